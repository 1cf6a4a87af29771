"""A private docker-registry for the benchmark, and an independent pusher.

`Registry` starts `/usr/bin/docker-registry` with its own config on 127.0.0.1 and a free
port, storage in a temp dir, and an access log (one line per request) that the benchmark
reads to count the requests a client really made. `push_set` uploads an artifact set
written by `gen.py` with raw HTTP (`http.client`, the layer under `urllib`): monolithic
blob uploads streamed from disk, then the manifest. Nothing here uses ocisource.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

REGISTRY_BIN = "/usr/bin/docker-registry"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Registry:
    """A docker-registry process with its own config, storage and access log."""

    def __init__(self, workdir: Path):
        self.dir = Path(tempfile.mkdtemp(prefix="registry-", dir=workdir))
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.log_path = self.dir / "access.log"
        config = self.dir / "config.yml"
        config.write_text(
            "version: 0.1\n"
            "log:\n  level: warn\n  formatter: text\n  accesslog:\n    disabled: false\n"
            f"storage:\n  filesystem:\n    rootdirectory: {self.dir / 'storage'}\n"
            "  maintenance:\n    uploadpurging:\n      enabled: false\n"
            f"http:\n  addr: {self.host}\n  secret: bench-only-not-a-secret\n"
        )
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [REGISTRY_BIN, "serve", str(config)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"docker-registry exited: {self.log_path.read_text()[-2000:]}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/v2/")
                if conn.getresponse().status == 200:
                    conn.close()
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("docker-registry did not come up within 20 s")
            time.sleep(0.05)

    def log_mark(self) -> int:
        """Current size of the access log: pass it to `requests_since`."""
        self.log.flush()
        time.sleep(0.2)  # the registry writes each access line after the response
        return self.log_path.stat().st_size

    def requests_since(self, mark: int, end: int | None = None) -> list[str]:
        """Request lines (`METHOD /path`) logged after `mark` (and before `end`, a later mark)."""
        if end is None:
            time.sleep(0.2)
        with open(self.log_path, "rb") as fh:
            fh.seek(mark)
            raw = fh.read() if end is None else fh.read(max(0, end - mark))
            text = raw.decode(errors="replace")
        out = []
        for line in text.splitlines():
            # Combined log format: ... "GET /v2/... HTTP/1.1" 200 ...
            if '"' in line and " /v2/" in line:
                req = line.split('"')[1]
                out.append(" ".join(req.split()[:2]))
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class _NoDelayConnection(http.client.HTTPConnection):
    """Disables Nagle: a body sent after its headers must not wait for a delayed ACK."""

    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Pusher:
    """Pushes blobs and manifests over one keep-alive HTTP connection."""

    def __init__(self, host: str):
        self.host = host
        h, p = host.split(":")
        self.conn = _NoDelayConnection(h, int(p), timeout=300, blocksize=1 << 20)
        self.done: set[tuple[str, str]] = set()

    def _req(self, method: str, path: str, body=None, headers=None) -> http.client.HTTPResponse:
        self.conn.request(method, path, body=body, headers=headers or {})
        resp = self.conn.getresponse()
        resp.read()
        return resp

    def blob(self, repo: str, digest: str, path: Path) -> None:
        if (repo, digest) in self.done:
            return
        self.done.add((repo, digest))
        if self._req("HEAD", f"/v2/{repo}/blobs/{digest}").status == 200:
            return
        resp = self._req("POST", f"/v2/{repo}/blobs/uploads/", headers={"Content-Length": "0"})
        if resp.status != 202:
            raise RuntimeError(f"failed to start upload to {repo}: HTTP {resp.status}")
        loc = urlsplit(resp.getheader("Location"))
        target = loc.path + "?" + (loc.query + "&" if loc.query else "") + f"digest={digest}"
        with open(path, "rb") as fh:
            resp = self._req(
                "PUT",
                target,
                body=fh,
                headers={
                    "Content-Length": str(path.stat().st_size),
                    "Content-Type": "application/octet-stream",
                },
            )
        if resp.status != 201:
            raise RuntimeError(f"failed to upload {digest} to {repo}: HTTP {resp.status}")

    def manifest(self, repo: str, tag: str, body: bytes, media_type: str) -> None:
        resp = self._req(
            "PUT", f"/v2/{repo}/manifests/{tag}", body=body, headers={"Content-Type": media_type}
        )
        if resp.status != 201:
            raise RuntimeError(f"failed to put manifest {repo}:{tag}: HTTP {resp.status}")

    def close(self) -> None:
        self.conn.close()


def push_set(host: str, aset: dict, workers: int = 4) -> None:
    """Pushes every image of an artifact set (see gen.py) to the registry at `host`.

    Many small images go over `workers` connections, one repository per worker at a time.
    """
    by_repo: dict[str, list[dict]] = {}
    for im in aset["images"]:
        by_repo.setdefault(im["repo"], []).append(im)
    groups = list(by_repo.values())
    if len(groups) == 1:
        _push_images(host, aset, groups[0])
        return
    with ThreadPoolExecutor(workers) as pool:
        for fut in [pool.submit(_push_images, host, aset, g) for g in groups]:
            fut.result()


def _push_images(host: str, aset: dict, images: list[dict]) -> None:
    blobs = Path(aset["dir"]) / "blobs"
    p = Pusher(host)
    try:
        for im in images:
            repo = im["repo"]
            for desc in [im["config"]] + im["layers"]:
                p.blob(repo, desc["digest"], blobs / desc["digest"].split(":")[1])
            body = (blobs / im["manifest"].split(":")[1]).read_bytes()
            media_type = json.loads(body)["mediaType"]
            p.manifest(repo, im["tag"], body, media_type)
    finally:
        p.close()


def blob_path(aset: dict, digest: str) -> str:
    return os.path.join(aset["dir"], "blobs", digest.split(":")[1])
