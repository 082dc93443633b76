#!/usr/bin/env bash
# Where the featurizer's time goes, by kind of work: samples a featurize run with `perf` and
# sums the samples of each function into neighbour maps (index work: coordinates, rulebooks,
# masks, keyed jobs), products (the SIMD conv kernels), pooling, buffers (copies, zeroing,
# allocation, page faults) and threads (rayon, waiting).
#
#   bash scripts/featurize-profile.sh [--graph waco|dash] [--threads N] [--repeats N] MATRIX.csr...
#
# Runs `examples/featurize_timing.rs` (random weights of the WACO or full-size DASH shape: the
# time depends only on the pattern and the graph shape) under `perf record` per matrix and
# prints one table row per matrix: the share of samples per kind. Functions that the
# compiler inlined count where they were inlined (a neighbour search inlined into a conv
# kernel counts as products), so the map share is a lower bound. `perf` must be installed
# and allowed to sample (perf_event_paranoid ≤ 2 for user code); otherwise the script says so
# and exits with status 2. The per-layer phase times of the same runs are in
# `cargo bench --bench featurize -- phases`.
set -euo pipefail
cd "$(dirname "$0")/.."

graph=waco
threads=2
repeats=3
matrices=()
while [ $# -gt 0 ]; do
  case "$1" in
    --graph) graph="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) matrices+=("$1"); shift ;;
  esac
done
[ ${#matrices[@]} -gt 0 ] || { echo "error: name at least one .csr matrix" >&2; exit 1; }
command -v perf >/dev/null || { echo "skipped: perf is not installed (Debian: linux-perf)" >&2; exit 2; }
if ! perf record -q -o /dev/null true 2>/dev/null; then
  echo "skipped: perf cannot sample here (see /proc/sys/kernel/perf_event_paranoid)" >&2
  exit 2
fi

cargo build --quiet --release --no-default-features --example featurize_timing
bin=target/release/examples/featurize_timing
out=target/profile
mkdir -p "$out"
echo "| matrix | graph | threads | samples | maps | products | pooling | buffers | threads/wait | other |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for m in "${matrices[@]}"; do
  [ -f "$m" ] || { echo "| $m | skipped: file not found |"; continue; }
  name=$(basename "$m" .csr)
  data="$out/$name-$graph.perf.data"
  perf record -q -F 499 -o "$data" "$bin" --graph "$graph" --threads "$threads" \
    --repeats "$repeats" "$m" > "$out/$name-$graph.timing.txt" 2>/dev/null
  perf report -i "$data" --no-children --sort symbol --stdio 2>/dev/null \
    | python3 scripts/featurize_profile_kinds.py "$name" "$graph" "$threads"
done
