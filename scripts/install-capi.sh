#!/usr/bin/env bash
# Installs the C API into PREFIX (default /usr/local) with cargo-c, built from this checkout's
# sources (never a library left in target/ by another build, e.g. one with other features):
#   lib/libdashrank.so.<ABI>.0.0, its links libdashrank.so.<ABI> (the SONAME) and libdashrank.so,
#   lib/libdashrank.a, lib/pkgconfig/dashrank.pc,
#   include/dashrank.h, dashrank.hpp (C++ RAII) and dashrank_taco.hpp (needs TACO),
#   share/dashrank/cmake/dashrankConfig.cmake + dashrankConfigVersion.cmake (find_package).
# The same as `cargo cinstall -p dashrank-capi --release --locked --prefix PREFIX --libdir lib`
# (capi/Cargo.toml's [package.metadata.capi] says what goes where); extra arguments go to
# cargo cinstall (e.g. --libdir lib/x86_64-linux-gnu, --destdir DIR, --features tract).
# Installs the pinned cargo-c first when it is missing (scripts/tools.sh).
#
#   bash scripts/install-capi.sh [PREFIX] [CARGO-CINSTALL-ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--no-build" ]; then
  echo "error: --no-build is gone: it installed whatever target/ held (a stale library, or one" \
    "built with other features); cargo cinstall rebuilds only what changed" >&2
  exit 1
fi
prefix=$(realpath -m "${1:-/usr/local}")
shift || true
libdir=(--libdir lib)
for arg in "$@"; do
  case "$arg" in --libdir | --libdir=*) libdir=() ;; esac
done
bash scripts/tools.sh cargo-c
# A target directory of its own: cargo-c builds with its own settings, and sharing the
# build scripts and proc macros of target/release with plain cargo builds would make each
# rebuild everything after the other.
target=$(realpath -m "${CARGO_TARGET_DIR:-target}")/cinstall
cargo cinstall -p dashrank-capi --release --locked --target-dir "$target" --prefix "$prefix" "${libdir[@]}" "$@"
abi=$(sed -n 's/^#define DASHRANK_ABI_VERSION \([0-9]*\)$/\1/p' include/dashrank.h)
version=$(sed -n 's/^#define DASHRANK_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' include/dashrank.h | paste -sd.)
echo "installed dashrank $version (C ABI $abi) into $prefix"
