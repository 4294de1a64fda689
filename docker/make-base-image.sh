#!/usr/bin/env bash
# Build the local base image `cascade-base:bookworm` without any registry: debootstrap a minimal Debian bookworm
# rootfs (python3, pip, venv, git, and strace: the docker sandbox records refused writes with it) and `docker import`
# it. The image also carries Debian bullseye's python3.9 with distutils (as scripts/install-python39.sh installs it
# on the host), so a Stage-2 venv built on the host from /usr/bin/python3 or /usr/bin/python3.9 runs in the
# container on the image's own interpreter: the docker sandbox never bind-mounts the host's /usr (that would hide
# the container's own system, e.g. docker-init).
# Only Debian's package servers are needed. Skips the work when the tag already exists at this recipe's version.
#
# Usage: docker/make-base-image.sh [TAG]
#   env: CASCADE_DEBIAN_MIRROR (default http://deb.debian.org/debian), CASCADE_BASE_REBUILD=1 to force a rebuild
set -euo pipefail

TAG="${1:-cascade-base:bookworm}"
MIRROR="${CASCADE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PACKAGES="python3,python3-pip,python3-venv,git,ca-certificates,strace"
# Bump when the recipe changes: an existing image with an older (or no) label is rebuilt.
RECIPE_VERSION="4"
LABEL_KEY="org.cascade.base-recipe"

die() { echo "make-base-image: $*" >&2; exit 1; }

command -v docker >/dev/null || die "docker CLI not found (apt-get install docker.io)"
docker info >/dev/null 2>&1 || die "the docker engine does not answer (is dockerd running?)"

existing="$(docker image inspect -f "{{ index .Config.Labels \"$LABEL_KEY\" }}" "$TAG" 2>/dev/null || true)"
if [[ "${CASCADE_BASE_REBUILD:-0}" != "1" && "$existing" == "$RECIPE_VERSION" ]]; then
  echo "make-base-image: $TAG (recipe $RECIPE_VERSION) already exists, skipping (CASCADE_BASE_REBUILD=1 forces)"
  exit 0
fi

command -v debootstrap >/dev/null || die "debootstrap not found (apt-get install debootstrap)"
[[ "$(id -u)" == "0" ]] || die "debootstrap needs root"

ROOTFS="$(mktemp -d /var/tmp/cascade-rootfs.XXXXXX)"
LOG="$ROOTFS.log"
STAGING="cascade-base-staging:$$"
# The rootfs holds device nodes and root-owned files: always remove it, whatever happens.
trap 'rm -rf --one-file-system "$ROOTFS"; docker image rm "$STAGING" >/dev/null 2>&1 || true' EXIT

echo "make-base-image: debootstrap bookworm (minbase + $PACKAGES) into $ROOTFS"
if ! debootstrap --variant=minbase --include="$PACKAGES" bookworm "$ROOTFS" "$MIRROR" >"$LOG" 2>&1; then
  tail -n 20 "$LOG" >&2
  die "debootstrap failed (full log: $LOG)"
fi

# Debian bullseye's python3.9 beside bookworm's 3.11: a bullseye source list used only for this
# install (its own lists directory), then distutils/lib2to3 unpacked from bullseye's python3-distutils and
# python3-lib2to3, whose dependencies clash with bookworm's python3 (merged, never replacing stdlib files).
install_python39() {
  local work=/var/tmp/py39
  mkdir -p "$ROOTFS$work/lists/partial" "$ROOTFS$work/unpacked"
  echo "deb $MIRROR bullseye main" >"$ROOTFS$work/bullseye.list"
  cp /etc/resolv.conf "$ROOTFS/etc/resolv.conf"  # name resolution for apt inside the chroot
  chroot "$ROOTFS" /bin/bash -euo pipefail -c "
    export DEBIAN_FRONTEND=noninteractive
    opts=(-o Dir::Etc::sourcelist=$work/bullseye.list -o Dir::Etc::sourceparts=/dev/null
          -o Dir::State::Lists=$work/lists -o APT::Get::List-Cleanup=0 -o APT::Sandbox::User=root)
    apt-get \"\${opts[@]}\" update -qq
    apt-get \"\${opts[@]}\" install -y -qq --no-install-recommends python3.9
    cd $work
    apt-get \"\${opts[@]}\" download python3-distutils=3.9.2-1 python3-lib2to3=3.9.2-1
    for deb in python3-distutils_*.deb python3-lib2to3_*.deb; do dpkg -x \"\$deb\" $work/unpacked; done
    for pkg in distutils lib2to3; do
      mkdir -p /usr/lib/python3.9/\$pkg
      cp -a $work/unpacked/usr/lib/python3.9/\$pkg/. /usr/lib/python3.9/\$pkg/
    done
    SETUPTOOLS_USE_DISTUTILS=stdlib python3.9 -c 'import distutils.dist, lib2to3, venv'
  "
  rm -rf "${ROOTFS:?}$work"
  : >"$ROOTFS/etc/resolv.conf"  # Docker provides the container's own
}
echo "make-base-image: python3.9 from bullseye into the rootfs"
install_python39 >>"$LOG" 2>&1 || { tail -n 20 "$LOG" >&2; die "installing python3.9 failed (full log: $LOG)"; }
rm -f "$LOG"

# Keep the image small and deterministic: no package caches or lists, no manuals or translations (but the
# copyright files). Fewer files also make every sandboxed run cheaper: `container.diff()` takes time in proportion
# to the image's file count on this Docker.
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/cache/apt/*.bin "$ROOTFS"/var/lib/apt/lists/*
rm -rf "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/locale/* "$ROOTFS"/usr/share/info/*
find "$ROOTFS"/usr/share/doc -mindepth 2 -not -name copyright -not -type d -delete
# The sandbox bind-mounts host paths (a venv cache under ~/.cache, a pyenv interpreter) at the same path; the
# unprivileged container user must be able to traverse the image's /root to reach them. Nothing lives in it.
chmod 0711 "$ROOTFS/root"

echo "make-base-image: docker import -> $STAGING"
tar -C "$ROOTFS" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change "LABEL $LABEL_KEY=$RECIPE_VERSION" \
  --change 'CMD ["/bin/bash"]' \
  - "$STAGING" >/dev/null || die "docker import failed"
# Check the interpreters as the unprivileged user the sandbox runs as, then publish the tag.
docker run --rm --network none --user 65534:65534 "$STAGING" /bin/sh -c \
  'strace -f -qq --seccomp-bpf -e trace=openat -o /dev/null true \
   && python3 -c "import venv, ensurepip" && python3.9 -c "import distutils.version, venv, ssl, sqlite3, ctypes" \
   && test -x /root -a ! -r /root' \
  || die "$STAGING was built but its strace / python3 / python3.9 do not work"
docker tag "$STAGING" "$TAG" || die "docker tag $TAG failed"
echo "make-base-image: built $TAG (recipe $RECIPE_VERSION)"
