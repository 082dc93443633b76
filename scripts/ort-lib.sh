#!/usr/bin/env bash
# Prints the path of libonnxruntime shipped in the onnxruntime PyPI wheel inside .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python - <<'PY'
import glob, os, onnxruntime
capi = os.path.join(os.path.dirname(onnxruntime.__file__), "capi")
libs = sorted(glob.glob(os.path.join(capi, "libonnxruntime.so*")) + glob.glob(os.path.join(capi, "libonnxruntime*.dylib")))
if not libs:
    raise SystemExit("libonnxruntime not found in " + capi)
print(libs[0])
PY
