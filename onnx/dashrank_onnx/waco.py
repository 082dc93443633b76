"""Convert WACO checkpoints (``resnet.pth`` state dicts) to dashrank bundles.

CLI: ``python -m dashrank_onnx.convert_waco --checkpoint PATH --kernel spmm|sddmm|spmv --out DIR [--fp16]``
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .export import build_featurizer, waco_layers
from .pth import load_state_dict
from .reference import (Head, MatrixEmbedder, Model, Piece, Predictor, ScheduleEmbedder, Schema)

SPLIT = [1 << p for p in range(17)]          # [1 .. 65536]
FORMAT = [0, 1]                               # 0 = Compressed, 1 = Uncompressed
PARNUM = [48]


def _pow2(n: int) -> List[int]:
    return [1 << p for p in range(n)]


# Per kernel: text-order fields and the embedder's concat order (WACO model.py).
KERNELS = {
    "spmm": {
        "splits": [("isplit", "isplit"), ("ksplit", "ksplit"), ("jsplit", "jsplit")],
        "index": ["i1", "i0", "k1", "k0", "j1", "j0"],
        "formats": ["i1f", "i0f", "k1f", "k0f"],
        "format_tables": ["formati1", "formati0", "formatk1", "formatk0"],
        "parchunk": _pow2(9),
        "paridx_embedded": False,
    },
    "sddmm": {
        "splits": [("isplit", "isplit"), ("jsplit", "jsplit"), ("ksplit", "ksplit")],
        "index": ["i1", "i0", "j1", "j0", "k1", "k0"],
        "formats": ["i1f", "i0f", "j1f", "j0f"],
        "format_tables": ["formati1", "formati0", "formatj1", "formatj0"],
        "parchunk": _pow2(6),
        "paridx_embedded": True,
    },
    "spmv": {
        "splits": [("isplit", "isplit"), ("ksplit", "ksplit")],
        "index": ["i1", "i0", "k1", "k0"],
        "formats": ["i1f", "i0f", "k1f", "k0f"],
        "format_tables": ["formati1", "formati0", "formatk1", "formatk0"],
        "parchunk": _pow2(9),
        "paridx_embedded": False,
    },
}

TARGET = "cpu-taco"
MEANING = "pairwise ranking score (hinge, margin 1); comparable within one matrix only"


def waco_schema(kernel: str, sd: Dict[str, np.ndarray]) -> Schema:
    """Schema of a kernel's SuperSchedule lines. Vocabulary sizes are checked against the
    checkpoint's embedding tables (a split table of V rows takes the first V powers of two)."""
    k = KERNELS[kernel]
    fields = []
    for fname, table in k["splits"]:
        V = sd[f"{table}.weight"].shape[0]
        fields.append({"name": fname, "kind": "choice", "values": SPLIT[:V]})
    fields.append({"name": "order", "kind": "permutation", "symbols": list(k["index"])})
    for fname, table in zip(k["formats"], k["format_tables"]):
        if sd[f"{table}.weight"].shape[0] != len(FORMAT):
            raise ValueError(f"{table}: {sd[table + '.weight'].shape[0]} rows, expected {len(FORMAT)}")
        fields.append({"name": fname, "kind": "choice", "values": list(FORMAT)})
    fields.append({"name": "paridx", "kind": "choice", "values": list(k["index"])})
    if k["paridx_embedded"] and sd["paridx.weight"].shape[0] != len(k["index"]):
        raise ValueError("paridx table size disagrees with the index list")
    fields.append({"name": "parnum", "kind": "choice", "values": list(PARNUM)})
    if sd["parchunk.weight"].shape[0] != len(k["parchunk"]):
        raise ValueError(f"parchunk table has {sd['parchunk.weight'].shape[0]} rows, expected {len(k['parchunk'])}")
    fields.append({"name": "parchunk", "kind": "choice", "values": list(k["parchunk"])})
    return Schema({"name": f"waco-superschedule-{kernel}", "version": 1, "text_format": "waco",
                   "fields": fields})


def _lin(sd, prefix) -> Tuple[np.ndarray, np.ndarray]:
    return sd[f"{prefix}.weight"].astype(np.float32), sd[f"{prefix}.bias"].astype(np.float32)


def waco_schedule_embedder(kernel: str, sd, schema: Schema) -> ScheduleEmbedder:
    k = KERNELS[kernel]
    cols = schema.columns()
    pieces = []
    for fname, table in k["splits"]:
        c = cols[fname][0]
        pieces.append(Piece("embedding", table, c, c + 1, table=sd[f"{table}.weight"].astype(np.float32)))
    s, e = cols["order"]
    pieces.append(Piece("linear", "order", s, e, linear=_lin(sd, "order")))
    for fname, table in zip(k["formats"], k["format_tables"]):
        c = cols[fname][0]
        pieces.append(Piece("embedding", table, c, c + 1, table=sd[f"{table}.weight"].astype(np.float32)))
    if k["paridx_embedded"]:
        c = cols["paridx"][0]
        pieces.append(Piece("embedding", "paridx", c, c + 1, table=sd["paridx.weight"].astype(np.float32)))
    c = cols["parchunk"][0]
    pieces.append(Piece("embedding", "parchunk", c, c + 1, table=sd["parchunk.weight"].astype(np.float32)))
    mlp = [_lin(sd, "schedule_embedding.0"), _lin(sd, "schedule_embedding.2")]
    width_in = sum(p.table.shape[1] if p.kind == "embedding" else p.linear[0].shape[0] for p in pieces)
    if width_in != mlp[0][0].shape[1]:
        raise ValueError(f"schedule pieces concat to {width_in}, MLP expects {mlp[0][0].shape[1]}")
    return ScheduleEmbedder(pieces, mlp, schema.width)


# --------------------------------------------------------------------------------------
# Shape normalization proxy
# --------------------------------------------------------------------------------------

_VARIANT = re.compile(r"_\d+x\d+_\d+$")


def normalization_proxy(stats_csv, train_txt: Optional[str] = None) -> Tuple[List[float], List[float], str]:
    """Mean / population std of (rows, cols, nnz) over ``matrix_stats.csv``.

    If ``train_txt`` is given, each matrix_stats row whose name is the base name of training
    entries (``<base>_<a>x<b>_<k>``) is weighted by how many training entries derive from it
    and rows not in the training split are dropped; otherwise all rows weigh 1."""
    rows = list(csv.DictReader(open(stats_csv, newline="")))
    X = {r["File Name"]: (float(r["Num Rows"]), float(r["Num Cols"]), float(r["Num Nonzero"])) for r in rows}
    if train_txt is not None:
        counts = Counter(_VARIANT.sub("", n.strip()) for n in open(train_txt) if n.strip())
        names = [n for n in X if counts.get(n, 0) > 0]
        w = np.array([counts[n] for n in names], dtype=np.float64)
        src = (f"proxy: matrix_stats.csv rows matching base names of {Path(train_txt).parent.name}/train.txt "
               f"({len(names)} matrices), each weighted by its number of training variants "
               f"({int(w.sum())} of {sum(counts.values())} entries); population std. WACO's exact constants "
               "(stats of the resized training variants) are not recoverable")
    else:
        names = list(X)
        w = np.ones(len(names))
        src = f"proxy: all {len(names)} rows of matrix_stats.csv, population std"
    A = np.array([X[n] for n in names], dtype=np.float64)
    mean = (A * w[:, None]).sum(0) / w.sum()
    std = np.sqrt(((A - mean) ** 2 * w[:, None]).sum(0) / w.sum())
    return [float(x) for x in mean], [float(x) for x in std], src


def convert(checkpoint, kernel: str, mean: Sequence[float], std: Sequence[float], source: str,
            model_name: Optional[str] = None) -> Model:
    kernel = kernel.lower()
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; expected one of {sorted(KERNELS)}")
    sd = load_state_dict(checkpoint)
    n_layers = sum(1 for k in sd if re.fullmatch(r"layer\d+\.0\.kernel", k))
    C = sd["layer1.0.kernel"].shape[2]
    layers = waco_layers(C, n_layers, int(round(np.sqrt(sd["layer1.0.kernel"].shape[0]))))
    feat = build_featurizer(layers, [sd[f"layer{i}.0.kernel"] for i in range(1, n_layers + 1)])
    me = MatrixEmbedder([_lin(sd, "feature.0"), _lin(sd, "feature.2")],
                        [_lin(sd, "matrix_embedding.0"), _lin(sd, "matrix_embedding.2")],
                        list(mean), list(std), source=source)
    schema = waco_schema(kernel, sd)
    se = waco_schedule_embedder(kernel, sd, schema)
    pr = Predictor([_lin(sd, "final.0"), _lin(sd, "final.2"), _lin(sd, "final.4")])
    head = f"{TARGET}/{kernel}"
    name = model_name or f"waco-resnet14-{kernel} ({Path(checkpoint).name})"
    return Model("waco", name, feat, me, {head: Head(head, kernel, TARGET, schema, se, pr, "lower_is_better",
                                                     MEANING)})


# --------------------------------------------------------------------------------------
# Validation on real data
# --------------------------------------------------------------------------------------

CASE_MATRICES = ("Trec6_16x16_9", "crystk01_2x16_1", "nemspmm1_16x4_0")


def read_collected(path) -> Tuple[List[str], np.ndarray]:
    """Collected lines ``<tokens> = <ms>`` → (schedule texts, runtimes)."""
    lines, rts = [], []
    for ln in open(path):
        ln = ln.strip()
        if not ln or "=" not in ln:
            continue
        text, _, rt = ln.partition("=")
        lines.append(text.strip())
        rts.append(float(rt))
    return lines, np.array(rts)


def rank_quality(model, head: str, pat, lines: Sequence[str], runtimes: np.ndarray,
                 max_runtime: Optional[float] = None) -> Dict[str, float]:
    """Kendall τ-b and Spearman ρ between scores and measured runtimes (lower score = faster
    ⇒ positive is good). ``model`` is a reference Model or a LoadedBundle."""
    from .reference import kendall_tau_b, spearman_rho
    _, _, memb = model.embed_matrix(pat)
    _, _, scores, ok, errs = model.score(head, memb, lines)
    rt = np.asarray(runtimes)[ok]
    sc = np.asarray(scores)
    if max_runtime is not None:
        keep = rt < max_runtime
        rt, sc = rt[keep], sc[keep]
    return {"n": int(rt.size), "tau": kendall_tau_b(sc, rt), "rho": spearman_rho(sc, rt),
            "invalid": len(errs)}
