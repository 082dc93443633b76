#!/usr/bin/env bash
# Regenerates include/dashrank.h from capi/src/ with cbindgen (pinned version, installed from
# crates.io into ~/.cargo/bin by scripts/tools.sh when missing). `--check` fails if the
# committed header is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/tools.sh cbindgen
out=include/dashrank.h
if [ "${1:-}" = "--check" ]; then
  tmp=$(mktemp)
  trap 'rm -f "$tmp"' EXIT
  cbindgen --quiet --config cbindgen.toml --output "$tmp" capi/src/lib.rs
  if ! diff -u "$out" "$tmp"; then
    echo "error: $out is stale; run: bash scripts/gen-header.sh" >&2
    exit 1
  fi
  # Also fails on uncommitted edits to include/ when run inside a git checkout.
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1 && git ls-files --error-unmatch "$out" >/dev/null 2>&1; then
    git diff --exit-code -- include/ || { echo "error: include/ differs from the committed header" >&2; exit 1; }
  fi
else
  cbindgen --quiet --config cbindgen.toml --output "$out" capi/src/lib.rs
  echo "wrote $out"
fi
