"""Seeded tiny bundles with golden outputs, and broken files for error tests.

CLI: ``python -m dashrank_onnx.fixtures --out tests/data [--seed 20240601]``

Writes ``<out>/fixtures/<name>/`` (bundle files + ``golden.json``), ``<out>/bad/`` and
``<out>/README.md``. Everything is a deterministic function of the seed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import onnx

from .bundle import bundle_models, head_file_stem, save
from .integrity import FEATURIZER_KEY, MAPPER_KEY, stamp_provenance, write_manifest
from .cognate import TINY, cognate_model, golden_lines as cognate_golden_lines
from .export import LayerSpec, build_featurizer
from .reference import (CognateScheduleEmbedder, Head, MatrixEmbedder, Model, Pattern, Piece, Predictor,
                        ScheduleEmbedder, Schema, ScheduleError, validate_csr, write_csr)
from .waco import KERNELS, SPLIT, FORMAT, PARNUM, MEANING

DEFAULT_SEED = 20240601
TOLERANCE = {"fp32": {"rtol": 1e-5, "atol": 1e-6}, "fp16": {"rtol": 1e-5, "atol": 1e-6}}


# --------------------------------------------------------------------------------------
# Tiny models
# --------------------------------------------------------------------------------------

def _lin(rng, n_out, n_in, scale=None):
    s = scale if scale is not None else 1.0 / np.sqrt(n_in)
    return (rng.standard_normal((n_out, n_in)).astype(np.float32) * np.float32(s),
            rng.standard_normal(n_out).astype(np.float32) * np.float32(0.1))


def _mlp(rng, dims):
    return [_lin(rng, dims[i + 1], dims[i]) for i in range(len(dims) - 1)]


def tiny_schema(kernel: str) -> Schema:
    """The real WACO schema of a kernel (vocabularies as in the checkpoints)."""
    k = KERNELS[kernel]
    sizes = {"spmm": [17, 17, 8], "sddmm": [17, 17, 8], "spmv": [17, 17]}[kernel]
    fields = [{"name": n, "kind": "choice", "values": SPLIT[:v]} for (n, _), v in zip(k["splits"], sizes)]
    fields.append({"name": "order", "kind": "permutation", "symbols": list(k["index"])})
    fields += [{"name": f, "kind": "choice", "values": list(FORMAT)} for f in k["formats"]]
    fields.append({"name": "paridx", "kind": "choice", "values": list(k["index"])})
    fields.append({"name": "parnum", "kind": "choice", "values": list(PARNUM)})
    fields.append({"name": "parchunk", "kind": "choice", "values": list(k["parchunk"])})
    return Schema({"name": f"waco-superschedule-{kernel}", "version": 1, "text_format": "waco", "fields": fields})


def tiny_head(rng, kernel: str, target: str, E: int, Es: int, Em: int) -> Head:
    schema = tiny_schema(kernel)
    k = KERNELS[kernel]
    cols = schema.columns()
    pieces = []
    for f in schema.fields:
        name = f["name"]
        if f["kind"] == "permutation":
            s, e = cols[name]
            pieces.append(Piece("linear", name, s, e, linear=_lin(rng, E, e - s)))
        elif name == "parnum" or (name == "paridx" and not k["paridx_embedded"]):
            continue
        else:
            c = cols[name][0]
            tab = rng.standard_normal((len(f["values"]), E)).astype(np.float32)
            pieces.append(Piece("embedding", name, c, c + 1, table=tab))
    se = ScheduleEmbedder(pieces, _mlp(rng, [E * len(pieces), 16, Es]), schema.width)
    pr = Predictor(_mlp(rng, [Em + Es, 8, 4, 1]))
    name = f"{target}/{kernel}"
    return Head(name, kernel, target, schema, se, pr, "lower_is_better", MEANING)


def _featurizer(rng, layers: List[LayerSpec]):
    ws = [rng.standard_normal((L.kernel ** 2, L.cin, L.cout)).astype(np.float32)
          * np.float32(np.sqrt(2.0 / (L.kernel ** 2 * L.cout))) for L in layers]
    bs = [rng.standard_normal(L.cout).astype(np.float32) * np.float32(0.1) if L.bias else None for L in layers]
    return build_featurizer(layers, ws, bs)


def tiny_waco(seed: int) -> Model:
    rng = np.random.default_rng(seed)
    C = 4
    layers = [LayerSpec(5, 1, 1, C, tap=True), LayerSpec(3, 2, C, C, tap=True),
              LayerSpec(3, 2, C, C, tap=True), LayerSpec(3, 2, C, C, tap=True)]
    feat = _featurizer(rng, layers)
    F = C * len(layers)
    me = MatrixEmbedder(_mlp(rng, [3, 8, 4]), _mlp(rng, [F + 4, 16, 8]), [40.0, 40.0, 150.0],
                        [30.0, 30.0, 200.0], source="fixture: arbitrary constants")
    head = tiny_head(rng, "spmm", "cpu-taco", 4, 8, 8)
    return Model("waco", "tiny-waco-spmm (seeded random weights)", feat, me, {head.name: head})


def tiny_dash(seed: int) -> Model:
    rng = np.random.default_rng(seed + 1)
    layers = [LayerSpec(5, 1, 1, 4), LayerSpec(3, 1, 4, 4, pool=(2, 2), bias=True),
              LayerSpec(3, 1, 4, 6, pool=(3, 1)), LayerSpec(3, 2, 6, 6, pool=(3, 3), tap=True)]
    feat = _featurizer(rng, layers)
    me = MatrixEmbedder(_mlp(rng, [3, 8, 4]), _mlp(rng, [6 + 4, 16, 8]), [40.0, 40.0, 150.0],
                        [30.0, 30.0, 200.0], source="fixture: arbitrary constants")
    h1 = tiny_head(rng, "sddmm", "gpu-sparsetir", 4, 8, 8)
    h2 = tiny_head(rng, "spmv", "spade", 4, 8, 8)
    return Model("cognate", "tiny-dash (seeded random weights, DASH-style block with max pools)", feat, me,
                 {h1.name: h1, h2.name: h2})


COGNATE_HEADS = ("cpu-taco/spmm", "spade/spmm", "gpu-sparsetir/spmm", "spade/sddmm")


def tiny_cognate(seed: int) -> Model:
    """The COGNATE/DASH architecture (dashrank_onnx.cognate) with every width divided by 8."""
    return cognate_model(seed + 2, TINY, COGNATE_HEADS,
                         "tiny-cognate (seeded random weights, COGNATE/DASH topology, widths / 8)")


def to_fp16(model: Model) -> Model:
    """The same model with every weight rounded through float16 (what an fp16 bundle holds)."""
    r = lambda a: None if a is None else np.asarray(a, np.float32).astype(np.float16).astype(np.float32)
    rl = lambda layers: [(r(W), r(b)) for W, b in layers]
    feat = model.featurizer
    feat = type(feat)(feat.nodes, {k: r(v) for k, v in feat.initializers.items()}, feat.input, feat.output)
    me = model.matrix_embedder
    me = MatrixEmbedder(rl(me.shape_mlp), rl(me.embed_mlp), me.mean, me.std, me.features, me.source)
    heads = {}
    for n, h in model.heads.items():
        se = h.schedule_embedder
        if isinstance(se, CognateScheduleEmbedder):
            se2 = CognateScheduleEmbedder(rl(se.mapper_layers), rl(se.latent_layers), se.mapper_width, se.width)
        else:
            pieces = [Piece(p.kind, p.name, p.start, p.stop, r(p.table),
                            None if p.linear is None else (r(p.linear[0]), r(p.linear[1]))) for p in se.pieces]
            se2 = ScheduleEmbedder(pieces, rl(se.mlp_layers), se.width)
        heads[n] = Head(h.name, h.kernel, h.target, h.schema, se2,
                        Predictor(rl(h.predictor.mlp_layers)), h.polarity, h.meaning)
    return Model(model.family, model.model_name.replace("(", "(fp16, ", 1), feat, me, heads)


# --------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------

def _pattern_from_coo(rows, cols, r, c) -> Pattern:
    key = np.unique(np.asarray(r, np.int64) * cols + np.asarray(c, np.int64))
    rr, cc = np.divmod(key, cols)
    row_ptr = np.zeros(rows + 1, np.int64)
    np.add.at(row_ptr, rr + 1, 1)
    return validate_csr(rows, cols, np.cumsum(row_ptr), cc)


def golden_patterns(seed: int) -> Dict[str, Pattern]:
    rng = np.random.default_rng(seed + 7)
    out = {}
    out["single_nonzero"] = _pattern_from_coo(5, 7, [2], [3])
    out["far_corners"] = _pattern_from_coo(37, 53, [0, 0, 36, 36], [0, 52, 0, 52])
    out["empty_rows"] = _pattern_from_coo(9, 6, [0, 0, 4, 8, 8], [1, 5, 2, 0, 3])
    out["diagonal_16"] = _pattern_from_coo(16, 16, range(16), range(16))
    for i, (R_, C_, n) in enumerate([(24, 31, 60), (64, 48, 300), (100, 100, 700)]):
        out[f"random_{i}"] = _pattern_from_coo(R_, C_, rng.integers(0, R_, n), rng.integers(0, C_, n))
    br = []
    bc = []
    for i in range(80):
        for d in (-2, 0, 1):
            if 0 <= i + d < 80:
                br.append(i)
                bc.append(i + d)
    out["banded_80"] = _pattern_from_coo(80, 80, br, bc)
    return out


def golden_schedules(schema: Schema, seed: int) -> List[str]:
    lines = schema.random_lines(6, seed)
    good = lines[0].split()
    n = len(good)
    cols = schema.columns()
    # invalid lines, one defect each
    lines.append(" ".join(good[:-1]))                                   # token count
    bad = list(good)
    bad[0] = "3"                                                        # not a listed split
    lines.append(" ".join(bad))
    perm_field = next(f for f in schema.fields if f["kind"] == "permutation")
    t0 = sum(1 for f in schema.fields[:schema.fields.index(perm_field)] if f["kind"] == "choice")
    bad = list(good)
    bad[t0 + 1] = bad[t0]                                               # repeated symbol
    lines.append(" ".join(bad))
    bad = list(good)
    bad[t0] = "x9"                                                      # unknown symbol
    lines.append(" ".join(bad))
    bad = list(good)
    bad[-2] = "47"                                                      # parnum out of vocabulary
    lines.append(" ".join(bad))
    lines.append(" ".join(good) + " = 12.5")                            # valid, with runtime
    return lines


def _f(a) -> list:
    return np.asarray(a, dtype=np.float32).astype(np.float64).tolist()


def golden(model: Model, seed: int, precision: str, lines_for=None) -> dict:
    """``lines_for(head) → lines`` overrides the seeded schedule lines of a head."""
    pats = golden_patterns(seed)
    heads = {}
    for hn, h in model.heads.items():
        sched = []
        if lines_for is not None:
            lines = lines_for(hn)
        else:
            lines = golden_schedules(h.schema, seed + hash_name(hn))
        enc, ok, errs = h.schema.encode(lines)
        semb = h.schedule_embedder(enc)
        j = 0
        for i, ln in enumerate(lines):
            if i in errs:
                e = errs[i]
                sched.append({"line": ln, "valid": False,
                              "error": {"kind": e.kind, "field": e.field, "value": e.value, "message": str(e)}})
            else:
                _, rt = h.schema.parse(ln)
                sched.append({"line": ln, "valid": True, "runtime": rt, "encoded": _f(enc[j]),
                              "schedule_embedding": _f(semb[j])})
                j += 1
        heads[hn] = {"kernel": h.kernel, "target": h.target, "schedules": sched}
    patterns = []
    for name, pat in pats.items():
        conv, shape, memb = model.embed_matrix(pat)
        entry = {"name": name, "rows": pat.rows, "cols": pat.cols, "nnz": pat.nnz,
                 "row_ptr": pat.row_ptr.tolist(), "col_idx": pat.col_idx.tolist(),
                 "shape_features": _f(shape[0]), "conv_features": _f(conv[0]),
                 "matrix_embedding": _f(memb[0]), "scores": {}}
        for hn, h in model.heads.items():
            lines = [s["line"] for s in heads[hn]["schedules"]]
            _, _, sc, ok, _ = model.score(hn, memb, lines)
            full = [None] * len(lines)
            for i, v in zip(ok, sc):
                full[i] = float(np.float32(v))
            entry["scores"][hn] = full
        patterns.append(entry)
    return {"format": "dashrank-golden-v1", "bundle_family": model.family, "model_name": model.model_name,
            "precision": precision, "seed": seed,
            "generator": "python -m dashrank_onnx.fixtures --out tests/data",
            "tolerance": TOLERANCE[precision],
            "notes": "floats are the float32 results of the numpy reference, printed exactly; scores[i] is null "
                     "for invalid schedule lines; conv_features/matrix_embedding are per pattern, schedule "
                     "embeddings per head",
            "heads": heads, "patterns": patterns}


def hash_name(s: str) -> int:
    return sum((i + 1) * ord(ch) for i, ch in enumerate(s)) % 1000


# --------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------

def write_fixture(model: Model, directory: Path, seed: int, fp16: bool = False, lines_for=None) -> None:
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    ref = to_fp16(model) if fp16 else model
    for fname, m in bundle_models(model, fp16).items():
        save(m, directory / fname)
    write_manifest(directory)
    g = golden(ref, seed, "fp16" if fp16 else "fp32", lines_for)
    (directory / "golden.json").write_text(json.dumps(g, indent=1) + "\n")


def _raw_save(m: onnx.ModelProto, path: Path) -> None:
    path.write_bytes(m.SerializeToString())


def _set_meta(m: onnx.ModelProto, key: str, value: Optional[str]) -> None:
    props = [(p.key, p.value) for p in m.metadata_props if p.key != key]
    if value is not None:
        props.append((key, value))
    del m.metadata_props[:]
    for k, v in props:
        e = m.metadata_props.add()
        e.key, e.value = k, v


def _write_variant(out: Path, base: Dict[str, onnx.ModelProto], name: str, fname: str, mutate,
                   raw: Optional[bytes] = None, restamp: bool = False) -> str:
    """Writes ``out/name``, a copy of the bundle ``base`` with ``fname`` mutated in place by
    ``mutate`` (or replaced by the bytes ``raw``). Each variant is internally consistent except
    for its one defect: weight edits are re-stamped (provenance recomputed) and every variant
    gets a manifest of its files as written, so the loader reaches the check the variant is
    about. Returns ``name``."""
    d = out / name
    d.mkdir()
    files = {}
    for fn, m in base.items():
        mm = onnx.ModelProto()
        mm.CopyFrom(m)
        if fn == fname and raw is None:
            mutate(mm)
        files[fn] = mm
    if restamp:
        stamp_provenance(files)
    for fn, mm in files.items():
        if fn == fname and raw is not None:
            (d / fn).write_bytes(raw)
        else:
            _raw_save(mm, d / fn)
    write_manifest(d)
    return name


def _write_bad_metadata(out: Path, base: Dict[str, onnx.ModelProto]) -> List[str]:
    """A featurizer of an unknown format version, a matrix embedder without its role."""
    return [
        _write_variant(out, base, "wrong-format-version", "featurizer.onnx",
                       lambda m: _set_meta(m, "dashrank.format_version", "99")),
        _write_variant(out, base, "missing-role", "matrix_embedder.onnx",
                       lambda m: _set_meta(m, "dashrank.role", None)),
    ]


def _drop_layer2_weight(m: onnx.ModelProto) -> None:
    keep = [t for t in m.graph.initializer if t.name != "layer2.weight"]
    del m.graph.initializer[:]
    m.graph.initializer.extend(keep)


def _shrink_layer2_weight(m: onnx.ModelProto) -> None:
    t = next(t for t in m.graph.initializer if t.name == "layer2.weight")
    K, ci, co = t.dims
    a = np.frombuffer(t.raw_data, "<f4").reshape(K, ci, co)[:, :ci - 1, :]
    t.dims[:] = [K, ci - 1, co]
    t.raw_data = np.ascontiguousarray(a).tobytes()


def _nan_in_layer1_weight(m: onnx.ModelProto) -> None:
    t = next(t for t in m.graph.initializer if t.name == "layer1.weight")
    a = np.frombuffer(t.raw_data, "<f4").copy()
    a[3] = np.nan
    t.raw_data = a.tobytes()


def _unknown_featurizer_op(m: onnx.ModelProto) -> None:
    n = next(n for n in m.graph.node if n.op_type == "SparseReLU")
    n.op_type = "SparseGELU"


def _write_bad_featurizers(out: Path, base: Dict[str, onnx.ModelProto]) -> List[str]:
    """Featurizers with a weight missing, of the wrong shape or NaN, an unknown op, or cut in
    half."""
    data = base["featurizer.onnx"].SerializeToString()
    return [
        _write_variant(out, base, "missing-weight-initializer", "featurizer.onnx", _drop_layer2_weight,
                       restamp=True),
        _write_variant(out, base, "conv-weight-shape-mismatch", "featurizer.onnx", _shrink_layer2_weight,
                       restamp=True),
        _write_variant(out, base, "nan-weight", "featurizer.onnx", _nan_in_layer1_weight, restamp=True),
        _write_variant(out, base, "unknown-featurizer-op", "featurizer.onnx", _unknown_featurizer_op),
        _write_variant(out, base, "truncated-onnx", "featurizer.onnx", None, raw=data[: len(data) // 2]),
    ]


def _drop_parchunk_field(m: onnx.ModelProto) -> None:
    schema = json.loads(next(p.value for p in m.metadata_props if p.key == "dashrank.schedule_schema"))
    schema["fields"] = [f for f in schema["fields"] if f["name"] != "parchunk"]
    _set_meta(m, "dashrank.schedule_schema", json.dumps(schema))


def _write_bad_heads(out: Path, base: Dict[str, onnx.ModelProto]) -> List[str]:
    """Heads whose schedule schema is cut off or one field short, of an unknown kernel, or
    without a predictor."""
    se_name = next(f for f in base if f.endswith(".schedule_embedder.onnx"))
    made = [
        _write_variant(out, base, "malformed-schema-json", se_name,
                       lambda m: _set_meta(m, "dashrank.schedule_schema",
                                           '{"name": "x", "fields": [{"name": "isplit", "kind": ')),
        _write_variant(out, base, "schedule-width-mismatch", se_name, _drop_parchunk_field),
        _write_variant(out, base, "unknown-kernel", se_name, lambda m: _set_meta(m, "dashrank.kernel", "spgemm")),
    ]
    pr_name = next(f for f in base if f.endswith(".predictor.onnx"))
    made.append(_write_variant(out, base, "missing-predictor", pr_name, lambda m: None))
    (out / "missing-predictor" / pr_name).unlink()
    write_manifest(out / "missing-predictor")
    return made


def _write_bad_integrity(out: Path, base: Dict[str, onnx.ModelProto]) -> List[str]:
    """Integrity: one weight byte flipped after export (the manifest is the exporter's), and a
    bundle written before manifests and provenance existed."""
    pr_name = next(f for f in base if f.endswith(".predictor.onnx"))
    _write_variant(out, base, "corrupted-weight", pr_name, lambda m: None)
    t = next(t for t in base[pr_name].graph.initializer if t.name == "final.0.weight")
    raw = bytearray((out / "corrupted-weight" / pr_name).read_bytes())
    at = bytes(raw).find(t.raw_data)
    assert at >= 0, "final.0.weight not found in the serialized predictor"
    raw[at + 4 * 5 + 1] ^= 0x10                          # a mantissa bit of final.0.weight[5]
    (out / "corrupted-weight" / pr_name).write_bytes(bytes(raw))
    _write_variant(out, base, "no-manifest", pr_name, lambda m: None)
    (out / "no-manifest" / "manifest.json").unlink()
    for p in (out / "no-manifest").glob("*.onnx"):
        m = onnx.load(str(p))
        _set_meta(m, FEATURIZER_KEY, None)
        _set_meta(m, MAPPER_KEY, None)
        _raw_save(m, p)
    return ["corrupted-weight", "no-manifest"]


def _write_foreign_head(out: Path, foreign: Model) -> List[str]:
    """Provenance: the spade/spmm head of another COGNATE model (its two files only; the tests
    put them into a copy of fixtures/tiny-cognate, as a user copying files would)."""
    d = out / "foreign-head"
    d.mkdir()
    for fn, m in bundle_models(foreign).items():
        if fn.startswith(head_file_stem("spade/spmm") + "."):
            _raw_save(m, d / fn)
    return ["foreign-head"]


def _write_bad_patterns(out: Path) -> List[str]:
    """Pattern files: a valid 4 x 5 CSR for contrast, then a truncated one, a column index equal
    to cols, a row_ptr that goes down, and a malformed Matrix Market file."""
    good = validate_csr(4, 5, [0, 2, 3, 3, 5], [0, 4, 2, 1, 3])
    write_csr(out / "good-small.csr", good)
    raw = (out / "good-small.csr").read_bytes()
    (out / "truncated.csr").write_bytes(raw[:-6])
    arr = np.frombuffer(raw, "<i4").copy()
    bad = arr.copy()
    bad[-1] = 5                      # col index == cols
    bad.tofile(out / "column-out-of-range.csr")
    bad = arr.copy()
    bad[3 + 2] = 4                   # row_ptr = [0, 2, 4, 3, 5]
    bad.tofile(out / "row-ptr-not-monotone.csr")
    (out / "malformed.mtx").write_text(
        "%%MatrixMarket matrix coordinate pattern general\n4 5 3\n1 1\n2 x\n")
    return ["good-small.csr", "truncated.csr", "column-out-of-range.csr", "row-ptr-not-monotone.csr",
            "malformed.mtx"]


def write_bad(model: Model, out: Path, foreign: Model) -> List[str]:
    """Broken bundles (copies of ``model``'s with one defect each), the ``spade/spmm`` head of
    ``foreign`` (a COGNATE model that is not the one of fixtures/tiny-cognate) and broken matrix
    files."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    base = bundle_models(model)
    return (_write_bad_metadata(out, base) + _write_bad_featurizers(out, base) + _write_bad_heads(out, base)
            + _write_bad_integrity(out, base) + _write_foreign_head(out, foreign) + _write_bad_patterns(out))


README = """# tests/data — generated test data (do not edit by hand)

Regenerate from the repository root with

    .venv/bin/pip install -e ./onnx
    .venv/bin/python -m dashrank_onnx.fixtures --out tests/data --seed {seed}

Everything here is a deterministic function of the seed ({seed}); `onnx/tests/test_fixtures.py`
regenerates into a temporary directory and compares.

## fixtures/

Each directory is a complete bundle (docs/bundle-format.md: the `.onnx` files with their
provenance hashes, and `manifest.json`) plus `golden.json`, the numpy reference's outputs
(`onnx/dashrank_onnx/reference.py`):

| dir | what |
|---|---|
| `tiny-waco-spmm/` | WACO-shaped: conv k5 s1 1→4, 3 × conv k3 s2 4→4, ReLU and a global-average-pool tap after each (F = 16); real WACO SpMM schema; fp32 |
| `tiny-waco-fp16/` | the same weights stored as FLOAT16 (dense graphs `Cast` them to FLOAT); goldens computed with the fp16-rounded weights |
| `tiny-dash/` | DASH-style block: conv k5, conv k3 (+bias) + max pool 2/2 (stride map), conv k3 + max pool 3/1 (offset rule), conv k3 s2 + max pool 3/3 (odd stride map), tap only at the end; two heads (`gpu-sparsetir/sddmm`, `spade/spmv`); family `cognate` |
| `tiny-cognate/` | the COGNATE/DASH architecture (`onnx/dashrank_onnx/cognate.py`) with every width / 8: IFE 12 convs (k5 1→4, k3 4→4, 4→8 + max pool 2/2, 8→8 ×2, 8→16 + pool, 16→16 ×2, 16→32 + pool, 32→32 ×3; stride 1, ReLU, global average pool of L12, F = 32); matrix embedder 3→8→4, 36→32→16; four heads `cpu-taco/spmm`, `spade/spmm`, `gpu-sparsetir/spmm`, `spade/sddmm` whose schemas parse COGNATE *unified* lines (`I J K` as `integer` log2 fields, the 7 loop numbers as one permutation, the target's heterogeneous fields as `choice`); schedule embedder = shared configuration mapper 52→8→8 (same weights in every head file) ‖ per-head latent encoder H→8→8; predictor 32→16→8→1. Schedule lines are fixed unified lines (the papers' SPADE example `4 1024 32 6 7 2 4 1 3 5 0 0 0`, lines pinned by the Rust space tests, more derived from the Rust mapping) plus invalid ones; family `cognate` |

`golden.json`: `patterns[]` (CSR `rows, cols, row_ptr, col_idx`; `shape_features`,
`conv_features`, `matrix_embedding`; `scores[head][i]` for schedule line i, `null` if the line is
invalid), `heads[head].schedules[]` (`line`, `valid`, `encoded`, `schedule_embedding`, or
`error {{kind, field, value, message}}` — kinds: `token_count`, `out_of_vocabulary`,
`bad_permutation`, and for `integer` fields `not_an_integer` / `out_of_range`). Floats are
float32 values printed exactly. Tolerance: `tolerance` (relative 1e-5, absolute 1e-6).

## bad/

Each entry is broken in exactly the way its name says. Bundles are copies of `tiny-waco-spmm`
with one file altered; each carries a manifest of its files as written (and, where weights were
edited, re-computed provenance hashes), so that the loader reaches the check the entry is about:
`wrong-format-version/` (featurizer says 99), `missing-role/` (matrix embedder lacks
`dashrank.role`), `missing-weight-initializer/` (`layer2.weight` removed),
`conv-weight-shape-mismatch/` (`layer2.weight` is [9, 3, 4] while 4 channels flow in),
`nan-weight/` (`layer1.weight[3]` is NaN), `unknown-featurizer-op/` (`SparseGELU`),
`truncated-onnx/` (featurizer file cut in half), `malformed-schema-json/` (schema JSON cut off),
`schedule-width-mismatch/` (schema lacks `parchunk`: 45 columns for a 46-wide graph input),
`unknown-kernel/` (`dashrank.kernel` = `spgemm`), `missing-predictor/` (head has no predictor file),
`corrupted-weight/` (one mantissa bit of `final.0.weight[5]` in the predictor flipped after export:
the manifest is the exporter's), `no-manifest/` (a bundle as written before manifests and
provenance hashes existed); `foreign-head/` holds only the two `spade/spmm` files of another
COGNATE model (seed + 1), which the tests copy into `fixtures/tiny-cognate` as a user would;
`good-small.csr` (a valid 4×5 pattern, for contrast), `truncated.csr`, `column-out-of-range.csr`
(a column index equal to `cols`), `row-ptr-not-monotone.csr`, `malformed.mtx` (non-numeric entry,
fewer entries than declared).
"""


def generate(out: Path, seed: int = DEFAULT_SEED) -> None:
    out = Path(out)
    fx = out / "fixtures"
    fx.mkdir(parents=True, exist_ok=True)
    w = tiny_waco(seed)
    write_fixture(w, fx / "tiny-waco-spmm", seed)
    write_fixture(w, fx / "tiny-waco-fp16", seed, fp16=True)
    write_fixture(tiny_dash(seed), fx / "tiny-dash", seed)
    cog = tiny_cognate(seed)
    write_fixture(cog, fx / "tiny-cognate", seed, lines_for=cognate_golden_lines)
    write_bad(w, out / "bad", tiny_cognate(seed + 1))
    (out / "README.md").write_text(README.format(seed=seed))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dashrank_onnx.fixtures", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    a = ap.parse_args(argv)
    generate(Path(a.out), a.seed)
    print(f"wrote fixtures to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
