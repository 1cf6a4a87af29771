#!/usr/bin/env bash
# Fuzzes every parser of outside bytes (cargo fuzz / libFuzzer; targets in hack/fuzz):
# builds all targets, seeds each corpus (hack/fuzz/make_seeds.py: generated seeds, the
# testdata fixtures, the cosign vectors of ../shared when present, and the regression
# seeds in hack/fuzz/seeds), then runs every target for a bounded time under a 512 MiB
# RSS limit and a per-input timeout. Prints execs, execs/s and the result per target;
# exits non-zero on any crash, timeout or OOM (the input is kept in hack/fuzz/artifacts).
#
#   hack/fuzz.sh [--seconds N] [--timeout S] [--asan] [--build-only] [TARGET...]
#
# --seconds N  fuzzing time per target (default 60)
# --timeout S  libFuzzer's per-input timeout in seconds (default 10)
# --asan       build with AddressSanitizer (default: no sanitizer, the crate forbids
#              unsafe code and the build is much faster)
# No nightly toolchain is needed: the stable one runs with RUSTC_BOOTSTRAP=1. The build
# goes to $OCISOURCE_FUZZ_TARGET (default ${OCISOURCE_CACHE:-~/.cache/ocisource}/fuzz-target,
# outside the clone), so a fresh clone in CI reuses the compiled dependencies.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

seconds=60
timeout=10
sanitizer=none
build_only=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --timeout) timeout="$2"; shift 2 ;;
    --asan) sanitizer=address; shift ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

FUZZ_DIR="$ROOT/hack/fuzz"
FUZZ_TARGET="${OCISOURCE_FUZZ_TARGET:-${OCISOURCE_CACHE:-$HOME/.cache/ocisource}/fuzz-target}"
mkdir -p "$FUZZ_TARGET"
export RUSTC_BOOTSTRAP=1
if ! command -v cargo-fuzz >/dev/null; then
  log "installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi

# --codegen-units 16: a much faster build for a slightly slower fuzzer; CI pays the build.
build=(--fuzz-dir "$FUZZ_DIR" --target-dir "$FUZZ_TARGET" -s "$sanitizer" --release
  --debug-assertions --codegen-units 16)
log "building fuzz targets (sanitizer: $sanitizer)"
build_start=$(date +%s)
cargo fuzz build "${build[@]}"
log "fuzz build took $(( $(date +%s) - build_start )) s"
[ "$build_only" = 1 ] && exit 0

if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo fuzz list --fuzz-dir "$FUZZ_DIR")
fi
python3 "$FUZZ_DIR/make_seeds.py" "$ROOT"

bin_dir="$FUZZ_TARGET/x86_64-unknown-linux-gnu/release"
logs="$FUZZ_DIR/logs"
mkdir -p "$logs"
failed=0
summary=()
for t in "${targets[@]}"; do
  corpus="$FUZZ_DIR/corpus/$t"
  artifacts="$FUZZ_DIR/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  log "fuzzing $t for ${seconds}s"
  status=0
  "$bin_dir/$t" "$corpus" \
    -max_total_time="$seconds" -rss_limit_mb=512 -timeout="$timeout" \
    -artifact_prefix="$artifacts/" -print_final_stats=1 \
    >"$logs/$t.log" 2>&1 || status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$t.log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$logs/$t.log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$logs/$t.log" | tail -1)
  if [ "$status" -eq 0 ]; then
    result=ok
  else
    failed=1
    artifact=$(grep -oE "(crash|timeout|oom|leak)-[0-9a-f]+" "$logs/$t.log" | tail -1 || true)
    case "$artifact" in
      crash-*) result="CRASH $artifacts/$artifact" ;;
      timeout-*) result="TIMEOUT $artifacts/$artifact" ;;
      oom-*) result="OOM $artifacts/$artifact" ;;
      leak-*) result="LEAK $artifacts/$artifact" ;;
      *) result="FAILED (exit $status)" ;;
    esac
    grep -E "panicked at|ERROR: libFuzzer|SUMMARY" "$logs/$t.log" | head -5 >&2 || true
  fi
  summary+=("$(printf '%-18s execs %-10s execs/s %-7s peak RSS %4s MB  %s' "$t" "${execs:-?}" "${rate:-?}" "${rss:-?}" "$result")")
done

log "fuzz summary (${seconds}s per target, logs in $logs)"
printf '%s\n' "${summary[@]}"
exit "$failed"
