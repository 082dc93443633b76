#!/usr/bin/env bash
# Builds dashrank's TACO tools against the cached stock TACO (scripts/taco.sh) and the release
# C library: target/taco/dashrank-taco-measure (taco/measure.cpp, docs/taco.md). Prints the
# measurer's path on stdout. Exit status 3, with a message, when ../shared/vendor is missing.
#
#   bash scripts/taco-tools.sh
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
taco=$(bash scripts/taco.sh) || status=$?
if [ $status -ne 0 ]; then exit $status; fi
cargo build --release -p dashrank-capi --quiet
out=target/taco
mkdir -p "$out"
# The C library as installed (SONAME libdashrank.so.<ABI>), staged under target/taco/prefix.
bash scripts/install-capi.sh --no-build "$out/prefix" >&2
bin=$out/dashrank-taco-measure
if [ ! -x "$bin" ] || [ -n "$(find taco include target/release/libdashrank_capi.so -newer "$bin" 2>/dev/null | head -1)" ]; then
  echo "== building $bin" >&2
  g++ -std=c++17 -O2 -Wall -Wextra -Werror -I"$out/prefix/include" -isystem "$taco/include" -Itaco \
    taco/measure.cpp -L"$out/prefix/lib" -ldashrank -L"$taco/lib" -ltaco -fopenmp \
    -Wl,-rpath,"$PWD/$out/prefix/lib" -Wl,-rpath,"$taco/lib" -o "$bin"
fi
echo "$PWD/$bin"
