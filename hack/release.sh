#!/usr/bin/env bash
# Publish a release: static binary, container image (signed), Helm chart, to one registry.
#
#   hack/release.sh REGISTRY VERSION
#     REGISTRY  e.g. ghcr.io/ocisource (the image goes to REGISTRY/ocisource:VERSION, the
#               chart to oci://REGISTRY/charts/ocisource:VERSION)
#     VERSION   e.g. 0.2.0 (no leading v): the image tag, the chart's version and appVersion
#
# Environment:
#   SIGN_KEY          cosign private key (cosign.key, PKCS#8 or SEC1 PEM); required.
#                     COSIGN_PASSWORD unlocks an encrypted cosign.key, as for cosign.
#   OCISOURCE_BIN     a prebuilt binary to ship instead of building one. Default: build
#                     `cargo build --release` with `-C target-feature=+crt-static` (glibc,
#                     statically linked; no musl target needed).
#   RELEASE_PLAIN_HTTP=1  talk plain HTTP to REGISTRY (a local test registry).
#   Registry logins come from the docker config (`docker login`, `buildah login`).
#
# Steps: binary -> hack/image-build.sh (buildah, FROM scratch) -> buildah push (OCI
# manifest) -> `ocisource sign` of the pushed digest (cosign's key-signature format, so
# `cosign verify --key` and `ocisource verify --key` accept it) -> chart with
# image.repository=REGISTRY/ocisource and version VERSION, packaged and pushed with the
# Helm SDK (Helm's OCI media types: config application/vnd.cncf.helm.config.v1+json, layer
# application/vnd.cncf.helm.chart.content.v1.tar+gzip). Prints the published references.
# Needs root (or `buildah unshare`) for buildah, and the venv of hack/chart-check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -eq 2 ] || { echo "usage: hack/release.sh REGISTRY VERSION" >&2; exit 2; }
registry=${1%/}
version=${2#v}
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$ ]] \
  || { echo "release: VERSION '$2' is not semver (e.g. 0.2.0)" >&2; exit 2; }
[ -n "${SIGN_KEY:-}" ] && [ -f "$SIGN_KEY" ] \
  || { echo "release: SIGN_KEY must name the cosign private key file" >&2; exit 2; }
image="$registry/ocisource"
plain=${RELEASE_PLAIN_HTTP:-0}
work=hack/.work/release
rm -rf "$work"; mkdir -p "$work"

# 1. The binary.
if [ -n "${OCISOURCE_BIN:-}" ]; then
  bin=$OCISOURCE_BIN
  echo "release: shipping the prebuilt $bin"
else
  RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    cargo build --release --locked --target x86_64-unknown-linux-gnu --bin ocisource
  bin=target/x86_64-unknown-linux-gnu/release/ocisource
  # ldd exits 0 on a static-pie binary too ("statically linked"): a dynamic one lists
  # its libraries with "=>" (read whole: `grep -q` would end ldd early under pipefail).
  if [[ $(ldd "$bin" 2>/dev/null) == *"=>"* ]]; then
    echo "release: $bin is not statically linked" >&2; exit 1
  fi
fi
[ -x "$bin" ] || { echo "release: no binary at $bin" >&2; exit 1; }

# 2. The image, then push it as an OCI manifest and note its digest.
hack/image-build.sh "$bin" "localhost/ocisource:$version"
tls=()
ocisource_flags=()
helm_plain=False
if [ "$plain" = 1 ]; then
  tls=(--tls-verify=false)
  ocisource_flags=(--plain-http)
  helm_plain=True
fi
export STORAGE_DRIVER=${STORAGE_DRIVER:-vfs}
buildah push --quiet "${tls[@]}" --format oci --digestfile "$work/image.digest" \
  "localhost/ocisource:$version" "docker://$image:$version"
digest=$(cat "$work/image.digest")
echo "release: pushed $image:$version@$digest"

# 3. Sign the pushed digest (cosign key signature: $image:sha256-<hex>.sig).
"$bin" sign "oci://$image@$digest" --key "$SIGN_KEY" "${ocisource_flags[@]}" -o json > "$work/signed.json"
echo "release: signed $image@$digest ($(sed -n 's/.*"signature": *"\([^"]*\)".*/\1/p' "$work/signed.json"))"

# 4. The chart: this release's image by default, then package and push it.
cp -r charts/ocisource "$work/chart"
sed -i "s|^  repository: ghcr.io/ocisource/ocisource$|  repository: $image|" "$work/chart/values.yaml"
grep -q "^  repository: $image\$" "$work/chart/values.yaml" \
  || { echo "release: could not set image.repository in the chart's values.yaml" >&2; exit 1; }
venv=.venv
[ -x "$venv/bin/python" ] || { echo "release: no $venv (run hack/chart-check.sh once)" >&2; exit 1; }
"$venv/bin/python" - "$work" "$version" "oci://$registry/charts" "$helm_plain" <<'PY'
import sys
import helm_python as helm
work, version, remote, plain = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "True"
archive = helm.package(f"{work}/chart", destination=work, version=version, app_version=version)
result = helm.push(archive, remote, plain_http=plain)
print(f"release: pushed chart {remote}/ocisource:{version} {result}")
PY

cat <<EOT
release: done
  image  $image:$version@$digest (signed; ocisource verify oci://$image@$digest --key cosign.pub)
  chart  oci://$registry/charts/ocisource --version $version
  helm install ocisource oci://$registry/charts/ocisource --version $version --namespace flux-system
EOT
