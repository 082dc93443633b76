#!/usr/bin/env bash
# Installs the cargo tools the test suite needs, from crates.io into ~/.cargo/bin, when missing:
# cbindgen (pinned: the committed header must match its output byte for byte; used by
# scripts/gen-header.sh), cargo-c (pinned; `cargo cinstall` in scripts/install-capi.sh; Debian's
# cargo-c 0.9.14 cannot read today's Cargo.lock, version 4) and cargo-fuzz (scripts/fuzz.sh).
# Safe to re-run; prints nothing when all are present. scripts/test.sh runs it in the
# background while the Python sections leave a core idle.
#
#   bash scripts/tools.sh [cbindgen|cargo-c|cargo-fuzz]...
set -euo pipefail
CBINDGEN_VERSION=0.29.4
CARGO_C_VERSION=0.10.24
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(cbindgen cargo-c cargo-fuzz)
for tool in "${tools[@]}"; do
  case "$tool" in
    cbindgen)
      if ! command -v cbindgen >/dev/null \
         || [ "$(cbindgen --version | awk '{print $2}')" != "$CBINDGEN_VERSION" ]; then
        echo "== installing cbindgen $CBINDGEN_VERSION (crates.io)"
        cargo install cbindgen --locked --version "$CBINDGEN_VERSION" --quiet
      fi
      ;;
    cargo-c)
      # `cargo cinstall --version` prints e.g. "cargo-c 0.10.24+cargo-0.98.0".
      have=$(cargo cinstall --version 2>/dev/null | awk '{print $2}' || true)
      if [ "${have%%+*}" != "$CARGO_C_VERSION" ]; then
        echo "== installing cargo-c $CARGO_C_VERSION (crates.io; have: ${have:-none})"
        cargo install cargo-c --locked --version "$CARGO_C_VERSION" --quiet
      fi
      ;;
    cargo-fuzz)
      if ! command -v cargo-fuzz >/dev/null; then
        echo "== installing cargo-fuzz (crates.io)"
        cargo install cargo-fuzz --locked --quiet
      fi
      ;;
    *) echo "error: unknown tool '$tool' (expected cbindgen, cargo-c or cargo-fuzz)" >&2; exit 1 ;;
  esac
done
