"""The ocisource benchmark: scenarios, baselines measured in the same run, the report.

Called by `hack/bench.sh` (which builds the release binary). Starts a private
docker-registry, generates deterministic artifacts (cached under `hack/.work/artifacts`),
pushes them with an independent client, runs every scenario several times and prints a
markdown table of medians and ratios, also written to `hack/.work/bench-results.md`
(and `.json` for the chart). A scenario whose ocisource command fails is reported as
such and the others still run, but the exit status is 1 when a command failed or a
correctness check did not hold (missing targets do not fail the run).

Environment: BENCH_QUICK=1 (tiny sizes, one run), BENCH_RUNS=N (runs per command),
BENCH_BIN (the ocisource binary), BENCH_ONLY=1,3 (scenarios to run).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen  # noqa: E402
import oci  # noqa: E402
import footprint  # noqa: E402
import serve  # noqa: E402
import versus  # noqa: E402
from measure import CommandFailed, Result, bench, run_once  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "hack" / ".work"
QUICK = os.environ.get("BENCH_QUICK") == "1"
BIN = os.environ.get("BENCH_BIN", str(ROOT / "target" / "release" / "ocisource"))
ONLY = {int(x) for x in os.environ.get("BENCH_ONLY", "1,2,3,4,5,6,7,8,9").split(",") if x}

if QUICK:
    SIZES = {
        "config": dict(files=400, total_bytes=4_000_000, layers=4),
        "large": dict(total_bytes=16 << 20, nfiles=4),
        "noop": dict(objects=50, repos=5),
        "fleet": dict(objects=50, repos=10),
        "single": dict(files=400, total_bytes=4_000_000, layers=1),
    }
    RUNS = {"s1": 1, "s2": 1, "s3": 1, "s4": 1, "s6": 1, "s9": 1}
else:
    SIZES = {
        "config": dict(files=12_000, total_bytes=116_000_000, layers=4),
        "large": dict(total_bytes=1 << 30, nfiles=64),
        "noop": dict(objects=1000, repos=20),
        "fleet": dict(objects=50, repos=10),
        "single": dict(files=12_000, total_bytes=116_000_000, layers=1),
    }
    RUNS = {"s1": 5, "s2": 3, "s3": 5, "s4": 3, "s6": 3, "s9": 3}
if os.environ.get("BENCH_RUNS"):
    RUNS = {k: int(os.environ["BENCH_RUNS"]) for k in RUNS}

MiB = 1 << 20


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Report:
    """Rows of the markdown table plus notes, and the raw numbers for the chart."""

    def __init__(self) -> None:
        self.rows: list[list[str]] = []
        self.notes: list[str] = []
        self.data: dict = {}
        # Failed commands and failed correctness checks: the run exits non-zero.
        self.failures: list[str] = []

    def row(self, scen: str, what: str, res: Result | None = None, ratio: str = "",
            target: str = "", met: bool | None = None, wall=None, cpu=None, rss=None) -> None:
        if res is not None and not res.ok:
            first = (res.error or "no samples").strip().splitlines()
            msg = " ".join(first[:1] + first[-1:])[:160].replace("|", "/")
            self.rows.append([scen, what, "failed", "", "", msg, target, "n/a"])
            self.failures.append(what)
            self.notes.append(f"{what} failed: {(res.error or '')[-600:]}".replace("\n", " / "))
            return
        if res is not None:
            wall, cpu, rss = res.wall, res.cpu, res.rss_mib
        cells = [
            scen,
            what,
            f"{wall:.2f}" if wall is not None else "",
            f"{cpu:.2f}" if cpu is not None else "",
            f"{rss:.1f}" if rss is not None else "",
            ratio,
            target,
            "" if met is None else ("yes" if met else "**no**"),
        ]
        self.rows.append(cells)

    def missed(self) -> list[str]:
        """`scenario: measured (target)` of every row whose target was not met."""
        out, scen = [], ""
        for r in self.rows:
            scen = r[0] or scen
            if r[7] == "**no**":
                out.append(f"{scen.split(':')[0]}: {r[1]} ({r[6]}): {r[5]}")
        return out

    def markdown(self, header: str) -> str:
        head = ["#", "measured", "wall s", "CPU s", "peak RSS MiB", "result / ratio", "target", "met"]
        lines = [header, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        if self.notes:
            lines += ["", "Notes:"] + [f"- {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def ratio(a: Result, b: Result) -> tuple[float | None, str]:
    if not (a.ok and b.ok):
        return None, "n/a"
    r = a.wall / b.wall
    return r, f"{r:.2f}x wall, {a.cpu / b.cpu:.2f}x CPU"


def pull_argv(host: str, repo: str, out: Path, *extra: str) -> list[str]:
    return [BIN, "pull", f"oci://{host}/{repo}", "--tag", "v1.0.0", "--output-file", str(out), "--insecure", *extra]


def scenario1(rep: Report, reg: oci.Registry, aset: dict, out: Path) -> None:
    st = aset["stats"]
    img = aset["images"][0]
    layers = [oci.blob_path(aset, l["digest"]) for l in img["layers"]]
    label = (f"1 config: {len(layers)} layers, {st['files']} files (1% of the last layer override the first), "
             f"{st['uncompressed'] / 1e6:.0f} MB tar ({st['compressed'] / 1e6:.0f} MB gz)")
    log(label)
    ours_out = out / "s1-ocisource.tar.gz"
    ours = bench("ocisource pull", pull_argv(reg.host, img["repo"], ours_out), RUNS["s1"],
                 stdout_path=out / "s1-ocisource.out", log_dir=out)
    disk_dir = out / "s1-disk"

    def clean_disk() -> None:
        shutil.rmtree(disk_dir, ignore_errors=True)
        (disk_dir / "tree").mkdir(parents=True)

    script = (
        "set -euo pipefail\n"
        f"skopeo copy --quiet --insecure-policy --src-tls-verify=false "
        f"docker://{reg.host}/{img['repo']}:{img['tag']} dir:{disk_dir}/dir\n"
        + "".join(f"tar -xzf {disk_dir}/dir/{l['digest'].split(':')[1]} -C {disk_dir}/tree\n"
                  for l in img["layers"])
        + "tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 "
        f"-czf {disk_dir}/out.tar.gz -C {disk_dir}/tree .\n"
    )
    disk = bench("disk", ["bash", "-c", script], RUNS["s1"], before=clean_disk, log_dir=out)
    floor_script = "set -euo pipefail\ncat " + " ".join(layers) + " | gzip -dc | gzip -6 -c > /dev/null\n"
    floor = bench("floor", ["bash", "-c", floor_script], RUNS["s1"], log_dir=out)

    rep.row(label, "ocisource pull", ours, target="RSS < 32 MiB",
            met=ours.rss_mib < 32 if ours.ok else None)
    r_a, txt_a = ratio(ours, disk)
    rep.row("", "(a) disk: skopeo copy dir: + tar -x each layer + tar --sort=name -czf", disk,
            ratio=f"ocisource/(a) = {txt_a}", target="<= 0.4x",
            met=None if r_a is None else r_a <= 0.4)
    r_b, txt_b = ratio(ours, floor)
    rep.row("", "(b) floor: cat blobs \\| gzip -dc \\| gzip -6 -c", floor,
            ratio=f"ocisource/(b) = {txt_b}", target="<= 0.5x",
            met=None if r_b is None else r_b <= 0.5)
    rep.data["s1"] = {k: (r.wall if r.ok else None) for k, r in
                      (("ocisource pull", ours), ("(a) disk", disk), ("(b) floor", floor))}
    if ours.ok and disk.ok and ours_out.exists():
        a, b = gen.tar_digest_list(ours_out), gen.tar_digest_list(disk_dir / "out.tar.gz")
        same = a == b
        if not same:
            rep.failures.append("scenario 1 output differs from the disk approach's")
        rep.notes.append(
            f"scenario 1 check: ocisource output has {len(a)} files, the disk approach {len(b)}; "
            f"names and contents {'identical' if same else 'DIFFER'}."
        )
    shutil.rmtree(disk_dir, ignore_errors=True)


def scenario23(rep: Report, reg: oci.Registry, aset: dict, out: Path) -> None:
    st = aset["stats"]
    img = aset["images"][0]
    layer = img["layers"][0]
    if 2 in ONLY:
        label = (f"2 large: 1 layer, {st['uncompressed'] / MiB:.0f} MiB tar "
                 f"({st['compressed'] / MiB:.0f} MiB gz)")
        log(label)
        o = out / "s2-ocisource.tar.gz"
        res = bench("pull", pull_argv(reg.host, img["repo"], o), RUNS["s2"], log_dir=out)
        tput = f"{st['uncompressed'] / MiB / res.wall:.0f} MiB/s uncompressed" if res.ok else ""
        rep.row(label, "ocisource pull", res, ratio=tput, target="RSS < 64 MiB",
                met=res.rss_mib < 64 if res.ok else None)
        if o.exists():
            o.unlink()
    if 3 in ONLY:
        label = f"3 copy: the {layer['size'] / MiB:.0f} MiB layer blob of 2"
        log(label)
        o = out / "s3-ocisource.blob"
        ours = bench("copy", pull_argv(reg.host, img["repo"], o, "--layer-operation", "copy"),
                     RUNS["s3"], log_dir=out)
        c = out / "s3-curl.blob"
        curl = bench("curl", ["curl", "-sf", "-o", str(c),
                              f"http://{reg.host}/v2/{img['repo']}/blobs/{layer['digest']}"],
                     RUNS["s3"], log_dir=out)
        r, txt = ratio(ours, curl)
        rep.row(label, "ocisource pull --layer-operation copy", ours, target="",
                met=None)
        rep.row("", "curl -o file of the blob URL", curl, ratio=f"ocisource/curl = {txt}",
                target="<= 1.05x", met=None if r is None else r <= 1.05)
        rep.data["s3"] = {"ocisource copy": ours.wall if ours.ok else None,
                          "curl": curl.wall if curl.ok else None}
        if ours.ok and o.exists():
            d = sha256_file(o)
            if d != layer["digest"]:
                rep.failures.append("scenario 3 copy has the wrong digest")
            rep.notes.append(f"scenario 3 check: copied file digest "
                             f"{'matches' if d == layer['digest'] else 'DOES NOT match'} the layer digest.")
        for f in (o, c):
            if f.exists():
                f.unlink()


def write_ocirepositories(path: Path, host: str, images: list[dict]) -> list[str]:
    docs = []
    for i, im in enumerate(images):
        docs.append(
            "apiVersion: ocisource.dev/v1beta1\n"
            "kind: OCIRepository\n"
            "metadata:\n"
            f"  name: app-{i:04d}\n"
            "  namespace: default\n"
            "spec:\n"
            "  interval: 10m\n"
            f"  url: oci://{host}/{im['repo']}\n"
            "  ref:\n"
            f"    tag: {im['tag']}\n"
            "  insecure: true\n"
        )
    path.write_text("---\n".join(docs))
    return docs


def scenario4(rep: Report, reg: oci.Registry, aset: dict, out: Path) -> None:
    n = len(aset["images"])
    label = f"4 no-op reconcile: {n} OCIRepository objects, one-shot mode, 2nd run"
    log(label)
    d = out / "s4"
    shutil.rmtree(d, ignore_errors=True)
    (d / "storage").mkdir(parents=True)
    multi = d / "ocirepositories.yaml"
    docs = write_ocirepositories(multi, reg.host, aset["images"])
    argv = [BIN, "reconcile", "-f", str(multi), "--storage", str(d / "storage"),
            "--output", "json", "--stats"]
    try:
        run_once(argv, stdout_path=d / "first.json", log_dir=out)
    except CommandFailed as first_err:
        # Fall back to one file per object, in case multi-document files are not read.
        split = d / "split"
        split.mkdir()
        argv = [BIN, "reconcile", "--storage", str(d / "storage"), "--output", "json", "--stats"]
        for i, doc in enumerate(docs):
            p = split / f"app-{i:04d}.yaml"
            p.write_text(doc)
            argv += ["-f", str(p)]
        try:
            run_once(argv, stdout_path=d / "first.json", log_dir=out)
            rep.notes.append("scenario 4: the CLI did not take one multi-document file; used one file per object.")
        except CommandFailed:
            res = Result("noop", error=f"first (storing) run failed: {first_err}")
            rep.row(label, "ocisource reconcile (no-op run)", res, target="1 request/object, < 1 ms CPU/object")
            return
    res = Result("noop")
    reqs: list[list[str]] = []
    for _ in range(RUNS["s4"]):
        mark = reg.log_mark()
        try:
            res.samples.append(run_once(argv, stdout_path=d / "second.json", log_dir=out))
        except CommandFailed as e:
            res.error = str(e)
            break
        reqs.append(reg.requests_since(mark))
    if not res.ok:
        rep.row(label, "ocisource reconcile (no-op run)", res, target="1 request/object, < 1 ms CPU/object")
        return
    seen = reqs[-1]
    stats = [l for l in res.samples[-1].stderr.splitlines() if "registry requests" in l]
    # "registry requests: N (M objects, ...)"
    reported = stats[-1].split(":", 1)[1].split()[0] if stats else "not printed"
    blob_gets = sum(1 for r in seen if r.startswith("GET") and "/blobs/" in r)
    kinds: dict[str, int] = {}
    for r in seen:
        m, path = r.split(" ", 1)
        kind = m + (" manifest" if "/manifests/" in path else " blob" if "/blobs/" in path
                    else " /v2/" if path.rstrip("/") == "/v2" else " tags" if "/tags/" in path else " other")
        kinds[kind] = kinds.get(kind, 0) + 1
    pings = kinds.get("GET /v2/", 0)
    per_obj = (len(seen) - pings) / n
    rep.row(label, "ocisource reconcile (no-op run), whole process", res,
            ratio=(f"{per_obj:.2f} requests/object seen by the registry ({len(seen) - pings} "
                   f"+ {pings} `GET /v2/` pings; --stats says {reported})"),
            target="1 request/object", met=abs(per_obj - 1.0) < 1e-9)
    cpu_ms = res.cpu * 1000 / n
    rep.row("", "CPU per object (process CPU / objects, incl. start-up and YAML parsing)",
            ratio=f"{cpu_ms:.3f} ms/object, {res.wall * 1000 / n:.3f} ms wall/object",
            target="< 1 ms CPU/object", met=cpu_ms < 1.0)
    if blob_gets:
        rep.failures.append("scenario 4 no-op run downloaded blobs")
    rep.notes.append(f"scenario 4 requests in the no-op run by kind: {json.dumps(kinds, sort_keys=True)}; "
                     f"blob downloads: {blob_gets}.")


def mem_gib() -> float:
    try:
        with open("/proc/meminfo") as fh:
            return int(fh.readline().split()[1]) / (1 << 20)
    except (OSError, ValueError, IndexError):
        return 0.0


def write_report(rep: Report, t0: float, load0: tuple[float, float, float]) -> str:
    """Writes the table (`bench-results.md`) and the numbers (`.json`) as they stand: called
    after every scenario, so an interrupted hour-long run keeps what it measured."""
    cpu = ""
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = "?"
    header = (
        f"### ocisource benchmark{' (BENCH_QUICK: tiny sizes, not representative)' if QUICK else ''}\n\n"
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, commit {commit}, "
        f"{os.cpu_count()} CPUs ({cpu or platform.machine()}), {mem_gib():.0f} GiB RAM, medians of "
        f"{RUNS['s1']}/{RUNS['s2']}/{RUNS['s3']}/{RUNS['s4']}/{RUNS['s6']}/{RUNS['s9']} runs "
        "(scenarios 1/2/3/4/6-8/9; 6-9 alternated between the contenders), "
        f"baselines measured in the same run; bench time {time.perf_counter() - t0:.0f} s; "
        f"load average {load0[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end. "
        "CPU = user+sys of the process and its children; peak RSS = largest single process. "
        "Scenarios 6-8: wall = time until all objects are Ready, CPU and peak RSS (VmHWM) of the "
        "controller process from /proc."
    )
    md = rep.markdown(header)
    (WORK / "bench-results.md").write_text(md)
    rep.data["missed"] = rep.missed()
    rep.data["machine"] = {"cpus": os.cpu_count(), "cpu": cpu, "loadavg_start": load0,
                           "loadavg_end": os.getloadavg()}
    (WORK / "bench-results.json").write_text(json.dumps(rep.data, indent=1, default=str))
    return md


def main() -> int:
    WORK.mkdir(parents=True, exist_ok=True)
    out = WORK / "run"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    cache = WORK / "artifacts"
    cache.mkdir(exist_ok=True)
    rep = Report()
    t0 = time.perf_counter()
    load0 = os.getloadavg()
    sets = {}
    need = {"config": 1 in ONLY, "large": bool({2, 3} & ONLY), "noop": bool({4, 5} & ONLY),
            "fleet": bool({6, 7} & ONLY), "single": 8 in ONLY}
    # The fleet set is the noop generator's, the single-layer set the config generator's;
    # scenarios 6-8 push them under their own repository names.
    generator = {"fleet": "noop", "single": "config"}
    for kind, wanted in need.items():
        if wanted:
            log(f"generating {kind} artifact set {SIZES[kind]} (cached after the first run)")
            sets[kind] = gen.ensure(cache, generator.get(kind, kind), **SIZES[kind])
    reg = oci.Registry(WORK)
    try:
        for kind, aset in sets.items():
            if kind in generator:
                continue
            log(f"pushing {kind} set ({len(aset['images'])} images) to {reg.host}")
            oci.push_set(reg.host, aset)
        if not Path(BIN).exists():
            rep.notes.append(f"ocisource binary {BIN} not found: its rows fail.")
        if 1 in ONLY:
            scenario1(rep, reg, sets["config"], out)
            write_report(rep, t0, load0)
        if {2, 3} & ONLY:
            scenario23(rep, reg, sets["large"], out)
            write_report(rep, t0, load0)
        if 4 in ONLY:
            scenario4(rep, reg, sets["noop"], out)
            write_report(rep, t0, load0)
        if 5 in ONLY:
            log("5 controller footprint")
            footprint.scenario5(rep, BIN, reg.host, sets["noop"]["images"], out, QUICK)
            write_report(rep, t0, load0)
        if {6, 7, 8} & ONLY:
            versus.scenarios678(rep, ONLY, QUICK, RUNS["s6"], BIN, WORK, out, reg, sets, log)
            write_report(rep, t0, load0)
        if 9 in ONLY:
            log("9 serving: ocisource controller's artifact server / Go FileServer / nginx")
            serve.scenario9(rep, BIN, WORK, out, QUICK, RUNS["s9"])
    finally:
        reg.stop()
        shutil.rmtree(reg.dir, ignore_errors=True)
    md = write_report(rep, t0, load0)
    print(md)
    if rep.failures:
        log("FAILED: " + "; ".join(rep.failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
