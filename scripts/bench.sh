#!/usr/bin/env bash
# Benchmarks (numbers in BENCHMARKS.md): the native featurizer (real matrices, generated corpus,
# full-size COGNATE) against numpy, and scoring throughput on tract and on ONNX Runtime. ort picks its backend once per process,
# so each backend is its own bench binary. Both are built first so that their scoring runs are
# back to back (the tract/onnxruntime ratio compares two processes). Extra arguments are passed
# to the tract run (section names: featurize, score). Output is also kept in target/bench/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ORT_LIB=$(bash scripts/ort-lib.sh)
mkdir -p target/bench
rm -f target/bench/score-tract.tsv target/bench/score-onnxruntime.tsv

echo "== building benches (tract, onnxruntime)"
cargo bench --quiet --bench bench_main --no-run
cargo bench --quiet --bench bench_main --no-default-features --features onnxruntime --no-run

echo "== featurizer: corpus and full-size COGNATE bundle (generated once, under target/ and models/)"
.venv/bin/python -m dashrank_onnx.corpus
[ -f models/cognate-full/featurizer.onnx ] || \
  .venv/bin/python -m dashrank_onnx.cognate --full-size --out models/cognate-full
cargo bench --quiet --bench featurize | tee target/bench/featurize.log

echo "== tract backend"
cargo bench --quiet --bench bench_main -- "$@" | tee target/bench/tract.log
echo "== ONNX Runtime backend ($ORT_LIB)"
DASHRANK_ORT_LIB="$ORT_LIB" cargo bench --quiet --bench bench_main \
  --no-default-features --features onnxruntime -- score | tee target/bench/onnxruntime.log
