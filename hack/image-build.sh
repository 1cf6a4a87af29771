#!/usr/bin/env bash
# Build the ocisource container image from a built binary with buildah (Debian's package).
#
#   hack/image-build.sh [BINARY] [IMAGE]
#     BINARY  default target/release/ocisource (cargo build --release)
#     IMAGE   default localhost/ocisource:<version from Cargo.toml>
#
# A dynamically linked binary (cargo build --release) gets every library `ldd` lists (and
# the dynamic loader) copied into the image at the same paths; the release's static binary
# (hack/release.sh) needs none. The CA bundle goes in either way. After the build
# it runs the binary from the image's own file system with chroot, as user 65532, to prove
# the libraries are complete: `/ocisource --help` must succeed. Needs root (or
# `buildah unshare`) and no network: FROM scratch pulls nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
bin=${1:-target/release/ocisource}
image=${2:-localhost/ocisource:${version}}
ca=/etc/ssl/certs/ca-certificates.crt
export STORAGE_DRIVER=${STORAGE_DRIVER:-vfs}

[ -x "$bin" ] || { echo "image-build: no binary at $bin (run cargo build --release)" >&2; exit 1; }
[ -f "$ca" ] || { echo "image-build: no CA bundle at $ca (apt-get install ca-certificates)" >&2; exit 1; }
command -v buildah >/dev/null || { echo "image-build: buildah is not installed (apt-get install buildah)" >&2; exit 1; }

ctx=hack/.work/image
rm -rf "$ctx"
mkdir -p "$ctx/rootfs/tmp" "$ctx/rootfs/data" "$ctx/rootfs/etc/ssl/certs"
cp hack/image/Containerfile "$ctx/Containerfile"
install -m 0755 "$bin" "$ctx/rootfs/ocisource"
cp "$ca" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
chmod 1777 "$ctx/rootfs/tmp"
printf 'root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n' > "$ctx/rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' > "$ctx/rootfs/etc/group"

# Shared libraries: every absolute path ldd prints (including the loader), at the same path.
# (ldd exits 0 on a static-pie binary too, printing "statically linked": test for "=>".)
if [[ $(ldd "$bin" 2>/dev/null) == *"=>"* ]]; then
  ldd "$bin" | grep -o '/[^ ]*' | sort -u | while read -r lib; do
    mkdir -p "$ctx/rootfs$(dirname "$lib")"
    cp -L "$lib" "$ctx/rootfs$lib"
  done
else
  echo "image-build: $bin is statically linked"
fi

echo "image-build: image contents:"
(cd "$ctx/rootfs" && find . -type f | sort | sed 's/^/  /')

buildah build --quiet --isolation chroot --layers=false -f "$ctx/Containerfile" -t "$image" "$ctx"

# Prove the image runs: mount its file system and run the binary there as 65532.
ctr=$(buildah from "$image")
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
mnt=$(buildah mount "$ctr")
[ ! -e "$mnt/bin/sh" ] || { echo "image-build: the image has a shell" >&2; exit 1; }
chroot --userspec=65532:65532 "$mnt" /ocisource --help >/dev/null
buildah umount "$ctr" >/dev/null
echo "image-build: $image runs /ocisource as 65532 ($(buildah inspect --format '{{.OCIv1.Config.User}} {{.OCIv1.Config.Entrypoint}}' "$image"))"
