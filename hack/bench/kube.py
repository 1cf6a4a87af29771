"""A minimal client of the real kube-apiserver for the fleet scenarios (standard library).

`Kube` talks HTTPS with the cluster's admin client certificate (from the pki dir that
`hack/cluster.sh` writes): create and delete namespaces and objects, read the API server's
own `/metrics`. `Watcher` keeps one watch on a kind of OCIRepository in one namespace and
records the moment the number of Ready objects first reaches a target: time-to-Ready
comes from the API server's view, not from either controller. `request_counts` parses
`apiserver_request_total` so a run reports the requests the API server served.
"""

from __future__ import annotations

import http.client
import json
import re
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class KubeError(Exception):
    pass


class Kube:
    """HTTPS to the API server as the cluster admin; one keep-alive connection per thread."""

    def __init__(self, server: str, pki: Path):
        u = urlsplit(server)
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 443
        self.ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        self.local = threading.local()

    def connect(self, timeout: float | None = 60) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)

    def request(self, method: str, path: str, body=None, ctype: str = "application/json",
                ok=(200, 201, 202)) -> tuple[int, dict | str]:
        data = json.dumps(body).encode() if body is not None else None
        for attempt in (1, 2):
            reused = getattr(self.local, "conn", None) is not None
            conn = self.local.conn if reused else self.connect()
            self.local.conn = conn
            try:
                conn.request(method, path, body=data, headers={"Content-Type": ctype} if data else {})
                resp = conn.getresponse()
                raw = resp.read()
                break
            except (OSError, http.client.HTTPException):
                conn.close()
                self.local.conn = None
                # The API server closes keep-alive connections idle for a while (longer
                # than a slow controller takes to get all Ready): one retry on a new one.
                if not reused or attempt == 2:
                    raise
        text = raw.decode(errors="replace")
        try:
            out = json.loads(text) if resp.getheader("Content-Type", "").startswith("application/json") else text
        except ValueError:
            out = text
        if ok and resp.status not in ok:
            raise KubeError(f"{method} {path}: HTTP {resp.status}: {text[:300]}")
        return resp.status, out

    def metrics(self) -> str:
        return str(self.request("GET", "/metrics")[1])

    def create_namespace(self, ns: str) -> None:
        self.request("POST", "/api/v1/namespaces",
                     {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    def create_all(self, base: str, objects: list[dict], workers: int = 4) -> None:
        """POSTs every object to the collection `base` over `workers` connections."""
        with ThreadPoolExecutor(workers) as pool:
            for fut in [pool.submit(self.request, "POST", base, o) for o in objects]:
                fut.result()

    def delete_namespace(self, ns: str, base: str, timeout: float, whole: bool = True) -> bool:
        """Deletes `ns` and waits until it is gone (`whole`; the controller manager then no
        longer deletes anything in it that a next run would count) or only until the
        objects in `base` are. When objects still hold their finalizers at `timeout` (no
        controller left to remove them), strips the finalizers of what is left in `base`
        and waits again. Returns False if it had to strip."""
        # The objects first (one deletecollection): the namespace controller would get to
        # them only after its own discovery pass, seconds later.
        # 504: a collection of thousands outlasts the request's 60 s; the API server goes
        # on deleting after it answers, and the waits below see the end.
        self.request("DELETE", base, ok=(200, 202, 404, 504))
        self.request("DELETE", f"/api/v1/namespaces/{ns}", ok=(200, 202, 404))
        if whole and self.wait_gone(f"/api/v1/namespaces/{ns}", timeout):
            return True
        if not whole and self.wait_empty(base, timeout):
            return True
        _, listed = self.request("GET", base)
        for item in listed.get("items", []) if isinstance(listed, dict) else []:
            self.request("PATCH", f"{base}/{item['metadata']['name']}",
                         {"metadata": {"finalizers": None}}, "application/merge-patch+json",
                         ok=(200, 404))
        self.wait_gone(f"/api/v1/namespaces/{ns}", 300)
        return False

    def wait_empty(self, base: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            listed = self.request("GET", base, ok=None)[1]
            if isinstance(listed, dict) and not listed.get("items"):
                return True
            time.sleep(0.2)
        return False

    def wait_gone(self, path: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.request("GET", path, ok=None)[0] == 404:
                return True
            time.sleep(0.5)
        return False


def is_ready(obj: dict) -> bool:
    """Ready=True for the current generation, with the artifact published. (Flux's
    source-controller patches its conditions before the rest of its status: Ready=True
    is seen a moment before `observedGeneration` and `artifact`.)"""
    status = obj.get("status") or {}
    return (status.get("observedGeneration") == obj.get("metadata", {}).get("generation")
            and bool(status.get("artifact"))
            and any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in status.get("conditions") or []))


class Watcher:
    """Watches `base` (a namespaced collection) on a thread; tracks Ready objects."""

    def __init__(self, kube: Kube, base: str, target: int):
        self.kube, self.base, self.target = kube, base, target
        self.objects: dict[str, dict] = {}
        self.ready: set[str] = set()
        self.ready_at: float | None = None
        self.events = 0
        self.error: str | None = None
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.stopping = False
        self.conn: http.client.HTTPSConnection | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        version = ""
        while not self.stopping:
            self.conn = self.kube.connect(timeout=None)
            try:
                q = "watch=1&allowWatchBookmarks=true&timeoutSeconds=3600"
                self.conn.request("GET", f"{self.base}?{q}" + (f"&resourceVersion={version}" if version else ""))
                resp = self.conn.getresponse()
                if resp.status != 200:
                    raise KubeError(f"watch {self.base}: HTTP {resp.status}: {resp.read()[:300]!r}")
                while line := resp.readline():
                    ev = json.loads(line)
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":
                        version = ""  # expired: list again through a fresh watch
                        break
                    version = obj.get("metadata", {}).get("resourceVersion", version)
                    if ev.get("type") != "BOOKMARK":
                        self._apply(ev["type"], obj)
            except (OSError, ValueError, http.client.HTTPException, KubeError) as e:
                if not self.stopping:
                    self.error = str(e)
                    time.sleep(0.5)
            finally:
                self.conn.close()

    def _apply(self, kind: str, obj: dict) -> None:
        name = obj["metadata"]["name"]
        with self.lock:
            self.events += 1
            if kind == "DELETED":
                self.objects.pop(name, None)
                self.ready.discard(name)
            else:
                self.objects[name] = obj
                (self.ready.add if is_ready(obj) else self.ready.discard)(name)
            if self.ready_at is None and len(self.ready) >= self.target:
                self.ready_at = time.monotonic()
            self.changed.notify_all()

    def wait(self, pred, timeout: float) -> bool:
        """Waits until `pred(self)` holds (checked on every event) or `timeout` passes."""
        with self.lock:
            return self.changed.wait_for(lambda: pred(self), timeout)

    def stop(self) -> None:
        self.stopping = True
        if self.conn and self.conn.sock:
            try:
                self.conn.sock.shutdown(2)
            except OSError:
                pass
        self.thread.join(5)


# What the control plane does on its own while a controller runs: the API server renews
# its identity lease and reconciles the kubernetes endpoints; the controller manager gives
# each new namespace its default ServiceAccount. Neither controller touches these here
# (both run without leader election), so they are left out of the counts.
BACKGROUND = {"leases", "endpoints", "endpointslices", "serviceaccounts", "namespaces"}
# The namespace controller empties a deleted namespace with deletecollection (cleanup of
# the previous run may still be under way); neither controller uses that verb.
BACKGROUND_VERBS = {"DELETECOLLECTION"}


def request_counts(metrics_text: str) -> dict[tuple[str, str, str], float]:
    """`apiserver_request_total` summed by (verb, resource, subresource), resources only
    (the requests for /metrics itself and discovery have no resource and are left out),
    and the control plane's own BACKGROUND resources left out."""
    out: dict[tuple[str, str, str], float] = {}
    for line in metrics_text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_part, _, value = line.rpartition("} ")
        labels = dict(LABEL.findall(labels_part))
        if (not labels.get("resource") or labels["resource"] in BACKGROUND
                or labels.get("verb") in BACKGROUND_VERBS):
            continue
        key = (labels.get("verb", ""), labels["resource"], labels.get("subresource", ""))
        out[key] = out.get(key, 0.0) + float(value)
    return out


def count_delta(after: dict, before: dict) -> dict[str, int]:
    """Requests counted between two `request_counts`, as `VERB resource[/sub]: n`, zero
    entries left out."""
    out = {}
    for (verb, res, sub), v in after.items():
        d = int(round(v - before.get((verb, res, sub), 0.0)))
        if d:
            out[f"{verb} {res}{'/' + sub if sub else ''}"] = d
    return out


def summarize(delta: dict[str, int]) -> str:
    """The largest entries of a `count_delta`, for the notes."""
    items = sorted(delta.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{k}: {n}" for k, n in items[:8])
