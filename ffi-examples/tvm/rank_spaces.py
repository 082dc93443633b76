#!/usr/bin/env python3
"""Rank and tune whole toolchain schedule spaces (TACO, SPADE, SparseTIR) from Python through
dashrank's TVM FFI module.

What a TVM/SparseTIR (or TACO/SPADE) user driving tuning from Python does: load
``libdashrank_tvm.so`` (the ``dashrank-tvm`` crate) with ``tvm_ffi.load_module``, load a cost
model, embed the CSR matrix once (numpy arrays in through DLPack, no copy), enumerate a
toolchain's space for it, rank it with the toolchain's default always reported, read each
candidate in the toolchain's own form, and tune: measure the top k and the default with a
Python function and keep the fastest.

The script also checks the results against the CLI (``dashrank rank --space ... --json`` and
``dashrank rank --candidates ... --json``, same indices, scores and toolchain text), checks
ranks, the default, the tuning outcome, and that errors map to ``ValueError``/``TypeError``.

The measure function times a real blocked CSR SpMM in numpy with the candidate's row split and
dense-column split read back from its TACO commands: a stand-in for compiling the command with
TACO. It declines k-outer loop orders (returns ``None``), which tuning skips.

Usage (see scripts/tvm.sh):
    python ffi-examples/tvm/rank_spaces.py --lib target/tvm/release/libdashrank_tvm.so \
        [--cli target/release/dashrank] [--matrix m.csr] [--k 5]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import tvm_ffi

ROOT = Path(__file__).resolve().parents[2]
WACO_MATRICES = ROOT.parent / "shared" / "data" / "waco" / "matrices"
DEFAULT_MATRIX = WACO_MATRICES / "mhd4800a.csr"
SPACES = ["taco-spmm", "spade-spmm", "spade-sddmm", "sparsetir-spmm"]
MAX_SPLIT = 8  # cut TACO's 611 712 schedules to 38 913 so the example runs in seconds


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


def spmm_timer(indptr: np.ndarray, indices: np.ndarray, nrows: int, ncols: int, dense: int = 16):
    """A measure function: times C = A @ B blocked by the TACO candidate's splits."""
    b = np.ones((ncols, dense), dtype=np.float32)
    row_of = np.repeat(np.arange(nrows), np.diff(indptr))

    def measure(index: int, toolchain: str, line: str, is_default: bool):
        # The candidate is a stock `taco` command line: C's modes and dimensions give the
        # splits (i0's and j0's extents), `reorder(...)` the loop order.
        result = re.match(r'taco "C\(([^)]*)\)', toolchain).group(1).split(",")
        dims = re.search(r"-d=C:([0-9,]+)", toolchain).group(1).split(",")
        extent = dict(zip(result, map(int, dims)))
        order = re.search(r"reorder\(([^)]*)\)", toolchain)
        order = order.group(1).split(",") if order else result
        first = lambda axis: next((n for n, v in enumerate(order) if v[0] == axis), len(order))
        if first("k") < first("i"):
            return None  # this kernel is row-outer only: a failed measurement, skipped
        isplit = extent.get("i0", 1)
        jsplit = min(extent.get("j0", dense), dense)
        block = max(isplit * 64, 256)  # rows per numpy step (the Python loop stays short)
        c = np.zeros((nrows, dense), dtype=np.float32)
        t0 = time.perf_counter()
        for r0 in range(0, nrows, block):
            p0, p1 = indptr[r0], indptr[min(r0 + block, nrows)]
            for j0 in range(0, dense, jsplit):
                np.add.at(c[:, j0 : j0 + jsplit], row_of[p0:p1], b[indices[p0:p1], j0 : j0 + jsplit])
        return (time.perf_counter() - t0) * 1e3

    return measure


def cli_json(cli: Path, args: list[str]) -> list:
    env = dict(os.environ)
    # A CLI built with --features tvm links libtvm_ffi.
    libdir = str(Path(tvm_ffi.libinfo.find_libtvm_ffi()).parent)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (libdir, env.get("LD_LIBRARY_PATH", "")) if p)
    out = subprocess.run([str(cli), *args], check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout)


def main() -> int:
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    if not target.is_absolute():
        target = ROOT / target
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", type=Path, default=target / "tvm" / "release" / "libdashrank_tvm.so")
    ap.add_argument("--cli", type=Path, default=target / "release" / "dashrank",
                    help="dashrank CLI to compare with (skipped if missing)")
    ap.add_argument("--model", type=Path, default=ROOT / "tests/data/fixtures/tiny-cognate")
    ap.add_argument("--matrix", type=Path, default=None,
                    help=f"WACO .csr file (default {DEFAULT_MATRIX.name} if present, else synthetic)")
    ap.add_argument("--synthetic", action="store_true",
                    help="use a synthetic banded matrix even when ../shared is present")
    ap.add_argument("--feat-size", type=int, default=128, help="SparseTIR feature size")
    ap.add_argument("--k", type=int, default=5)
    args = ap.parse_args()
    k = args.k

    # --- the matrix, as numpy CSR arrays ---
    matrix_path = None if args.synthetic else (args.matrix or (DEFAULT_MATRIX if DEFAULT_MATRIX.is_file() else None))
    if matrix_path is not None:
        nrows, ncols, indptr, indices = read_waco_csr(matrix_path)
        name = matrix_path.stem
    else:
        nrows, ncols, indptr, indices = banded(2000, 3)
        name = "banded2000"
    print(f"matrix {name}: {nrows} x {ncols}, {indices.size} nonzeros, {indptr.dtype} indices")

    mod = tvm_ffi.load_module(str(args.lib))
    # A Rust panic inside an export reaches Python as an error naming it; the module goes on.
    why = expect_error(Exception, mod.dashrank_panic_check, "on purpose")
    assert "dashrank_panic_check: on purpose" in why, why
    model = mod.dashrank_load_model(str(args.model))
    heads = list(mod.dashrank_model_heads(model))
    print(f"model {args.model.name}: heads {heads}")
    matrix = mod.dashrank_embed_csr(model, indptr, indices, nrows, ncols)

    # --- every space: rank with the default, read candidates in the toolchain's form ---
    prepared = {}
    for space in SPACES:
        p = mod.dashrank_prepare_space(model, matrix, space, "", args.feat_size, MAX_SPLIT)
        sname, head, n, ranked, default = mod.dashrank_space_summary(p)
        states, dup_of = (np.from_dlpack(t) for t in mod.dashrank_space_states(p))
        assert states.shape == (n,) and int((states == 0).sum()) == ranked
        assert all(int(dup_of[i]) < i for i in np.flatnonzero(states == 1))
        idx, scores, ranks, is_default = (np.from_dlpack(t) for t in mod.dashrank_space_rank(p, k))
        assert int(is_default.sum()) == 1 and int(idx[is_default == 1][0]) == default
        assert list(ranks[: min(k, ranked)]) == list(range(1, min(k, ranked) + 1)), ranks
        print(f"{sname}: {n} candidates, {ranked} ranked, head {head}; default #{default} "
              f"is {mod.dashrank_space_message(p, default)}")
        for i, s, r, d in zip(idx, scores, ranks, is_default):
            text = str(mod.dashrank_space_render(p, int(i), name))
            print(f"  {'default' if d else '#' + str(int(r)):>7}  {s:10.5f}  {text[:110]}")
        prepared[space] = (p, idx, scores, is_default)

    # --- tune TACO with a Python measure function ---
    p = prepared["taco-spmm"][0]
    measure = spmm_timer(indptr, indices, nrows, ncols)
    calls = []

    def logged(index, toolchain, line, is_default):
        calls.append((int(index), bool(is_default)))
        return measure(index, str(toolchain), str(line), is_default)

    tidx, tms, best, speedup = mod.dashrank_space_tune(p, k, name, logged)
    tidx, tms = np.from_dlpack(tidx), np.from_dlpack(tms)
    assert [c[0] for c in calls] == [int(i) for i in tidx]
    assert sum(c[1] for c in calls) == 1, "the default is measured once"
    ok_ms = tms[~np.isnan(tms)]
    print(f"tuned taco-spmm: {len(calls)} measured, {int(np.isnan(tms).sum())} skipped; "
          f"fastest #{int(best)} {np.nanmin(tms):.3f} ms, {float(speedup):.2f}x the TACO default")
    assert int(best) == int(tidx[np.nanargmin(tms)]) and ok_ms.min() == np.nanmin(tms)
    _, _, _, _, default = mod.dashrank_space_summary(p)
    d_ms = tms[list(tidx).index(default)]
    assert math.isnan(float(speedup)) if math.isnan(d_ms) else abs(float(speedup) - d_ms / ok_ms.min()) < 1e-9

    # A measure function that raises stops tuning with that exception.
    def broken(*_):
        raise RuntimeError("the measuring rig is offline")
    msg = expect_error(RuntimeError, mod.dashrank_space_tune, p, 2, name, broken)
    assert "offline" in msg, msg

    # --- errors map to Python exceptions ---
    msgs = [
        expect_error(ValueError, mod.dashrank_prepare_space, model, matrix, "spade-spmv", "", 0, 0),
        expect_error(ValueError, mod.dashrank_prepare_space, model, matrix, "spade-spgemm", "", 0, 0),
        expect_error(ValueError, mod.dashrank_prepare_space, model, matrix, "taco-sddmm", "", 0, 0),
        expect_error(ValueError, mod.dashrank_prepare_space, model, matrix, "spade-spmm", "cpu-taco/spmm", 0, 0),
        expect_error(ValueError, mod.dashrank_space_render, p, 10**9, name),
        expect_error(TypeError, mod.dashrank_embed_csr, model, indptr.astype(np.float32),
                     indices.astype(np.float32), nrows, ncols),
    ]
    print("ok: errors raise ValueError/TypeError:")
    for m in msgs:
        print(f"    {m}")

    # --- identical to the CLI on the same input ---
    if not args.cli.is_file():
        print(f"skipped CLI comparison: no {args.cli}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        if matrix_path is not None:
            mat_file = matrix_path
        else:
            mat_file = Path(tmp) / f"{name}.mtx"
            write_mtx(mat_file, nrows, ncols, indptr, indices)
        for space in SPACES:
            target_name, kernel = space.split("-")
            flags = ["--space", target_name, "--kernel", kernel, "--feat-size", str(args.feat_size)]
            if target_name == "taco":
                flags += ["--max-split", str(MAX_SPLIT)]
            report = cli_json(args.cli, ["rank", "--model", str(args.model), "--matrix", str(mat_file),
                                         "--top", str(k), "--format", "json", *flags])[0]
            p, idx, scores, _ = prepared[space]
            assert [e["index"] for e in report["entries"]] == list(idx), space
            assert np.array_equal(np.array([e["score"] for e in report["entries"]], dtype=np.float32), scores)
            assert [e["toolchain"] for e in report["entries"]] == [
                str(mod.dashrank_space_render(p, int(i), name)) for i in idx]
        # The line-list functions agree with `rank --candidates`.
        p = prepared["sparsetir-spmm"][0]
        lines = [str(s) for s in mod.dashrank_space_lines(p)]
        cand_file = Path(tmp) / "candidates.txt"
        cand_file.write_text("\n".join(lines) + "\n")
        ridx, rscores = (np.from_dlpack(t) for t in mod.dashrank_rank_csr(
            model, indptr, indices, nrows, ncols, "gpu-sparsetir/spmm", lines, k))
        report = cli_json(args.cli, ["rank", "--model", str(args.model), "--head", "gpu-sparsetir/spmm",
                                     "--matrix", str(mat_file), "--candidates", str(cand_file),
                                     "--top", str(k), "--json"])[0]
        assert [t["index"] for t in report["top"]] == list(ridx)
        assert np.array_equal(np.array([t["score"] for t in report["top"]], dtype=np.float32), rscores)
    print(f"ok: identical to `{args.cli.name} rank --space ... --json` for {', '.join(SPACES)} "
          f"and to `rank --candidates` (indices, float32 scores, toolchain text)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
