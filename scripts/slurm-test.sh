#!/usr/bin/env bash
# The Slurm recipe of docs/scale-out.md on a real Slurm: starts a single-node cluster on this
# machine (scripts/slurm-cluster.sh), runs the doc's Slurm blocks as written in a scratch copy
# of the checkout (scripts/doc-blocks.py --slurm: an array job over the real WACO data with
# --shard auto, a merge job that depends on it, the merged report compared byte for byte
# with an unsharded run), then checks the shards' work against the partial reports: each
# shard's work (its log line) is the sum of nonzeros x measured lines of its matrices, the
# shards cover every file once, and their work differs by at most one matrix's. Stops the
# daemons it started. Without root, or without the packages (and no way to install them),
# it says so and skips (exit 0). Run after scripts/setup.sh.
#
#   bash scripts/slurm-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${DASHRANK_SHARED:-../shared}
if [ ! -d "$SHARED/data/waco/collected/SpMM" ] || [ ! -d models/waco-spmm ]; then
  echo "SKIPPED: the Slurm array test needs $SHARED/data/waco and models/waco-spmm (scripts/setup.sh)"
  exit 0
fi
target=$(realpath -m "${CARGO_TARGET_DIR:-target}")
cluster=$target/slurm/cluster
# The scratch copy scripts/doc-test.sh uses (builds are reused), outside the target directory.
scratch=${XDG_CACHE_HOME:-$HOME/.cache}/dashrank/doc-blocks-$(printf %s "$PWD" | sha256sum | cut -c1-12)
status=0
conf=$(bash scripts/slurm-cluster.sh start "$cluster") || status=$?
if [ $status -eq 3 ]; then
  echo "SKIPPED: the Slurm array test cannot start a Slurm cluster here (see the message above)"
  exit 0
elif [ $status -ne 0 ]; then
  exit $status
fi
trap 'bash scripts/slurm-cluster.sh stop "$cluster"' EXIT
eval "$conf"
echo "== single-node Slurm cluster up: $(sinfo -h -o '%P %D node(s) %c CPUs %T')"

PY=.venv/bin/python
"$PY" -c "import yaml" 2>/dev/null || .venv/bin/pip install --quiet --disable-pip-version-check pyyaml==6.0.3
"$PY" scripts/doc-blocks.py --slurm --scratch "$scratch" docs/scale-out.md

echo "== shard work against the partial reports"
"$PY" - "$scratch/repo" <<'PY'
import glob, json, os, re, sys
repo = sys.argv[1]
parts = glob.glob(os.path.join(repo, "parts", "*", "part-*.json"))
assert parts, f"no partial reports under {repo}/parts"
loads, units = {}, {}
for p in parts:
    r = json.load(open(p))
    shard = r["shard"]
    task = re.search(r"part-(\d+)\.json$", p).group(1)
    job = os.path.basename(os.path.dirname(p))
    log = open(os.path.join(repo, f"slurm-eval-{job}_{task}.out")).read()
    m = re.search(rf"^shard {re.escape(shard)}: (\d+) of (\d+) measured files, work (\d+) of (\d+)", log, re.M)
    assert m, f"task {task}: no shard line in its log:\n{log}"
    files, total, work = int(m.group(1)), int(m.group(2)), int(m.group(3))
    mine = {e["matrix"]: e["nnz"] * len(e["points"]) for e in r["matrices"]}
    assert files == len(r["matrices"]) + len(r["skipped"]), (p, files)
    assert work == sum(mine.values()), f"shard {shard}: log says work {work}, its matrices {mine}"
    loads[shard] = work
    units.update(mine)
n = int(next(iter(loads)).split("/")[1])
assert sorted(loads) == [f"{i}/{n}" for i in range(1, n + 1)], sorted(loads)
spread, largest = max(loads.values()) - min(loads.values()), max(units.values())
assert spread <= largest, f"shard work {loads} differs by {spread} > one matrix's {largest}"
print(f"{n} shards, work {sorted(loads.values(), reverse=True)} (nonzeros x measured lines): "
      f"spread {spread} <= the largest matrix's {largest}")
PY
echo "== slurm: ok"
