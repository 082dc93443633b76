#!/usr/bin/env bash
# README command 2: the whole test suite (Python exporter + Rust runtime on both backends),
# plus format and lint gates. Installs what it needs through scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${DASHRANK_SHARED:-../shared}
bash scripts/setup.sh

echo "== format and lint"
cargo fmt --all -- --check
cargo clippy --quiet --all-targets -- -D warnings
cargo clippy --quiet --all-targets --no-default-features --features onnxruntime -- -D warnings

echo "== Python exporter tests"
.venv/bin/python -m pytest onnx/tests -q

echo "== reference outputs of the real WACO models (numpy oracle)"
mkdir -p target/golden
if [ -d "$SHARED/data/waco/matrices" ]; then
  for pair in spmm:SpMM sddmm:SDDMM spmv:SpMV; do
    kernel=${pair%%:*}
    upper=${pair##*:}
    out="target/golden/waco-$kernel.json"
    if [ ! -f "$out" ] || [ "models/waco-$kernel/.converted" -nt "$out" ]; then
      sched="$SHARED/data/waco/collected/$upper"
      if [ -d "$sched" ]; then lines=(--schedules "$sched"); else lines=(--random 100 --seed 1); fi
      .venv/bin/python -m dashrank_onnx.golden --bundle "models/waco-$kernel" \
        --matrices "$SHARED/data/waco/matrices" "${lines[@]}" --out "$out"
    fi
  done
fi

echo "== Rust tests, tract backend (default features)"
cargo test --release --all-targets
cargo test --release --doc

echo "== C ABI: header, SONAME, C/C++ examples, valgrind, ASan"
bash scripts/ffi.sh

echo "== soak, short: one model, mixed calls over matrices of very different sizes (RSS, repeats)"
cargo run --release --quiet --example soak -- --calls 300 --every 100 --large-rows 65536

echo "== fuzz, short pass: every target briefly (long campaigns: docs/reliability.md)"
bash scripts/fuzz.sh --time 15

echo "== TVM FFI module: tvm_ffi.load_module from Python ranks SparseTIR configurations"
CARGO_TARGET_DIR=target bash scripts/tvm.sh

echo "== Rust tests, ONNX Runtime backend (libonnxruntime from the onnxruntime wheel)"
DASHRANK_ORT_LIB=$(bash scripts/ort-lib.sh) \
  cargo test --release --no-default-features --features onnxruntime,cli --all-targets
