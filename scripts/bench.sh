#!/usr/bin/env bash
# Benchmarks (numbers in BENCHMARKS.md): the native featurizer (real matrices, generated corpus,
# full-size COGNATE) against numpy (featurize), and the native dense-head engine against tract
# and against ONNX Runtime (heads). ort picks its backend once per process, so each reference
# is its own bench binary; both are built first so that their runs are back to back. Extra
# arguments are passed to the heads runs (sections: call, throughput, cache, space). Output is
# kept in target/bench/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ORT_LIB=$(bash scripts/ort-lib.sh)
mkdir -p target/bench

echo "== building benches"
cargo bench --quiet --bench featurize --no-run
cargo bench --quiet --bench heads --features tract --no-run
cargo bench --quiet --bench heads --features onnxruntime --no-run

echo "== featurizer: corpus and full-size COGNATE bundle (generated once, under target/ and models/)"
.venv/bin/python -m dashrank_onnx.corpus
[ -f models/cognate-full/featurizer.onnx ] || \
  .venv/bin/python -m dashrank_onnx.cognate --full-size --out models/cognate-full
cargo bench --quiet --bench featurize | tee target/bench/featurize.log
echo "== featurizer time by kind of work (perf; skipped where perf cannot sample)"
rc=0
bash scripts/featurize-profile.sh ../shared/data/waco/matrices/kim1.csr target/corpus/rmat-10m.csr \
  target/corpus/uniform-10m.csr > target/bench/featurize-profile.log || rc=$?
cat target/bench/featurize-profile.log
[ $rc -eq 0 ] || [ $rc -eq 2 ] || { echo "error: featurize-profile.sh failed ($rc)" >&2; exit 1; }

echo "== native heads vs tract"
cargo bench --quiet --bench heads --features tract -- "$@" | tee target/bench/heads-tract.log
echo "== native heads vs ONNX Runtime ($ORT_LIB)"
DASHRANK_ORT_LIB="$ORT_LIB" cargo bench --quiet --bench heads --features onnxruntime -- "$@" \
  | tee target/bench/heads-onnxruntime.log
