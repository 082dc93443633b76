#!/usr/bin/env bash
# Doc-block test: runs every command block of README.md and docs/*.md, compares the outputs
# the docs show and runs the CI workflows they give (scripts/doc-blocks.py says how blocks
# are annotated), each Markdown file in a scratch copy of the checkout. The Slurm blocks of
# docs/scale-out.md run in scripts/slurm-test.sh. Run after scripts/setup.sh.
#
#   bash scripts/doc-test.sh [FILE.md...]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || { echo "error: $PY missing; run: bash scripts/setup.sh" >&2; exit 1; }
if ! "$PY" -c "import yaml" 2>/dev/null; then
  echo "== installing pyyaml into .venv (PyPI), to read the docs' CI workflows"
  .venv/bin/pip install --quiet --disable-pip-version-check pyyaml==6.0.3
fi
if [ $# -eq 0 ]; then set -- README.md docs/*.md; fi
"$PY" scripts/doc-blocks.py "$@"
