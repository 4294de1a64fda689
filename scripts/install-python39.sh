#!/usr/bin/env bash
# Install Debian bullseye's python3.9 (and its headers) beside bookworm's python3.11, for
# the benchmark's old SWE-bench repositories (sympy & co. want Python 3.9; astropy builds C extensions against it).
# Needs root and Debian's package servers.
#   1. a sources list for bullseye (main) used only for this install: its own lists directory, the system's untouched;
#   2. `uv venv` needs distutils, which bullseye ships in python3-distutils / python3-lib2to3 (3.9.2-1) — their
#      dependencies clash with bookworm's python3, so they are downloaded and unpacked, and only their
#      usr/lib/python3.9/{distutils,lib2to3} are copied into /usr/lib/python3.9/.
# Idempotent: does nothing when /usr/bin/python3.9 already imports distutils.
set -euo pipefail

# (setuptools' distutils shim can make `import distutils` succeed without the stdlib files: check the files.)
if [ -x /usr/bin/python3.9 ] && [ -f /usr/lib/python3.9/distutils/__init__.py ] && [ -f /usr/lib/python3.9/distutils/dist.py ] \
  && [ -f /usr/lib/python3.9/lib2to3/__init__.py ] && [ -f /usr/include/python3.9/Python.h ]; then
  echo "python3.9 with distutils already installed: $(/usr/bin/python3.9 --version)"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-python39.sh: run as root (apt-get install)" >&2
  exit 3
fi

work="$(mktemp -d /tmp/py39-install.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/archives/partial"
echo "deb http://deb.debian.org/debian bullseye main" > "$work/bullseye.list"
apt_opts=(
  -o "Dir::Etc::sourcelist=$work/bullseye.list"
  -o "Dir::Etc::sourceparts=/dev/null"
  -o "Dir::State::Lists=$work/lists"
  -o "APT::Get::List-Cleanup=0"
)

export DEBIAN_FRONTEND=noninteractive
apt-get "${apt_opts[@]}" update -qq
apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends python3.9 >/dev/null
# Its headers: astropy's C extensions are compiled against them (cascade/execution/extensions.py).
apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends python3.9-dev >/dev/null
# A half-done earlier run may have removed stdlib files under distutils/: put the package's own files back.
apt-get "${apt_opts[@]}" install -y -qq --reinstall libpython3.9-stdlib >/dev/null

cd "$work"
apt-get "${apt_opts[@]}" download python3-distutils=3.9.2-1 python3-lib2to3=3.9.2-1 >/dev/null
for deb in python3-distutils_*.deb python3-lib2to3_*.deb; do
  dpkg -x "$deb" "$work/root"
done
# Merge, never replace: libpython3.9-stdlib already owns distutils/__init__.py and version.py.
for pkg in distutils lib2to3; do
  mkdir -p "/usr/lib/python3.9/$pkg"
  cp -a "$work/root/usr/lib/python3.9/$pkg/." "/usr/lib/python3.9/$pkg/"
done

SETUPTOOLS_USE_DISTUTILS=stdlib /usr/bin/python3.9 -c \
  'import distutils.dist, lib2to3, sys; assert distutils.__file__; print("python", sys.version.split()[0], "with distutils")'
