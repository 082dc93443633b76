"""Reference outputs of a (real) bundle on real matrices, for the Rust parity tests.

CLI:
    python -m dashrank_onnx.golden --bundle DIR --matrices DIR_OR_CSR [...] \\
        --schedules FILE_OR_DIR --out FILE.json [--head NAME] [--random N --seed S] [--limit N]

``--schedules`` is a text file of SuperSchedule lines (``= <ms>`` suffixes allowed) or a
directory of them (e.g. ``collected/SpMM``; a file named ``<matrix>.txt`` is used for that
matrix, the union of all files otherwise). ``--random N`` instead draws N valid lines from the
head's schema with ``--seed`` (used for SpMV, which has no collected data).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Dict, List

import numpy as np

from .bundle import read_bundle
from .reference import load_csr


def _read_lines(path: Path) -> List[str]:
    return [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]


def _f(a) -> list:
    return np.asarray(a, dtype=np.float32).astype(np.float64).tolist()


def build(bundle_dir, matrices: List[Path], schedules=None, head=None, random_n=0, seed=0, limit=None) -> dict:
    b = read_bundle(bundle_dir)
    if head is None:
        if len(b.heads) != 1:
            raise SystemExit(f"bundle has heads {sorted(b.heads)}; pass --head")
        head = next(iter(b.heads))
    h = b.heads[head]
    sched_src = Path(schedules) if schedules else None
    union = None
    out = {"format": "dashrank-golden-v1", "bundle": str(bundle_dir), "family": b.family,
           "model_name": b.model_name, "head": head, "shape_normalization": b.norm,
           "tolerance": {"conv_features": {"rtol": 1e-4, "atol": 1e-6},
                         "matrix_embedding": {"rtol": 1e-4, "atol": 1e-5},
                         "score": {"rtol": 1e-4, "atol": 1e-4}},
           "notes": "numpy reference (dashrank_onnx.reference) float32 results; scores[i] null for invalid lines",
           "matrices": []}
    for mpath in matrices:
        name = mpath.stem
        if random_n:
            lines = h.schema.random_lines(random_n, seed)
        elif sched_src is not None and sched_src.is_dir():
            f = sched_src / f"{name}.txt"
            if f.exists():
                lines = _read_lines(f)
            else:
                if union is None:
                    union = sorted({ln.partition("=")[0].strip() for p in sorted(sched_src.glob("*.txt"))
                                    for ln in _read_lines(p)})
                lines = union
        elif sched_src is not None:
            lines = _read_lines(sched_src)
        else:
            lines = []
        if limit:
            lines = lines[:limit]
        pat = load_csr(mpath)
        t0 = time.perf_counter()
        conv, shape, memb = b.embed_matrix(pat)
        t1 = time.perf_counter()
        _, _, sc, ok, errs = b.score(head, memb, lines)
        full = [None] * len(lines)
        for i, v in zip(ok, sc):
            full[i] = float(np.float32(v))
        out["matrices"].append({
            "name": name, "file": str(mpath), "rows": pat.rows, "cols": pat.cols, "nnz": pat.nnz,
            "shape_features": _f(shape[0]), "conv_features": _f(conv[0]), "matrix_embedding": _f(memb[0]),
            "schedules": lines, "scores": full,
            "errors": {str(i): str(e) for i, e in errs.items()},
            "reference_seconds": {"featurizer+matrix_embedder": t1 - t0},
        })
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dashrank_onnx.golden", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--matrices", required=True, nargs="+", help="directory of .csr files or .csr files")
    ap.add_argument("--schedules")
    ap.add_argument("--head")
    ap.add_argument("--random", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    mats: List[Path] = []
    for m in a.matrices:
        p = Path(m)
        mats += sorted(p.glob("*.csr")) if p.is_dir() else [p]
    if not a.schedules and not a.random:
        ap.error("give --schedules or --random N")
    g = build(a.bundle, mats, a.schedules, a.head, a.random, a.seed, a.limit)
    Path(a.out).write_text(json.dumps(g) + "\n")
    print(f"wrote {a.out}: {len(g['matrices'])} matrices")
    return 0


if __name__ == "__main__":
    sys.exit(main())
