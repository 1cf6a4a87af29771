#!/usr/bin/env bash
# A real Kubernetes control plane and real Flux controllers for the test suite, on
# 127.0.0.1 only. Go is used here as a test harness: every binary is built from an
# upstream module at a pinned version, cached outside the clone, and never shipped.
#
#   hack/cluster.sh build     build (or reuse) etcd, kube-apiserver, kube-controller-manager,
#                             kubectl and Flux's kustomize-, helm- and notification-controllers
#   hack/cluster.sh build-all also Flux's source-controller and the flux CLI (benchmarks)
#   hack/cluster.sh up        build, then start etcd, kube-apiserver and kube-controller-manager
#                             (garbage collector and namespace controllers only; no kubelet)
#   hack/cluster.sh flux      start Flux's kustomize-, helm- and notification-controllers
#                             against the running API server (source-controller on request)
#   hack/cluster.sh env       print the variables the tests read (KUBECONFIG, binaries, ...)
#   hack/cluster.sh start     `up` without the build: the cached binaries only
#   hack/cluster.sh built     exit 0 when what `start` and source-controller need is cached
#   hack/cluster.sh down      stop everything this script started
#
# State lives in $CLUSTER_DIR (default hack/.work/cluster); binaries in
# $OCISOURCE_CACHE/harness/<component>-<version>/ (default ~/.cache/ocisource).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# Pinned versions. Flux 2.9.5's components (the versions flux2 v2.9.5's go.mod names), and
# the Kubernetes release whose client libraries those components are built against.
K8S_VERSION="${K8S_VERSION:-v1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.8}"
FLUX_VERSION="${FLUX_VERSION:-v2.9.5}"
KUSTOMIZE_CONTROLLER_VERSION="${KUSTOMIZE_CONTROLLER_VERSION:-v1.9.5}"
HELM_CONTROLLER_VERSION="${HELM_CONTROLLER_VERSION:-v1.6.4}"
# source-controller v1.9.x needs github.com/fluxcd/pkg/artifact v0.18.x, which the Go module
# proxy does not serve (403 for every v0.18 and v0.27 version): v1.8.0 (Flux 2.8) is the newest
# that builds here. The cluster's source.toolkit.fluxcd.io CRDs still come from
# SOURCE_CRDS_VERSION, the release Flux 2.9.5's consumers are built against.
SOURCE_CONTROLLER_VERSION="${SOURCE_CONTROLLER_VERSION:-v1.8.0}"
SOURCE_CRDS_VERSION="${SOURCE_CRDS_VERSION:-v1.9.5}"
NOTIFICATION_CONTROLLER_VERSION="${NOTIFICATION_CONTROLLER_VERSION:-v1.9.3}"

CACHE="${OCISOURCE_CACHE:-$HOME/.cache/ocisource}/harness"
CLUSTER_DIR="${CLUSTER_DIR:-$WORK/cluster}"
mkdir -p "$CACHE"

export CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" GOTOOLCHAIN=local GOWORK=off

# module_src MODULE VERSION DEST: a writable copy of an upstream module's source, from
# the Go module proxy (go mod download keeps the zip's checksum in go.sum's database).
module_src() {
  local mod="$1" ver="$2" dest="$3" dir
  dir="$(cd "$CACHE" && go mod download -json "$mod@$ver" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  rm -rf "$dest"; mkdir -p "$(dirname "$dest")"
  cp -r "$dir" "$dest"; chmod -R u+w "$dest"
}

# go_build NAME VERSION OUT_BIN DIR PKG: build PKG inside DIR into OUT_BIN, timing it.
go_build() {
  local name="$1" ver="$2" out="$3" dir="$4" pkg="$5" took
  log "building $name $ver (first time only; cached in $(dirname "$out"))"
  # Wall time depends on what else runs; CPU seconds (user+sys) tell the cost on any machine.
  local TIMEFORMAT='%0R s wall, %0U+%0S s CPU'
  { time (cd "$dir" && go build -trimpath -ldflags='-s -w' -o "$out.partial" "$pkg" 2>"$CACHE/build-$name.log") ; } 2>"$CACHE/build-$name.time" \
    || { cat "$CACHE/build-$name.log" >&2; return 1; }
  took="$(tail -1 "$CACHE/build-$name.time")"
  mv "$out.partial" "$out"
  echo "$name $ver $took" >>"$CACHE/build-times.txt"
}

# Module versions the Go module proxy reachable here does not serve (HTTP 403 "not
# available" for the zip), each replaced by the nearest later release that it serves and
# the checksum database knows: source-controller v1.9.5 pins fluxcd/pkg/artifact v0.18.3;
# with v0.20.0 Go's version selection also lifts fluxcd/pkg/oci to v0.69.0 and
# fluxcd/pkg/apis/meta to v1.31.0 (`go version -m` on the binary lists them).
MODULE_SUBSTITUTES=("github.com/fluxcd/pkg/artifact@v0.18.3=v0.20.0")

# Flux controllers keep `replace <module>/api => ./api`; the api module is published
# on its own at the same version, so the local replace becomes a versioned require.
build_flux_component() {
  local name="$1" mod="$2" ver="$3" pkg="$4"
  local out="$CACHE/$name-$ver/$name"
  [ -x "$out" ] && return 0
  local src="$CACHE/src/$name-$ver"
  module_src "$mod" "$ver" "$src"
  # flux2 embeds install manifests that its Makefile generates (kustomize build) and its
  # module zip lacks; the commands the tests use (get, reconcile, suspend, resume, events)
  # never read them, so an empty manifest set stands in and `flux install` is unusable.
  if [ "$name" = flux ] && [ -d "$src/cmd/flux" ] && ! ls "$src"/cmd/flux/manifests/*.yaml >/dev/null 2>&1; then
    mkdir -p "$src/cmd/flux/manifests"
    printf '# placeholder: this test build of flux cannot install Flux\n' >"$src/cmd/flux/manifests/placeholder.yaml"
  fi
  if grep -q "^replace $mod/api => ./api" "$src/go.mod"; then
    (cd "$src" && go mod edit -dropreplace "$mod/api" -require "$mod/api@$ver")
  fi
  local sub dep old new
  for sub in "${MODULE_SUBSTITUTES[@]}"; do
    dep="${sub%%@*}"; old="${sub#*@}"; old="${old%%=*}"; new="${sub#*=}"
    if grep -qE "^[[:space:]]*$dep $old( |$)" "$src/go.mod"; then
      (cd "$src" && go mod edit -replace "$dep=$dep@$new")
    fi
  done
  go_build "$name" "$ver" "$out" "$src" "$pkg"
  # Flux's CRDs come from the same module as the controller that owns them.
  if [ -d "$src/config/crd/bases" ]; then
    mkdir -p "$CACHE/$name-$ver/crds"; cp "$src"/config/crd/bases/*.yaml "$CACHE/$name-$ver/crds/"
  fi
  rm -rf "$src"
}

build_kubernetes() {
  local dir="$CACHE/kubernetes-$K8S_VERSION"
  [ -x "$dir/kube-apiserver" ] && [ -x "$dir/kube-controller-manager" ] && [ -x "$dir/kubectl" ] && return 0
  local src="$CACHE/src/kubernetes-$K8S_VERSION" staging
  module_src k8s.io/kubernetes "$K8S_VERSION" "$src"
  # The module points its staging repositories at ./staging, which a module zip does not
  # carry; each of them is published as k8s.io/<name> v0.<minor>.<patch>.
  local libver="v0.${K8S_VERSION#v1.}"
  local edits=()
  for staging in $(sed -n 's#^\s*k8s.io/\([a-z0-9-]*\) => ./staging/src/k8s.io/.*#\1#p' "$src/go.mod"); do
    edits+=(-replace "k8s.io/$staging=k8s.io/$staging@$libver")
  done
  (cd "$src" && go mod edit "${edits[@]}")
  go_build kube-apiserver "$K8S_VERSION" "$dir/kube-apiserver" "$src" ./cmd/kube-apiserver
  go_build kube-controller-manager "$K8S_VERSION" "$dir/kube-controller-manager" "$src" ./cmd/kube-controller-manager
  go_build kubectl "$K8S_VERSION" "$dir/kubectl" "$src" ./cmd/kubectl
  rm -rf "$src"
}

build_etcd() {
  local dir="$CACHE/etcd-$ETCD_VERSION"
  [ -x "$dir/etcd" ] && return 0
  local src="$CACHE/src/etcd-$ETCD_VERSION"
  rm -rf "$src"; mkdir -p "$src"
  # etcd's own main package lives in a module that replaces its siblings with local
  # paths; this three-line main calls the same entry point from the published server module.
  cat >"$src/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$src" && go mod init ocisource-harness/etcd >/dev/null 2>&1 && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null 2>&1 && go mod tidy >/dev/null 2>&1)
  go_build etcd "$ETCD_VERSION" "$dir/etcd" "$src" .
  rm -rf "$src"
}

# The CRDs of a Flux component at a version, without building it.
fetch_crds() {
  local name="$1" mod="$2" ver="$3"
  local dest="$CACHE/$name-crds-$ver/crds"
  [ -d "$dest" ] && return 0
  local src="$CACHE/src/$name-crds-$ver"
  module_src "$mod" "$ver" "$src"
  mkdir -p "$dest.partial"; cp "$src"/config/crd/bases/*.yaml "$dest.partial/"
  mv "$dest.partial" "$dest"; rm -rf "$src"
}

# What the test suite runs: the control plane, Flux's consumers and the CRDs they need.
cmd_build() {
  command -v go >/dev/null || { echo "hack/cluster.sh: Go is needed to build the test control plane (go 1.26+)" >&2; exit 1; }
  command -v openssl >/dev/null || ensure_packages
  build_etcd
  build_kubernetes
  build_flux_component kustomize-controller github.com/fluxcd/kustomize-controller "$KUSTOMIZE_CONTROLLER_VERSION" .
  build_flux_component helm-controller github.com/fluxcd/helm-controller "$HELM_CONTROLLER_VERSION" .
  build_flux_component notification-controller github.com/fluxcd/notification-controller "$NOTIFICATION_CONTROLLER_VERSION" .
  fetch_crds source-controller github.com/fluxcd/source-controller "$SOURCE_CRDS_VERSION"
}

# Also Flux's own source-controller and the flux CLI, for the benchmarks side by side.
cmd_build_all() {
  cmd_build
  build_flux_component flux github.com/fluxcd/flux2/v2 "$FLUX_VERSION" ./cmd/flux
  build_flux_component source-controller github.com/fluxcd/source-controller "$SOURCE_CONTROLLER_VERSION" .
}


bin_dir() { echo "$CACHE/$1-$2"; }

# cmd_built: the control plane, the Flux CRDs `start` applies and source-controller are
# cached (the benchmark's quick mode skips its Flux scenarios rather than build them).
cmd_built() {
  local f
  for f in "etcd-$ETCD_VERSION/etcd" "kubernetes-$K8S_VERSION/kube-apiserver" \
      "kubernetes-$K8S_VERSION/kube-controller-manager" "kubernetes-$K8S_VERSION/kubectl" \
      "source-controller-$SOURCE_CONTROLLER_VERSION/source-controller"; do
    [ -x "$CACHE/$f" ] || return 1
  done
  for f in source-controller-crds-$SOURCE_CRDS_VERSION kustomize-controller-$KUSTOMIZE_CONTROLLER_VERSION \
      helm-controller-$HELM_CONTROLLER_VERSION notification-controller-$NOTIFICATION_CONTROLLER_VERSION; do
    [ -d "$CACHE/$f/crds" ] || return 1
  done
}

KUBE_BIN="$(bin_dir kubernetes "$K8S_VERSION")"
ETCD_BIN="$(bin_dir etcd "$ETCD_VERSION")/etcd"
KCTL="$KUBE_BIN/kubectl"

# alive NAME: the process recorded in $CLUSTER_DIR/NAME.pid is running.
alive() { [ -f "$CLUSTER_DIR/$1.pid" ] && kill -0 "$(cat "$CLUSTER_DIR/$1.pid")" 2>/dev/null; }

# start NAME CMD...: start a process in the background with its log and pid file.
start() {
  local name="$1"; shift
  "$@" >"$CLUSTER_DIR/$name.log" 2>&1 &
  echo $! >"$CLUSTER_DIR/$name.pid"
}

stop() {
  local name="$1" pid
  [ -f "$CLUSTER_DIR/$name.pid" ] || return 0
  pid="$(cat "$CLUSTER_DIR/$name.pid")"
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$CLUSTER_DIR/$name.pid"
}

# wait_http URL WHAT LOG [CURL_ARGS...]: poll until URL answers 200 (60 s at most).
wait_http() {
  local url="$1" what="$2" logf="$3"; shift 3
  for _ in $(seq 1 600); do
    curl -fsS -o /dev/null "$@" "$url" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "hack/cluster.sh: $what did not become ready at $url; last lines of $logf:" >&2
  tail -20 "$logf" >&2
  return 1
}

# Certificates with openssl: a cluster CA, the API server's serving certificate, the
# service-account signing key and client certificates for the admin and the controller
# manager (both in system:masters; the product under test never uses them).
make_pki() {
  local d="$CLUSTER_DIR/pki"
  [ -f "$d/admin.crt" ] && return 0
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj "/CN=ocisource-test-ca" \
    -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
  openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
  openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
  client_cert() { # name subject [san]
    openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$d/$1.key" -out "$d/$1.csr" 2>/dev/null
    local ext="$d/$1.ext"
    if [ -n "${3:-}" ]; then printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$3" >"$ext"
    else printf 'extendedKeyUsage=clientAuth\n' >"$ext"; fi
    openssl x509 -req -in "$d/$1.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
      -days 365 -extfile "$ext" -out "$d/$1.crt" 2>/dev/null
  }
  client_cert apiserver "/CN=kube-apiserver" "IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc"
  client_cert admin "/O=system:masters/CN=admin"
  client_cert kcm "/O=system:masters/CN=system:kube-controller-manager"
}

write_kubeconfig() { # file user
  local f="$1" user="$2" d="$CLUSTER_DIR/pki"
  cat >"$f" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: https://127.0.0.1:$(cat "$CLUSTER_DIR/apiserver.port")
    certificate-authority: $d/ca.crt
users:
- name: $user
  user:
    client-certificate: $d/$user.crt
    client-key: $d/$user.key
contexts:
- name: test
  context: {cluster: test, user: $user}
current-context: test
YAML
}

start_etcd() {
  alive etcd && return 0
  local port peer; port="$(free_port)"; peer="$(free_port)"
  echo "$port" >"$CLUSTER_DIR/etcd.port"
  start etcd "$ETCD_BIN" --name=test --data-dir="$CLUSTER_DIR/etcd-data" \
    --listen-client-urls="http://127.0.0.1:$port" --advertise-client-urls="http://127.0.0.1:$port" \
    --listen-peer-urls="http://127.0.0.1:$peer" --initial-advertise-peer-urls="http://127.0.0.1:$peer" \
    --initial-cluster="test=http://127.0.0.1:$peer" --unsafe-no-fsync --log-level=warn
  wait_http "http://127.0.0.1:$port/health" etcd "$CLUSTER_DIR/etcd.log"
}

# start_apiserver: the port is kept across restarts so clients reconnect to the same URL.
start_apiserver() {
  alive apiserver && return 0
  local d="$CLUSTER_DIR/pki" port
  [ -f "$CLUSTER_DIR/apiserver.port" ] || free_port >"$CLUSTER_DIR/apiserver.port"
  port="$(cat "$CLUSTER_DIR/apiserver.port")"
  start apiserver "$KUBE_BIN/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$(cat "$CLUSTER_DIR/etcd.port")" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$port" \
    --tls-cert-file="$d/apiserver.crt" --tls-private-key-file="$d/apiserver.key" \
    --client-ca-file="$d/ca.crt" --authorization-mode=RBAC \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$d/sa.pub" --service-account-signing-key-file="$d/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 --disable-admission-plugins=ServiceAccount \
    --allow-privileged=false --profiling=false --cert-dir="$CLUSTER_DIR/apiserver-certs" \
    --v=1
  wait_http "https://127.0.0.1:$port/readyz" kube-apiserver "$CLUSTER_DIR/apiserver.log" \
    --cacert "$d/ca.crt" --cert "$d/admin.crt" --key "$d/admin.key"
}

# The garbage collector (ownerReference cascades), namespace deletion and the default
# service account per namespace: the parts of a cluster the tests rely on without a kubelet.
start_controller_manager() {
  alive controller-manager && return 0
  write_kubeconfig "$CLUSTER_DIR/kcm.kubeconfig" kcm
  start controller-manager "$KUBE_BIN/kube-controller-manager" \
    --kubeconfig="$CLUSTER_DIR/kcm.kubeconfig" --leader-elect=false --secure-port=0 \
    --controllers=garbagecollector,namespace,serviceaccount --use-service-account-credentials=false \
    --v=1
  sleep 0.5
  alive controller-manager || { tail -20 "$CLUSTER_DIR/controller-manager.log" >&2; return 1; }
}

cmd_up() {
  cmd_build
  cmd_start
}

cmd_start() {
  # A cluster left by an earlier run is reused while its API server runs; otherwise start clean.
  if ! alive apiserver; then cmd_down; rm -rf "$CLUSTER_DIR"; fi
  mkdir -p "$CLUSTER_DIR"
  make_pki
  start_etcd
  start_apiserver
  write_kubeconfig "$CLUSTER_DIR/admin.kubeconfig" admin
  start_controller_manager
  # Flux's CRDs, from the modules of the controllers that own them.
  local crd
  for crd in "$CACHE"/{source-controller-crds-$SOURCE_CRDS_VERSION,kustomize-controller-$KUSTOMIZE_CONTROLLER_VERSION,helm-controller-$HELM_CONTROLLER_VERSION,notification-controller-$NOTIFICATION_CONTROLLER_VERSION}/crds; do
    "$KCTL" --kubeconfig="$CLUSTER_DIR/admin.kubeconfig" apply --server-side --force-conflicts -f "$crd" >/dev/null
  done
  "$KCTL" --kubeconfig="$CLUSTER_DIR/admin.kubeconfig" wait --for=condition=Established --timeout=60s crd --all >/dev/null
  log "control plane up: https://127.0.0.1:$(cat "$CLUSTER_DIR/apiserver.port") (state in $CLUSTER_DIR)"
}

# flux_controller NAME [FLAGS...]: run one of Flux's controllers out of cluster, as the
# admin (Flux's own RBAC is not under test), health endpoint on a free loopback port.
flux_controller() {
  local name="$1"; shift
  alive "$name" && return 0
  local ver health metrics
  case "$name" in
    kustomize-controller) ver="$KUSTOMIZE_CONTROLLER_VERSION" ;;
    helm-controller) ver="$HELM_CONTROLLER_VERSION" ;;
    source-controller) ver="$SOURCE_CONTROLLER_VERSION" ;;
    notification-controller) ver="$NOTIFICATION_CONTROLLER_VERSION" ;;
  esac
  health="$(free_port)"; metrics="$(free_port)"
  echo "$metrics" >"$CLUSTER_DIR/$name.metrics-port"
  mkdir -p "$CLUSTER_DIR/$name-tmp"
  TMPDIR="$CLUSTER_DIR/$name-tmp" KUBECONFIG="$CLUSTER_DIR/admin.kubeconfig" RUNTIME_NAMESPACE=flux-system \
    start "$name" "$CACHE/$name-$ver/$name" --health-addr="127.0.0.1:$health" \
    --metrics-addr="127.0.0.1:$metrics" --enable-leader-election=false --watch-all-namespaces=true \
    --log-level=debug --log-encoding=json "$@"
  wait_http "http://127.0.0.1:$health/readyz" "$name" "$CLUSTER_DIR/$name.log"
}

# cmd_flux [source-controller]: Flux's consumers with ExternalArtifact on, the
# notification-controller's event receiver, and source-controller when asked (the drop-in
# and benchmark tests run it beside ocisource).
cmd_flux() {
  "$KCTL" --kubeconfig="$CLUSTER_DIR/admin.kubeconfig" create namespace flux-system --dry-run=client -o yaml \
    | "$KCTL" --kubeconfig="$CLUSTER_DIR/admin.kubeconfig" apply -f - >/dev/null
  local events; [ -f "$CLUSTER_DIR/events.port" ] || free_port >"$CLUSTER_DIR/events.port"
  events="$(cat "$CLUSTER_DIR/events.port")"
  flux_controller notification-controller --events-addr="127.0.0.1:$events" --receiverAddr="127.0.0.1:$(free_port)"
  # Objects labelled sharding.fluxcd.io/key belong to a test's own kustomize-controller
  # shard (tests/support/shard.rs), as in Flux's sharding setup.
  flux_controller kustomize-controller --feature-gates=ExternalArtifact=true --events-addr="http://127.0.0.1:$events/" --no-remote-bases=true \
    --watch-label-selector='!sharding.fluxcd.io/key'
  flux_controller helm-controller --feature-gates=ExternalArtifact=true --events-addr="http://127.0.0.1:$events/"
  if [ "${1:-}" = source-controller ]; then
    cmd_build_all
    local sport; sport="$(free_port)"; echo "$sport" >"$CLUSTER_DIR/source-controller.storage-port"
    mkdir -p "$CLUSTER_DIR/source-controller-storage"
    flux_controller source-controller --storage-path="$CLUSTER_DIR/source-controller-storage" \
      --storage-addr="127.0.0.1:$sport" --storage-adv-addr="127.0.0.1:$sport" \
      --events-addr="http://127.0.0.1:$events/" ${SOURCE_CONTROLLER_ARGS:-}
  fi
}

cmd_env() {
  cat <<ENV
export KUBECONFIG=$CLUSTER_DIR/admin.kubeconfig
export OCISOURCE_TEST_CLUSTER=$CLUSTER_DIR
export OCISOURCE_TEST_KUBECTL=$KCTL
export OCISOURCE_TEST_FLUX=$CACHE/flux-$FLUX_VERSION/flux
export OCISOURCE_TEST_KUSTOMIZE_CONTROLLER=$CACHE/kustomize-controller-$KUSTOMIZE_CONTROLLER_VERSION/kustomize-controller
export OCISOURCE_TEST_SOURCE_CONTROLLER=$CACHE/source-controller-$SOURCE_CONTROLLER_VERSION/source-controller
export OCISOURCE_TEST_APISERVER=https://127.0.0.1:$(cat "$CLUSTER_DIR/apiserver.port" 2>/dev/null)
export OCISOURCE_TEST_EVENTS_ADDR=http://127.0.0.1:$(cat "$CLUSTER_DIR/events.port" 2>/dev/null)/
ENV
}

cmd_down() {
  local n
  for n in source-controller helm-controller kustomize-controller notification-controller controller-manager apiserver etcd; do
    stop "$n"
  done
}

case "${1:-}" in
  build) cmd_build ;;
  build-all) cmd_build_all ;;
  up) cmd_up ;;
  flux) shift; cmd_flux "$@" ;;
  env) cmd_env ;;
  start) cmd_start ;;
  built) cmd_built ;;
  down) cmd_down ;;
  # The restart test stops and starts the API server alone; etcd keeps the data.
  stop-apiserver) stop apiserver ;;
  start-apiserver) start_apiserver ;;
  *) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
