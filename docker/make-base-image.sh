#!/usr/bin/env bash
# Build the local base image `cascade-base:bookworm` without any registry: debootstrap a minimal Debian bookworm
# rootfs (with python3, pip, venv and git) and `docker import` it. Skips the work when the tag already exists.
#
# Usage: docker/make-base-image.sh [TAG]      (env: CASCADE_DEBIAN_MIRROR, CASCADE_BASE_REBUILD=1 to force)
set -euo pipefail

TAG="${1:-cascade-base:bookworm}"
MIRROR="${CASCADE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PACKAGES="python3,python3-pip,python3-venv,git,ca-certificates"

die() { echo "make-base-image: $*" >&2; exit 1; }

command -v docker >/dev/null || die "docker CLI not found (apt-get install docker.io)"
docker info >/dev/null 2>&1 || die "the docker engine does not answer (is dockerd running?)"

if [[ "${CASCADE_BASE_REBUILD:-0}" != "1" ]] && docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "make-base-image: $TAG already exists, skipping (CASCADE_BASE_REBUILD=1 forces a rebuild)"
  exit 0
fi

command -v debootstrap >/dev/null || die "debootstrap not found (apt-get install debootstrap)"
[[ "$(id -u)" == "0" ]] || die "debootstrap needs root"

ROOTFS="$(mktemp -d /var/tmp/cascade-rootfs.XXXXXX)"
# The rootfs holds device nodes and root-owned files: always remove it, whatever happens.
trap 'rm -rf --one-file-system "$ROOTFS"' EXIT

echo "make-base-image: debootstrap bookworm (minbase + $PACKAGES) into $ROOTFS"
if ! debootstrap --variant=minbase --include="$PACKAGES" bookworm "$ROOTFS" "$MIRROR" \
    >"$ROOTFS.log" 2>&1; then
  tail -n 20 "$ROOTFS.log" >&2
  die "debootstrap failed (full log: $ROOTFS.log)"
fi
rm -f "$ROOTFS.log"

# Keep the image small and deterministic: no package caches or lists.
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*

echo "make-base-image: docker import -> $TAG"
tar -C "$ROOTFS" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  - "$TAG" >/dev/null || die "docker import failed"
docker run --rm --network none "$TAG" python3 -c 'import venv, ensurepip' \
  || die "$TAG was built but has no working python3 venv"
echo "make-base-image: built $TAG"
