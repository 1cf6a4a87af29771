"""Scenarios 6-8: ocisource against Flux's source-controller, side by side, same API server.

6 fleet: N OCIRepositories (100 and 1000) over 50 distinct artifacts: time until all are
  Ready, peak RSS, CPU seconds, registry requests during the first reconcile and during
  one steady-state interval, API server requests.
7 scale: 10,000 OCIRepositories on one ocisource replica (Flux beside it only when its
  scenario-6 pace says it finishes within BENCH_FLUX_BUDGET seconds): time to all Ready,
  peak RSS and the RSS after 30 s of steady state.
8 big artifact: the scenario-1 artifact in single-layer form, one object: wall time from
  create to Ready, CPU, peak RSS and its growth over the idle controller.

Runs alternate between the controllers (ours first on even runs); each figure is the
median over runs. The runner is `fleet.py`; what it measures is explained there.
"""

from __future__ import annotations

import os
import statistics
import time

import gen
import oci
from fleet import DISPLAY, Cluster, cleanup_storage, run_fleet, run_single
from kube import KubeError

CONCURRENT = int(os.environ.get("BENCH_CONCURRENT", "4"))
FLUX_BUDGET = float(os.environ.get("BENCH_FLUX_BUDGET", "600"))
KINDS = ("ocisource", "flux")


def med(runs: list[dict], key: str) -> float | None:
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def med_count(runs: list[dict], key: str, only: str | None = None) -> float | None:
    """Median over runs of the total of a request-count dict (or of its entry `only`)."""
    vals = [sum(v for k, v in r[key].items() if only is None or k == only)
            for r in runs if key in r]
    return statistics.median(vals) if vals else None


def reg_text(runs: list[dict], key: str) -> str:
    pings = med_count(runs, key, "ping")
    return f"{med_count(runs, key):,.0f}" + (f" ({pings:,.0f} `GET /v2/` pings)" if pings else "")


def ratio_row(rep, what: str, a: float | None, b: float | None, unit: str, target: float | None,
              fmt: str = "{:,.2f}") -> None:
    if a is None or b is None:
        rep.row("", what, ratio="n/a (a controller did not finish)", target="", met=None)
        return
    r = a / b if b else float("inf")
    rep.row("", what, ratio=f"ours {fmt.format(a)} / Flux {fmt.format(b)} {unit} = {r:.2f}x",
            target=f"<= {target}x" if target is not None else "", met=None if target is None else r <= target)


def alternate(runs: int, kinds: tuple[str, ...], one) -> dict[str, list[dict]]:
    """Calls `one(kind, run)` for every run, alternating the order; failures are kept."""
    out: dict[str, list[dict]] = {k: [] for k in kinds}
    for run in range(runs):
        order = kinds if run % 2 == 0 else tuple(reversed(kinds))
        for kind in order:
            try:
                out[kind].append(one(kind, run))
            except (RuntimeError, KubeError, OSError) as e:
                out[kind].append({"error": str(e)})
    return out


def failed(rep, label: str, res: dict[str, list[dict]]) -> bool:
    bad = [(k, r["error"]) for k, rs in res.items() for r in rs if "error" in r]
    for k, e in bad:
        rep.failures.append(f"{label}: {DISPLAY[k]} run failed")
        rep.notes.append(f"{label}, {DISPLAY[k]}: {e}".replace("\n", " / ")[:700])
    return bool(bad)


def controller_row(rep, scen: str, kind: str, runs: list[dict], n: int,
                   steady: str = "steady interval") -> None:
    ok = [r for r in runs if "error" not in r]
    if not ok:
        rep.row(scen, DISPLAY[kind], ratio="failed", target="", met=None)
        return
    ready = min(r["ready"] for r in ok)
    parts = [f"{ready}/{n} Ready" + ("" if all(r["all_ready"] for r in ok) else " (deadline hit)")]
    if any((r.get("ready_s") or 0) > r.get("interval_s", float("inf")) for r in ok):
        parts.append("the interval elapsed before all were Ready: the first counts include repeat reconciles")
    parts.append(f"CPU to all Ready {med(ok, 'cpu_ready_s'):.2f} s")
    if any("reg_steady" in r for r in ok):
        parts.append(f"registry requests first {reg_text(ok, 'reg_first')}, "
                     f"{steady} {reg_text(ok, 'reg_steady')}")
        parts.append(f"API requests first {med_count(ok, 'api_first'):,.0f}, "
                     f"{steady} {med_count(ok, 'api_steady'):,.0f}")
    else:
        parts.append(f"registry requests {reg_text(ok, 'reg_first')}, API requests "
                     f"{med_count(ok, 'api_first'):,.0f} (to all Ready)")
    parts.append(f"RSS at the end {med(ok, 'rss_mib'):.1f} MiB")
    rep.row(scen, DISPLAY[kind], wall=med(ok, "ready_s"), cpu=med(ok, "cpu_s"), rss=med(ok, "hwm_mib"),
            ratio="; ".join(parts))


def push_renamed(reg, aset: dict, old: str, new: str) -> list[dict]:
    images = [dict(im, repo=im["repo"].replace(old, new)) for im in aset["images"]]
    oci.push_set(reg.host, dict(aset, images=images))
    return images


def scenario6(rep, ctx, images: list[dict]) -> None:
    sizes = tuple(int(x) for x in os.environ.get("BENCH_S6_N", "100,1000").split(",") if x)
    ns_list, runs = ((10,), 1) if ctx.quick else (sizes, ctx.runs)
    for n in ns_list:
        interval = 60
        steady = 0.0 if ctx.quick else float(interval)
        label = (f"6 fleet: {n} OCIRepositories over {len(images)} artifacts, --concurrent "
                 f"{CONCURRENT}, interval {interval}s")
        ctx.log(label)
        res = alternate(runs, KINDS, lambda kind, run: run_fleet(
            kind, f"s6-{kind}-{n}-r{run}", ctx.cluster, ctx.reg, ctx.bin, ctx.out, images, n,
            CONCURRENT, interval, steady, 600))
        failed(rep, f"scenario 6 (N={n})", res)
        for i, kind in enumerate(KINDS):
            controller_row(rep, label if i == 0 else "", kind, res[kind], n)
        ours, flux = ([r for r in res[k] if "error" not in r and r["all_ready"]] for k in KINDS)
        ratio_row(rep, "time until all Ready (from process start)", med(ours, "ready_s"),
                  med(flux, "ready_s"), "s", 0.5)
        ratio_row(rep, "peak RSS (VmHWM)", med(ours, "hwm_mib"), med(flux, "hwm_mib"), "MiB", 0.5, "{:.1f}")
        ratio_row(rep, "CPU seconds, start to end of the run" + ("" if ctx.quick else
                  " (incl. one steady interval)"), med(ours, "cpu_s"), med(flux, "cpu_s"), "s", 0.5)
        if not ctx.quick:
            a, b = med_count(ours, "reg_steady"), med_count(flux, "reg_steady")
            rep.row("", f"registry requests in one steady interval ({steady:.0f} s)",
                    ratio=f"ours {a:,.0f} / Flux {b:,.0f}" if a is not None and b is not None else "n/a",
                    target="<= Flux's", met=None if a is None or b is None else a <= b)
        for kind in KINDS:
            ok = [r for r in res[kind] if "error" not in r]
            if ok:
                rep.notes.append(
                    f"scenario 6 N={n} {DISPLAY[kind]}, run 1: registry {ok[0]['reg_first']}"
                    + (f", steady {ok[0]['reg_steady']}" if "reg_steady" in ok[0] else "")
                    + "; API " + summarize_api(ok[0]))
        ctx.data.setdefault("fleet", {k: {} for k in KINDS})
        for kind in KINDS:
            ok = [r for r in res[kind] if "error" not in r and r["all_ready"]]
            if ok:
                ctx.data["fleet"][kind][str(n)] = {"ready_s": med(ok, "ready_s"), "hwm_mib": med(ok, "hwm_mib"),
                                                   "cpu_s": med(ok, "cpu_s")}


def summarize_api(r: dict) -> str:
    from kube import summarize
    return "first " + summarize(r["api_first"]) + (
        "; steady " + summarize(r["api_steady"]) if r.get("api_steady") else "")


def scenario7(rep, ctx, images: list[dict]) -> None:
    n = int(os.environ.get("BENCH_S7_N", "10000"))
    label = f"7 scale: {n:,} OCIRepositories on one replica, --concurrent {CONCURRENT}"
    ctx.log(label)
    kinds: tuple[str, ...] = ("ocisource",)
    flux1000 = ctx.data.get("fleet", {}).get("flux", {}).get("1000", {}).get("ready_s")
    estimate = flux1000 * n / 1000 if flux1000 else None
    if estimate is not None and estimate <= FLUX_BUDGET:
        kinds = KINDS
    else:
        rep.notes.append(
            "scenario 7: Flux not run: at its scenario-6 pace "
            + (f"({flux1000:.0f} s for 1000) {n:,} objects take ~{estimate:,.0f} s" if estimate
               else "(no scenario-6 figure)")
            + f", over the budget BENCH_FLUX_BUDGET={FLUX_BUDGET:.0f} s per run.")
    runs = int(os.environ.get("BENCH_S7_RUNS", str(ctx.runs)))
    if runs < 3:
        rep.notes.append(f"scenario 7: {runs} run(s) only (BENCH_S7_RUNS), not a median of 3.")
    res = alternate(runs, kinds, lambda kind, run: run_fleet(
        kind, f"s7-{kind}-r{run}", ctx.cluster, ctx.reg, ctx.bin, ctx.out, images, n,
        CONCURRENT, 600, 30.0, 1800 if kind == "ocisource" else FLUX_BUDGET,
        cleanup=run < runs - 1 or kind != kinds[-1 if runs % 2 else 0]))
    failed(rep, "scenario 7", res)
    ok = [r for r in res["ocisource"] if "error" not in r]
    for i, kind in enumerate(kinds):
        controller_row(rep, label if i == 0 else "", kind, res[kind], n, "in the 30 s after")
    if ok:
        steady = med(ok, "rss_mib")
        all_ready = all(r["all_ready"] for r in ok)
        rep.row("", "ocisource: all Ready; RSS 30 s after all Ready (steady)", rss=steady,
                ratio=f"{min(r['ready'] for r in ok):,}/{n:,} Ready; steady RSS {steady:.1f} MiB, "
                      f"peak {med(ok, 'hwm_mib'):.1f} MiB",
                target="all Ready, steady RSS < 96 MiB", met=all_ready and steady < 96)
        ctx.data.setdefault("fleet", {k: {} for k in KINDS})
        for kind in kinds:
            good = [r for r in res[kind] if "error" not in r and r["all_ready"]]
            if good:
                ctx.data["fleet"][kind][str(n)] = {"ready_s": med(good, "ready_s"),
                                                   "hwm_mib": med(good, "hwm_mib"), "cpu_s": med(good, "cpu_s")}


def scenario8(rep, ctx, aset: dict) -> None:
    st = aset["stats"]
    images = push_renamed(ctx.reg, aset, "bench/config", "bench/config-single")
    label = (f"8 big artifact: 1 layer, {st['files']:,} files, {st['uncompressed'] / 1e6:.0f} MB tar "
             f"({st['compressed'] / 1e6:.0f} MB gz), one object")
    ctx.log(label)
    runs = 1 if ctx.quick else ctx.runs
    kept: dict[str, dict] = {}

    def one(kind: str, run: int) -> dict:
        r = run_single(kind, f"s8-{kind}-r{run}", ctx.cluster, ctx.reg, ctx.bin, ctx.out,
                       images[0], CONCURRENT, 900, keep=run == 0, quick=ctx.quick)
        if run == 0:
            kept[kind] = r
        return r

    res = alternate(runs, KINDS, one)
    failed(rep, "scenario 8", res)
    for i, kind in enumerate(KINDS):
        ok = [r for r in res[kind] if "error" not in r]
        if not ok:
            rep.row(label if i == 0 else "", DISPLAY[kind], ratio="failed", target="", met=None)
            continue
        rep.row(label if i == 0 else "", DISPLAY[kind], wall=med(ok, "ready_s"), cpu=med(ok, "cpu_s"),
                rss=med(ok, "hwm_mib"),
                ratio=f"idle {med(ok, 'idle_mib'):.1f} MiB, peak growth {med(ok, 'growth_mib'):.1f} MiB",
                target="growth < 32 MiB (flat)" if kind == "ocisource" else "",
                met=med(ok, "growth_mib") < 32 if kind == "ocisource" else None)
    ours, flux = ([r for r in res[k] if "error" not in r] for k in KINDS)
    ratio_row(rep, "wall time, create to Ready", med(ours, "ready_s"), med(flux, "ready_s"), "s", 0.5)
    ratio_row(rep, "CPU seconds for the object", med(ours, "cpu_s"), med(flux, "cpu_s"), "s", None)
    ratio_row(rep, "peak RSS (VmHWM)", med(ours, "hwm_mib"), med(flux, "hwm_mib"), "MiB", None, "{:.1f}")
    if all(kept.get(k, {}).get("artifact") for k in KINDS):
        a, b = (gen.tar_digest_list(kept[k]["artifact"]) for k in KINDS)
        same = a == b
        if not same:
            rep.failures.append("scenario 8: the two artifacts differ")
        rep.notes.append(f"scenario 8 check: ocisource's artifact has {len(a):,} files, Flux's "
                         f"{len(b):,}; names and contents {'identical' if same else 'DIFFER'}.")
    for r in kept.values():
        cleanup_storage(r)


class Ctx:
    """What the scenarios share: cluster, registry, binary, output dir, run count."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def scenarios678(rep, only: set[int], quick: bool, runs: int, bin_path: str, work, out, reg,
                 sets: dict, log) -> None:
    """Brings the private cluster up, runs the selected scenarios, takes it down."""
    cluster = Cluster(work)
    built = cluster.built()
    if not built:
        reason = ("the control plane and Flux binaries are not built (hack/cluster.sh build, "
                  "about an hour the first time)")
        if quick:
            rep.row("6-8 ocisource vs Flux source-controller", "skipped", ratio=reason, target="", met=None)
            rep.notes.append(f"scenarios 6-8 skipped: {reason}.")
            log(f"scenarios 6-8 skipped: {reason}")
            return
        log("building the control plane and Flux (first time only)")
    t = time.perf_counter()
    try:
        cluster.up(bin_path, build=not built)
        log(f"private control plane up in {time.perf_counter() - t:.0f} s ({cluster.dir})")
        ctx = Ctx(cluster=cluster, reg=reg, bin=bin_path, out=out, quick=quick, runs=runs,
                  data=rep.data, log=log)
        images = push_renamed(reg, sets["fleet"], "bench/noop", "bench/fleet") if {6, 7} & only else []
        if 6 in only:
            scenario6(rep, ctx, images)
        if 8 in only:
            scenario8(rep, ctx, sets["single"])
        # Last: its final run leaves its 10,000 objects behind (the cluster goes down next).
        if 7 in only and quick:
            rep.notes.append("scenario 7 (10,000 objects) is not run in quick mode.")
        elif 7 in only:
            scenario7(rep, ctx, images)
    except (RuntimeError, KubeError, OSError) as e:
        rep.row("6-8 ocisource vs Flux source-controller", "failed", ratio=str(e)[:160], target="", met=None)
        rep.failures.append(f"scenarios 6-8: {e}")
    finally:
        cluster.down()
