"""Scenario 5: the controller's memory, idle and with many objects, against a mock API.

There is no Kubernetes API server on the benchmark machine, so `MockKube` plays one over
plain HTTP on 127.0.0.1: it lists the OCIRepository objects it was given (or none), holds
watch requests open and sends them an event when an object changes, answers GETs from its
store, applies PATCHes to the stored object (JSON patches such as the finalizer, merge
patches of status, server-side apply of ExternalArtifacts) and stores POST/PUT bodies. It is just enough for a kube-rs controller to start, list, reconcile and patch
status; it does not validate anything. RSS is read from /proc (VmRSS now, VmHWM peak).
"""

from __future__ import annotations

import copy
import json
import os
import queue
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from measure import proc_cpu, proc_status, stop_process
from oci import free_port

GROUP_VERSION = "ocisource.dev/v1beta1"


class MockKube:
    """A tiny in-memory stand-in for the Kubernetes API (see module doc)."""

    def __init__(self, objects: list[dict]):
        self.store: dict[tuple[str, str, str], dict] = {}
        for o in objects:
            self.store[("ocirepositories", o["metadata"]["namespace"], o["metadata"]["name"])] = o
        self.patches = 0
        self.status_patched: set[tuple[str, str]] = set()
        self.requests = 0
        self.version = 1
        self.watchers: list[tuple[str, queue.Queue]] = []
        # Every watch event with its resourceVersion: a watch that starts from an older
        # version gets the events it missed replayed first, as from a real API server
        # (without this, a status patch made between the controller's list and its watch
        # was never seen, and a few objects waited forever).
        self.history: list[tuple[int, str, dict]] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        mock = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in two writes: without this, Nagle and the
                # client's delayed ACK add ~40 ms to every response.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _send(self, code: int, obj: dict) -> None:
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _body(self) -> dict:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    return json.loads(raw) if raw else {}
                except ValueError:
                    return {}

            def _route(self):
                u = urlsplit(self.path)
                segs = [s for s in u.path.split("/") if s]
                query = parse_qs(u.query)
                if segs[:1] == ["api"]:
                    rest = segs[2:]
                elif segs[:1] == ["apis"]:
                    rest = segs[3:]
                else:
                    return None, None, None, None, query
                ns = None
                if len(rest) >= 3 and rest[0] == "namespaces":
                    ns, rest = rest[1], rest[2:]
                plural = rest[0] if rest else None
                name = rest[1] if len(rest) > 1 else None
                sub = rest[2] if len(rest) > 2 else None
                return plural, ns, name, sub, query

            def do_GET(self) -> None:
                with mock.lock:
                    mock.requests += 1
                if self.path.startswith("/version"):
                    self._send(200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0"})
                    return
                plural, ns, name, _sub, query = self._route()
                if plural is None:
                    self._send(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
                    return
                if query.get("watch", [""])[0] in ("1", "true"):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    self.wfile.flush()
                    timeout = float(query.get("timeoutSeconds", ["290"])[0])
                    q: queue.Queue = queue.Queue()
                    try:
                        since = int(query.get("resourceVersion", ["0"])[0] or 0)
                    except ValueError:
                        since = 0
                    with mock.lock:
                        for version, p, ev in mock.history:
                            if p == plural and version > since:
                                q.put(ev)
                        mock.watchers.append((plural, q))
                    end = time.monotonic() + timeout
                    try:
                        while not mock.stopping.is_set() and time.monotonic() < end:
                            try:
                                ev = q.get(timeout=0.5)
                            except queue.Empty:
                                continue
                            data = json.dumps(ev).encode() + b"\n"
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                            self.wfile.flush()
                        self.wfile.write(b"0\r\n\r\n")
                    except OSError:
                        pass
                    finally:
                        with mock.lock:
                            mock.watchers.remove((plural, q))
                    return
                if name is None:
                    with mock.lock:
                        items = [o for (p, n, _), o in mock.store.items()
                                 if p == plural and (ns is None or n == ns)]
                        version = str(mock.version)
                    self._send(200, {"apiVersion": "v1", "kind": "List",
                                     "metadata": {"resourceVersion": version}, "items": items})
                    return
                with mock.lock:
                    obj = mock.store.get((plural, ns or "", name))
                if obj is None:
                    self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                     "reason": "NotFound", "code": 404,
                                     "message": f"{plural} {name} not found"})
                else:
                    self._send(200, obj)

            def _write(self, code: int, merge: bool) -> None:
                with mock.lock:
                    mock.requests += 1
                body = self._body()
                plural, ns, name, sub, _ = self._route()
                name = name or body.get("metadata", {}).get("name", "unnamed")
                key = (plural or "", ns or "", name)
                with mock.lock:
                    mock.patches += 1
                    if sub == "status" and plural == "ocirepositories":
                        mock.status_patched.add((ns or "", name))
                    obj = copy.deepcopy(mock.store.get(key) or {})
                    if isinstance(body, list):
                        json_patch(obj, body)
                    elif merge and obj:
                        for k, v in body.items():
                            if k == "metadata" and isinstance(v, dict):
                                obj["metadata"] = {**obj.get("metadata", {}), **v}
                            else:
                                obj[k] = v
                    else:
                        obj = body
                    meta = obj.setdefault("metadata", {})
                    meta.setdefault("name", name)
                    if ns:
                        meta.setdefault("namespace", ns)
                    meta.setdefault("uid", f"uid-{abs(hash(key))}")
                    old = mock.store.get(key)
                    # Like an API server: an unchanged object keeps its resourceVersion
                    # and no watch event is sent.
                    if json.dumps(old, sort_keys=True) != json.dumps(obj, sort_keys=True):
                        mock.version += 1
                        meta["resourceVersion"] = str(mock.version)
                        mock.store[key] = obj
                        ev = {"type": "MODIFIED" if old else "ADDED", "object": obj}
                        mock.history.append((mock.version, plural or "", ev))
                        for p, q in mock.watchers:
                            if p == plural:
                                q.put(ev)
                self._send(code, obj)

            def do_PATCH(self) -> None:
                self._write(200, merge=True)

            def do_PUT(self) -> None:
                self._write(200, merge=False)

            def do_POST(self) -> None:
                self._write(201, merge=False)

            def do_DELETE(self) -> None:
                self._write(200, merge=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def ready_count(self) -> int:
        """OCIRepository objects whose stored status says Ready=True."""
        with self.lock:
            objs = [o for (p, _, _), o in self.store.items() if p == "ocirepositories"]
        return sum(
            1 for o in objs
            if any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in (o.get("status") or {}).get("conditions") or [])
        )

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: mock\n  cluster:\n    server: http://127.0.0.1:{self.port}\n"
            "users:\n- name: mock\n  user: {}\n"
            "contexts:\n- name: mock\n  context:\n    cluster: mock\n    user: mock\n"
            "    namespace: default\n"
            "current-context: mock\n"
        )
        return path

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


def json_patch(obj: dict, ops: list[dict]) -> None:
    """Applies RFC 6902 add/replace/remove ops (tests are not checked) to `obj` in place."""
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op.get("path", "").split("/")[1:]]
        if not parts or op.get("op") not in ("add", "replace", "remove"):
            continue
        parent = obj
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent.setdefault(p, {})
        last = parts[-1]
        if isinstance(parent, list):
            if op["op"] == "remove":
                parent.pop(int(last))
            elif last == "-":
                parent.append(op.get("value"))
            elif op["op"] == "add":
                parent.insert(int(last), op.get("value"))
            else:
                parent[int(last)] = op.get("value")
        elif op["op"] == "remove":
            parent.pop(last, None)
        else:
            parent[last] = op.get("value")


def oci_objects(host: str, images: list[dict]) -> list[dict]:
    objs = []
    for i, im in enumerate(images):
        objs.append({
            "apiVersion": GROUP_VERSION,
            "kind": "OCIRepository",
            "metadata": {"name": f"app-{i:04d}", "namespace": "default",
                         "uid": f"00000000-0000-4000-8000-{i:012d}", "resourceVersion": "1",
                         "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"interval": "10m", "url": f"oci://{host}/{im['repo']}",
                     "ref": {"tag": im["tag"]}, "insecure": True, "timeout": "60s"},
        })
    return objs


def run_controller(bin_path: str, mock: MockKube, out: Path, tag: str, settle: float,
                   wait_for: int, deadline_s: float) -> dict:
    """Starts the controller against `mock`, waits, samples /proc, stops it."""
    d = out / f"s5-{tag}"
    d.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, KUBECONFIG=str(mock.kubeconfig(d / "kubeconfig")), RUST_LOG="warn")
    extra = os.environ.get("BENCH_CONTROLLER_ARGS", "").split()
    ports = [free_port() for _ in range(3)]
    argv = [bin_path, "controller", "--storage-path", str(d / "storage"),
            "--storage-addr", f"127.0.0.1:{ports[0]}", "--storage-adv-addr", f"127.0.0.1:{ports[0]}",
            "--metrics-addr", f"127.0.0.1:{ports[1]}", "--health-addr", f"127.0.0.1:{ports[2]}",
            "--watch-all-namespaces", "--runtime-namespace", "default", *extra]
    err = open(d / "stderr.txt", "wb")
    start = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=err, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        done_at = None
        while time.monotonic() - start < deadline_s:
            if proc.poll() is not None:
                break
            # Ready, not patched: a new object's first status patch is Reconciling.
            if done_at is None and mock.ready_count() >= wait_for:
                done_at = time.monotonic()
            if done_at is not None and time.monotonic() - done_at >= settle:
                break
            time.sleep(0.1)
        if proc.poll() is not None:
            err.close()
            tail = (d / "stderr.txt").read_text(errors="replace")[-800:]
            return {"error": f"controller exited with {proc.returncode}: {tail}"}
        st = proc_status(proc.pid)
        return {
            "rss_mib": st.get("VmRSS", 0) / 1024,
            "hwm_mib": st.get("VmHWM", 0) / 1024,
            "cpu_s": proc_cpu(proc.pid),
            "patched": len(mock.status_patched),
            "ready": mock.ready_count(),
            "requests": mock.requests,
            "seconds": (done_at or time.monotonic()) - start,
        }
    finally:
        stop_process(proc)
        err.close()


def scenario5(rep, bin_path: str, host: str, images: list[dict], out: Path, quick: bool) -> None:
    label = "5 controller footprint (mock API server)"
    if not Path(bin_path).exists():
        rep.row(label, "ocisource controller, idle", wall=None, ratio="binary missing",
                target="< 20 MiB idle", met=None)
        return
    results = {}
    for tag, objs in (("idle", []), ("loaded", oci_objects(host, images))):
        mock = MockKube(objs)
        try:
            wait_for = len(objs)
            results[tag] = run_controller(bin_path, mock, out, tag, settle=2.0 if not quick else 1.0,
                                          wait_for=wait_for, deadline_s=(20 if quick else 120) if objs else 4)
        finally:
            mock.stop()
    idle = results["idle"]
    if "error" in idle:
        rep.row(label, "ocisource controller, idle", ratio="not measured", target="< 20 MiB idle", met=None)
        rep.notes.append(f"scenario 5 idle: {idle['error']}".replace("\n", " / "))
        rep.failures.append("scenario 5: the idle controller exited")
    else:
        rep.row(label, "ocisource controller, idle (no objects, watches open)", rss=idle["rss_mib"],
                cpu=idle["cpu_s"], ratio=f"RSS now {idle['rss_mib']:.1f} MiB, peak {idle['hwm_mib']:.1f} MiB",
                target="< 20 MiB idle", met=idle["rss_mib"] < 20)
    loaded = results["loaded"]
    n = len(images)
    if "error" in loaded:
        rep.row("", f"ocisource controller, {n} objects", ratio="not measured", target="", met=None)
        rep.notes.append(f"scenario 5 loaded: {loaded['error']}".replace("\n", " / "))
        rep.failures.append("scenario 5: the loaded controller exited")
    else:
        rep.row("", f"ocisource controller, {n} objects reconciled", rss=loaded["rss_mib"], cpu=loaded["cpu_s"],
                wall=loaded["seconds"],
                ratio=(f"{loaded['ready']}/{n} Ready; RSS after {loaded['patched']}/{n} status patches "
                       f"{loaded['rss_mib']:.1f} MiB, "
                       f"peak {loaded['hwm_mib']:.1f} MiB"),
                target="(no target)", met=None)
    rep.data["s5"] = results
