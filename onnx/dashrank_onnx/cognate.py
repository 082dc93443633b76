"""COGNATE / DASH cost models (seeds 000 and 001: the same method) as dashrank bundles.

Architecture (seed 001 §3 and appendix F, Tables 5/6; ``docs/bundle-format.md`` for the files):

* **Input featurizer (IFE)** — :func:`~dashrank_onnx.export.dash_layers`: 12 sparse convs in 4
  blocks (L1 in→32 k5; L2 32→32; L3 32→64 + max pool; L4–L5 64→64; L6 64→128 + max pool;
  L7–L8 128→128; L9 128→256 + max pool; L10–L12 256→256; k3 from L2 on), ReLU after every conv,
  global average pool of the last layer only (F = 256). The papers give neither strides nor
  activations: convs are stride 1 and the three max pools (kernel 2, stride 2: MinkowskiEngine's
  stride-map pooling, ``docs/bundle-format.md`` §3.1) are the only down-sampling (total stride 8),
  since Table 5 lists the pools as the block boundaries; ReLU as in WACO. No conv bias (ME's
  default, as in WACO).
* **Matrix embedder** — WACO's: shape (rows, cols, nnz) standardized → MLP 3→64→32; concat with
  the F pooled features → MLP → 256 → 128 (``Em = 128``, Table 6's "Matrix Embedding (x) 128").
* **Schedule embedder of a head** (:class:`~dashrank_onnx.reference.CognateScheduleEmbedder`):
  the head's schema parses a COGNATE *unified* line (``src/schedule/space/cognate.rs``,
  ``Unified::to_line``: ``I J K loop_1..loop_7 <heterogeneous values>``); the first 52 encoded
  columns (``log2 I, log2 J, log2 K`` + the 7×7 one-hot of the loop order) go to the
  **configuration mapper FM** (MLP 52 → 64 → 64, shared by every head: each head file holds an
  identical copy), the remaining columns (the heterogeneous fields, as ``choice`` indices) to
  the head's **latent encoder LE** (the encoder half of its autoencoder: MLP H → 64 → 64);
  output ``concat(config embedding 64, latent 64)``.
* **Predictor of a head** — MLP over ``concat(matrix embedding, config embedding, latent)``
  → 128 → 64 → 1 (ReLU between), ``lower_is_better`` (pairwise margin ranking loss).

Dimension notes. The papers' "Configuration Embedding (y) 53 → 64" counts 53 inputs; the
unified form as our schema encodes it has 3 + 7·7 = **52** mapper columns (the papers do not
say how their 53 is made up — possibly the 7 loop numbers and some extra column). Table 6's
concatenation "128 + 64 = 192" disagrees with its own rows (128 + 64 + 64 = 256); we use 256.
No trained COGNATE checkpoint is public, so bundles written here carry seeded random weights;
every dimension is read back from the files by the runtime, never assumed.

CLI (seeded random weights, real or tiny dimensions)::

    python -m dashrank_onnx.cognate --out models/cognate-random [--full-size] [--seed 1] \\
        [--heads cpu-taco/spmm,spade/spmm,gpu-sparsetir/spmm] [--fp16]
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from .export import build_featurizer, dash_layers
from .reference import (CognateScheduleEmbedder, Head, MatrixEmbedder, Model, Predictor, Schema)

MEANING = "pairwise ranking score (hinge, margin 1); comparable within one matrix only"

# --------------------------------------------------------------------------------------
# The unified form (mirror of src/schedule/space/cognate.rs and the spaces it maps)
# --------------------------------------------------------------------------------------

#: The seven unified segments in numbering order: segment ``s`` has number ``s + 1``.
SEGMENTS = ["i1", "i2", "j1", "j2", "k1", "k2", "k3"]
#: Largest accepted split: SPADE's ``J`` is ``NUM_MATRIX_COLS`` for the all-columns panel, and
#: pattern coordinates are below 2**31 (``docs/bundle-format.md`` §3.1, the featurizer's limit).
SPLIT_MAX = 2 ** 31 - 1
#: Columns of the homogeneous part: I, J, K (1 each) + the 7×7 loop-order one-hot.
MAPPER_WIDTH = 3 + len(SEGMENTS) ** 2

TARGETS = ("cpu-taco", "spade", "gpu-sparsetir")
KERNELS = ("spmm", "sddmm")


def _pow2(upto: int) -> List[int]:
    return [1 << p for p in range(upto.bit_length()) if (1 << p) <= upto]


# Heterogeneous fields per (target, kernel), in the order `ToUnified` appends them; the values
# are everything the Rust space can emit (see the comments for where each list comes from).
HETERO: Dict[Tuple[str, str], List[Tuple[str, List[int]]]] = {
    # SuperSchedule → unified (π_a1): format flags of A's levels x1 x0 y1 y0 (WACO names, 0 =
    # Compressed, 1 = Uncompressed), the parallel loop's *unified* segment number (validate()
    # allows any outer loop x1: SpMM i1→1, k1→j1=3, j1→k1=5; SDDMM i1→1, j1→3, k1→5), threads
    # (TacoSpace::waco: 48) and the OpenMP chunk (TacoSpace::waco: 1…256 SpMM, 1…32 SDDMM).
    ("cpu-taco", "spmm"): [("i1f", [0, 1]), ("i0f", [0, 1]), ("k1f", [0, 1]), ("k0f", [0, 1]),
                           ("paridx", [1, 3, 5]), ("parnum", [48]), ("parchunk", _pow2(256))],
    ("cpu-taco", "sddmm"): [("i1f", [0, 1]), ("i0f", [0, 1]), ("j1f", [0, 1]), ("j0f", [0, 1]),
                            ("paridx", [1, 3, 5]), ("parnum", [48]), ("parchunk", _pow2(32))],
    # SpadeConfig → unified (φ): the three flags.
    ("spade", "spmm"): [("barrier", [0, 1]), ("bypass", [0, 1]), ("reorder", [0, 1])],
    ("spade", "sddmm"): [("barrier", [0, 1]), ("bypass", [0, 1]), ("reorder", [0, 1])],
    # GpuConfig → unified (π_a3): SparseTirSpace::enumerate's lists.
    ("gpu-sparsetir", "spmm"): [("thread_x", [16, 32]), ("coarsen", [1, 2, 4]), ("group", [1]),
                                ("bind_k1", [0, 1]), ("unroll", [0, 1])],
    ("gpu-sparsetir", "sddmm"): [("thread_x", [8, 16, 32]), ("coarsen", [1, 2, 4]), ("group", [1, 2]),
                                 ("bind_k1", [0]), ("unroll", [0, 1])],
}


def unified_fields() -> List[dict]:
    """The homogeneous fields every COGNATE head shares (52 encoded columns)."""
    split = {"kind": "integer", "min": 1, "max": SPLIT_MAX, "encode": "log2"}
    return [{"name": "i_split", **split}, {"name": "j_split", **split}, {"name": "k_split", **split},
            {"name": "loop_order", "kind": "permutation", "symbols": [str(i) for i in range(1, 8)]}]


def cognate_schema(target: str, kernel: str) -> Schema:
    """Schema of a head's unified lines: ``I J K loop_1..loop_7 <heterogeneous…>``."""
    fields = unified_fields()
    fields += [{"name": n, "kind": "choice", "values": list(v)} for n, v in HETERO[(target, kernel)]]
    return Schema({"name": f"cognate-unified-{target}-{kernel}", "version": 1, "text_format": "waco",
                   "fields": fields})


def _unified(splits: Sequence[int], order: Sequence[str], hetero: Sequence[int]) -> str:
    if sorted(order) != sorted(SEGMENTS):
        raise ValueError(f"loop order {order} is not a permutation of {SEGMENTS}")
    nums = [SEGMENTS.index(s) + 1 for s in order]
    return " ".join(str(int(v)) for v in [*splits, *nums, *hetero])


def _insert_after(order: List[str], after: str, dummy: str) -> None:
    p = order.index(after) + 1 if after in order else len(order)
    order.insert(p, dummy)


# SPADE (src/schedule/space/spade.rs)
SPADE_ROW_PANELS = [4, 32, 256, 2048]
SPADE_COLUMN_PANELS = [1024, 16384, 65536]
SPADE_SPLITS = [32, 256]


def spade_unified(row_panels: int, column_width: int, split: int, barrier: int, bypass: int,
                  reorder: int) -> str:
    """φ for SPADE; ``column_width`` is the resolved column panel (``NUM_MATRIX_COLS`` → ncols)."""
    omega = ["k2", "j2", "i2", "i1", "j1", "k1"] if barrier else ["k2", "i2", "j2", "i1", "j1", "k1"]
    _insert_after(omega, "k2", "k3")
    return _unified([row_panels, column_width, split], omega, [int(barrier), int(bypass), int(reorder)])


def spade_lines(ncols: int) -> List[str]:
    """The 256 unified lines of ``Mapped(SpadeSpace)`` for a matrix with ``ncols`` columns
    (SpadeSpace::enumerate order)."""
    out = []
    for r in SPADE_ROW_PANELS:
        for c in SPADE_COLUMN_PANELS + [min(ncols, 2 ** 32 - 1)]:
            for s in SPADE_SPLITS:
                for bits in range(8):
                    out.append(spade_unified(r, c, s, bits >> 2 & 1, bits >> 1 & 1, bits & 1))
    return out


# GPU / SparseTIR (src/schedule/space/sparsetir.rs)
GPU_SPACE = {"spmm": {"row_tile": [1, 2, 4, 8, 16, 32], "thread_x": [16, 32], "group": [1], "bind_k1": [0, 1]},
             "sddmm": {"row_tile": [1, 2, 4, 8], "thread_x": [8, 16, 32], "group": [1, 2], "bind_k1": [0]}}
_GPU_ORDERS = {("spmm", 0): ["i1", "i2", "k1", "k3", "j1", "k2"], ("spmm", 1): ["i1", "i2", "k1", "k3", "k2", "j1"],
               ("sddmm", 0): ["i1", "i2", "k1", "j1", "k2", "k3"], ("sddmm", 1): ["i1", "i2", "j1", "k1", "k2", "k3"]}


def gpu_unified(kernel: str, row_tile: int, thread_x: int, coarsen: int, group: int, reduction_inner: int,
                bind_k1: int, unroll: int) -> str:
    """π_a3 for a SparseTIR configuration (GPU ``j`` ↦ ``j1``, the dummy ``j'`` ↦ ``j2``)."""
    omega = list(_GPU_ORDERS[(kernel, int(reduction_inner))])
    _insert_after(omega, "j1", "j2")
    k = min(thread_x * coarsen, 2 ** 32 - 1)
    return _unified([row_tile, 1, k], omega, [thread_x, coarsen, group, int(bind_k1), int(unroll)])


def gpu_lines(kernel: str) -> List[str]:
    """The 288 unified lines of ``Mapped(SparseTirSpace)`` (SparseTirSpace::enumerate order)."""
    g = GPU_SPACE[kernel]
    return [gpu_unified(kernel, r, tx, c, grp, o, b, u)
            for r in g["row_tile"] for tx in g["thread_x"] for c in (1, 2, 4) for grp in g["group"]
            for o in (0, 1) for b in g["bind_k1"] for u in (0, 1)]


# CPU / TACO (src/schedule/space/taco.rs): WACO axis → unified axis, by role.
_WACO_AXES = {"spmm": "ikj", "sddmm": "ijk"}
_WACO_ROLE = {"spmm": {"i": "i", "k": "j", "j": "k"}, "sddmm": {"i": "i", "j": "j", "k": "k"}}


def waco_unified(kernel: str, line: str) -> str:
    """π_a1 for a WACO SuperSchedule line (``x1``/``x0`` ↦ ``x1``/``x2``, ``k3`` after ``k2``)."""
    toks = line.partition("=")[0].split()
    if len(toks) != 16:
        raise ValueError(f"{kernel} SuperSchedule needs 16 tokens, got {len(toks)}")
    axes, role = _WACO_AXES[kernel], _WACO_ROLE[kernel]
    splits = dict(zip(axes, (int(t) for t in toks[:3])))

    def seg(name: str) -> str:
        return role[name[0]] + ("2" if name[1] == "0" else "1")

    omega = [seg(v) for v in toks[3:9]]
    _insert_after(omega, "k2", "k3")
    inv = {u: w for w, u in role.items()}
    par = SEGMENTS.index(seg(toks[13])) + 1
    hetero = [int(t) for t in toks[9:13]] + [par, int(toks[14]), int(toks[15])]
    return _unified([splits[inv["i"]], splits[inv["j"]], splits[inv["k"]]], omega, hetero)


def taco_order_allowed(kernel: str, order: Sequence[str], dense_split: int) -> bool:
    """TacoSpace::order_allowed (WACO generators' ``filter``)."""
    pos = {v: i for i, v in enumerate(order)}
    axes = _WACO_AXES[kernel]
    if any(pos[f"{a}1"] > pos[f"{a}0"] for a in axes):
        return False
    d = "j" if kernel == "spmm" else "k"
    d1, d0 = pos[f"{d}1"], pos[f"{d}0"]
    last = (d1 == 4 and d0 == 5) if dense_split < 8 else d0 == 5
    return last and (kernel != "spmm" or d1 > pos["i1"])


def taco_lines(kernel: str, exhaustive: bool = False) -> Iterator[str]:
    """WACO SuperSchedule lines of ``TacoSpace::waco(kernel)``. ``exhaustive=False`` yields a
    covering subset (every split combination × allowed order once, with the format flags and
    chunk cycling, plus every flags × chunk combination once), enough to see every value of
    every unified field; ``True`` yields the whole space (611 712 / 544 320 lines)."""
    axes = _WACO_AXES[kernel]
    lists = [_pow2(32), _pow2(32), _pow2(128)]
    chunks = _pow2(32) if kernel == "sddmm" else _pow2(256)
    dense_i = axes.index("j" if kernel == "spmm" else "k")
    loop_vars = [f"{a}{x}" for a in axes for x in "10"]
    orders = list(itertools.permutations(loop_vars))
    flags = [f for f in range(16) if not (kernel == "sddmm" and f == 15)]
    fc = [(f, c) for f in flags for c in chunks]
    n = 0
    for splits in itertools.product(*lists):
        for order in orders:
            if not taco_order_allowed(kernel, order, splits[dense_i]):
                continue
            par = "i1"
            if kernel == "sddmm":
                par = next(v for v in order if v in ("i1", "j1"))
            combos = fc if exhaustive or n == 0 else [fc[n % len(fc)]]
            for f, c in combos:
                bits = [(f >> s) & 1 for s in (3, 2, 1, 0)]
                yield " ".join([*map(str, splits), *order, *map(str, bits), par, "48", str(c)])
            n += 1


# --------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CognateDims:
    """Layer widths of a COGNATE model (each tuple: hidden widths…, output width)."""

    ife: Tuple[int, ...] = (32, 32, 64, 64, 64, 128, 128, 128, 256, 256, 256, 256)
    shape_mlp: Tuple[int, ...] = (64, 32)
    embed_mlp: Tuple[int, ...] = (256, 128)
    mapper: Tuple[int, ...] = (64, 64)
    latent: Tuple[int, ...] = (64, 64)
    predictor: Tuple[int, ...] = (128, 64)

    def scaled(self, div: int) -> "CognateDims":
        """Every width divided by ``div`` (topology unchanged)."""
        d = lambda t: tuple(max(1, v // div) for v in t)
        return CognateDims(d(self.ife), d(self.shape_mlp), d(self.embed_mlp), d(self.mapper), d(self.latent),
                           d(self.predictor))


FULL = CognateDims()
TINY = FULL.scaled(8)
ALL_HEADS = tuple(f"{t}/{k}" for t in TARGETS for k in KERNELS)
#: Normalization of the full-size random model: WACO SpMM's proxy constants (onnx/README.md).
FULL_NORM = ([115738.0, 123128.0, 1278950.0], [247439.0, 252198.0, 1623574.0],
             "random weights; WACO SpMM normalization proxy, rounded (no COGNATE training split is public)")
TINY_NORM = ([40.0, 40.0, 150.0], [30.0, 30.0, 200.0], "fixture: arbitrary constants")


def _lin(rng, n_out: int, n_in: int):
    return (rng.standard_normal((n_out, n_in)).astype(np.float32) * np.float32(1.0 / np.sqrt(n_in)),
            rng.standard_normal(n_out).astype(np.float32) * np.float32(0.1))


def _mlp(rng, dims: Sequence[int]):
    return [_lin(rng, dims[i + 1], dims[i]) for i in range(len(dims) - 1)]


def cognate_featurizer(rng, widths: Sequence[int]):
    """The IFE graph with seeded random weights: He scale over the kernel fan-in times a gain
    of 1.4 (sparse neighbourhoods are mostly empty; with it the fixture's denser patterns end
    with conv features O(1), the isolated-point ones O(1e-4); untrained 12-layer sparse nets
    have no scale that suits both)."""
    layers = dash_layers(tuple(widths))
    ws = [rng.standard_normal((L.kernel ** 2, L.cin, L.cout)).astype(np.float32)
          * np.float32(1.4 * np.sqrt(2.0 / (L.kernel ** 2 * L.cin))) for L in layers]
    return build_featurizer(layers, ws)


def cognate_model(seed: int, dims: CognateDims = TINY, heads: Sequence[str] = ALL_HEADS,
                  model_name: Optional[str] = None, norm=None) -> Model:
    """A COGNATE model with seeded random weights. The mapper is drawn once and shared by
    every head; each head draws its latent encoder and predictor (in ``heads`` order)."""
    rng = np.random.default_rng(seed)
    feat = cognate_featurizer(rng, dims.ife)
    F = dims.ife[-1]
    mean, std, source = norm or (TINY_NORM if dims != FULL else FULL_NORM)
    me = MatrixEmbedder(_mlp(rng, [3, *dims.shape_mlp]), _mlp(rng, [F + dims.shape_mlp[-1], *dims.embed_mlp]),
                        list(mean), list(std), source=source)
    mapper = _mlp(rng, [MAPPER_WIDTH, *dims.mapper])
    Em = dims.embed_mlp[-1]
    out = {}
    for hn in heads:
        target, kernel = hn.split("/")
        schema = cognate_schema(target, kernel)
        H = schema.width - MAPPER_WIDTH
        se = CognateScheduleEmbedder([(W.copy(), b.copy()) for W, b in mapper], _mlp(rng, [H, *dims.latent]),
                                     MAPPER_WIDTH, schema.width)
        pr = Predictor(_mlp(rng, [Em + se.out_width, *dims.predictor, 1]))
        out[hn] = Head(hn, kernel, target, schema, se, pr, "lower_is_better", MEANING)
    name = model_name or (f"cognate (seeded random weights, seed {seed}, "
                          f"{'full size' if dims == FULL else 'widths ' + 'x'.join(map(str, dims.ife))})")
    return Model("cognate", name, feat, me, out)


# --------------------------------------------------------------------------------------
# Golden schedule lines (fixtures)
# --------------------------------------------------------------------------------------

def golden_lines(head: str) -> List[str]:
    """Unified lines for a head's golden: valid lines derived from the Rust mapping (the ones the
    Rust tests pin are marked), then invalid ones with one defect each."""
    target, kernel = head.split("/")
    if target == "spade":
        valid = ["4 1024 32 6 7 2 4 1 3 5 0 0 0",                 # papers' worked example (144, 4, 1024, 1, 0, 0, 0)
                 "32 16384 256 6 7 4 2 1 3 5 1 1 0",              # Rust test spade_barrier_order
                 spade_unified(2048, 777, 256, 0, 1, 1),          # NUM_MATRIX_COLS resolved to 777
                 spade_unified(256, 65536, 32, 1, 0, 1) + " = 38.83592"]
        return valid + [
            "0 1024 32 6 7 2 4 1 3 5 0 0 0",                      # out_of_range i_split (below min)
            "4 2147483648 32 6 7 2 4 1 3 5 0 0 0",                # out_of_range j_split (above max)
            "4 NUM_MATRIX_COLS 32 6 7 2 4 1 3 5 0 0 0",           # not_an_integer j_split (unresolved)
            "4 1024 32 6 6 2 4 1 3 5 0 0 0",                      # bad_permutation (6 repeated)
            "4 1024 32 6 7 2 4 1 3 8 0 0 0",                      # bad_permutation (unknown 8)
            "4 1024 32 6 7 2 4 1 3 5 0 0",                        # token_count (12)
            "4 1024 1 0 0 0",                                     # token_count (a raw SPADE row)
            "4 1024 32 6 7 2 4 1 3 5 0 2 0",                      # out_of_vocabulary bypass
        ]
    if target == "gpu-sparsetir":
        valid = ["8 1 64 1 2 5 7 3 4 6 32 2 1 1 1",               # Rust test: SpMM default (F = 128)
                 gpu_unified(kernel, 32, 16, 4, 1, 1, 0, 0),      # reduction inner: j after k2
                 gpu_unified(kernel, 1, 16, 1, 1, 0, 1, 0)]
        return valid + [
            "8 1 16 1 2 5 7 3 4 6 8 2 1 1 1",                     # out_of_vocabulary thread_x 8 (SDDMM only)
            "8 1 64 1 2 5 7 3 4 6 32 2 2 1 1",                    # out_of_vocabulary group 2
            "8 1 -64 1 2 5 7 3 4 6 32 2 1 1 1",                   # out_of_range k_split
            "8 1 64 1 2 5 7 3 4 4 32 2 1 1 1",                    # bad_permutation (4 repeated)
            "8 1 64 1 2 5 7 3 4 6 32 2 1 1 1 0",                  # token_count (16)
            "8 32 2 1 0 1 1",                                     # token_count (a raw SparseTIR line)
        ]
    assert target == "cpu-taco" and kernel == "spmm"
    valid = ["16 256 1 3 4 1 2 5 6 7 1 0 0 0 1 48 16",                            # Rust test (SPMM_LINE)
             waco_unified("spmm", "1 1 1 i1 i0 k1 k0 j1 j0 1 1 0 1 i1 48 32"),  # TACO FixedCSR default
             waco_unified("spmm", "32 8 64 i1 k1 i0 k0 j1 j0 0 1 0 0 i1 48 128"),
             waco_unified("spmm", "4 2 128 k1 i1 i0 k0 j1 j0 1 1 1 0 k1 48 256") + " = 14.815"]
    return valid + [
        "16 256 1 3 4 1 2 5 6 7 1 0 0 0 1 47 16",                 # out_of_vocabulary parnum
        "16 256 1 3 4 1 2 5 6 7 1 0 0 0 2 48 16",                 # out_of_vocabulary paridx (i2 is inner)
        "16 256 1 3 4 1 2 5 6 7 1 0 0 0 1 48 512",                # out_of_vocabulary parchunk
        "16 256 1e3 3 4 1 2 5 6 7 1 0 0 0 1 48 16",               # not_an_integer k_split
        "2147483648 256 1 3 4 1 2 5 6 7 1 0 0 0 1 48 16",         # out_of_range i_split
        "16 256 1 k1 4 1 2 5 6 7 1 0 0 0 1 48 16",                # bad_permutation (symbol k1)
        "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16",            # token_count (raw WACO line, 16)
    ]


# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------

def main(argv=None) -> int:
    from .bundle import write_bundle
    ap = argparse.ArgumentParser(prog="python -m dashrank_onnx.cognate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="bundle directory to write")
    ap.add_argument("--full-size", action="store_true",
                    help="the papers' dimensions (IFE 32…256, Em 128, FM/LE 64, predictor 128-64-1); "
                         "default: every width divided by 8")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--heads", default=",".join(ALL_HEADS),
                    help=f"comma-separated target/kernel list (default: all of {', '.join(ALL_HEADS)})")
    ap.add_argument("--fp16", action="store_true", help="store weights as FLOAT16")
    a = ap.parse_args(argv)
    heads = [h.strip() for h in a.heads.split(",") if h.strip()]
    for h in heads:
        t, _, k = h.partition("/")
        if (t, k) not in HETERO:
            ap.error(f"unknown head {h!r}; expected target/kernel with target in {TARGETS}, kernel in {KERNELS}")
    model = cognate_model(a.seed, FULL if a.full_size else TINY, heads)
    paths = write_bundle(model, a.out, fp16=a.fp16)
    n = sum(p.stat().st_size for p in paths)
    print(f"wrote {len(paths)} files ({n} bytes) to {a.out}: {model.model_name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
