#!/usr/bin/env bash
# Every test, on a fresh machine: installs what the tests need (Debian's docker-registry,
# skopeo, openssl; Python tools in .venv), builds (or reuses, from ~/.cache/ocisource) a
# real control plane and Flux's controllers from pinned Go modules and starts them on
# 127.0.0.1 (hack/cluster.sh), then runs the Rust tests (unit, real registry, real API
# server with real Flux consumers, mock API faults, end to end through the CLI), the
# chart checks, the layering check, and last a bounded fuzz run of every parser.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

ensure_packages
ensure_venv
"$VENV/bin/pip" install --quiet --disable-pip-version-check -r hack/chart/requirements.txt
export PATH="$VENV/bin:$PATH"

# The Go builds (first run only) overlap the Rust build; both are needed before the tests
# (build-all: also Flux's source-controller and the flux CLI, for the drop-in tests; and a
# registry serving the referrers API, hack/referrers-registry.sh, for tests/e2e_referrers.rs).
log "control plane and Flux controllers: build or reuse (log: $WORK/cluster-build.log)"
{ nice -n 10 hack/cluster.sh build-all && nice -n 10 hack/referrers-registry.sh build; } >"$WORK/cluster-build.log" 2>&1 &
cluster_build=$!
log "cargo build (tests and binary)"
cargo build --all-targets --quiet
wait "$cluster_build" || { tail -40 "$WORK/cluster-build.log"; exit 1; }
cat "${OCISOURCE_CACHE:-$HOME/.cache/ocisource}/harness/build-times.txt" 2>/dev/null | sed 's/^/  built: /' >&2 || true
trap 'hack/cluster.sh down' EXIT
hack/cluster.sh up
# Flux's own source-controller runs beside ocisource with Flux's sharding exclusion, as a
# user's would in drop-in mode (tests/cluster_drop_in.rs); objects labelled
# sharding.fluxcd.io/key are ocisource's.
SOURCE_CONTROLLER_ARGS='--watch-label-selector=!sharding.fluxcd.io/key' hack/cluster.sh flux source-controller
eval "$(hack/cluster.sh env)"
export OCISOURCE_REQUIRE_CLUSTER=1

python3 -B hack/layers.py --check
cargo fmt --check >/dev/null || { cargo fmt --check | head -40; echo "run cargo fmt" >&2; exit 1; }
log "cargo test (unit, real registry, real API server and Flux, mock API faults, CLI end to end)"
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
# Last, once nothing needs the cluster: it goes down so both cores fuzz. About a minute
# per target (10 targets) under a 512 MiB RSS limit; any crash, timeout or OOM fails
# the job. The fuzz build lives in the cache, outside the clone (hack/fuzz.sh).
hack/cluster.sh down
trap - EXIT
log "fuzz: every target for ${OCISOURCE_FUZZ_SECONDS:-60} s (log: $WORK/fuzz.log)"
hack/fuzz.sh --seconds "${OCISOURCE_FUZZ_SECONDS:-60}" >"$WORK/fuzz.log" 2>&1 || { tail -40 "$WORK/fuzz.log"; exit 1; }
sed -n '/fuzz summary/,$p' "$WORK/fuzz.log" >&2
log "all checks passed"
