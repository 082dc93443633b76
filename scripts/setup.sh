#!/usr/bin/env bash
# One-time set-up, safe to re-run: Python venv with the exporter (PyPI packages only), the
# WACO checkpoints in ../shared converted to dashrank bundles under models/, and the dashrank
# wheel (python/) built and installed (scripts/python.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${DASHRANK_SHARED:-../shared}

if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  python3 -m venv .venv
fi
if ! .venv/bin/python -c "import dashrank_onnx, onnxruntime, pytest" 2>/dev/null \
   || [ onnx/requirements.txt -nt .venv/.installed ] || [ onnx/pyproject.toml -nt .venv/.installed ]; then
  echo "== installing Python packages (PyPI)"
  .venv/bin/pip install --quiet --disable-pip-version-check -r onnx/requirements.txt
  .venv/bin/pip install --quiet --disable-pip-version-check -e ./onnx
  touch .venv/.installed
fi

# Convert the real WACO checkpoints (skipped with a message when ../shared is absent).
if [ -d "$SHARED/data/waco/weights" ]; then
  for pair in spmm:SpMM sddmm:SDDMM spmv:SpMV; do
    kernel=${pair%%:*}
    ckpt="$SHARED/data/waco/weights/${pair##*:}/resnet.pth"
    out="models/waco-$kernel"
    if [ ! -f "$out/.converted" ] || [ "$ckpt" -nt "$out/.converted" ] \
       || [ -n "$(find onnx/dashrank_onnx -newer "$out/.converted" -name '*.py' 2>/dev/null)" ]; then
      echo "== converting $ckpt -> $out"
      rm -rf "$out"
      .venv/bin/dashrank-export waco --checkpoint "$ckpt" --kernel "$kernel" --out "$out"
      touch "$out/.converted"
    fi
  done
else
  echo "note: $SHARED/data/waco not found; real-model bundles not converted"
fi

# The dashrank wheel, built once (release) and installed into .venv with its test packages.
bash scripts/python.sh > /dev/null
