"""Share of each WACO layer's output points that are alone in their window.

For the stride-2, 3-wide convs of the WACO featurizer (conv1 … conv13), counts for every
output point how many input points its nine offsets reach, and prints the share of output
points that reach exactly one (their own). BENCHMARKS.md §1 ("Where the rewrite should
start") quotes it for the generated corpus:

    .venv/bin/python scripts/isolation.py target/corpus/uniform-1m.csr target/corpus/rmat-1m.csr

Pure numpy over the coordinates, independent of the Rust featurizer; its point counts per
layer equal the ones `DASHRANK_TRACE=1` prints.
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "onnx"))
from dashrank_onnx.reference import load_csr  # noqa: E402


def isolation(path, layers=13):
    """[(layer, output points, share alone)] for conv1 … conv{layers}."""
    p = load_csr(path)
    rows = np.repeat(np.arange(p.rows, dtype=np.int64), np.diff(p.row_ptr))
    pts = (rows << 32) | p.col_idx.astype(np.int64)  # sorted, unique
    out = []
    for layer in range(1, layers + 1):
        t = 1 << (layer - 1)  # input tensor stride
        snap = ~np.int64(2 * t - 1)
        outs = np.unique((((pts >> 32) & snap) << 32) | ((pts & 0xFFFFFFFF) & snap))
        reached = np.zeros(outs.size, np.int32)
        for dr in (-t, 0, t):
            for dc in (-t, 0, t):
                reached += np.isin(outs + (np.int64(dr) << 32) + dc, pts, assume_unique=True)
        out.append((layer, outs.size, float(np.mean(reached == 1))))
        pts = outs
    return out


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        cells = [f"conv{layer} {n} pts {100 * share:.1f} % alone" for layer, n, share in isolation(arg)]
        print(f"{Path(arg).name}: " + "; ".join(cells))
