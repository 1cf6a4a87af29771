#!/usr/bin/env bash
# A registry that serves the OCI distribution-spec v1.1 referrers API, for
# tests/e2e_referrers.rs. Test harness only, never shipped.
#
# Why not zot (the first choice, zotregistry.dev/zot/v2): the Go module proxy reachable
# here refuses its releases (v2.1.0, and v2.1.2 answered 403 Forbidden when tried on
# 2026-11-24), so it cannot be built from its module. Instead this builds the small Go
# program in hack/referrers-registry/: go-containerregistry's pkg/registry (pinned in its
# go.mod, v0.21.6) with WithReferrersSupport(true), which serves referrers, ignores the
# artifactType filter (as the spec allows) and does not page. main.go says the one
# correction it makes (artifactType from the manifest, as the spec says).
#
#   hack/referrers-registry.sh build   build (or reuse) the binary, cached outside the clone
#   hack/referrers-registry.sh path    print where the binary is (built or not)
#
# The binary lives in $OCISOURCE_CACHE/harness/referrers-registry-<hash of the sources>/
# (default ~/.cache/ocisource), so an edit to main.go or go.mod builds a new one.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

SRC="$ROOT/hack/referrers-registry"
CACHE="${OCISOURCE_CACHE:-$HOME/.cache/ocisource}/harness"
KEY="$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC/main.go" | sha256sum | cut -c1-12)"
BIN="$CACHE/referrers-registry-$KEY/referrers-registry"

export CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" GOTOOLCHAIN=local GOWORK=off

build() {
  [ -x "$BIN" ] && return 0
  mkdir -p "$(dirname "$BIN")"
  log "building referrers-registry (go-containerregistry pkg/registry; first time only; cached in $(dirname "$BIN"))"
  local TIMEFORMAT='%0R s wall, %0U+%0S s CPU' took
  { time (cd "$SRC" && go build -trimpath -ldflags='-s -w' -o "$BIN.partial" . 2>"$CACHE/build-referrers-registry.log"); } 2>"$CACHE/build-referrers-registry.time" \
    || { cat "$CACHE/build-referrers-registry.log" >&2; return 1; }
  took="$(tail -1 "$CACHE/build-referrers-registry.time")"
  mv "$BIN.partial" "$BIN"
  echo "referrers-registry $KEY $took" >>"$CACHE/build-times.txt"
}

case "${1:-}" in
  build) build ;;
  path) echo "$BIN" ;;
  *) echo "usage: $0 build|path" >&2; exit 2 ;;
esac
