"""Deterministic benchmark corpus of large synthetic sparsity patterns.

Writes WACO binary ``.csr`` files (see :func:`dashrank_onnx.reference.write_csr`) plus a
``manifest.json`` into ``--out`` (default ``target/corpus``; never committed)::

    python -m dashrank_onnx.corpus [--out target/corpus] [--only rmat-1m,uniform-1m] [--force]

Matrices (fixed seeds, so every run writes the same bytes):

==============  =====================================================  ==========
name            generator                                              nnz
==============  =====================================================  ==========
rmat-1m         R-MAT (a, b, c = .57, .19, .19), 2^18 × 2^18, 1.1 M     ≈ 1.07 M
                edges drawn, duplicates merged
rmat-10m        the same at 2^21 × 2^21, 11 M edges drawn               ≈ 10.8 M
uniform-1m      uniform random entries, 200 000 × 200 000               ≈ 1.0 M
uniform-10m     uniform random entries, 2 000 000 × 2 000 000           ≈ 10.0 M
laplace-10m     2-D 5-point Laplacian on a 1415 × 1415 grid             10.0 M
==============  =====================================================  ==========

The R-MAT and uniform patterns are graph-like: most 3×3 and 5×5 neighbourhoods hold one
entry, so the featurizer's receptive fields are mostly unique (the unstructured case).
A file that already exists with the manifest's size is kept unless ``--force``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Callable, Dict, Tuple

import numpy as np

from .reference import Pattern, write_csr


def _csr(rows: int, cols: int, r: np.ndarray, c: np.ndarray) -> Pattern:
    """CSR of the distinct (r, c) pairs, columns ascending within a row."""
    key = np.unique(r.astype(np.uint64) << np.uint64(32) | c.astype(np.uint64))
    rr = (key >> np.uint64(32)).astype(np.int64)
    cc = (key & np.uint64(0xFFFFFFFF)).astype(np.int32)
    row_ptr = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rr, minlength=rows), out=row_ptr[1:])
    return Pattern(rows, cols, row_ptr.astype(np.int32), cc)


def rmat(scale: int, m: int, seed: int, a=0.57, b=0.19, c=0.19) -> Pattern:
    """R-MAT: ``m`` edges, each picking one quadrant per level with probabilities a, b, c,
    1-a-b-c (duplicates merged)."""
    n = 1 << scale
    rng = np.random.default_rng(seed)
    r = np.zeros(m, dtype=np.uint32)
    col = np.zeros(m, dtype=np.uint32)
    for level in range(scale):
        u = rng.random(m, dtype=np.float32)
        bit = np.uint32(1 << (scale - 1 - level))
        down = u >= a + b                      # quadrants c and d: lower half
        right = ((u >= a) & (u < a + b)) | (u >= a + b + c)  # quadrants b and d
        r |= down.astype(np.uint32) * bit
        col |= right.astype(np.uint32) * bit
    return _csr(n, n, r, col)


def uniform(n: int, nnz: int, seed: int) -> Pattern:
    """``nnz`` entries drawn uniformly over an n × n matrix (duplicates merged)."""
    rng = np.random.default_rng(seed)
    r = rng.integers(0, n, size=nnz, dtype=np.uint32)
    c = rng.integers(0, n, size=nnz, dtype=np.uint32)
    return _csr(n, n, r, c)


def laplace2d(g: int) -> Pattern:
    """5-point stencil on a g × g grid, natural (row-major) ordering."""
    n = g * g
    i = np.arange(n, dtype=np.int64)
    x, y = i % g, i // g
    rs, cs = [i], [i]
    for ok, d in ((x > 0, -1), (x < g - 1, 1), (y > 0, -g), (y < g - 1, g)):
        rs.append(i[ok])
        cs.append(i[ok] + d)
    return _csr(n, n, np.concatenate(rs), np.concatenate(cs))


MATRICES: Dict[str, Tuple[str, Callable[[], Pattern]]] = {
    "rmat-1m": ("R-MAT .57/.19/.19, 2^18, 1.1M draws, seed 18", lambda: rmat(18, 1_100_000, 18)),
    "rmat-10m": ("R-MAT .57/.19/.19, 2^21, 11M draws, seed 21", lambda: rmat(21, 11_000_000, 21)),
    "uniform-1m": ("uniform, 200000^2, 1M draws, seed 5", lambda: uniform(200_000, 1_000_000, 5)),
    "uniform-10m": ("uniform, 2000000^2, 10M draws, seed 6", lambda: uniform(2_000_000, 10_000_000, 6)),
    "laplace-10m": ("2-D 5-point Laplacian, 1415^2 grid", lambda: laplace2d(1415)),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="target/corpus")
    ap.add_argument("--only", default="", help="comma-separated names (default: all)")
    ap.add_argument("--force", action="store_true", help="rewrite existing files")
    a = ap.parse_args(argv)
    names = [s for s in a.only.split(",") if s] or list(MATRICES)
    unknown = [s for s in names if s not in MATRICES]
    if unknown:
        ap.error(f"unknown matrix {unknown[0]!r} (known: {', '.join(MATRICES)})")
    os.makedirs(a.out, exist_ok=True)
    manifest_path = os.path.join(a.out, "manifest.json")
    manifest = {}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = json.load(f)
    for name in names:
        what, make = MATRICES[name]
        path = os.path.join(a.out, f"{name}.csr")
        old = manifest.get(name)
        if not a.force and old and os.path.exists(path) and os.path.getsize(path) == old["bytes"]:
            print(f"{name}: kept {path}")
            continue
        p = make()
        write_csr(path, p)
        manifest[name] = {"file": f"{name}.csr", "rows": p.rows, "cols": p.cols, "nnz": p.nnz,
                          "generator": what, "bytes": os.path.getsize(path)}
        print(f"{name}: {p.rows} x {p.cols}, {p.nnz} entries -> {path}")
        with open(manifest_path, "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
