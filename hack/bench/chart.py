"""Draws the throughput comparison of a benchmark run as a PNG (needs matplotlib).

Usage: chart.py bench-results.json out.png. Scenario 1 (ocisource pull against the disk
approach and the compute floor) and scenario 3 (copy against curl), median wall seconds.
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src: str, dst: str) -> int:
    data = json.load(open(src))
    panels = [(k, t) for k, t in (("s1", "1: multi-layer config artifact"),
                                  ("s3", "3: copy of one large layer")) if data.get(k)]
    if not panels:
        print("chart: no scenario 1 or 3 results", file=sys.stderr)
        return 1
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
    sys.exit(main(sys.argv[1], sys.argv[2]))
