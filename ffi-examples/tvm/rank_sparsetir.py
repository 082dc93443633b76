#!/usr/bin/env python3
"""Rank SparseTIR GPU SpMM configurations for a CSR matrix through dashrank's TVM FFI module.

What a SparseTIR/TVM user driving tuning from Python does: load ``libdashrank.so`` (built with
``--features tvm``) with ``tvm_ffi.load_module``, load a cost model, enumerate the SparseTIR
configurations for the matrix, rank them with the model's ``gpu-sparsetir/spmm`` head, and
build/measure only the top k. CSR arrays go in as numpy arrays (DLPack, borrowed, no copy);
results come back as DLPack tensors.

The script also checks the results: k results, indices in range, scores sorted by the head's
polarity and equal to the full score vector, int32 and int64 input agree, errors map to
``TypeError``/``ValueError``, and the ranking is identical to ``dashrank rank --json`` on the
same matrix and lines (when the CLI binary is available).

Usage (see scripts/tvm.sh):
    python ffi-examples/tvm/rank_sparsetir.py --lib target/release/libdashrank.so \
        [--cli target/release/dashrank] [--matrix m.csr] [--k 10]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import tvm_ffi

ROOT = Path(__file__).resolve().parents[2]
WACO_MATRICES = ROOT.parent / "shared" / "data" / "waco" / "matrices"
DEFAULT_MATRIX = WACO_MATRICES / "mhd4800a.csr"


def read_waco_csr(path: Path) -> tuple[int, int, np.ndarray, np.ndarray]:
    """WACO binary .csr: little-endian int32 nrows, ncols, nnz, indptr[nrows+1], indices[nnz]."""
    data = np.fromfile(path, dtype="<i4")
    nrows, ncols, nnz = (int(v) for v in data[:3])
    indptr = np.ascontiguousarray(data[3 : 4 + nrows])
    indices = np.ascontiguousarray(data[4 + nrows :])
    assert indices.size == nnz, f"{path}: header says {nnz} nonzeros, file has {indices.size}"
    return nrows, ncols, indptr, indices


def banded(n: int, half_width: int) -> tuple[int, int, np.ndarray, np.ndarray]:
    """A synthetic n x n banded pattern (int64), for when ../shared is absent."""
    rows = [np.arange(max(0, r - half_width), min(n, r + half_width + 1)) for r in range(n)]
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(r) for r in rows])
    return n, n, indptr, np.concatenate(rows).astype(np.int64)


def write_mtx(path: Path, nrows: int, ncols: int, indptr: np.ndarray, indices: np.ndarray) -> None:
    """Matrix Market pattern file of the CSR arrays (for the CLI comparison)."""
    with open(path, "w") as f:
        f.write("%%MatrixMarket matrix coordinate pattern general\n")
        f.write(f"{nrows} {ncols} {indices.size}\n")
        for r in range(nrows):
            for c in indices[indptr[r] : indptr[r + 1]]:
                f.write(f"{r + 1} {int(c) + 1}\n")


def expect_error(kind: type, fn, *args) -> str:
    """Calls fn(*args), which must raise `kind`; returns the message."""
    try:
        fn(*args)
    except kind as e:
        return str(e).splitlines()[-1] if str(e) else ""
    raise AssertionError(f"expected {kind.__name__}")


def main() -> int:
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    if not target.is_absolute():
        target = ROOT / target
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", type=Path, default=target / "release" / "libdashrank.so")
    ap.add_argument("--cli", type=Path, default=target / "release" / "dashrank",
                    help="dashrank CLI to compare with (skipped if missing)")
    ap.add_argument("--model", type=Path, default=ROOT / "tests/data/fixtures/tiny-cognate")
    ap.add_argument("--head", default="gpu-sparsetir/spmm")
    ap.add_argument("--matrix", type=Path, default=None,
                    help=f"WACO .csr file (default {DEFAULT_MATRIX.name} if present, else synthetic)")
    ap.add_argument("--synthetic", action="store_true",
                    help="use a synthetic banded matrix even when ../shared is present")
    ap.add_argument("--feat-size", type=int, default=128, help="SpMM dense columns (B is n x F)")
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()

    # --- the matrix, as numpy CSR arrays ---
    matrix_path = args.matrix or (DEFAULT_MATRIX if DEFAULT_MATRIX.is_file() else None)
    if args.synthetic:
        matrix_path = None
    if matrix_path is not None:
        nrows, ncols, indptr, indices = read_waco_csr(matrix_path)
        name = matrix_path.name
    else:
        nrows, ncols, indptr, indices = banded(2000, 3)
        name = "synthetic banded 2000 x 2000, half-width 3"
    nnz = int(indices.size)
    print(f"matrix {name}: {nrows} x {ncols}, {nnz} nonzeros, {indptr.dtype} indices")

    # --- load the module and the model ---
    mod = tvm_ffi.load_module(str(args.lib))
    model = mod.dashrank_load_model(str(args.model))
    heads = list(mod.dashrank_model_heads(model))
    assert args.head in heads, f"{args.head} not in {heads}"
    polarity = str(mod.dashrank_head_polarity(model, args.head))
    print(f"model {args.model.name}: heads {heads}; {args.head} is {polarity}")

    # --- the SparseTIR space for this matrix, as COGNATE unified lines ---
    lines, valid, default_index = mod.dashrank_sparsetir_space(
        "spmm", args.feat_size, nrows, ncols, nnz, True
    )
    lines = [str(s) for s in lines]
    valid = np.from_dlpack(valid)
    default_index = int(default_index)
    assert len(lines) == 288, len(lines)
    assert valid.dtype == np.int64 and valid.size > 0
    candidates = [lines[i] for i in valid]
    print(f"SparseTIR SpMM space: {len(lines)} configurations, {len(candidates)} valid, "
          f"default #{default_index}: {lines[default_index]}")

    # --- rank ---
    k = args.k
    idx_t, score_t = mod.dashrank_rank_csr(
        model, indptr, indices, nrows, ncols, args.head, candidates, k
    )
    idx, scores = np.from_dlpack(idx_t), np.from_dlpack(score_t)
    all_scores = np.from_dlpack(
        mod.dashrank_score_csr(model, indptr, indices, nrows, ncols, args.head, candidates)
    )

    print(f"top {k} of {len(candidates)} ({polarity}):")
    print(f"{'rank':>4} {'space#':>6} {'score':>12}  unified line")
    for r, (i, s) in enumerate(zip(idx, scores)):
        space_i = int(valid[i])
        mark = "  (default)" if space_i == default_index else ""
        print(f"{r + 1:>4} {space_i:>6} {s:>12.6f}  {candidates[i]}{mark}")
    if default_index in set(valid.tolist()):
        d = int(np.flatnonzero(valid == default_index)[0])
        better = all_scores < all_scores[d] if polarity == "lower_is_better" else all_scores > all_scores[d]
        print(f"default configuration: score {all_scores[d]:.6f}, predicted rank "
              f"{int(better.sum()) + 1} of {len(candidates)}")

    # --- sanity ---
    assert idx.dtype == np.int64 and scores.dtype == np.float32
    assert idx.shape == scores.shape == (min(k, len(candidates)),)
    assert ((idx >= 0) & (idx < len(candidates))).all() and len(set(idx.tolist())) == idx.size
    step = np.diff(scores)
    assert (step >= 0).all() if polarity == "lower_is_better" else (step <= 0).all(), scores
    assert all_scores.shape == (len(candidates),) and not np.isnan(all_scores).any()
    assert np.array_equal(all_scores[idx], scores)
    key = all_scores if polarity == "lower_is_better" else -all_scores
    assert np.array_equal(np.argsort(key, kind="stable")[: idx.size], idx)

    other = np.int64 if indptr.dtype == np.int32 else np.int32
    idx2, scores2 = (np.from_dlpack(t) for t in mod.dashrank_rank_csr(
        model, indptr.astype(other), indices.astype(other), nrows, ncols, args.head, candidates, k
    ))
    assert np.array_equal(idx, idx2) and np.array_equal(scores, scores2)
    print(f"ok: {idx.size} results, in range, sorted ({polarity}); int32 and int64 input agree")

    # --- errors map to Python exceptions ---
    msgs = [
        expect_error(TypeError, mod.dashrank_rank_csr, model, indptr.astype(np.float32),
                     indices.astype(np.float32), nrows, ncols, args.head, candidates, k),
        expect_error(ValueError, mod.dashrank_rank_csr, model, indptr, indices, nrows, ncols,
                     "no-such/head", candidates, k),
        expect_error(ValueError, mod.dashrank_rank_csr, model, indptr[::-1].copy(), indices,
                     nrows, ncols, args.head, candidates, k),
        expect_error(ValueError, mod.dashrank_sparsetir_space, "spmv", 128, nrows, ncols, nnz,
                     True),
    ]
    bad = mod.dashrank_score_csr(model, indptr, indices, nrows, ncols, args.head,
                                 ["not a schedule", candidates[0]])
    bad = np.from_dlpack(bad)
    assert np.isnan(bad[0]) and bad[1] == all_scores[0]
    print("ok: errors raise TypeError/ValueError:")
    for m in msgs:
        print(f"    {m}")

    # --- identical to the CLI on the same input ---
    if not args.cli.is_file():
        print(f"skipped CLI comparison: no {args.cli}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        cand_file = Path(tmp) / "candidates.txt"
        cand_file.write_text("\n".join(candidates) + "\n")
        if matrix_path is not None:
            mat_file = matrix_path
        else:
            mat_file = Path(tmp) / "m.mtx"
            write_mtx(mat_file, nrows, ncols, indptr, indices)
        env = dict(os.environ)
        # A CLI built with --features tvm links libtvm_ffi.
        libdir = str(Path(tvm_ffi.libinfo.find_libtvm_ffi()).parent)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (libdir, env.get("LD_LIBRARY_PATH", "")) if p
        )
        out = subprocess.run(
            [str(args.cli), "rank", "--model", str(args.model), "--head", args.head,
             "--matrix", str(mat_file), "--candidates", str(cand_file), "--top", str(k),
             "--json"],
            check=True, capture_output=True, text=True, env=env,
        ).stdout
    report = json.loads(out)[0]
    cli_idx = np.array([t["index"] for t in report["top"]], dtype=np.int64)
    cli_scores = np.array([t["score"] for t in report["top"]], dtype=np.float32)
    assert [t["schedule"] for t in report["top"]] == [candidates[i] for i in idx]
    assert np.array_equal(cli_idx, idx), (cli_idx, idx)
    assert np.array_equal(cli_scores, scores), (cli_scores, scores)
    print(f"ok: identical to `{args.cli.name} rank --json` (indices and float32 scores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
