#!/usr/bin/env bash
# C ABI gate (run after scripts/setup.sh): checks that the committed header is current,
# installs the C API into a staging prefix with cargo-c (scripts/install-capi.sh) and checks
# what was installed (scripts/check-install.sh: files, SONAME, no TVM), then builds the C and
# C++ examples and the threaded C test through pkg-config and runs them plainly, under
# valgrind, and under AddressSanitizer (static lib), and the CMake example
# (ffi-examples/cmake, find_package) against the same prefix.
# The C TACO driver ranks WACO's whole SpMM space for a real matrix and tunes it through stock
# TACO with a C callback (when scripts/taco-tools.sh built the measurer); under valgrind and
# ASan the space is cut (MAX_SPLIT) to keep the runs short.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${DASHRANK_SHARED:-../shared}
MODEL=models/waco-spmm
COGNATE=tests/data/fixtures/tiny-cognate
OUT=target/ffi
PREFIX=$PWD/$OUT/prefix
[ -d "$MODEL" ] || { echo "error: $MODEL missing; run: bash scripts/setup.sh" >&2; exit 1; }

need=()
command -v valgrind >/dev/null || need+=(valgrind)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v gcc >/dev/null || need+=(gcc)
command -v g++ >/dev/null || need+=(g++)
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing ${need[*]} (apt)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi

echo "== header is current"
bash scripts/gen-header.sh --check

echo "== cargo cinstall into $PREFIX"
rm -rf "$PREFIX"
bash scripts/install-capi.sh "$PREFIX"
bash scripts/check-install.sh "$PREFIX"
abi=$(sed -n 's/^#define DASHRANK_ABI_VERSION \([0-9]*\)$/\1/p' include/dashrank.h)
export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
CFLAGS_DR=$(pkg-config --cflags dashrank)
LIBS_DR=$(pkg-config --libs dashrank)
STATIC_DR="$PREFIX/lib/libdashrank.a $(pkg-config --variable=libdir dashrank >/dev/null; pkg-config --libs --static dashrank | sed 's/-ldashrank//')"
WARN="-Wall -Wextra -Werror"
RPATH="-Wl,-rpath,$PREFIX/lib"

echo "== build (shared library, via pkg-config)"
gcc -std=c11 $WARN -O1 -g $CFLAGS_DR ffi-examples/c/taco_driver.c $LIBS_DR $RPATH -o $OUT/taco_driver
gcc -std=c11 $WARN -O1 -g $CFLAGS_DR ffi-examples/c/abi_test.c $LIBS_DR -lpthread $RPATH -o $OUT/abi_test
gcc -std=c11 $WARN -O1 -g $CFLAGS_DR ffi-examples/c/space_test.c $LIBS_DR -lpthread $RPATH -o $OUT/space_test
g++ -std=c++17 $WARN -O1 -g $CFLAGS_DR ffi-examples/cpp/rank.cpp $LIBS_DR -lpthread $RPATH -o $OUT/rank_cpp
g++ -std=c++17 $WARN -O1 -g $CFLAGS_DR ffi-examples/cpp/spaces.cpp $LIBS_DR -lpthread $RPATH -o $OUT/spaces_cpp
gcc -std=c11 $WARN -O1 -g $CFLAGS_DR ffi-examples/c/misuse.c $LIBS_DR -lpthread $RPATH -o $OUT/misuse
echo "== build (AddressSanitizer, static library)"
gcc -std=c11 $WARN -O1 -g -fsanitize=address -fno-omit-frame-pointer $CFLAGS_DR ffi-examples/c/taco_driver.c $STATIC_DR -o $OUT/taco_driver_asan
gcc -std=c11 $WARN -O1 -g -fsanitize=address -fno-omit-frame-pointer $CFLAGS_DR ffi-examples/c/abi_test.c $STATIC_DR -lpthread -o $OUT/abi_test_asan
gcc -std=c11 $WARN -O1 -g -fsanitize=address -fno-omit-frame-pointer $CFLAGS_DR ffi-examples/c/space_test.c $STATIC_DR -lpthread -o $OUT/space_test_asan
g++ -std=c++17 $WARN -O1 -g -fsanitize=address -fno-omit-frame-pointer $CFLAGS_DR ffi-examples/cpp/rank.cpp $STATIC_DR -lpthread -o $OUT/rank_cpp_asan
g++ -std=c++17 $WARN -O1 -g -fsanitize=address -fno-omit-frame-pointer $CFLAGS_DR ffi-examples/cpp/spaces.cpp $STATIC_DR -lpthread -o $OUT/spaces_cpp_asan
gcc -std=c11 $WARN -O1 -g -fsanitize=address -fno-omit-frame-pointer $CFLAGS_DR ffi-examples/c/misuse.c $STATIC_DR -lpthread -o $OUT/misuse_asan

echo "== misuse suite covers every export of the header"
missing=$(grep -o 'dashrank_[a-z0-9_]*(' include/dashrank.h | sort -u | tr -d '(' |
  while read -r f; do grep -q "$f(" ffi-examples/c/misuse.c || echo "$f"; done)
if [ -n "$missing" ]; then
  echo "error: ffi-examples/c/misuse.c has no case for: $missing" >&2
  exit 1
fi

# Real data: a real WACO matrix (converted to .mtx for the C driver's own reader) and its
# measured SuperSchedules for the C++ example.
MATRIX=Trec6_16x16_9
REAL_CSR=$SHARED/data/waco/matrices/$MATRIX.csr
REAL_LINES=$SHARED/data/waco/collected/SpMM/$MATRIX.txt
SMALL=ffi-examples/data/band96.mtx
if [ -f "$REAL_CSR" ]; then
  python3 - "$REAL_CSR" "$OUT/$MATRIX.mtx" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
r, c, n = struct.unpack_from("<3i", b)
rp = struct.unpack_from(f"<{r+1}i", b, 12)
ci = struct.unpack_from(f"<{n}i", b, 12 + 4 * (r + 1))
with open(sys.argv[2], "w") as f:
    f.write(f"%%MatrixMarket matrix coordinate pattern general\n{r} {c} {n}\n")
    for i in range(r):
        f.write("".join(f"{i+1} {ci[k]+1}\n" for k in range(rp[i], rp[i+1])))
PY
  REAL_MTX=$OUT/$MATRIX.mtx
else
  echo "note: $REAL_CSR not found; running on the bundled small matrix only"
  REAL_CSR=$SMALL REAL_MTX=$SMALL
  REAL_LINES=$OUT/lines.txt
  printf '%s\n' "16 8 8 i1 k1 i0 k0 j1 j0 1 0 0 0 i1 48 16" "32 1 1 i1 k1 i0 k0 j1 j0 1 0 0 0 i1 48 1" > "$REAL_LINES"
fi

# The driver tunes through stock TACO when the measurer is built (scripts/taco-tools.sh).
if [ -x target/taco/dashrank-taco-measure ]; then
  export DASHRANK_TACO_MEASURE=$PWD/target/taco/dashrank-taco-measure
else
  echo "note: target/taco/dashrank-taco-measure not built (no ../shared/vendor): the TACO driver ranks and prints without tuning"
fi
echo "== C: TACO driver, WACO's whole SpMM space (611 712 schedules) for real matrix $MATRIX"
$OUT/taco_driver $MODEL "$REAL_MTX" 5
echo "== C++: RAII wrapper, measured SuperSchedules of $MATRIX"
$OUT/rank_cpp $MODEL "$REAL_CSR" "$REAL_LINES" 10
echo "== C++: every space with a head, the COGNATE fixture (TACO space cut at 8)"
$OUT/spaces_cpp $COGNATE "$REAL_CSR" 3 8
echo "== C: misuse paths and one model shared by 4 pthreads"
$OUT/abi_test $MODEL $SMALL 4
echo "== C: schedule-space calls (statuses, default, tuning, misuse, threads)"
$OUT/space_test $COGNATE $SMALL
echo "== C: misuse suite (NULLs, buffers, lifetimes, bad values; 8 threads x 1000 calls)"
FIXTURE=tests/data/fixtures/tiny-waco-spmm
$OUT/misuse $MODEL $FIXTURE 8 1000

echo "== CMake: find_package(dashrank CONFIG) from the prefix; C (shared, static) and C++"
command -v cmake >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake; }
cmake_example() { # PREFIX BUILD-DIR: configures and builds ffi-examples/cmake against PREFIX
  rm -rf "$2"
  cmake -S ffi-examples/cmake -B "$2" -DCMAKE_PREFIX_PATH="$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$2.log" \
    || { cat "$2.log"; return 1; }
  grep -- "-- dashrank" "$2.log"
  cmake --build "$2" > "$2.build.log" 2>&1 || { cat "$2.build.log"; return 1; }
}
cmake_example "$PREFIX" "$OUT/cmake"
# The same ranking from every build: the C example shared and static, the C++ one (CMake), and
# the C++ one built through pkg-config above.
$OUT/rank_cpp $MODEL "$REAL_CSR" "$REAL_LINES" 5 | grep '^#' > "$OUT/top-pkgconfig.txt"
for exe in rank_c rank_c_static rank_cpp; do
  "$OUT/cmake/$exe" $MODEL "$REAL_CSR" "$REAL_LINES" 5 | grep '^#' > "$OUT/top-$exe.txt"
  cmp "$OUT/top-pkgconfig.txt" "$OUT/top-$exe.txt" \
    || { echo "error: $exe (CMake) ranks differently from rank_cpp (pkg-config)" >&2; exit 1; }
done
[ -s "$OUT/top-pkgconfig.txt" ] || { echo "error: the examples ranked nothing" >&2; exit 1; }
readelf -d "$OUT/cmake/rank_c" | grep -q "NEEDED.*\[libdashrank.so.$abi\]" \
  || { echo "error: rank_c does not load libdashrank.so.$abi" >&2; exit 1; }
if readelf -d "$OUT/cmake/rank_c_static" | grep -q "NEEDED.*libdashrank"; then
  echo "error: rank_c_static loads libdashrank: dashrank::dashrank_static is not the archive" >&2; exit 1
fi
echo "CMake: rank_c (libdashrank.so.$abi), rank_c_static (libdashrank.a) and rank_cpp rank as pkg-config's build"
# Relocatable: the package found from a copy of the prefix points into the copy; a multiarch
# libdir (cargo-c's default on Debian) is found too; a newer version than installed is refused.
moved=$PWD/$OUT/moved
rm -rf "$moved" && cp -a "$PREFIX" "$moved"
cmake_example "$moved" "$OUT/cmake-moved" | grep -q "$moved/lib/libdashrank.so" \
  || { echo "error: the CMake package of a moved prefix does not point into it" >&2; exit 1; }
multiarch=$(gcc -print-multiarch)
if [ -n "$multiarch" ]; then
  ma=$PWD/$OUT/multiarch
  rm -rf "$ma" && mkdir -p "$ma/lib/$multiarch"
  cp -a "$PREFIX/include" "$PREFIX/share" "$ma/"
  cp -a "$PREFIX/lib/." "$ma/lib/$multiarch/"
  cmake_example "$ma" "$OUT/cmake-multiarch" | grep -q "lib/$multiarch/libdashrank.so" \
    || { echo "error: the CMake package does not find the library in lib/$multiarch" >&2; exit 1; }
  "$OUT/cmake-multiarch/rank_c_static" $MODEL "$REAL_CSR" "$REAL_LINES" 5 | grep '^#' | cmp - "$OUT/top-pkgconfig.txt"
fi
mkdir -p "$OUT/cmake-version"
printf 'cmake_minimum_required(VERSION 3.16)\nproject(v NONE)\nfind_package(dashrank 0.99 CONFIG REQUIRED)\n' \
  > "$OUT/cmake-version/CMakeLists.txt"
if cmake -S "$OUT/cmake-version" -B "$OUT/cmake-version/build" -DCMAKE_PREFIX_PATH="$PREFIX" > "$OUT/cmake-version.log" 2>&1; then
  echo "error: find_package(dashrank 0.99) accepted the installed 0.x" >&2; exit 1
fi
grep -q "version: 0\." "$OUT/cmake-version.log" || { cat "$OUT/cmake-version.log"; exit 1; }
echo "CMake: relocatable, multiarch libdir found, find_package(dashrank 0.99) refused"

VG="valgrind -q --error-exitcode=1 --leak-check=full --suppressions=ffi-examples/valgrind.supp"
echo "== valgrind"
$VG $OUT/taco_driver $MODEL $SMALL 3 2 > /dev/null
$VG $OUT/abi_test $MODEL $SMALL 2 > /dev/null
$VG $OUT/rank_cpp $MODEL $SMALL "$REAL_LINES" 3 > /dev/null
$VG $OUT/spaces_cpp $COGNATE $SMALL 2 2 > /dev/null
$VG $OUT/space_test $COGNATE $SMALL > /dev/null
$VG $OUT/misuse $FIXTURE $MODEL 2 40 > /dev/null
echo "valgrind: clean"

echo "== AddressSanitizer (+ LeakSanitizer)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/ffi-examples/lsan.supp:print_suppressions=0
$OUT/taco_driver_asan $MODEL "$REAL_MTX" 3 4 > /dev/null
$OUT/abi_test_asan $MODEL $SMALL 4 > /dev/null
$OUT/rank_cpp_asan $MODEL "$REAL_CSR" "$REAL_LINES" 3 > /dev/null
$OUT/spaces_cpp_asan $COGNATE "$REAL_CSR" 3 4 > /dev/null
$OUT/space_test_asan $COGNATE $SMALL > /dev/null
$OUT/misuse_asan $MODEL $FIXTURE 8 1000 > /dev/null
echo "asan: clean"
echo "== ffi: ok"
