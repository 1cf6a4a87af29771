#!/usr/bin/env bash
# Every test, on a fresh machine: installs what the tests need (Debian's docker-registry,
# skopeo, openssl; Python tools in .venv), then runs the Rust tests (unit, real-registry,
# mock-API and end-to-end), the chart checks and the domain import check.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

ensure_packages
ensure_venv
export PATH="$VENV/bin:$PATH"

hack/check-domain.sh
log "cargo test (unit, real registry, mock API server, end to end through the CLI)"
cargo test --all-targets --no-fail-fast 2>&1 | tee "$WORK/cargo-test.log"
log "chart: lint, render, validate, least privilege, pod security"
OCISOURCE_BIN="$ROOT/target/debug/ocisource" hack/chart-check.sh
log "clippy"
cargo clippy --all-targets --quiet -- -D warnings
log "benchmark harness: its own tests, then a smoke run at tiny sizes"
python3 -B -m unittest discover -s hack/bench 2>&1 | tail -3
BENCH_QUICK=1 BENCH_CHART=0 BENCH_BIN="$ROOT/target/debug/ocisource" hack/bench.sh >"$WORK/bench-quick.log" 2>&1 || { tail -30 "$WORK/bench-quick.log"; exit 1; }
grep -q '^| ' "$WORK/bench-quick.log" || { echo "bench smoke test printed no table" >&2; exit 1; }
log "the demo (the README's main job)"
hack/demo.sh >"$WORK/demo.log" 2>&1 || { tail -30 "$WORK/demo.log"; exit 1; }
log "all checks passed"
