#!/usr/bin/env bash
# The main job, end to end on this machine: start a local registry on 127.0.0.1, push a
# multi-layer artifact with an independent client (oras), pull it with ocisource into one
# normalised tar.gz, reconcile an OCIRepository in one-shot mode, and show the results.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

ensure_packages
ensure_venv
log "building ocisource"
cargo build --quiet --bin ocisource
BIN="$ROOT/target/debug/ocisource"

DEMO="$WORK/demo"; rm -rf "$DEMO"; mkdir -p "$DEMO/src"
trap stop_registry EXIT
start_registry "$DEMO/registry"
log "registry listening on $REGISTRY_ADDR"

log "building three layers with GNU tar: base, an overlay that overrides a file, a whiteout"
mk_layer() { # name, then path=content pairs
  local name="$1"; shift; local d="$DEMO/src/$name"; mkdir -p "$d"
  for kv in "$@"; do mkdir -p "$d/$(dirname "${kv%%=*}")"; printf '%s\n' "${kv#*=}" >"$d/${kv%%=*}"; done
  tar -C "$d" -czf "$DEMO/$name.tar.gz" .
}
mk_layer base "apps/web/deployment.yaml=replicas: 1" "apps/web/service.yaml=port: 80" "apps/db/statefulset.yaml=db: v1" "README.md=base"
mk_layer overlay "apps/web/deployment.yaml=replicas: 3" "apps/web/hpa.yaml=max: 10"
mk_layer cleanup "apps/db/.wh.statefulset.yaml=" "apps/.wh.legacy="
LT=application/vnd.oci.image.layer.v1.tar+gzip
"$VENV/bin/python" hack/tools/oras_push.py --insecure \
  --annotation org.opencontainers.image.source=https://example.com/demo \
  "$REGISTRY_ADDR/demo/app:v1.0.0" "$DEMO/base.tar.gz:$LT" "$DEMO/overlay.tar.gz:$LT" "$DEMO/cleanup.tar.gz:$LT" >/dev/null

log "ocisource pull: all layers, one pass, one tar.gz"
"$BIN" pull "oci://$REGISTRY_ADDR/demo/app" --semver '>=1.0.0' --insecure --output-file "$DEMO/app.tar.gz"
log "contents (later layers win, whiteouts applied, headers normalised)"
tar -tvzf "$DEMO/app.tar.gz"
tar -xzOf "$DEMO/app.tar.gz" apps/web/deployment.yaml

log "one-shot reconcile of an OCIRepository, as the controller would do it"
cat >"$DEMO/ocirepository.yaml" <<YAML
apiVersion: ocisource.dev/v1beta1
kind: OCIRepository
metadata:
  name: demo-app
  namespace: default
spec:
  url: oci://$REGISTRY_ADDR/demo/app
  ref:
    semver: ">=1.0.0"
  insecure: true
  interval: 5m
YAML
"$BIN" reconcile -f "$DEMO/ocirepository.yaml" --storage "$DEMO/storage"
log "stored artifacts:"
find "$DEMO/storage" -type f | sed "s|$DEMO/||"
