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
log "cargo test"
cargo test --all-targets --no-fail-fast 2>&1 | tee "$WORK/cargo-test.log"
if [ -x hack/chart-check.sh ]; then
  log "chart checks"
  OCISOURCE_BIN="$ROOT/target/debug/ocisource" hack/chart-check.sh
fi
