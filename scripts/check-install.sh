#!/usr/bin/env bash
# Checks a C API install (scripts/install-capi.sh PREFIX, i.e. cargo cinstall): every file
# in its place, headers identical to include/, the SONAME libdashrank.so.<ABI>, the
# pkg-config version, and a library that is the C ABI crate only (no TVM FFI, no ONNX Runtime).
#
#   bash scripts/check-install.sh PREFIX
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:?usage: check-install.sh PREFIX}
abi=$(sed -n 's/^#define DASHRANK_ABI_VERSION \([0-9]*\)$/\1/p' include/dashrank.h)
version=$(sed -n 's/^#define DASHRANK_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' include/dashrank.h | paste -sd.)
fail() { echo "error: install in $prefix: $*" >&2; exit 1; }
for f in include/dashrank.h include/dashrank.hpp include/dashrank_taco.hpp \
         "lib/libdashrank.so.$abi" lib/libdashrank.so lib/libdashrank.a lib/pkgconfig/dashrank.pc \
         share/dashrank/cmake/dashrankConfig.cmake share/dashrank/cmake/dashrankConfigVersion.cmake; do
  [ -e "$prefix/$f" ] || fail "$f is missing"
done
for h in dashrank.h dashrank.hpp dashrank_taco.hpp; do
  cmp -s "include/$h" "$prefix/include/$h" || fail "include/$h differs from the checkout's"
done
soname=$(readelf -d "$prefix/lib/libdashrank.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libdashrank.so.$abi" ] || fail "SONAME '$soname', expected libdashrank.so.$abi (DASHRANK_ABI_VERSION)"
needed=$(readelf -d "$prefix/lib/libdashrank.so" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | paste -sd' ')
case "$needed" in *tvm* | *onnxruntime*) fail "libdashrank.so needs $needed: not the C ABI crate alone" ;; esac
if nm -D --defined-only "$prefix/lib/libdashrank.so" | grep -q ' __tvm_ffi_'; then
  fail "libdashrank.so exports TVM FFI functions: it is the TVM module, not the C library"
fi
pc=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --modversion dashrank)
[ "$pc" = "$version" ] || fail "dashrank.pc says $pc, the header $version"
echo "install ok: dashrank $version, SONAME $soname, needs: $needed"
