#!/usr/bin/env bash
# Builds dashrank's TACO tools against the cached stock TACO (scripts/taco.sh) and the C
# library installed with cargo-c: target/taco/dashrank-taco-measure (taco/measure.cpp,
# docs/taco.md). Prints the measurer's path on stdout. Exit status 3, with a message, when ../shared/vendor is missing.
#
#   bash scripts/taco-tools.sh
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
taco=$(bash scripts/taco.sh) || status=$?
if [ $status -ne 0 ]; then exit $status; fi
out=target/taco
mkdir -p "$out"
# The C library as installed (cargo cinstall; SONAME libdashrank.so.<ABI>), staged under
# target/taco/prefix. The measurer loads it at run time, so a newer library needs no relink.
bash scripts/install-capi.sh "$out/prefix" >&2
bin=$out/dashrank-taco-measure
if [ ! -x "$bin" ] || [ -n "$(find taco include/ -newer "$bin" 2>/dev/null | head -1)" ]; then
  echo "== building $bin" >&2
  g++ -std=c++17 -O2 -Wall -Wextra -Werror -I"$out/prefix/include" -isystem "$taco/include" -Itaco \
    taco/measure.cpp -L"$out/prefix/lib" -ldashrank -L"$taco/lib" -ltaco -fopenmp \
    -Wl,-rpath,"$PWD/$out/prefix/lib" -Wl,-rpath,"$taco/lib" -o "$bin"
fi
echo "$PWD/$bin"
