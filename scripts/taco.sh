#!/usr/bin/env bash
# Builds stock TACO (the `taco` CLI and libtaco, Release, OpenMP) from the vendored archive in
# ../shared/vendor, once per machine: the build is cached outside the checkout, keyed by the
# archive's SHA-256 and this script's build settings, and reused by setup, tests, benchmarks
# and CI. Prints the install prefix (bin/taco, lib/libtaco.so, include/taco.h) on stdout.
#
#   bash scripts/taco.sh            # build if needed, print the prefix
#   bash scripts/taco.sh --check    # print the prefix if the cached build exists, else exit 3
#
# Exit status 3, with a message on stderr, when the vendored archive is missing: callers skip
# their TACO parts then (and say so). Installs cmake from Debian (as root) or PyPI (into
# .venv) when it is missing. Cache root: $DASHRANK_CACHE_DIR, else $XDG_CACHE_HOME/dashrank,
# else ~/.cache/dashrank.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${DASHRANK_SHARED:-../shared}
ARCHIVE=$SHARED/vendor/taco-2b8ece4c.tar.gz
# The settings the cache key covers: changing them rebuilds.
CMAKE_FLAGS=(-DCMAKE_BUILD_TYPE=Release -DOPENMP=ON -DPYTHON=OFF -DCUDA=OFF)
SETTINGS="${CMAKE_FLAGS[*]} targets=taco,taco-tool pybind11-placeholder"

if [ ! -f "$ARCHIVE" ]; then
  echo "skipping TACO: $ARCHIVE not found (../shared/vendor is not beside the checkout)" >&2
  exit 3
fi
root=${DASHRANK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dashrank}
key=$( (sha256sum "$ARCHIVE" | cut -c1-16; echo "$SETTINGS" | sha256sum | cut -c1-8) | paste -sd-)
dir=$root/taco-$key
prefix=$dir/prefix
if [ -f "$dir/.complete" ]; then
  echo "$prefix"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "no cached TACO build at $dir (run: bash scripts/taco.sh)" >&2
  exit 3
fi

mkdir -p "$root"
exec 9>"$root/taco.lock"
flock 9
if [ -f "$dir/.complete" ]; then # built by another process while this one waited
  echo "$prefix"
  exit 0
fi

cmake=cmake
if ! command -v cmake >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing cmake (apt)" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake >&2
  else
    echo "== installing cmake (PyPI, into .venv)" >&2
    [ -x .venv/bin/python ] || python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check cmake >&2
    cmake=$PWD/.venv/bin/cmake
  fi
fi

echo "== building TACO from $ARCHIVE into $dir (once per machine; a few minutes)" >&2
rm -rf "$dir"
mkdir -p "$dir/src"
tar -xzf "$ARCHIVE" -C "$dir/src"
src=$dir/src/taco
# The archive has no git submodules; an empty pybind11 CMakeLists.txt passes TACO's check
# (shared/vendor/README.md).
mkdir -p "$src/python_bindings/pybind11"
touch "$src/python_bindings/pybind11/CMakeLists.txt"
"$cmake" -S "$src" -B "$src/build" "${CMAKE_FLAGS[@]}" -DCMAKE_INSTALL_PREFIX="$prefix" >&2
make -C "$src/build" -j"$(nproc)" taco taco-tool >&2
mkdir -p "$prefix/bin" "$prefix/lib" "$prefix/include"
cp -a "$src/build/lib/." "$prefix/lib/"
cp -a "$src/build/bin/taco" "$prefix/bin/"
cp -a "$src/include/." "$prefix/include/"
cp -a "$src/build/include/." "$prefix/include/"
"$prefix/bin/taco" "a(i)=b(i)+c(i)" >/dev/null
touch "$dir/.complete"
echo "== TACO ready: $prefix" >&2
echo "$prefix"
