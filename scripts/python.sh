#!/usr/bin/env bash
# The dashrank wheel (python/: maturin, release, abi3 for CPython >= 3.9): builds it into
# $CARGO_TARGET_DIR/wheels (default target/wheels) and installs it into .venv, with the
# pinned packages its tests use (python/requirements-test.txt, PyPI only). Run by
# scripts/setup.sh, after .venv exists; safe to re-run: cargo rebuilds what changed, and the
# wheel is reinstalled only when its package files change. Prints the wheel's path on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
PIP=(.venv/bin/pip install --quiet --disable-pip-version-check)
[ -x .venv/bin/python ] || { echo "error: .venv missing; run: bash scripts/setup.sh" >&2; exit 1; }

REQ=python/requirements-test.txt
if [ ! -f .venv/.python-installed ] || [ "$REQ" -nt .venv/.python-installed ] \
   || [ ffi-examples/tvm/requirements.txt -nt .venv/.python-installed ]; then
  echo "== installing the Python test packages (PyPI): $REQ" >&2
  "${PIP[@]}" -r "$REQ"
  touch .venv/.python-installed
fi

wheels=$(realpath -m "${CARGO_TARGET_DIR:-target}")/wheels
echo "== maturin build --release (python/) -> $wheels" >&2
# Each build replaces the wheel of this version; the newest is the one installed.
(cd python && ../.venv/bin/maturin build --release --quiet --out "$wheels" >&2)
wheel=$(ls -t "$wheels"/dashrank-*.whl | head -1)
# The package's files (the wheel's SBOM has a fresh serial number in every build).
sum=$(unzip -p "$wheel" 'dashrank/*' | sha256sum | cut -d' ' -f1)
if [ "$(cat .venv/.dashrank-wheel 2>/dev/null)" != "$sum" ]; then
  echo "== installing $wheel into .venv" >&2
  "${PIP[@]}" --force-reinstall --no-deps "$wheel"
  echo "$sum" > .venv/.dashrank-wheel
fi
echo "$wheel"
