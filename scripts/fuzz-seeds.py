#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/ (standard library
only; run from anywhere). Seeds come from the committed fixtures (bundle files, golden
schedule lines, bad inputs), WACO's collected SuperSchedules in ../shared when present,
small hand-made examples of each text format, random programs for the graph generator, and
the minimized corpora of finished campaigns kept under fuzz/kept/<target>/ (see
docs/reliability.md). Existing corpus files are kept."""
import hashlib
import json
import os
import random
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("DASHRANK_SHARED", os.path.join(ROOT, "..", "shared"))
FIXTURES = ["tiny-waco-spmm", "tiny-waco-fp16", "tiny-dash", "tiny-cognate"]  # fuzz/src order


def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(ROOT, "fuzz", "corpus", target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def csr_bytes(nrows, ncols, rows):
    row_ptr, cols = [0], []
    for r in range(nrows):
        cols.extend(sorted(rows.get(r, [])))
        row_ptr.append(len(cols))
    return struct.pack(f"<{3 + len(row_ptr) + len(cols)}i", nrows, ncols, len(cols), *row_ptr, *cols)


def golden_lines():
    out = {}
    for fx in FIXTURES:
        g = json.load(open(os.path.join(ROOT, "tests/data/fixtures", fx, "golden.json")))
        for head, h in g["heads"].items():
            out.setdefault(head, []).extend(s["line"] for s in h["schedules"])
    return out


def seed_matrices(rng):
    """Matrix Market and WACO .csr: the bad inputs, every header kind, a few random CSRs."""
    bad = os.path.join(ROOT, "tests/data/bad")
    # Matrix Market.
    for p in [os.path.join(bad, "malformed.mtx"), os.path.join(ROOT, "ffi-examples/data/band96.mtx")]:
        put("mtx", open(p, "rb").read())
    for field in ["pattern", "real", "integer", "complex"]:
        for sym in ["general", "symmetric", "skew-symmetric", "hermitian"]:
            vals = {"pattern": "", "real": " 1.5", "integer": " 7", "complex": " 1.0 -2.0"}[field]
            body = "".join(f"{r} {c}{vals}\n" for r, c in [(2, 1), (3, 1), (4, 3)])
            put("mtx", f"%%MatrixMarket matrix coordinate {field} {sym}\n% c\n4 4 3\n{body}")
    put("mtx", "\ufeff%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n")
    put("mtx", b"%%MatrixMarket matrix coordinate pattern general\n% caf\xe9\n2147483647 2147483647 1\n1 1\n")

    # WACO .csr.
    for name in sorted(os.listdir(bad)):
        if name.endswith(".csr"):
            put("waco_csr", open(os.path.join(bad, name), "rb").read())
    for n in [1, 5, 17]:
        rows = {r: rng.sample(range(n), min(n, 1 + r % 3)) for r in range(n) if r % 4 != 3}
        put("waco_csr", csr_bytes(n, n, rows))


def seed_schedules():
    """Schedule lines against every schema, TACO commands, SPADE CSV, SparseTIR JSON."""
    # Schedule lines: the selector byte picks the schema; every kind of line with each.
    lines = golden_lines()
    collected = []
    for kernel in ["SpMM", "SDDMM"]:
        d = os.path.join(SHARED, "data/waco/collected", kernel)
        if os.path.isdir(d):
            for name in sorted(os.listdir(d))[:2]:
                collected.extend(open(os.path.join(d, name)).read().splitlines()[:3])
    every = [l for ls in lines.values() for l in ls[:6]] + collected
    for sel in range(12):
        for i in range(0, len(every), 3):
            put("schedule_lines", bytes([sel]) + "\n".join(every[i:i + 3]).encode())

    # TACO commands and SuperSchedule lines (selector: 0 SpMM, 1 SDDMM, 2 SpMV).
    taco = ("OMP_NUM_THREADS=48 OMP_SCHEDULE=dynamic,16 -f=A:ssds:2,3,0,1 -s=split(i,i1,i0,16) "
            "-s=split(k,k1,k0,256) -s=split(j,j1,j0,1) -s=reorder(k1,k0,i1,i0,j1,j0) "
            "-s=parallelize(i1,CPUThread,NoRaces)")
    put("taco_commands", bytes([0]) + taco.encode())
    put("taco_commands", bytes([0]) + b"16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16")
    for line in collected[:6] + lines.get("cpu-taco/spmm", [])[:4]:
        put("taco_commands", bytes([0]) + line.encode())

    # SPADE CSV.
    put("spade_csv", "a, 4, 1024, 32, 0, 1, 1, 1.5\nb, 2048, NUM_MATRIX_COLS, 256, 1, 0, 0\n")
    put("spade_csv", "c, 256, 65536, 256, 1, 1, 1\n144, 4, 1024, 1, 0, 0, 0, 38.83592")

    # SparseTIR JSON.
    one = {"kernel": "spmm", "row_tile": 8, "thread_x": 32, "coarsen": 2, "group": 1,
           "order": "reduction_outer", "bind_k1": True, "unroll": True}
    put("sparsetir_json", json.dumps(one))
    put("sparsetir_json", json.dumps([one, dict(one, kernel="sddmm", bind_k1=False, group=4)]))


def seed_models(rng):
    """Bundle files, C call sequences and generated dense graphs."""
    # Bundles: [fixture, file] + the unchanged file (file order: sorted names; the last index
    # is the manifest).
    for i, fx in enumerate(FIXTURES):
        d = os.path.join(ROOT, "tests/data/fixtures", fx)
        names = sorted(n for n in os.listdir(d) if n.endswith(".onnx"))
        for j, n in enumerate(names):
            put("bundle", bytes([i, j]) + open(os.path.join(d, n), "rb").read())
        put("bundle", bytes([i, len(names)]) + open(os.path.join(d, "manifest.json"), "rb").read())

    # C call sequences: random op streams.
    for _ in range(24):
        put("capi_sequence", bytes(rng.randrange(256) for _ in range(rng.randrange(8, 96))))

    # Generated dense graphs (fuzz/src/graphs.rs): [slot, flags] + a program, one op per few
    # bytes; random programs for each slot, and a 4096-wide layer with and without a ReLU
    # (past the target's load budget with it).
    for slot in range(3):
        for _ in range(8):
            put("onnx_graph", bytes([slot, 1]) + bytes(rng.randrange(256) for _ in range(rng.randrange(8, 160))))
    put("onnx_graph", bytes([2, 1, 0, 0, 0, 0xff, 5, 0, 0, 0, 0, 5, 2]))
    put("onnx_graph", bytes([2, 1, 0, 0, 0, 0xff]))


def seed_kept():
    """The corpora kept from finished campaigns: a new campaign continues from them."""
    kept = os.path.join(ROOT, "fuzz", "kept")
    for target in sorted(os.listdir(kept)) if os.path.isdir(kept) else []:
        for name in sorted(os.listdir(os.path.join(kept, target))):
            with open(os.path.join(kept, target, name), "rb") as f:
                put(target, f.read())


def main():
    rng = random.Random(20240601)
    seed_matrices(rng)
    seed_schedules()
    seed_models(rng)
    seed_kept()
    return 0


if __name__ == "__main__":
    sys.exit(main())
