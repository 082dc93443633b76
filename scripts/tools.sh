#!/usr/bin/env bash
# Installs the cargo tools the test suite needs, from crates.io into ~/.cargo/bin, when missing:
# cbindgen (pinned: the committed header must match its output byte for byte; used by
# scripts/gen-header.sh) and cargo-fuzz (scripts/fuzz.sh). Safe to re-run; prints nothing when
# both are present. scripts/test.sh runs it in the background while the Python sections leave
# a core idle.
#
#   bash scripts/tools.sh [cbindgen|cargo-fuzz]...
set -euo pipefail
CBINDGEN_VERSION=0.29.4
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(cbindgen cargo-fuzz)
for tool in "${tools[@]}"; do
  case "$tool" in
    cbindgen)
      if ! command -v cbindgen >/dev/null \
         || [ "$(cbindgen --version | awk '{print $2}')" != "$CBINDGEN_VERSION" ]; then
        echo "== installing cbindgen $CBINDGEN_VERSION (crates.io)"
        cargo install cbindgen --locked --version "$CBINDGEN_VERSION" --quiet
      fi
      ;;
    cargo-fuzz)
      if ! command -v cargo-fuzz >/dev/null; then
        echo "== installing cargo-fuzz (crates.io)"
        cargo install cargo-fuzz --locked --quiet
      fi
      ;;
    *) echo "error: unknown tool '$tool' (expected cbindgen or cargo-fuzz)" >&2; exit 1 ;;
  esac
done
