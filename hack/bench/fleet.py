"""Scenarios 6-8 runner: ocisource against Flux's source-controller on one real API server.

`hack/cluster.sh up` starts a private control plane (etcd, kube-apiserver, the controller
manager; state in `hack/.work/bench-cluster`, never the test suite's). Each run starts
ONE controller as a plain process with the admin kubeconfig (a benchmark, not an RBAC
test), same registry, same `--concurrent`, each with the log level and encoding of its
production defaults (info, json), in a fresh namespace, and stops it afterwards; the two
controllers alternate run by run. `run_fleet` measures a fleet created before the
controller starts (scenarios 6 and 7), `run_single` one object created once the
controller is idle (scenario 8). Figures come from /proc (VmHWM, VmRSS, utime+stime),
the registry's access log and the API server's `apiserver_request_total`, never from the
controllers' own metrics. Cleanup deletes the namespace while the controller still runs,
so its finalizers are honoured, then stops the controller.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from kube import Kube, KubeError, Watcher, count_delta, request_counts
from measure import proc_cpu, proc_status
from oci import free_port

ROOT = Path(__file__).resolve().parents[2]
CONTROLLERS = {
    "ocisource": ("ocisource.dev", "v1beta1"),
    "flux": ("source.toolkit.fluxcd.io", "v1"),
}
DISPLAY = {"ocisource": "ocisource", "flux": "Flux source-controller"}


class Cluster:
    """The private control plane: `up` (building only if allowed), `down`, clients."""

    def __init__(self, work: Path):
        self.dir = work / "bench-cluster"
        self.env = dict(os.environ, CLUSTER_DIR=str(self.dir))
        self.vars: dict[str, str] = {}
        self.kube: Kube | None = None

    def built(self) -> bool:
        return subprocess.run([str(ROOT / "hack/cluster.sh"), "built"], env=self.env,
                              capture_output=True).returncode == 0

    def up(self, ocisource_bin: str, build: bool) -> None:
        """Starts the control plane (`up` builds what is missing first, `start` never does)."""
        with open(self.dir.parent / "bench-cluster.log", "wb") as log:
            r = subprocess.run([str(ROOT / "hack/cluster.sh"), "up" if build else "start"],
                               env=self.env, stdout=log, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            raise RuntimeError(f"hack/cluster.sh failed to start the control plane "
                               f"(log: {self.dir.parent / 'bench-cluster.log'})")
        out = subprocess.run([str(ROOT / "hack/cluster.sh"), "env"], env=self.env,
                             capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            k, _, v = line.removeprefix("export ").partition("=")
            self.vars[k] = v
        crd = subprocess.run([ocisource_bin, "crd"], capture_output=True, check=True).stdout
        subprocess.run([self.vars["OCISOURCE_TEST_KUBECTL"], "--kubeconfig", self.vars["KUBECONFIG"],
                        "apply", "--server-side", "-f", "-"], input=crd, check=True,
                       capture_output=True)
        subprocess.run([self.vars["OCISOURCE_TEST_KUBECTL"], "--kubeconfig", self.vars["KUBECONFIG"],
                        "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"],
                       check=True, capture_output=True)
        self.kube = Kube(self.vars["OCISOURCE_TEST_APISERVER"], self.dir / "pki")

    def down(self) -> None:
        subprocess.run([str(ROOT / "hack/cluster.sh"), "down"], env=self.env, capture_output=True)


def start_controller(kind: str, cluster: Cluster, ocisource_bin: str, d: Path,
                     concurrent: int) -> tuple[subprocess.Popen, int]:
    """Starts one controller; returns the process and its health port (/readyz)."""
    storage, tmp = d / "storage", d / "tmp"
    storage.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(exist_ok=True)
    sport, mport, hport = free_port(), free_port(), free_port()
    env = dict(os.environ, KUBECONFIG=cluster.vars["KUBECONFIG"], TMPDIR=str(tmp))
    if kind == "ocisource":
        argv = [ocisource_bin, "controller", f"--concurrent={concurrent}", f"--storage-path={storage}",
                f"--storage-addr=127.0.0.1:{sport}", f"--storage-adv-addr=127.0.0.1:{sport}",
                f"--metrics-addr=127.0.0.1:{mport}", f"--health-addr=127.0.0.1:{hport}",
                "--watch-all-namespaces", "--runtime-namespace=default",
                "--log-level=info", "--log-encoding=json"]
    else:
        env["RUNTIME_NAMESPACE"] = "flux-system"
        argv = [cluster.vars["OCISOURCE_TEST_SOURCE_CONTROLLER"], f"--concurrent={concurrent}",
                f"--storage-path={storage}", f"--storage-addr=127.0.0.1:{sport}",
                f"--storage-adv-addr=127.0.0.1:{sport}", f"--metrics-addr=127.0.0.1:{mport}",
                f"--health-addr=127.0.0.1:{hport}", "--enable-leader-election=false",
                "--watch-all-namespaces=true", "--log-level=info", "--log-encoding=json"]
    with open(d / "controller.log", "wb") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    return proc, hport


def note(tag: str, what: str, t0: float) -> None:
    """A progress line on stderr: which run, what just finished, seconds since `t0`."""
    print(f"[bench {time.strftime('%H:%M:%S')}]   {tag}: {what} (+{time.monotonic() - t0:.1f} s)",
          file=sys.stderr, flush=True)


def kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def wait_ready(proc: subprocess.Popen, hport: int, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"controller exited with {proc.returncode}: "
                               f"{log.read_text(errors='replace')[-600:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{hport}/readyz", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"controller not ready within {timeout:.0f} s")


def objects(kind: str, ns: str, host: str, images: list[dict], n: int, interval: str) -> list[dict]:
    group, version = CONTROLLERS[kind]
    out = []
    for i in range(n):
        im = images[i % len(images)]
        out.append({
            "apiVersion": f"{group}/{version}", "kind": "OCIRepository",
            "metadata": {"name": f"app-{i:05d}", "namespace": ns},
            "spec": {"interval": interval, "url": f"oci://{host}/{im['repo']}",
                     "ref": {"tag": im["tag"]}, "insecure": True, "timeout": "60s"},
        })
    return out


def collection(kind: str, ns: str) -> str:
    group, version = CONTROLLERS[kind]
    return f"/apis/{group}/{version}/namespaces/{ns}/ocirepositories"


def sample(pid: int) -> dict:
    st = proc_status(pid)
    return {"cpu_s": proc_cpu(pid), "hwm_mib": st.get("VmHWM", 0) / 1024,
            "rss_mib": st.get("VmRSS", 0) / 1024}


def registry_split(reqs: list[str]) -> dict[str, int]:
    """Registry requests by kind; `GET /v2/` pings apart."""
    kinds: dict[str, int] = {}
    for r in reqs:
        method, _, path = r.partition(" ")
        kind = ("ping" if path.rstrip("/") == "/v2" else
                f"{method} manifest" if "/manifests/" in path else
                f"{method} blob" if "/blobs/" in path else f"{method} other")
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def run_fleet(kind: str, tag: str, cluster: Cluster, reg, bin_path: str, out: Path,
              images: list[dict], n: int, concurrent: int, interval_s: int, steady_s: float,
              deadline_s: float, cleanup: bool = True) -> dict:
    """One timed run of a fleet of `n` objects (created first), see the module doc.

    `steady_s` > 0 adds one steady-state window after all are Ready (registry and API
    requests counted in it); the RSS reported as steady is read at its end. Without
    `cleanup` the objects are left behind (the last run before the cluster goes down)."""
    kube = cluster.kube
    ns = f"b{tag}".lower().replace("_", "-")
    d = out / tag
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    base = collection(kind, ns)
    tc = time.monotonic()
    kube.create_namespace(ns)
    kube.create_all(base, objects(kind, ns, reg.host, images, n, f"{interval_s}s"))
    watcher = Watcher(kube, base, n)
    proc = None
    try:
        if not watcher.wait(lambda w: len(w.objects) >= n, 120):
            raise RuntimeError(f"the watch listed {len(watcher.objects)}/{n} objects")
        note(tag, f"{n} objects created", tc)
        m0 = request_counts(kube.metrics())
        mark0 = reg.log_mark()
        t0 = time.monotonic()
        proc, _ = start_controller(kind, cluster, bin_path, d, concurrent)
        done = watcher.wait(lambda w: w.ready_at is not None or proc.poll() is not None, deadline_s)
        if proc.poll() is not None:
            raise RuntimeError(f"controller exited with {proc.returncode}: "
                               f"{(d / 'controller.log').read_text(errors='replace')[-600:]}")
        res: dict = {"n": n, "ready": len(watcher.ready), "all_ready": bool(done), "interval_s": interval_s}
        res["ready_s"] = (watcher.ready_at - t0) if done else None
        note(tag, f"{len(watcher.ready)}/{n} Ready", t0)
        at_ready = sample(proc.pid)
        res["cpu_ready_s"] = at_ready["cpu_s"]
        mark1 = reg.log_mark()
        m1 = request_counts(kube.metrics())
        res["reg_first"] = registry_split(reg.requests_since(mark0, mark1))
        res["api_first"] = count_delta(m1, m0)
        if steady_s > 0:
            time.sleep(steady_s)
            res["reg_steady"] = registry_split(reg.requests_since(mark1))
            res["api_steady"] = count_delta(request_counts(kube.metrics()), m1)
        end = sample(proc.pid)
        res.update(cpu_s=end["cpu_s"], hwm_mib=end["hwm_mib"], rss_mib=end["rss_mib"],
                   watch_events=watcher.events)
        if watcher.error:
            res["watch_error"] = watcher.error
        return res
    finally:
        watcher.stop()
        tc = time.monotonic()
        clean = True
        try:
            if cleanup or not proc:
                clean = kube.delete_namespace(ns, base, (300 if n > 2000 else 120) if proc else 0,
                                              whole=False)
        finally:
            # Even when the cleanup fails: a controller left running outlives the bench.
            if proc:
                kill(proc)
        if not clean:
            (d / "cleanup.txt").write_text("finalizers had to be stripped\n")
        shutil.rmtree(d / "storage", ignore_errors=True)
        note(tag, "cleaned up" + ("" if clean else " (finalizers stripped)"), tc)


def run_single(kind: str, tag: str, cluster: Cluster, reg, bin_path: str, out: Path,
               image: dict, concurrent: int, deadline_s: float, keep: bool = False,
               quick: bool = False) -> dict:
    """One object created once the controller is idle: time from create to Ready, the CPU
    it took, the RSS growth over idle. With `keep`, a copy of the artifact is kept (the
    controller deletes its own at cleanup) for the equivalence check; see `cleanup_storage`."""
    kube = cluster.kube
    ns = f"b{tag}".lower()
    d = out / tag
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    base = collection(kind, ns)
    kube.create_namespace(ns)
    ts = time.monotonic()
    proc, hport = start_controller(kind, cluster, bin_path, d, concurrent)
    watcher = Watcher(kube, base, 1)
    try:
        wait_ready(proc, hport, d / "controller.log")
        note(tag, "controller ready", ts)
        time.sleep(0.2 if quick else 1.0)
        idle = sample(proc.pid)
        t0 = time.monotonic()
        kube.create_all(base, objects(kind, ns, reg.host, [image], 1, "10m"), workers=1)
        done = watcher.wait(lambda w: w.ready_at is not None or proc.poll() is not None, deadline_s)
        if not done or watcher.ready_at is None:
            raise RuntimeError(f"{kind}: the object was not Ready within {deadline_s:.0f} s "
                               f"({(d / 'controller.log').read_text(errors='replace')[-400:]})")
        wall = watcher.ready_at - t0
        note(tag, "object Ready", t0)
        end = sample(proc.pid)
        res = {"ready_s": wall, "cpu_s": end["cpu_s"] - idle["cpu_s"], "idle_mib": idle["rss_mib"],
               "hwm_mib": end["hwm_mib"], "growth_mib": end["hwm_mib"] - idle["rss_mib"], "artifact": ""}
        obj = next(iter(watcher.objects.values()))
        path = ((obj.get("status") or {}).get("artifact") or {}).get("path", "")
        if keep and path:
            res["artifact"] = str(d / "artifact.tar.gz")
            shutil.copyfile(d / "storage" / path, res["artifact"])
        return res
    finally:
        watcher.stop()
        tc = time.monotonic()
        kube.delete_namespace(ns, base, 120, whole=False)
        kill(proc)
        shutil.rmtree(d / "storage", ignore_errors=True)
        note(tag, "cleaned up", tc)


def cleanup_storage(res: dict) -> None:
    """Removes the artifact copy `run_single(keep=True)` made."""
    if res.get("artifact"):
        Path(res["artifact"]).unlink(missing_ok=True)


__all__ = ["Cluster", "run_fleet", "run_single", "cleanup_storage", "registry_split",
           "DISPLAY", "KubeError"]
