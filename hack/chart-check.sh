#!/usr/bin/env bash
# Lint, render and check the Helm chart charts/ocisource (see hack/chart/check.py).
#
# Uses a venv at .venv with PyPI's helm-python-sdk (Helm's Go SDK behind a C ABI: no helm
# binary) and kubernetes-validate. Needs the ocisource binary for `ocisource rbac`:
# OCISOURCE_BIN (default target/debug/ocisource; build it with `cargo build`).
# `hack/chart-check.sh --sync-crds` first copies crds/*.yaml into the chart.
# Ends with `chart-check: N passed, M failed[, K skipped]`; exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import helm_python, kubernetes_validate, yaml, jsonschema' 2>/dev/null; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r hack/chart/requirements.txt
fi
export PYTHONDONTWRITEBYTECODE=1
exec "$venv/bin/python" hack/chart/check.py "$@"
