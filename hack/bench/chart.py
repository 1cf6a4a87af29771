"""Draws a benchmark run's charts as PNGs (needs matplotlib).

Usage: chart.py bench-results.json out.png [fleet.png]. out.png: scenario 1 (ocisource
pull against the disk approach and the compute floor) and scenario 3 (copy against curl),
median wall seconds. fleet.png: scenarios 6 and 7, time until all objects are Ready and
the controller's peak RSS against the number of objects, ocisource and Flux's
source-controller (log-log).
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import NullFormatter, ScalarFormatter  # noqa: E402


NAMES = {"ocisource": ("ocisource", "#2b6cb0", "o"), "flux": ("Flux source-controller", "#dd6b20", "s")}


def fleet(data: dict, dst: str) -> int:
    series = {k: sorted((int(n), v) for n, v in d.items()) for k, d in data.get("fleet", {}).items() if d}
    if not series:
        print("chart: no scenario 6/7 results", file=sys.stderr)
        return 1
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    for ax, key, title in ((axes[0], "ready_s", "time until all Ready, s"),
                           (axes[1], "hwm_mib", "controller peak RSS, MiB")):
        for kind, pts in series.items():
            name, color, marker = NAMES.get(kind, (kind, "#718096", "^"))
            xs, ys = [n for n, _ in pts], [v[key] for _, v in pts]
            ax.plot(xs, ys, marker=marker, color=color, label=name)
            for x, y in zip(xs, ys):
                ax.annotate(f"{y:.1f}" if y < 100 else f"{y:.0f}", (x, y), textcoords="offset points",
                            xytext=(4, 4), fontsize=7, color=color)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("OCIRepository objects (N)", fontsize=8)
        ax.set_title(title + " (lower is better)", fontsize=10)
        ax.tick_params(labelsize=8)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=120)
    return 0


def main(src: str, dst: str, fleet_dst: str | None = None) -> int:
    data = json.load(open(src))
    wrote = bool(fleet_dst and data.get("fleet")) and fleet(data, fleet_dst) == 0
    panels = [(k, t) for k, t in (("s1", "1: multi-layer config artifact"),
                                  ("s3", "3: copy of one large layer")) if data.get(k)]
    if not panels:
        print("chart: no scenario 1 or 3 results", file=sys.stderr)
        return 0 if wrote else 1
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 3.2), squeeze=False)
    for ax, (key, title) in zip(axes[0], panels):
        items = [(k, v) for k, v in data[key].items() if v is not None]
        names = [k for k, _ in items]
        vals = [v for _, v in items]
        colors = ["#2b6cb0" if n.startswith("ocisource") else "#a0aec0" for n in names]
        bars = ax.barh(names, vals, color=colors)
        ax.bar_label(bars, labels=[f"{v:.2f} s" for v in vals], padding=3, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("median wall time, s (lower is better)", fontsize=8)
        ax.set_xlim(0, max(vals) * 1.25)
        ax.tick_params(labelsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
