#!/usr/bin/env bash
# Installs the C API into PREFIX (default /usr/local): include/dashrank.h, the C++ headers
# dashrank.hpp and dashrank_taco.hpp (the latter needs TACO's headers and libtaco),
# lib/libdashrank.so.<ABI> (+ libdashrank.so symlink), lib/libdashrank.a and
# lib/pkgconfig/dashrank.pc. Builds the release library first unless --no-build.
#   bash scripts/install-capi.sh [--no-build] [PREFIX]
set -euo pipefail
cd "$(dirname "$0")/.."
build=1
if [ "${1:-}" = "--no-build" ]; then build=0; shift; fi
prefix=$(realpath -m "${1:-/usr/local}")
if [ $build = 1 ]; then cargo build --release -p dashrank-capi; fi
abi=$(sed -n 's/^#define DASHRANK_ABI_VERSION \([0-9]*\)$/\1/p' include/dashrank.h)
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
# Libraries the static archive needs (from `rustc --print native-static-libs` on Linux).
private_libs="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"
mkdir -p "$prefix/include" "$prefix/lib/pkgconfig"
install -m 644 include/dashrank.h include/dashrank.hpp include/dashrank_taco.hpp "$prefix/include/"
install -m 755 target/release/libdashrank_capi.so "$prefix/lib/libdashrank.so.$abi"
ln -sf "libdashrank.so.$abi" "$prefix/lib/libdashrank.so"
install -m 644 target/release/libdashrank_capi.a "$prefix/lib/libdashrank.a"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" -e "s|@PRIVATE_LIBS@|$private_libs|" \
  dashrank.pc.in > "$prefix/lib/pkgconfig/dashrank.pc"
echo "installed dashrank $version (ABI $abi) into $prefix"
