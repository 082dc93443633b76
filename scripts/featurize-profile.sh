#!/usr/bin/env bash
# Where the featurizer's time goes, by kind of work: samples a featurize run's call stacks
# with `perf` and counts each sample for the first frame, from the leaf up, that names a kind:
# neighbour maps (index work: coordinates, rulebooks, masks, keyed jobs, band merges),
# products (the SIMD conv kernels), pooling sums, buffers (copies, zeroing, allocation, page
# faults) and threads (rayon's hand-offs and waiting); see scripts/featurize_profile_kinds.py.
#
#   bash scripts/featurize-profile.sh [--graph waco|dash] [--threads N] [--repeats N] MATRIX.csr...
#
# Runs `examples/featurize_timing.rs` (random weights of the WACO or full-size DASH shape: the
# time depends only on the pattern and the graph shape) under `perf record` per matrix and
# prints one table row per matrix: the share of samples per kind, and maps + buffers together.
# The example is built with frame pointers (into target/profile-build, so the normal build is
# untouched) for the stacks. Code the compiler inlined counts where it was inlined (a
# neighbour search inlined into a conv kernel counts as products). `perf` must be installed
# and allowed to sample (perf_event_paranoid ≤ 2 for user code); otherwise the script says so
# and exits with status 2. Per-layer wall time by phase: `cargo bench --bench featurize --
# phases`.
set -euo pipefail
cd "$(dirname "$0")/.."

graph=waco
threads=2
repeats=5
matrices=()
while [ $# -gt 0 ]; do
  case "$1" in
    --graph) graph="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) matrices+=("$1"); shift ;;
  esac
done
[ ${#matrices[@]} -gt 0 ] || { echo "error: name at least one .csr matrix" >&2; exit 1; }
command -v perf >/dev/null || { echo "skipped: perf is not installed (Debian: linux-perf)" >&2; exit 2; }
if ! perf record -q -o /dev/null true 2>/dev/null; then
  echo "skipped: perf cannot sample here (see /proc/sys/kernel/perf_event_paranoid)" >&2
  exit 2
fi

RUSTFLAGS="${RUSTFLAGS:-} -C force-frame-pointers=yes" cargo build --quiet --release \
  --no-default-features --example featurize_timing --target-dir target/profile-build
bin=target/profile-build/release/examples/featurize_timing
out=target/profile
mkdir -p "$out"
echo "| matrix | graph | threads | samples | maps | products | pooling | buffers | threads/wait | other | maps + buffers |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for m in "${matrices[@]}"; do
  [ -f "$m" ] || { echo "| $m | skipped: file not found |"; continue; }
  name=$(basename "$m" .csr)
  data="$out/$name-$graph.perf.data"
  perf record -q -g -F 999 -o "$data" "$bin" --graph "$graph" --threads "$threads" \
    --repeats "$repeats" "$m" > "$out/$name-$graph.timing.txt" 2>/dev/null
  perf script -i "$data" -F tid,ip,sym 2>/dev/null \
    | python3 scripts/featurize_profile_kinds.py "$name" "$graph" "$threads"
done
