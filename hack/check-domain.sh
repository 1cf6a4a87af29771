#!/usr/bin/env bash
# Keeps src/domain free of I/O crates (STYLE.md): it may not import kube, tokio, reqwest,
# axum, sigstore crates, hyper or the project's adapters.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=$(grep -rnE '^\s*(pub\s+)?use\s+(::)?(kube|k8s_openapi|tokio|reqwest|axum|hyper|sigstore[a-z_]*|crate::(registry|verify|storage|server|reconcile|app|pipeline))\b|\b(kube|tokio|reqwest|axum|hyper|sigstore_verify)::' src/domain || true)
if [ -n "$bad" ]; then
  echo "check-domain: src/domain imports I/O crates or adapters:" >&2
  echo "$bad" >&2
  exit 1
fi
echo "check-domain: src/domain imports no I/O crate"
