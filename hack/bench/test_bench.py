"""Tests of the benchmark harness itself: run `python3 -B -m unittest discover -s hack/bench`.

They prove what the numbers rest on: artifacts are deterministic and valid, the pusher
round-trips through a real docker-registry, the access log counts requests, the peak RSS
is the command's and not the Python parent's, the mock API server serves and patches, and
the parsers and aggregations of scenarios 6-9 (wrk output, the API server's request
counter, registry request kinds, medians, missed targets, process-tree RSS) read what
they are given.
Needs /usr/bin/docker-registry and /usr/bin/time; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest
from pathlib import Path
from unittest import mock

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))

import footprint  # noqa: E402
import gen  # noqa: E402
import kube  # noqa: E402
import measure  # noqa: E402
import oci  # noqa: E402
import run  # noqa: E402
import serve  # noqa: E402
import versus  # noqa: E402
from fleet import registry_split  # noqa: E402
from measure import (CommandFailed, RssSampler, descendants, proc_status, run_once,  # noqa: E402
                     tree_rss_kib)

SMALL = dict(files=40, total_bytes=200_000, layers=4)


class GenTest(unittest.TestCase):
    def test_same_parameters_give_the_same_digests(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            sa = gen.ensure(Path(a), "config", **SMALL)
            sb = gen.ensure(Path(b), "config", **SMALL)
            self.assertEqual(sa["images"][0]["manifest"], sb["images"][0]["manifest"])
            self.assertEqual([l["digest"] for l in sa["images"][0]["layers"]],
                             [l["digest"] for l in sb["images"][0]["layers"]])

    def test_layers_are_valid_tar_gz_with_the_counted_files_and_overrides(self):
        with tempfile.TemporaryDirectory() as d:
            s = gen.ensure(Path(d), "config", files=400, total_bytes=400_000, layers=4)
            layers = s["images"][0]["layers"]
            names = []
            for l in layers:
                p = Path(oci.blob_path(s, l["digest"]))
                self.assertEqual("sha256:" + hashlib.sha256(p.read_bytes()).hexdigest(), l["digest"])
                with tarfile.open(p, "r:gz") as tf:
                    files = [m.name for m in tf if m.isfile()]
                self.assertEqual(len(files), l["files"])
                names.append(set(files))
            self.assertEqual(sum(len(n) for n in names), 400)
            self.assertTrue(names[0] & names[3], "the last layer must override files of the first")
            self.assertFalse(names[1] & names[2])


class RegistryTest(unittest.TestCase):
    def test_push_round_trips_and_the_access_log_counts_requests(self):
        with tempfile.TemporaryDirectory() as d:
            s = gen.ensure(Path(d), "config", **SMALL)
            reg = oci.Registry(Path(d))
            try:
                oci.push_set(reg.host, s)
                im = s["images"][0]
                mark = reg.log_mark()
                conn = http.client.HTTPConnection(reg.host)
                conn.request("GET", f"/v2/{im['repo']}/manifests/{im['tag']}",
                             headers={"Accept": gen.MT_MANIFEST})
                resp = conn.getresponse()
                body = resp.read()
                self.assertEqual(resp.status, 200)
                self.assertEqual("sha256:" + hashlib.sha256(body).hexdigest(), im["manifest"])
                digest = im["layers"][0]["digest"]
                conn.request("GET", f"/v2/{im['repo']}/blobs/{digest}")
                blob = conn.getresponse().read()
                self.assertEqual("sha256:" + hashlib.sha256(blob).hexdigest(), digest)
                seen = reg.requests_since(mark)
                self.assertEqual(seen, [f"GET /v2/{im['repo']}/manifests/{im['tag']}",
                                        f"GET /v2/{im['repo']}/blobs/{digest}"])
                # A window closed by a later mark leaves out what came after it.
                end = reg.log_mark()
                conn.request("HEAD", f"/v2/{im['repo']}/manifests/{im['tag']}",
                             headers={"Accept": gen.MT_MANIFEST})
                conn.getresponse().read()
                self.assertEqual(len(reg.requests_since(mark, end)), 2)
                self.assertEqual(reg.requests_since(end),
                                 [f"HEAD /v2/{im['repo']}/manifests/{im['tag']}"])
            finally:
                conn.close()
                reg.stop()


class MeasureTest(unittest.TestCase):
    def test_peak_rss_is_the_commands_not_the_python_parents(self):
        with tempfile.TemporaryDirectory() as d:
            small = run_once(["true"], log_dir=Path(d))
            self.assertLess(small.rss_kib, 16 << 10)
            big = run_once([sys.executable, "-c", "b = b'x' * (96 << 20)"], log_dir=Path(d))
            self.assertGreaterEqual(big.rss_kib, 96 << 10)

    def test_a_failing_command_raises_with_its_stderr(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(CommandFailed) as ctx:
                run_once(["bash", "-c", "echo boom >&2; exit 3"], log_dir=Path(d))
            self.assertIn("boom", str(ctx.exception))
            self.assertIn("exit 3", str(ctx.exception))


class MockKubeTest(unittest.TestCase):
    BASE = "/apis/ocisource.dev/v1beta1/namespaces/default/ocirepositories"

    def setUp(self):
        objs = footprint.oci_objects("127.0.0.1:5000", [{"repo": "r", "tag": "v1"}])
        self.mock = footprint.MockKube(objs)
        self.addCleanup(self.mock.stop)
        self.conn = http.client.HTTPConnection("127.0.0.1", self.mock.port)
        self.addCleanup(self.conn.close)

    def test_lists_gets_and_merges_status_patches(self):
        mock, conn, base = self.mock, self.conn, self.BASE
        conn.request("GET", base)
        items = json.loads(conn.getresponse().read())["items"]
        self.assertEqual([i["metadata"]["name"] for i in items], ["app-0000"])
        patch = json.dumps({"status": {"observedGeneration": 1}})
        conn.request("PATCH", base + "/app-0000/status", body=patch,
                     headers={"Content-Type": "application/merge-patch+json"})
        got = json.loads(conn.getresponse().read())
        self.assertEqual(got["status"], {"observedGeneration": 1})
        self.assertEqual(got["spec"]["url"], "oci://127.0.0.1:5000/r")
        self.assertEqual(mock.status_patched, {("default", "app-0000")})
        fin = json.dumps([{"op": "test", "path": "/metadata/finalizers", "value": None},
                          {"op": "add", "path": "/metadata/finalizers", "value": ["f"]}])
        conn.request("PATCH", base + "/app-0000", body=fin,
                     headers={"Content-Type": "application/json-patch+json"})
        got = json.loads(conn.getresponse().read())
        self.assertEqual(got["metadata"]["finalizers"], ["f"])
        conn.request("PATCH", base + "/app-0000", body=json.dumps(
            [{"op": "add", "path": "/metadata/finalizers/-", "value": "g"}]),
            headers={"Content-Type": "application/json-patch+json"})
        self.assertEqual(json.loads(conn.getresponse().read())["metadata"]["finalizers"], ["f", "g"])
        conn.request("GET", base + "/missing")
        self.assertEqual(conn.getresponse().status, 404)

    def test_a_watch_replays_what_changed_after_the_listed_version(self):
        conn, base = self.conn, self.BASE
        conn.request("GET", base)
        listed = json.loads(conn.getresponse().read())["metadata"]["resourceVersion"]
        # A change between the list and the watch, as a controller's first patch can be.
        conn.request("PATCH", base + "/app-0000/status",
                     body=json.dumps({"status": {"observedGeneration": 1}}),
                     headers={"Content-Type": "application/merge-patch+json"})
        conn.getresponse().read()
        conn.request("GET", f"{base}?watch=1&resourceVersion={listed}&timeoutSeconds=1")
        resp = conn.getresponse()
        events = [json.loads(line) for line in resp.read().splitlines() if line.strip()]
        self.assertEqual([e["type"] for e in events], ["MODIFIED"])
        self.assertEqual(events[0]["object"]["status"], {"observedGeneration": 1})


WRK_OUTPUT = """Running 1s test @ http://127.0.0.1:18777/
  1 threads and 2 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    12.39ms   19.24ms  99.07ms   88.59%
    Req/Sec   414.80    371.22     0.92k    60.00%
  Latency Distribution
     50%    1.63ms
     75%   17.53ms
     90%   35.69ms
     99%   89.17ms
  427 requests in 1.05s, 77.98KB read
  Non-2xx or 3xx responses: 3
Requests/sec:    404.86
Transfer/sec:     73.93KB
"""

METRICS = """# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="ocisource.dev",resource="ocirepositories",scope="namespace",subresource="status",verb="PATCH",version="v1beta1"} 40
apiserver_request_total{code="409",component="apiserver",dry_run="",group="ocisource.dev",resource="ocirepositories",scope="namespace",subresource="status",verb="PATCH",version="v1beta1"} 2
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="events",scope="namespace",subresource="",verb="POST",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="namespace",subresource="",verb="PUT",version="v1"} 11
apiserver_request_duration_seconds_count{group="",resource="events",verb="POST"} 5
"""


class ParseTest(unittest.TestCase):
    def test_wrk_output_gives_rate_latencies_bytes_and_errors(self):
        got = serve.parse_wrk(WRK_OUTPUT)
        self.assertEqual(got["rps"], 404.86)
        self.assertAlmostEqual(got["p50_ms"], 1.63)
        self.assertAlmostEqual(got["p99_ms"], 89.17)
        self.assertAlmostEqual(got["bytes_per_s"], 73.93 * 1024)
        self.assertEqual((got["requests"], got["non2xx"], got["errors"]), (427, 3, 0))
        micro = WRK_OUTPUT.replace("99%   89.17ms", "99%  250.00us").replace(
            "Transfer/sec:     73.93KB", "Transfer/sec:      1.50GB")
        got = serve.parse_wrk(micro + "  Socket errors: connect 0, read 2, write 1, timeout 4\n")
        self.assertAlmostEqual(got["p99_ms"], 0.25)
        self.assertAlmostEqual(got["bytes_per_s"], 1.5 * (1 << 30))
        self.assertEqual(got["errors"], 7)
        with self.assertRaises(ValueError):
            serve.parse_wrk("unable to connect to 127.0.0.1:1 Connection refused")

    def test_api_server_counter_sums_codes_by_verb_and_resource_without_non_resource_urls(self):
        before = kube.request_counts(METRICS)
        self.assertEqual(before, {("PATCH", "ocirepositories", "status"): 42.0,
                                  ("POST", "events", ""): 5.0})
        after = kube.request_counts(METRICS.replace("} 40", "} 140").replace(
            'verb="GET",version=""} 7', 'verb="GET",version=""} 9'))
        delta = kube.count_delta(after, before)
        self.assertEqual(delta, {"PATCH ocirepositories/status": 100})
        self.assertEqual(kube.summarize(delta), "PATCH ocirepositories/status: 100")

    def test_ready_needs_the_condition_the_generation_and_the_artifact(self):
        ready = {"type": "Ready", "status": "True"}
        obj = {"metadata": {"generation": 2},
               "status": {"observedGeneration": 2, "artifact": {"path": "p"}, "conditions": [ready]}}
        self.assertTrue(kube.is_ready(obj))
        # Flux's first patch: the conditions alone, observedGeneration not yet written.
        self.assertFalse(kube.is_ready({"metadata": {"generation": 2},
                                        "status": {"observedGeneration": -1, "conditions": [ready]}}))
        stale = {"metadata": {"generation": 3}, "status": obj["status"]}
        self.assertFalse(kube.is_ready(stale))
        failing = {"metadata": {"generation": 2}, "status": dict(
            obj["status"], conditions=[{"type": "Ready", "status": "False"}])}
        self.assertFalse(kube.is_ready(failing))

    def test_registry_requests_are_split_by_kind_with_pings_apart(self):
        got = registry_split(["GET /v2/", "HEAD /v2/a/manifests/v1", "GET /v2/a/manifests/sha256:ab",
                              "GET /v2/a/blobs/sha256:cd", "GET /v2/a/blobs/sha256:ef",
                              "GET /v2/a/tags/list"])
        self.assertEqual(got, {"ping": 1, "HEAD manifest": 1, "GET manifest": 1, "GET blob": 2,
                               "GET other": 1})

    def test_medians_skip_missing_figures_and_request_totals_count_pings_too(self):
        runs = [{"t": 3.0, "reg": {"ping": 9, "GET blob": 1}}, {"t": None, "reg": {"GET blob": 5}},
                {"t": 1.0, "reg": {"HEAD manifest": 2}}, {"error": "boom"}]
        self.assertEqual(versus.med(runs, "t"), 2.0)
        self.assertEqual(versus.med(runs, "missing"), None)
        self.assertEqual(versus.med_count(runs, "reg"), 5)
        self.assertEqual(versus.med_count(runs, "reg", only="ping"), 0)
        self.assertEqual(versus.reg_text(runs[:1], "reg"), "10 (9 `GET /v2/` pings)")
        self.assertEqual(versus.reg_text(runs[1:2], "reg"), "5")

    def test_missed_targets_name_their_scenario(self):
        rep = run.Report()
        rep.row("6 fleet: 100 objects", "ocisource", wall=1.0)
        rep.row("", "time until all Ready", ratio="0.7x", target="<= 0.5x", met=False)
        rep.row("", "peak RSS", ratio="0.2x", target="<= 0.5x", met=True)
        rep.row("9 serving", "10 KB file", ratio="0.9x", target=">= 1.0x Go", met=False)
        self.assertEqual(rep.missed(), ["6 fleet: time until all Ready (<= 0.5x): 0.7x",
                                        "9 serving: 10 KB file (>= 1.0x Go): 0.9x"])

    def test_process_tree_rss_counts_the_children(self):
        with tempfile.TemporaryDirectory() as d:
            ready = Path(d) / "ready"
            # Only the child holds the 64 MiB: the parent alone stays far below it.
            code = (f"import os,time,pathlib\npid=os.fork()\n"
                    f"if pid==0:\n c=b'y'*(64<<20); pathlib.Path('{ready}').touch(); time.sleep(30)\n"
                    f"else:\n os.waitpid(pid,0)")
            proc = subprocess.Popen([sys.executable, "-c", code])
            try:
                while not ready.exists():
                    time.sleep(0.05)
                sampler = RssSampler(proc.pid, period=0.01)
                time.sleep(0.2)
                peak = sampler.stop()
                parent = proc_status(proc.pid)["VmRSS"]
                self.assertLess(parent, 64 << 10)
                self.assertGreaterEqual(tree_rss_kib(proc.pid), parent + (64 << 10))
                self.assertGreaterEqual(peak, parent + (64 << 10))
            finally:
                for p in reversed(descendants(proc.pid)):
                    os.kill(p, 9)
                proc.wait()

    def test_sampler_lists_the_tree_once_per_rescan(self):
        # Listing the tree scans all of /proc; between rescans only the listed pids are read.
        listed = []
        real = measure.descendants
        with mock.patch.object(measure, "descendants", lambda pid: listed.append(pid) or real(pid)):
            sampler = RssSampler(os.getpid(), period=0.01, rescan=60)
            time.sleep(0.2)
            peak = sampler.stop()
        self.assertEqual(listed, [os.getpid()])
        self.assertGreaterEqual(peak, proc_status(os.getpid())["VmRSS"] // 2)

    def test_serving_report_takes_the_median_of_all_slow_windows(self):
        def w(p99, **more):
            return {"rps": 100.0, "bytes_per_s": 1e6, "p50_ms": 0.1, "p99_ms": p99, "errors": 0,
                    "non2xx": 0, **more}
        res = {}
        for name, p99s, rss in (("ocisource", [0.4, 0.5, 0.9], 17.0), ("Go FileServer", [0.6, 0.7, 0.8], 26.0),
                                ("nginx", [0.5, 0.5, 0.5], 19.0)):
            res[name] = {"small-1": [w(0.2)], "big-1": [w(5.0)],
                         "slow": [w(p) for p in p99s], "slow_rss": [{"rss_mib": rss}]}
        res["nginx"]["slow"][0]["errors"] = 1
        rep = run.Report()
        serve.report9(rep, "9 serving", res, {}, (1,), (1,), 200, 100 << 20)
        p99 = next(r for r in rep.rows if r[1].startswith("p99"))
        self.assertIn("median of 3 windows, ours 0.40-0.90, Go 0.60-0.80", p99[1])
        self.assertIn("ours 0.50 / Go 0.70 ms = 0.71x", p99[5])
        rss = next(r for r in rep.rows if "server RSS" in r[1])
        self.assertIn("ours 17.0 / Go 26.0 MiB", rss[5])
        self.assertTrue(any("nginx slow" in n for n in rep.notes), rep.notes)


if __name__ == "__main__":
    unittest.main()
