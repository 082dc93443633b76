#!/usr/bin/env bash
# TVM FFI gate (run after scripts/setup.sh): installs the pinned `apache-tvm-ffi` into .venv if
# missing, builds the `dashrank-tvm` crate (libdashrank_tvm.so; the tvm-ffi crate's build runs
# `tvm-ffi-config`, so .venv/bin goes on PATH) and the CLI, then runs the Python example, which
# loads the module with `tvm_ffi.load_module`, checks that a Rust panic surfaces as an error,
# ranks the TACO, SPADE and SparseTIR spaces with the tiny-cognate fixture's heads (default
# always reported), tunes the TACO space with a Python measure function, and compares with
# `dashrank rank --space ... --json`.
#
# The build goes to $CARGO_TARGET_DIR, by default target/tvm (the TVM module links
# libtvm_ffi.so; the C library the C examples link never does).
#
# Extra arguments go to the example, e.g. `bash scripts/tvm.sh --k 5 --matrix m.csr`.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/tvm}
PY=.venv/bin/python
[ -x "$PY" ] || { echo "error: $PY missing; run: bash scripts/setup.sh" >&2; exit 1; }

REQ=ffi-examples/tvm/requirements.txt
want=$(sed -n 's/^apache-tvm-ffi==//p' "$REQ")
have=$("$PY" -c 'import importlib.metadata as m; print(m.version("apache-tvm-ffi"))' 2>/dev/null || true)
if [ "$have" != "$want" ]; then
  echo "== installing apache-tvm-ffi==$want into .venv (have: ${have:-none})"
  .venv/bin/pip install -q -r "$REQ"
fi
export PATH=$PWD/.venv/bin:$PATH
echo "== tvm-ffi-config --libdir: $(tvm-ffi-config --libdir)"

echo "== cargo build --release -p dashrank-tvm -p dashrank-cli (target dir $CARGO_TARGET_DIR)"
cargo build --release -p dashrank-tvm -p dashrank-cli
TARGET=$(cargo metadata --format-version 1 --no-deps \
  | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
LIB=$TARGET/release/libdashrank_tvm.so
for f in rank_csr prepare_space space_rank space_tune panic_check; do
  nm -D --defined-only "$LIB" | grep -q " __tvm_ffi_dashrank_$f\$" \
    || { echo "error: $LIB does not export __tvm_ffi_dashrank_$f" >&2; exit 1; }
done

echo "== ffi-examples/tvm/rank_spaces.py"
"$PY" ffi-examples/tvm/rank_spaces.py --lib "$LIB" --cli "$TARGET/release/dashrank" "$@"
