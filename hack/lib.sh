#!/usr/bin/env bash
# Shared helpers for hack/*.sh: install what the project needs (idempotent), and start a
# throw-away local registry on 127.0.0.1 with our own config file.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$ROOT/hack/.work"
VENV="$ROOT/.venv"
mkdir -p "$WORK"

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# Debian packages: the real registry, an independent OCI client, openssl for CAs and
# signatures, htpasswd for basic auth, GNU time for peak memory.
ensure_packages() {
  local missing=()
  [ -x /usr/bin/docker-registry ] || missing+=(docker-registry)
  command -v skopeo >/dev/null || missing+=(skopeo)
  command -v openssl >/dev/null || missing+=(openssl)
  command -v htpasswd >/dev/null || missing+=(apache2-utils)
  [ -x /usr/bin/time ] || missing+=(time)
  command -v buildah >/dev/null || missing+=(buildah)
  command -v zstd >/dev/null || missing+=(zstd)
  command -v curl >/dev/null || missing+=(curl)
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

# Python tools in a venv: oras (independent OCI client), the Helm SDK and a manifest validator.
ensure_venv() {
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating $VENV"
    python3 -m venv "$VENV"
  fi
  if ! "$VENV/bin/python" -c 'import oras' 2>/dev/null || [ "$ROOT/hack/requirements.txt" -nt "$VENV/.stamp" ]; then
    log "installing Python tools from hack/requirements.txt"
    "$VENV/bin/pip" install -q --disable-pip-version-check -r "$ROOT/hack/requirements.txt"
    touch "$VENV/.stamp"
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# start_registry DIR: starts docker-registry on 127.0.0.1:<free port> with storage in DIR,
# sets REGISTRY_PID and REGISTRY_ADDR. Stop it with stop_registry.
start_registry() {
  local dir="$1"; mkdir -p "$dir/data"
  local port; port="$(free_port)"
  cat >"$dir/config.yml" <<YAML
version: 0.1
log:
  level: info
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
YAML
  /usr/bin/docker-registry serve "$dir/config.yml" >"$dir/registry.log" 2>&1 &
  REGISTRY_PID=$!
  REGISTRY_ADDR="127.0.0.1:$port"
  for _ in $(seq 1 100); do
    curl -fsS "http://$REGISTRY_ADDR/v2/" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "registry did not start; log:" >&2; cat "$dir/registry.log" >&2
  return 1
}

stop_registry() {
  if [ -n "${REGISTRY_PID:-}" ]; then kill "$REGISTRY_PID" 2>/dev/null || true; wait "$REGISTRY_PID" 2>/dev/null || true; fi
  REGISTRY_PID=""
}
