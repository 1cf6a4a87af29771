"""Deterministic OCI artifact generators for the benchmark.

Each generator writes an "artifact set" directory: `blobs/<hex>` (layers, configs and
manifests, content-addressed) and `set.json` listing the images to push (repo, tag,
manifest digest, layer descriptors and uncompressed sizes). Everything derives from a
fixed seed, fixed tar metadata (mtime 0, uid/gid 0, mode 0644) and gzip with mtime 0,
so the digests are the same on every run with the same zlib. A set is cached under its
parameters: a second run with the same sizes reuses it.

Standard library only (the benchmark must run on a fresh machine).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import tarfile
import zlib
from pathlib import Path

# Bump a kind's version whenever its output changes, so caches are regenerated.
GEN_VERSION = {"config": 5, "large": 4, "noop": 4}
SEED = 20261122

MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_CONFIG = "application/vnd.cncf.flux.config.v1+json"
MT_LAYER = "application/vnd.cncf.flux.content.v1.tar+gzip"
ANNOTATIONS = {
    "org.opencontainers.image.created": "2026-01-01T00:00:00Z",
    "org.opencontainers.image.source": "https://example.invalid/fleet-infra",
    "org.opencontainers.image.revision": "main@sha1:0123456789abcdef0123456789abcdef01234567",
}


class BlobWriter:
    """Streams a tar archive through gzip into a content-addressed blob file."""

    def __init__(self, blobs: Path, level: int = 6):
        self.blobs = blobs
        self.tmp = blobs / f".tmp-{os.getpid()}-{id(self)}"
        self.fh = open(self.tmp, "wb")
        self.gz = zlib.compressobj(level, zlib.DEFLATED, 31, 9)
        self.sha = hashlib.sha256()
        self.size = 0
        self.uncompressed = 0
        self.files = 0

    def _raw(self, data: bytes) -> None:
        self.uncompressed += len(data)
        out = self.gz.compress(data)
        if out:
            self._out(out)

    def _out(self, out: bytes) -> None:
        self.sha.update(out)
        self.size += len(out)
        self.fh.write(out)

    def add_dir(self, name: str) -> None:
        info = tarfile.TarInfo(name.rstrip("/") + "/")
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
        info.mtime = 0
        self._raw(info.tobuf(format=tarfile.PAX_FORMAT))

    def add_file(self, name: str, data_chunks: list[bytes], size: int) -> None:
        info = tarfile.TarInfo(name)
        info.size = size
        info.mode = 0o644
        info.mtime = 0
        self._raw(info.tobuf(format=tarfile.PAX_FORMAT))
        written = 0
        for chunk in data_chunks:
            written += len(chunk)
            self._raw(chunk)
        if written != size:
            raise ValueError(f"entry {name}: wrote {written} bytes, header says {size}")
        pad = (-size) % 512
        if pad:
            self._raw(b"\0" * pad)
        self.files += 1

    def finish(self) -> dict:
        self._raw(b"\0" * 1024)
        self._out(self.gz.flush())
        self.fh.close()
        digest = "sha256:" + self.sha.hexdigest()
        os.replace(self.tmp, self.blobs / self.sha.hexdigest())
        return {
            "mediaType": MT_LAYER,
            "digest": digest,
            "size": self.size,
            "uncompressed": self.uncompressed,
            "files": self.files,
        }


def put_blob(blobs: Path, data: bytes) -> str:
    hexd = hashlib.sha256(data).hexdigest()
    path = blobs / hexd
    if not path.exists():
        path.write_bytes(data)
    return "sha256:" + hexd


def make_image(blobs: Path, repo: str, tag: str, layers: list[dict]) -> dict:
    config = b"{}"
    config_desc = {"mediaType": MT_CONFIG, "digest": put_blob(blobs, config), "size": len(config)}
    manifest = {
        "schemaVersion": 2,
        "mediaType": MT_MANIFEST,
        "config": config_desc,
        "layers": [{k: l[k] for k in ("mediaType", "digest", "size")} for l in layers],
        "annotations": ANNOTATIONS,
    }
    body = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    return {
        "repo": repo,
        "tag": tag,
        "manifest": put_blob(blobs, body),
        "manifest_size": len(body),
        "config": config_desc,
        "layers": layers,
    }


def word_pool(rng: random.Random, n: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=3 + int(rng.random() * 8))) for _ in range(n)]


def line_pool(rng: random.Random, words: list[str], n: int) -> list[str]:
    lines = []
    for i in range(n):
        k = 3 + int(rng.random() * 9)
        body = " ".join(rng.choices(words, k=k))
        if i % 3 == 0:
            body += f" {int(rng.random() * 1e9):x}"
        lines.append(body)
    return lines


def zipf_weights(n: int) -> list[float]:
    """Cumulative Zipf(1) weights: a few lines recur often, as in real configuration."""
    cum, total = [], 0.0
    for rank in range(n):
        total += 1.0 / (rank + 1)
        cum.append(total)
    return cum


def yaml_doc(rng: random.Random, lines: list[str], name: str, ns: str, target: int, cum=None) -> bytes:
    head = (
        "apiVersion: v1\n"
        "kind: ConfigMap\n"
        "metadata:\n"
        f"  name: {name}\n"
        f"  namespace: {ns}\n"
        "  labels:\n"
        f"    app.kubernetes.io/name: {name.rsplit('-', 1)[0]}\n"
        "    app.kubernetes.io/part-of: fleet\n"
        "    toolkit.fluxcd.io/tenant: " + ns + "\n"
        "  annotations:\n"
        "    kustomize.toolkit.fluxcd.io/reconcile: enabled\n"
        "data:\n"
    )
    parts = [head]
    size = len(head)
    i = 0
    while size < target:
        chosen = rng.choices(lines, cum_weights=cum, k=16)
        for line in chosen:
            entry = f"  key-{i:05d}: \"{line}\"\n"
            parts.append(entry)
            size += len(entry)
            i += 1
            if size >= target:
                break
    return "".join(parts).encode()


def gen_config_set(out: Path, files: int, total_bytes: int, layers: int) -> None:
    """Scenario 1: `layers` layers of YAML files, `files` entries in total, ~`total_bytes`.

    Each layer has its own top directory, except 1% of the last layer's files, which
    replace files of the first layer, so the merge has overrides to honour.
    """
    blobs = out / "blobs"
    rng = random.Random(SEED)
    words = word_pool(rng, 3000)
    lines = line_pool(rng, words, 40000)
    cum = zipf_weights(len(lines))
    per_layer = files // layers
    mean = total_bytes / files
    roots = ["infrastructure", "apps", "clusters", "tenants", "platform", "policies"]
    descs = []
    first_paths: list[str] = []
    for li in range(layers):
        w = BlobWriter(blobs)
        root = roots[li % len(roots)]
        w.add_dir(root)
        ndirs = max(1, per_layer // 100)
        for d in range(ndirs):
            w.add_dir(f"{root}/team-{d:03d}")
        for fi in range(per_layer):
            target = int(mean * (0.2 + 1.6 * rng.random()))
            ns = f"team-{fi % ndirs:03d}"
            name = f"{rng.choice(words)}-{fi:05d}"
            data = yaml_doc(rng, lines, name, ns, target, cum)
            path = f"{root}/{ns}/{name}.yaml"
            if li == layers - 1 and li > 0 and fi < per_layer // 100:
                # 1% of the last layer overrides files of the first one (later layers win).
                path = first_paths[(fi * 7) % len(first_paths)]
            if li == 0:
                first_paths.append(path)
            w.add_file(path, [data], len(data))
        descs.append(w.finish())
    image = make_image(blobs, "bench/config", "v1.0.0", descs)
    write_set(out, [image])


def gen_large_set(out: Path, total_bytes: int, nfiles: int) -> None:
    """Scenario 2: one layer, `nfiles` text files, `total_bytes` of file data in total."""
    blobs = out / "blobs"
    rng = random.Random(SEED + 2)
    words = word_pool(rng, 5000)
    lines = [l.encode() + b"\n" for l in line_pool(rng, words, 65536)]
    cum = zipf_weights(len(lines))
    w = BlobWriter(blobs)
    w.add_dir("data")
    per_file = total_bytes // nfiles
    for fi in range(nfiles):
        size = per_file if fi < nfiles - 1 else total_bytes - per_file * (nfiles - 1)
        chunks = []
        have = 0
        while have < size:
            buf = b"".join(rng.choices(lines, cum_weights=cum, k=20000))
            buf = buf[: size - have]
            chunks.append(buf)
            have += len(buf)
        w.add_file(f"data/part-{fi:04d}.txt", chunks, size)
    image = make_image(blobs, "bench/large", "v1.0.0", [w.finish()])
    write_set(out, [image])


def gen_noop_set(out: Path, objects: int, repos: int) -> None:
    """Scenario 4: `objects` small artifacts, spread over `repos` repositories, one tag each."""
    blobs = out / "blobs"
    rng = random.Random(SEED + 4)
    words = word_pool(rng, 500)
    lines = line_pool(rng, words, 2000)
    images = []
    for i in range(objects):
        w = BlobWriter(blobs)
        name = f"app-{i:04d}"
        data = yaml_doc(rng, lines, name, "default", 1500)
        w.add_file(f"deploy/{name}.yaml", [data], len(data))
        images.append(make_image(blobs, f"bench/noop-{i % repos:02d}", f"v1.0.{i}", [w.finish()]))
    write_set(out, images)


def write_set(out: Path, images: list[dict]) -> None:
    stats = {
        "files": sum(l["files"] for im in images for l in im["layers"]),
        "uncompressed": sum(l["uncompressed"] for im in images for l in im["layers"]),
        "compressed": sum(l["size"] for im in images for l in im["layers"]),
    }
    (out / "set.json").write_text(json.dumps({"images": images, "stats": stats}, indent=1))


def tar_digest_list(path: Path) -> dict[str, str]:
    """Regular files of a tar.gz: normalised name -> sha256 of the content."""
    out = {}
    with tarfile.open(path, "r:gz") as tf:
        for m in tf:
            if m.isfile():
                fh = tf.extractfile(m)
                out[m.name.removeprefix("./")] = hashlib.sha256(fh.read() if fh else b"").hexdigest()
    return out


GENERATORS = {"config": gen_config_set, "large": gen_large_set, "noop": gen_noop_set}


def ensure(cache: Path, kind: str, **params) -> dict:
    """Returns the artifact set for `kind` with `params`, generating it unless cached."""
    key = "-".join([kind, f"g{GEN_VERSION[kind]}"] + [f"{k}{v}" for k, v in sorted(params.items())])
    out = cache / key
    if not (out / "set.json").exists():
        if out.exists():
            shutil.rmtree(out)
        tmp = cache / (key + ".partial")
        if tmp.exists():
            shutil.rmtree(tmp)
        (tmp / "blobs").mkdir(parents=True)
        GENERATORS[kind](tmp, **params)
        os.replace(tmp, out)
    data = json.loads((out / "set.json").read_text())
    data["dir"] = str(out)
    return data


if __name__ == "__main__":
    import sys
    import time

    t = time.perf_counter()
    s = ensure(Path(sys.argv[1]), sys.argv[2], **{k: int(v) for k, v in (a.split("=") for a in sys.argv[3:])})
    print(json.dumps(s["stats"]), f"{time.perf_counter() - t:.1f}s")
