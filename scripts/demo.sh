#!/usr/bin/env bash
# README command 1: rank the measured SpMM schedules of a real matrix with the converted real
# WACO model and print the top candidates beside their measured runtimes.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${DASHRANK_SHARED:-../shared}
MATRIX=${1:-Trec6_16x16_9}
KERNEL=${2:-SpMM}
kernel=$(echo "$KERNEL" | tr A-Z a-z)
bash scripts/setup.sh
cargo build --release --quiet -p dashrank-cli
./target/release/dashrank rank \
  --model "models/waco-$kernel" \
  --matrix "$SHARED/data/waco/matrices/$MATRIX.csr" \
  --candidates "$SHARED/data/waco/collected/$KERNEL/$MATRIX.txt" \
  --top 10
