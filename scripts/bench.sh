#!/usr/bin/env bash
# Benchmarks (numbers in BENCHMARKS.md): the native featurizer against the numpy reference
# (bench_main), and the native dense-head engine against tract and against ONNX Runtime
# (heads). ort picks its backend once per process, so each reference is its own bench binary;
# both are built first so that their runs are back to back. Output is kept in target/bench/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ORT_LIB=$(bash scripts/ort-lib.sh)
mkdir -p target/bench

echo "== building benches"
cargo bench --quiet --bench bench_main --no-run
cargo bench --quiet --bench heads --features tract --no-run
cargo bench --quiet --bench heads --features onnxruntime --no-run

echo "== featurizer vs numpy"
cargo bench --quiet --bench bench_main -- featurize | tee target/bench/featurize.log
echo "== native heads vs tract"
cargo bench --quiet --bench heads --features tract -- "$@" | tee target/bench/heads-tract.log
echo "== native heads vs ONNX Runtime ($ORT_LIB)"
DASHRANK_ORT_LIB="$ORT_LIB" cargo bench --quiet --bench heads --features onnxruntime -- "$@" \
  | tee target/bench/heads-onnxruntime.log
