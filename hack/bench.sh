#!/usr/bin/env bash
# Benchmark ocisource against baselines measured in the same run (issue 5).
#
# Builds the release binary once, starts a private docker-registry on 127.0.0.1, generates
# deterministic artifacts (cached in hack/.work/artifacts), pushes them with an independent
# client and prints a markdown table of medians and ratios, also written to
# hack/.work/bench-results.md (plus a PNG chart when .venv has matplotlib).
#
# Needs cargo and python3 (>= 3.9; the benchmark itself uses the standard library only);
# installs docker-registry, skopeo, curl and GNU time from Debian if missing (hack/lib.sh),
# and matplotlib into .venv for the chart. Environment:
#   BENCH_QUICK=1       tiny sizes, one run each (development, smoke test)
#   BENCH_RUNS=N        runs per command (default 5, 3 for the 1 GiB pull and no-op runs)
#   BENCH_ONLY=1,3      run only these scenarios
#   BENCH_SKIP_BUILD=1  use the existing target/release/ocisource (or BENCH_BIN)
#   BENCH_CONTROLLER_ARGS  extra flags for `ocisource controller` in scenario 5
#   BENCH_CHART=0       no chart (no matplotlib install)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=hack/lib.sh
source hack/lib.sh
ensure_packages

for tool in python3 skopeo curl tar gzip /usr/bin/time /usr/bin/docker-registry; do
  command -v "$tool" >/dev/null || { echo "bench: missing $tool (see README set-up)" >&2; exit 1; }
done

chart=0
if [[ "${BENCH_CHART:-1}" != 0 ]]; then
  [[ -x .venv/bin/python ]] || python3 -m venv .venv >/dev/null 2>&1 || true
  if [[ -x .venv/bin/python ]] && { .venv/bin/python -c 'import matplotlib' 2>/dev/null \
      || .venv/bin/pip install -q --disable-pip-version-check -r hack/bench/requirements-chart.txt >/dev/null 2>&1; }; then
    chart=1
  else
    echo "[bench] matplotlib not available: no chart" >&2
  fi
fi

if [[ "${BENCH_SKIP_BUILD:-0}" != 1 && -z "${BENCH_BIN:-}" ]]; then
  echo "[bench] cargo build --release" >&2
  cargo build --release --quiet
fi

mkdir -p hack/.work
python3 hack/bench/run.py

if [[ $chart == 1 ]]; then
  .venv/bin/python hack/bench/chart.py hack/.work/bench-results.json hack/.work/bench-results.png \
    && echo "[bench] chart: hack/.work/bench-results.png" >&2
fi
