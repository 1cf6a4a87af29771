#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target into hack/fuzz/corpus/<target>/.

Seeds are small, well-formed inputs in each target's input layout (fields joined by
FIELD, layers by LAYER, as in hack/fuzz/src/lib.rs): tar layers made here with tarfile
(plain, gzip, zstd when the `zstd` tool is there), manifests, references and semver
ranges from testdata/ plus hand-written ones, docker configs, challenges, Link headers,
and the third-party cosign vectors of ../shared/vectors/cosign when present
(OCISOURCE_COSIGN_VECTORS overrides that path). The regression seeds committed under
hack/fuzz/seeds/<target>/ are copied too.

Usage: make_seeds.py ROOT   (ROOT is the repository root)
"""

import base64
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

FIELD = b"\x1e"
LAYER = b"\x1e\x1eLAYER\x1e\x1e"


def join(*fields):
    return FIELD.join(f if isinstance(f, bytes) else f.encode() for f in fields)


class Corpus:
    def __init__(self, root):
        self.root = root

    def add(self, target, data):
        d = self.root / target
        d.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha1(data).hexdigest()
        (d / name).write_bytes(data)


# ---------------------------------------------------------------- archive_merge


def tar_bytes(entries, fmt=tarfile.GNU_FORMAT):
    """entries: (name, kind, data_or_target) with kind in f d l h p (fifo)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for name, kind, payload in entries:
            info = tarfile.TarInfo(name)
            info.mtime = 1700000000
            if kind == "f":
                data = payload.encode() if isinstance(payload, str) else payload
                info.size = len(data)
                info.mode = 0o644
                t.addfile(info, io.BytesIO(data))
            elif kind == "x":
                data = payload.encode()
                info.size = len(data)
                info.mode = 0o755
                t.addfile(info, io.BytesIO(data))
            elif kind == "d":
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                t.addfile(info)
            elif kind == "l":
                info.type = tarfile.SYMTYPE
                info.linkname = payload
                t.addfile(info)
            elif kind == "h":
                info.type = tarfile.LNKTYPE
                info.linkname = payload
                t.addfile(info)
            elif kind == "p":
                info.type = tarfile.FIFOTYPE
                t.addfile(info)
    # Drop tarfile's padding to a 10 KiB record: keep whole blocks and the end marker.
    data = buf.getvalue().rstrip(b"\0")
    return data + b"\0" * (-len(data) % 512 + 1024)


def zstd(data):
    if not shutil.which("zstd"):
        return None
    out = subprocess.run(["zstd", "-q", "-c", "-"], input=data, capture_output=True)
    return out.stdout if out.returncode == 0 else None


def archive_seeds(c):
    base = tar_bytes([
        ("./", "d", None),
        ("deploy/", "d", None),
        ("deploy/app.yaml", "f", "apiVersion: v1\nkind: ConfigMap\n"),
        ("deploy/run.sh", "x", "#!/bin/sh\necho hi\n"),
        ("README.md", "f", "# demo\n"),
    ])
    top = tar_bytes([
        ("deploy/app.yaml", "f", "kind: Secret\n"),
        ("deploy/.wh.run.sh", "f", ""),
        ("extra/.wh..wh..opq", "f", ""),
        ("extra/new.txt", "f", "new\n"),
        ("link", "l", "deploy"),
    ])
    ignored = tar_bytes([
        (".git/config", "f", "[core]\n"),
        ("img/logo.png", "f", b"\x89PNG"),
        ("keep.yaml", "f", "a: 1\n"),
        (".sourceignore", "f", "*.txt\n!keep.txt\n"),
        ("keep.txt", "f", "k\n"),
        ("drop.txt", "f", "d\n"),
    ])
    # A .sourceignore that comes after the entries it excludes: a second pass.
    late = tar_bytes([
        ("x/y.txt", "f", "y\n"),
        ("x/z.yaml", "f", "z: 1\n"),
        (".sourceignore", "f", "x/*.txt\n"),
    ])
    unsafe = [
        tar_bytes([("../escape", "f", "x")]),
        tar_bytes([("/abs", "f", "x")]),
        tar_bytes([("a", "f", "1"), ("hard", "h", "a")]),
        tar_bytes([("fifo", "p", None)]),
        tar_bytes([("dup", "f", "1"), ("dup", "f", "2")]),
        tar_bytes([("f", "f", "1"), ("f/under", "f", "2")]),
        tar_bytes([("l", "l", "/etc"), ("l/passwd", "f", "x")]),
        tar_bytes([("long/" + "n" * 300, "f", "gnu long name")], tarfile.GNU_FORMAT),
        tar_bytes([("pax/" + "p" * 300, "f", "pax long name")], tarfile.PAX_FORMAT),
        tar_bytes([("/".join(["d"] * 60) + "/f", "f", "deep")]),
    ]
    gz = lambda b: gzip.compress(b, mtime=0)

    def seed(flags, *layers, spec=None):
        parts = [bytes([flags])]
        body = []
        if spec is not None:
            body.append(spec.encode())
        body.extend(layers)
        c.add("archive_merge", parts[0] + LAYER.join(body))

    seed(0, b"r" + base)
    seed(0, b"g" + base)
    seed(0, b"z" + base)
    seed(0, b"Z" + base)
    seed(0, b"r" + gz(base))
    seed(0, b"r" + gz(base), b"g" + top)
    seed(0, b"r" + base, b"r" + top, b"z" + ignored)
    seed(1, b"g" + ignored)
    seed(1, b"r" + late)
    seed(0, b"r" + base, b"g" + late)
    seed(2, b"r" + base, spec="*.md\n!README.md\ndeploy/\n")
    seed(3, b"g" + ignored, spec="# only comments\n")
    seed(4, b"r" + base)
    seed(8, b"g" + base)
    seed(0, b"r" + gz(base) + gz(top))  # two gzip members in one layer
    seed(0, b"r")
    seed(0, b"r" + base[:700])  # truncated
    for u in unsafe:
        seed(0, b"r" + u)
    z = zstd(base)
    if z:
        seed(0, b"r" + z)
        seed(0, b"r" + z, b"r" + gz(top))


# ---------------------------------------------------------------- manifest


def digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def manifest_seeds(c):
    layer = {
        "mediaType": "application/vnd.cncf.flux.content.v1.tar+gzip",
        "digest": digest(b"layer"),
        "size": 5,
    }
    image = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": "application/vnd.cncf.flux.config.v1+json",
        "config": {
            "mediaType": "application/vnd.cncf.flux.config.v1+json",
            "digest": digest(b"{}"),
            "size": 2,
        },
        "layers": [layer, dict(layer, mediaType="application/vnd.oci.image.layer.v1.tar+zstd",
                               annotations={"org.opencontainers.image.title": "x"})],
        "annotations": {"org.opencontainers.image.revision": "main@sha1:abc"},
    }
    docker = dict(image, mediaType="application/vnd.docker.distribution.manifest.v2+json")
    del docker["artifactType"]
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json",
             "digest": digest(b"amd64"), "size": 7,
             "platform": {"os": "linux", "architecture": "amd64"}},
            {"mediaType": "application/vnd.oci.image.manifest.v1+json",
             "digest": digest(b"arm64"), "size": 7,
             "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
            {"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
             "digest": digest(b"ref"), "size": 3,
             "artifactType": "application/vnd.dev.sigstore.bundle.v0.3+json"},
        ],
    }
    dlist = dict(index, mediaType="application/vnd.docker.distribution.manifest.list.v2+json")
    generic = dict(index)
    del generic["mediaType"]
    for ct, body, plat in [
        ("application/vnd.oci.image.manifest.v1+json", image, "linux/amd64"),
        ("application/vnd.docker.distribution.manifest.v2+json", docker, "linux/amd64"),
        ("application/vnd.oci.image.index.v1+json", index, "linux/arm64/v8"),
        ("application/vnd.docker.distribution.manifest.list.v2+json", dlist, "linux/arm64"),
        ("application/json", generic, "windows/amd64"),
        ("", {k: v for k, v in image.items() if k != "mediaType"}, "linux/amd64"),
        ("application/vnd.oci.image.index.v1+json; charset=utf-8", image, "linux"),
        ("text/html", {"schemaVersion": 2}, "a/b/c"),
    ]:
        c.add("manifest", join(ct, json.dumps(body).encode(), plat,
                               "application/vnd.oci.image.layer.v1.tar+zstd", digest(b"x")))
    c.add("manifest", join("application/json", b"{\"manifests\": null}", "", "", "latest"))
    c.add("manifest", join("", b"[]", "", "", " sha256:" + "a" * 64 + " "))


# ---------------------------------------------------------------- reference, semver


def yaml_values(root, key):
    out = []
    for p in sorted((root / "testdata").rglob("*.yaml")):
        for m in re.finditer(r"^\s*" + key + r":\s*(.+?)\s*$", p.read_text(), re.M):
            out.append(m.group(1).strip("'\""))
    return out


def reference_seeds(c, root):
    urls = yaml_values(root, "url") + [
        "oci://ghcr.io/org/repo:v1.0.0",
        "oci://localhost:5000/a/b@" + digest(b"m"),
        "oci://[::1]:5000/team/app",
        "oci://127.0.0.1:5000/x/y/z/",
        "oci://registry.example.com/UPPER",
        "oci://host/a..b",
        "https://ghcr.io/org/repo",
        "oci://host/repo:tag@sha256:" + "0" * 64,
    ]
    tags = yaml_values(root, "tag") + ["latest", "v1.2.3", "-bad", "_ok", "a" * 129]
    semvers = yaml_values(root, "semver") + ["1.x", ">=1.0.0 <2.0.0"]
    filters = yaml_values(root, "semverFilter") + ["^v", "(", ".*-rc.*"]
    digests = yaml_values(root, "digest") + [digest(b"d"), "sha512:" + "0" * 128, "sha256:ABC"]
    for i, u in enumerate(urls):
        c.add("reference", join(u, tags[i % len(tags)], "", "", ""))
        c.add("reference", join(u, "", semvers[i % len(semvers)], filters[i % len(filters)], ""))
        c.add("reference", join(u, "", "", "", digests[i % len(digests)]))


def semver_seeds(c, root):
    tags = "\n".join([
        "v1.0.0", "1.2.3", "1.2", "2", "6.1.0-rc.1", "6.1.0", "6.0.9_build.5", "v6.2.0+meta",
        "latest", "main", "1.2.3-alpha.01", "18446744073709551615.0.0", "V0.0.1",
    ])
    ranges = yaml_values(root, "semver") + [
        "*", "1.x", "~1.2", "~> 1.2.3", "^0.2.3", "^0.0.3", "^1", ">= 1.2, < 3",
        "1.2 - 1.4.5", "1.2.3 - 2", ">=6.0.0-0 <7.0.0", "!=1.2.3 || >3", "<=1.2", ">1.2",
        "=1.0.0", "x", "1.2.3.4", ">", "|| 1", "^18446744073709551614",
    ]
    filters = ["", ".*-rc.*", "^v", "^\\d+\\.\\d+$", "["]
    for i, r in enumerate(ranges):
        c.add("semver_tags", join(r, filters[i % len(filters)], tags))


# ---------------------------------------------------------------- ignore


def ignore_seeds(c, root):
    src = (root / "src/domain/ignore.rs").read_text()
    m = re.search(r'FLUX_DEFAULT_EXCLUSIONS: &str = "\\\n(.*?)";', src, re.S)
    defaults = m.group(1) if m else ".git/\n*.png\n"
    paths = "\n".join([
        ".git/config", "a/.git/", "deploy/app.yaml", "img/logo.png", "keep.txt", "x/y.txt",
        "x/", "a/b/c/d.tar.gz", "/lead/slash", "trail/", "sub/.sourceignore", "",
    ])
    for spec, d1, c1, d2, c2 in [
        ("", "", "*.txt\n!keep.txt\n", "x", "y.txt\n"),
        (defaults, "sub", "/*\n!/keep\n", "", ""),
        ("*.yaml\n!deploy/\n", "deploy", "!app.yaml\n", "a/b", "**/c\n"),
        ("[abc\n", "", "", "", ""),
        ("**/x/**\n\\#hash\n  spaced  \n", "/x/", "*\n", "x", "!*\n"),
        ("{a,b}/{c,d}/**/*.[ch]\n", "", "\\!bang\n", "", ""),
    ]:
        c.add("ignore_rules", join(spec, d1, c1, d2, c2, paths))


# ---------------------------------------------------------------- registry


def docker_config_seeds(c):
    auth = base64.b64encode(b"robot:s3cretPassw0rd").decode()
    configs = [
        {"auths": {"ghcr.io": {"auth": auth}}},
        {"auths": {"https://index.docker.io/v1/": {"username": "u", "password": "Passw0rdPassw0rd"}}},
        {"auths": {"localhost:5000/path": {"identitytoken": "T0kenT0kenT0ken"}}},
        {"auths": {"r.example": {"auth": "bm9jb2xvbg=="}}},
        {"auths": {"r.example": {"auth": "!!"}}},
        {"auths": {"r.example": {}}, "credsStore": "desktop", "credHelpers": {"gcr.io": "gcloud"}},
        {"auths": []},
    ]
    hosts = "ghcr.io\nindex.docker.io\ndocker.io\nlocalhost:5000\nR.EXAMPLE\nhttps://ghcr.io/v2/"
    for cfg in configs:
        c.add("docker_config", join(json.dumps(cfg).encode(), hosts))
    c.add("docker_config", join(b"{", hosts))


def auth_seeds(c):
    headers = [
        'Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull"',
        'Bearer realm="http://127.0.0.1:5001/token", service=reg',
        'bearer realm=https://a/t,scope="repository:x:pull,push"',
        'Basic realm="Registry Realm"',
        "BASIC",
        'Bearer service="s"',
        "Negotiate abc",
        'Bearer realm="unterminated',
    ]
    tokens = [
        b'{"token":"abc","expires_in":300}',
        b'{"access_token":"xyz"}',
        b'{"token":"","access_token":"x","expires_in":0}',
        b'{"token":"t","expires_in":99999999999999}',
        b"{}",
    ]
    for i, h in enumerate(headers):
        c.add("www_authenticate", join(h, tokens[i % len(tokens)], "repository:team/app:pull"))


def link_seeds(c):
    for h in [
        '</v2/a/tags/list?last=x&n=1000>; rel="next"',
        '<https://h/p?a=1>; rel="prev", <https://h/q>; rel="next"',
        "<//other.example/v2/a/tags/list>; rel=next",
        '</v2/a/tags/list>; rel="prev"',
        "<http://[::1]:5000/v2/x/tags/list?n=2>;rel=next;type=x",
        "<>; rel=next",
        "garbage",
    ]:
        c.add("link_header", join(h, ""))
        c.add("link_header", join(h, "https://registry.example:8443/v2/team/app/tags/list?n=10"))


def artifact_request_seeds(c):
    app = "/ocirepository/ns/app"
    for r in [
        f"GET {app}/abc.tar.gz HTTP/1.1\r\nHost: s\r\n\r\n",
        f"HEAD {app}/latest.tar.gz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        f"GET {app}/abc.tar.gz HTTP/1.1\r\nRange: bytes=2-5\r\nIf-Range: \"x\"\r\n\r\n",
        f"GET {app}/abc.tar.gz HTTP/1.1\r\nIf-None-Match: *\r\n\r\n",
        f"GET {app}/abc.tar.gz HTTP/1.1\r\nIf-Modified-Since: Mon, 01 Jan 2001 00:00:00 GMT\r\n\r\n",
        f"GET {app}/rel.tar.gz HTTP/1.1\r\n\r\n",
        f"GET {app}/abs.tar.gz HTTP/1.1\r\n\r\n",
        f"GET {app}/.tmp-1.tar.gz HTTP/1.1\r\n\r\n",
        f"GET {app}/%2e%2e/x HTTP/1.1\r\n\r\n",
        f"POST {app}/abc.tar.gz HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        f"GET {app}/abc.tar.gz HTTP/1.1\r\n\r\nGET {app}/latest.tar.gz HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost",
    ]:
        c.add("artifact_request", r.encode())


# ---------------------------------------------------------------- cosign


def cosign_seeds(c, root):
    env = os.environ.get("OCISOURCE_COSIGN_VECTORS")
    vec = Path(env) if env else root.parent / "shared" / "vectors" / "cosign"
    if (vec / "expected.json").is_file():
        cases = json.loads((vec / "expected.json").read_text())["cases"]
        by_id = {k["id"]: k for k in cases}
        for case in cases:
            if "same_files_as" in case:
                case = dict(by_id[case["same_files_as"]], **case)
            read = lambda key: (vec / case[key]).read_bytes() if case.get(key) else b""
            dig = case.get("image_digest", "").encode()
            if case["format"] == "cosign-v2-simplesigning":
                mode = 1 if case["mode"] == "key" else 0
                fields = [read("payload"), read("signature").strip(), read("certificate"),
                          read("chain"), read("rekor_bundle"), read("public_key"), dig]
                c.add("cosign_signature", bytes([mode]) + FIELD.join(fields))
                c.add("cosign_signature", bytes([mode | 2]) + FIELD.join(fields))
            else:
                bundle = read("bundle")
                if case["mode"] == "key":
                    mode, material = 1, read("public_key")
                elif case.get("trusted_root", "").startswith("trusted-roots/"):
                    mode, material = 0, b""
                else:
                    mode, material = 2, read("trusted_root")
                if case.get("artifact"):
                    c.add("cosign_bundle", bytes([mode | 4]) + join(bundle, material, read("artifact")))
                else:
                    c.add("cosign_bundle", bytes([mode]) + join(bundle, material, dig))
    else:
        print(f"fuzz seeds: no cosign vectors at {vec}; generated cosign seeds only", file=sys.stderr)
    generated_cosign_seeds(c)


def generated_cosign_seeds(c):
    """A key-mode v2 signature made here with openssl, so the fuzzer starts from a
    signature that verifies; plus minimal bundle shapes."""
    d = digest(b"image")
    payload = json.dumps({
        "critical": {"identity": {"docker-reference": "registry.example/app"},
                     "image": {"docker-manifest-digest": d},
                     "type": "cosign container image signature"},
        "optional": None,
    }, separators=(",", ":")).encode()
    if shutil.which("openssl"):
        with tempfile.TemporaryDirectory() as tmp:
            t = Path(tmp)
            key, pub, pay, sig = t / "k.pem", t / "k.pub", t / "p.json", t / "s.der"
            pay.write_bytes(payload)
            ok = subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout",
                                 "-out", str(key)], capture_output=True).returncode == 0
            ok = ok and subprocess.run(["openssl", "ec", "-in", str(key), "-pubout", "-out", str(pub)],
                                       capture_output=True).returncode == 0
            ok = ok and subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(key), "-out", str(sig),
                                        str(pay)], capture_output=True).returncode == 0
            if ok:
                b64 = base64.b64encode(sig.read_bytes())
                c.add("cosign_signature", bytes([1]) + FIELD.join(
                    [payload, b64, b"", b"", b"", pub.read_bytes(), d.encode()]))
    pem = b"-----BEGIN CERTIFICATE-----\nMIIBkTCCATegAwIBAgIUQ==\n-----END CERTIFICATE-----\n"
    rekor = json.dumps({"SignedEntryTimestamp": "MEUCIQ==", "Payload": {
        "body": base64.b64encode(b'{"apiVersion":"0.0.1","kind":"hashedrekord"}').decode(),
        "integratedTime": 1700000000, "logIndex": 1, "logID": "c0d23d6a"}}).encode()
    c.add("cosign_signature", bytes([0]) + FIELD.join([payload, b"MEUCIQ==", pem, pem, rekor, b"", d.encode()]))
    c.add("cosign_signature", bytes([0]) + FIELD.join([b"{}", b"", b"", b"", b"{}", b"", b""]))
    for bundle in [
        {"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
         "verificationMaterial": {"certificate": {"rawBytes": "MIIB"}, "tlogEntries": []},
         "messageSignature": {"messageDigest": {"algorithm": "SHA2_256", "digest": "AAAA"},
                              "signature": "MEUCIQ=="}},
        {"mediaType": "application/vnd.dev.sigstore.bundle+json;version=0.1",
         "verificationMaterial": {"x509CertificateChain": {"certificates": [{"rawBytes": "MIIB"}]}},
         "dsseEnvelope": {"payload": "e30=", "payloadType": "application/vnd.in-toto+json",
                          "signatures": [{"sig": "MEUCIQ==", "keyid": ""}]}},
    ]:
        c.add("cosign_bundle", bytes([0]) + join(json.dumps(bundle).encode(), b"", d.encode()))


def main():
    root = Path(sys.argv[1]).resolve()
    corpus = Corpus(root / "hack" / "fuzz" / "corpus")
    archive_seeds(corpus)
    manifest_seeds(corpus)
    reference_seeds(corpus, root)
    semver_seeds(corpus, root)
    ignore_seeds(corpus, root)
    docker_config_seeds(corpus)
    auth_seeds(corpus)
    link_seeds(corpus)
    artifact_request_seeds(corpus)
    cosign_seeds(corpus, root)
    committed = root / "hack" / "fuzz" / "seeds"
    if committed.is_dir():
        for target in committed.iterdir():
            for f in target.iterdir():
                corpus.add(target.name, f.read_bytes())


if __name__ == "__main__":
    main()
