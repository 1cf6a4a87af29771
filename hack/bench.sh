#!/usr/bin/env bash
# Benchmark ocisource against baselines measured in the same run (issues 5 and 17):
# shell pipelines, curl, Flux's own source-controller on a private real API server
# (hack/cluster.sh, state in hack/.work/bench-cluster), Go's http.FileServer and nginx.
#
# Builds the release binary once, starts a private docker-registry on 127.0.0.1, generates
# deterministic artifacts (cached in hack/.work/artifacts), pushes them with an independent
# client and prints a markdown table of medians and ratios, also written to
# hack/.work/bench-results.md (plus a PNG chart when .venv has matplotlib).
#
# Needs cargo, python3 (>= 3.9; the benchmark itself uses the standard library only) and
# go (scenario 9's FileServer; scenarios 6-8 build the control plane and Flux with it);
# installs docker-registry, skopeo, curl and GNU time (hack/lib.sh), wrk and nginx from
# Debian if missing, and matplotlib into .venv for the charts.
#
#   hack/bench.sh           run, print the table; exit 1 only when a command or a check failed
#   hack/bench.sh --check   the same, and exit 3 when a target is missed (not part of CI)
#
# Environment:
#   BENCH_QUICK=1       tiny sizes, one run each (development, smoke test)
#   BENCH_RUNS=N        runs per command (default 5, 3 for the 1 GiB pull and no-op runs)
#   BENCH_ONLY=1,3      run only these scenarios (1-9)
#   BENCH_SKIP_BUILD=1  use the existing target/release/ocisource (or BENCH_BIN)
#   BENCH_CONTROLLER_ARGS  extra flags for `ocisource controller` in scenario 5
#   BENCH_CHART=0       no chart (no matplotlib install)
#   BENCH_CONCURRENT=N  --concurrent of both controllers in scenarios 6-8 (default 4)
#   BENCH_FLUX_BUDGET=S seconds one Flux run of scenario 7 may take (default 600)
#   BENCH_S7_N=N        objects in scenario 7 (default 10000)
#   BENCH_S6_N=100,1000 fleet sizes of scenario 6 (default 100,1000)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=hack/lib.sh
source hack/lib.sh
ensure_packages
if ! command -v wrk >/dev/null || ! command -v nginx >/dev/null; then
  log "installing Debian packages: wrk nginx (scenario 9)"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq wrk nginx >/dev/null; } \
    || echo "[bench] wrk/nginx not installed: scenario 9 is skipped" >&2
fi

check=0
if [[ "${1:-}" == --check ]]; then check=1; shift; fi

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
status=0
python3 hack/bench/run.py || status=$?

if [[ $chart == 1 ]]; then
  .venv/bin/python hack/bench/chart.py hack/.work/bench-results.json hack/.work/bench-results.png \
    hack/.work/bench-fleet.png && echo "[bench] charts: hack/.work/bench-results.png, bench-fleet.png" >&2
fi
if [[ $status == 0 && $check == 1 ]]; then
  missed="$(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1])).get("missed", [])))' hack/.work/bench-results.json)"
  if [[ -n "$missed" ]]; then
    echo "[bench] --check: targets missed:" >&2
    printf '  %s\n' "$missed" >&2
    exit 3
  fi
  echo "[bench] --check: every target met" >&2
fi
exit "$status"
