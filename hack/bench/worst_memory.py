"""The controller's peak memory with `--concurrent N` reconciles of the largest artifact
the caps allow, all at once (docs/performance.md, "Memory: the worst case").

One worst-case artifact is pushed to a private docker-registry: a manifest padded with
annotations to just under the 4 MiB manifest cap, and one zstd layer compressed with the
largest window accepted (8 MiB, `--long=23`) whose tar holds a `.sourceignore` just under
the 8 KiB cap (the costliest globs measured: their compiled form is what costs), then
files with unique ~3.8 KB paths filling ~97% of the 16 MiB budget of remembered paths (a
first `ocisource pull` checks that it still fits, and trims it when not). N OCIRepositories point at it,
each with a `spec.ignore` just under its 32 KiB cap; the controller runs against
`footprint.MockKube` with `--concurrent N`; VmHWM is read from /proc once every object's
status was patched. The same run with a one-file artifact gives the baseline.

    python3 hack/bench/worst_memory.py target/release/ocisource 1 4 8
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from footprint import MockKube, oci_objects, run_controller  # noqa: E402
from oci import Pusher, Registry  # noqa: E402

NODE_COST = 104  # size_of::<Node<Mark>>() + 32, src/archive/tree.rs
BUDGET = 16 << 20  # Limits::max_remembered_bytes
SOURCEIGNORE_CAP = 8 << 10  # MAX_SOURCEIGNORE_BYTES
SPEC_IGNORE_CAP = 32 << 10  # MAX_SPEC_IGNORE_BYTES
TAIL = "/".join(["p" * 250] * 15)


def entry_cost() -> int:
    return (8 + NODE_COST) + 15 * (250 + NODE_COST)


def rules(limit: int, prefix: str) -> str:
    """The costliest gitignore globs measured (~0.64 KiB compiled per byte of text: `**`,
    many `*`, alternations, classes), just under `limit` bytes."""
    out, size, i = [], 0, 0
    while True:
        line = f"**/{prefix}{i}*b*c*d*/**/*e*{{x,y,z}}[a-z]?\n"
        if size + len(line) > limit:
            return "".join(out)
        out.append(line)
        size += len(line)
        i += 1


def layer_tar(entries: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        data = rules(SOURCEIGNORE_CAP, "skip").encode()
        info = tarfile.TarInfo(".sourceignore")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        for n in range(entries):
            info = tarfile.TarInfo(f"{n:08d}/{TAIL}")
            info.size = 0
            tar.addfile(info, io.BytesIO(b""))
    return buf.getvalue()


def zstd(data: bytes) -> bytes:
    return subprocess.run(["zstd", "-q", "-c", "-3", "--long=23", "-"], input=data,
                          stdout=subprocess.PIPE, check=True).stdout


def push(host: str, repo: str, layer: bytes, media: str, pad: int, work: Path) -> None:
    p = Pusher(host)
    try:
        config = b"{}"
        descs = []
        for blob, mt in ((config, "application/vnd.cncf.flux.config.v1+json"), (layer, media)):
            d = "sha256:" + hashlib.sha256(blob).hexdigest()
            path = work / d.split(":")[1]
            path.write_bytes(blob)
            p.blob(repo, d, path)
            descs.append({"mediaType": mt, "digest": d, "size": len(blob)})
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": descs[0],
            "layers": descs[1:],
        }
        if pad:
            # Annotations of ~1 KB each up to `pad` bytes of manifest.
            one = len(json.dumps({"bench.ocisource.dev/pad-000000": "v" * 1000})) - 1
            count = (pad - len(json.dumps(manifest))) // one
            manifest["annotations"] = {f"bench.ocisource.dev/pad-{i:06d}": "v" * 1000
                                       for i in range(count)}
            while len(json.dumps(manifest)) > pad:
                manifest["annotations"].popitem()
        p.manifest(repo, "v1", json.dumps(manifest).encode(),
                   "application/vnd.oci.image.manifest.v1+json")
    finally:
        p.close()


def fits(bin_path: str, host: str, repo: str, work: Path) -> bool:
    out = work / "probe.tar.gz"
    run = subprocess.run([bin_path, "pull", f"oci://{host}/{repo}", "--tag", "v1", "--insecure",
                          "--output-file", str(out)], capture_output=True, text=True)
    if run.returncode != 0:
        print(f"[worst] probe: {run.stderr.strip()[-300:]}", file=sys.stderr)
    return run.returncode == 0


def main() -> None:
    bin_path = sys.argv[1]
    ns = [int(n) for n in sys.argv[2:]] or [8]
    work = Path(tempfile.mkdtemp(prefix="worst-memory-"))
    reg = Registry(work)
    try:
        entries = int(0.97 * BUDGET / entry_cost())
        while True:
            tar = layer_tar(entries)
            push(reg.host, "worst/artifact", zstd(tar), "application/vnd.oci.image.layer.v1.tar+zstd",
                 (4 << 20) - 4096, work)
            if fits(bin_path, reg.host, "worst/artifact", work):
                break
            entries = int(entries * 0.97)
        print(f"[worst] artifact: {entries} files, tar {len(tar) >> 20} MiB", file=sys.stderr)
        small = io.BytesIO()
        with tarfile.open(fileobj=small, mode="w:gz") as t:
            info = tarfile.TarInfo("app.yaml")
            info.size = 3
            t.addfile(info, io.BytesIO(b"a:1"))
        push(reg.host, "worst/small", small.getvalue(), "application/vnd.oci.image.layer.v1.tar+gzip",
             0, work)
        rows = []
        for n in ns:
            os.environ["BENCH_CONTROLLER_ARGS"] = f"--concurrent {n}"
            row = {"n": n}
            for label, repo in (("baseline", "worst/small"), ("worst", "worst/artifact")):
                objs = oci_objects(reg.host, [{"repo": repo, "tag": "v1"}] * n)
                if label == "worst":
                    for o in objs:
                        o["spec"]["ignore"] = rules(SPEC_IGNORE_CAP, "spec")
                mock = MockKube(objs)
                try:
                    res = run_controller(bin_path, mock, work, f"{label}-{n}", settle=1.0,
                                         wait_for=n, deadline_s=300)
                finally:
                    mock.stop()
                if "error" in res:
                    raise RuntimeError(res["error"])
                if res["ready"] < n:
                    raise RuntimeError(f"{label} N={n}: {res['ready']}/{n} Ready: not a measurement "
                                       "of successful merges")
                row[label] = res["hwm_mib"]
                row[f"{label}_patched"] = res["patched"]
            rows.append(row)
            print(f"[worst] N={n}: baseline {row['baseline']:.1f} MiB, "
                  f"worst {row['worst']:.1f} MiB ({n} objects Ready)",
                  file=sys.stderr)
        print(json.dumps(rows))
    finally:
        reg.stop()


if __name__ == "__main__":
    main()
