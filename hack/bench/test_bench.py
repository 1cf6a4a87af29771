"""Tests of the benchmark harness itself: run `python3 -B -m unittest discover -s hack/bench`.

They prove what the numbers rest on: artifacts are deterministic and valid, the pusher
round-trips through a real docker-registry, the access log counts requests, the peak RSS
is the command's and not the Python parent's, and the mock API server serves and patches.
Needs /usr/bin/docker-registry and /usr/bin/time; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import sys
import tarfile
import tempfile
import unittest
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))

import footprint  # noqa: E402
import gen  # noqa: E402
import oci  # noqa: E402
from measure import CommandFailed, run_once  # noqa: E402

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
                conn.close()
                seen = reg.requests_since(mark)
                self.assertEqual(seen, [f"GET /v2/{im['repo']}/manifests/{im['tag']}",
                                        f"GET /v2/{im['repo']}/blobs/{digest}"])
            finally:
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


if __name__ == "__main__":
    unittest.main()
