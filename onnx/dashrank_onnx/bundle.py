"""Write and read dashrank bundles (docs/bundle-format.md).

``write_bundle`` turns a reference :class:`Model` into the four kinds of ONNX files with the
spec's metadata (provenance hashes included, :mod:`~dashrank_onnx.integrity`), checking every
file with ``onnx.checker.check_model``, and writes the bundle's ``manifest.json``.
``read_bundle`` checks the manifest and the provenance, then loads a bundle directory into a
:class:`LoadedBundle`, whose dense graphs run on a small numpy executor for exactly the op set
the exporter emits (the same ops a native Rust executor needs).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from . import FORMAT_VERSION, SPARSE_DOMAIN
from .export import (featurizer_proto, featurizer_width, make_model, matrix_embedder_proto,
                     predictor_proto, schedule_embedder_proto)
from .integrity import (check_manifest, check_provenance, check_weights, read_manifest, stamp_provenance,
                        write_manifest)
from .reference import (FeaturizerGraph, Model, Node, Pattern, Schema, run_featurizer)

ROLES = ("featurizer", "matrix_embedder", "schedule_embedder", "predictor")


class BundleError(ValueError):
    pass


def head_file_stem(head: str) -> str:
    return head.replace("/", "__")


def _common(model: Model, role: str) -> Dict[str, str]:
    return _meta(model.family, model.model_name, role)


def _meta(family: str, model_name: str, role: str) -> Dict[str, str]:
    return {"dashrank.format_version": str(FORMAT_VERSION), "dashrank.role": role,
            "dashrank.family": family, "dashrank.model_name": model_name}


def check(m: onnx.ModelProto) -> None:
    onnx.checker.check_model(m)


def save(m: onnx.ModelProto, path: Path) -> None:
    check(m)
    data = m.SerializeToString()
    with open(path, "wb") as f:
        f.write(data)


def bundle_models(model: Model, fp16: bool = False) -> Dict[str, onnx.ModelProto]:
    """File name → ModelProto (conventional names), provenance hashes recorded in every file."""
    out = {}
    F = featurizer_width(model.featurizer)
    out["featurizer.onnx"] = make_model(featurizer_proto(model.featurizer, fp16),
                                        _common(model, "featurizer"), sparse=True)
    me = model.matrix_embedder
    meta = _common(model, "matrix_embedder")
    meta["dashrank.shape_normalization"] = json.dumps(
        {"features": list(me.features), "mean": [float(x) for x in me.mean],
         "std": [float(x) for x in me.std], "source": me.source})
    out["matrix_embedder.onnx"] = make_model(matrix_embedder_proto(me, F, fp16), meta)
    Em = me.embed_mlp[-1][0].shape[0]
    for h in model.heads.values():
        out.update(head_models(model.family, model.model_name, h, Em, fp16))
    stamp_provenance(out)
    return out


def head_models(family: str, model_name: str, h, Em: int, fp16: bool = False) -> Dict[str, onnx.ModelProto]:
    """The two files of one head (file name → ModelProto), without provenance keys."""
    hm = {"dashrank.head": h.name, "dashrank.kernel": h.kernel, "dashrank.target": h.target}
    se_meta = {**_meta(family, model_name, "schedule_embedder"), **hm,
               "dashrank.schedule_schema": h.schema.to_json()}
    stem = head_file_stem(h.name)
    Es = h.schedule_embedder.out_width
    pr_meta = {**_meta(family, model_name, "predictor"), **hm, "dashrank.score_polarity": h.polarity,
               "dashrank.score_meaning": h.meaning}
    return {f"{stem}.schedule_embedder.onnx": make_model(schedule_embedder_proto(h.schedule_embedder, fp16), se_meta),
            f"{stem}.predictor.onnx": make_model(predictor_proto(h.predictor, Em, Es, fp16), pr_meta)}


def write_bundle(model: Model, out_dir, fp16: bool = False) -> List[Path]:
    """Writes the bundle files and ``manifest.json`` (returned last). A directory that already
    holds other ``.onnx`` files is refused: the manifest must not vouch for leftovers."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = bundle_models(model, fp16)
    stale = sorted(p.name for p in out_dir.glob("*.onnx") if p.name not in files)
    if stale:
        raise BundleError(f"{out_dir} already holds {stale}, which this bundle does not contain: "
                          "write to an empty directory (or remove them)")
    written = []
    for fname, m in files.items():
        p = out_dir / fname
        save(m, p)
        written.append(p)
    written.append(write_manifest(out_dir))
    return written


# --------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------

def tensor_to_f32(t: onnx.TensorProto) -> np.ndarray:
    a = numpy_helper.to_array(t)
    if a.dtype.kind == "f":
        a = a.astype(np.float32)
        if not np.isfinite(a).all():
            raise BundleError(f"tensor {t.name!r} has non-finite values")
    return a


def metadata(m: onnx.ModelProto) -> Dict[str, str]:
    return {p.key: p.value for p in m.metadata_props}


def featurizer_graph(m: onnx.ModelProto) -> FeaturizerGraph:
    g = m.graph
    inits = {t.name: tensor_to_f32(t) for t in g.initializer}
    nodes = []
    for n in g.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        nodes.append(Node(n.op_type, list(n.input), list(n.output), attrs, name=n.name, domain=n.domain))
    if len(g.input) != 1 or len(g.output) != 1:
        raise BundleError("featurizer must have exactly one input and one output")
    return FeaturizerGraph(nodes, inits, g.input[0].name, g.output[0].name)


def run_dense(m: onnx.ModelProto, feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """numpy executor for the dense op set: Gemm, MatMul, Add, Relu, Gather, Cast, Slice,
    Concat, Squeeze, Unsqueeze, Reshape, Flatten, Identity."""
    env = {t.name: tensor_to_f32(t) for t in m.graph.initializer}
    env.update({k: np.asarray(v) for k, v in feeds.items()})
    for n in m.graph.node:
        a = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
        x = [env[i] if i else None for i in n.input]
        op = n.op_type
        if op == "Gemm":
            A, B = x[0], x[1]
            if a.get("transA", 0):
                A = A.T
            if a.get("transB", 0):
                B = B.T
            y = a.get("alpha", 1.0) * (A @ B)
            if len(x) > 2 and x[2] is not None:
                y = y + a.get("beta", 1.0) * x[2]
        elif op == "MatMul":
            y = x[0] @ x[1]
        elif op == "Add":
            y = x[0] + x[1]
        elif op == "Relu":
            y = np.maximum(x[0], 0)
        elif op == "Gather":
            y = np.take(x[0], x[1].astype(np.int64), axis=a.get("axis", 0))
        elif op == "Cast":
            to = a["to"]
            y = x[0].astype({onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.INT64: np.int64,
                             onnx.TensorProto.INT32: np.int32}[to])
        elif op == "Slice":
            axes = x[3] if len(x) > 3 and x[3] is not None else range(len(x[1]))
            sl = [slice(None)] * x[0].ndim
            for s, e, ax in zip(x[1], x[2], axes):
                sl[int(ax)] = slice(int(s), int(e))
            y = x[0][tuple(sl)]
        elif op == "Concat":
            y = np.concatenate(x, axis=a["axis"])
        elif op == "Squeeze":
            y = np.squeeze(x[0], axis=tuple(int(i) for i in x[1])) if len(x) > 1 else np.squeeze(x[0])
        elif op == "Unsqueeze":
            y = np.expand_dims(x[0], tuple(int(i) for i in x[1]))
        elif op == "Reshape":
            y = x[0].reshape([int(d) for d in x[1]])
        elif op == "Flatten":
            ax = a.get("axis", 1)
            y = x[0].reshape(int(np.prod(x[0].shape[:ax])), -1)
        elif op == "Identity":
            y = x[0]
        else:
            raise BundleError(f"node {n.name!r}: op {op} not supported by the numpy executor")
        if isinstance(y, np.ndarray) and y.dtype == np.float64:
            y = y.astype(np.float32)
        env[n.output[0]] = y
    return {o.name: env[o.name] for o in m.graph.output}


@dataclass
class LoadedHead:
    name: str
    kernel: str
    target: str
    schema: Schema
    polarity: str
    schedule_embedder: onnx.ModelProto
    predictor: onnx.ModelProto

    def embed(self, enc: np.ndarray) -> np.ndarray:
        return run_dense(self.schedule_embedder, {"schedule": enc.astype(np.float32)})["schedule_embedding"]

    def predict(self, memb: np.ndarray, semb: np.ndarray) -> np.ndarray:
        m = np.repeat(memb, semb.shape[0], axis=0)
        return run_dense(self.predictor, {"matrix_embedding": m, "schedule_embedding": semb})["score"]


class LoadedBundle:
    """A bundle read back; ``allow_provenance_mismatch`` accepts heads of another model (their
    mismatches are kept in ``provenance_warnings``), corrupted files are always refused."""

    def __init__(self, directory, allow_provenance_mismatch: bool = False):
        self.directory = Path(directory)
        files = sorted(self.directory.glob("*.onnx"))
        if not files:
            raise BundleError(f"{directory}: no .onnx files")
        self.featurizer_model = None
        self.matrix_model = None
        ses, prs = {}, {}
        families = set()
        names = {}
        for f in files:
            m = onnx.load(str(f))
            names[id(m)] = f.name
            md = metadata(m)
            v = md.get("dashrank.format_version")
            if v != str(FORMAT_VERSION):
                raise BundleError(f"{f.name}: format version {v!r} outside the supported window [1, 1]")
            role = md.get("dashrank.role")
            if role not in ROLES:
                raise BundleError(f"{f.name}: bad or missing dashrank.role {role!r}")
            families.add(md.get("dashrank.family"))
            if role == "featurizer":
                if self.featurizer_model is not None:
                    raise BundleError("more than one featurizer")
                self.featurizer_model = m
            elif role == "matrix_embedder":
                if self.matrix_model is not None:
                    raise BundleError("more than one matrix embedder")
                self.matrix_model = m
            elif role == "schedule_embedder":
                ses[md["dashrank.head"]] = m
            else:
                prs[md["dashrank.head"]] = m
        if self.featurizer_model is None or self.matrix_model is None:
            raise BundleError("bundle lacks a featurizer or a matrix embedder")
        if len(families) != 1:
            raise BundleError(f"files disagree on family: {sorted(map(str, families))}")
        self.family = families.pop()
        for h in ses:
            if h not in prs:
                raise BundleError(f"head {h!r} has no predictor")
        # docs/bundle-format.md §7.3, in the loader's order
        read_manifest(self.directory)
        head_files = {h: (names[id(se)], se, names[id(prs[h])], prs[h]) for h, se in ses.items()}
        self.featurizer_sha256, self.mapper_sha256, self.provenance_warnings = check_provenance(
            self.featurizer_model, self.matrix_model, head_files, allow_provenance_mismatch)
        check_manifest(self.directory)
        check_weights(self.featurizer_model, self.matrix_model, head_files)
        md0 = metadata(self.featurizer_model)
        self.model_name = md0.get("dashrank.model_name")
        self.featurizer = featurizer_graph(self.featurizer_model)
        norm = json.loads(metadata(self.matrix_model)["dashrank.shape_normalization"])
        self.norm = norm
        # force-load every initializer so non-finite weights are reported at load
        for m in [self.matrix_model, *ses.values(), *prs.values()]:
            for t in m.graph.initializer:
                tensor_to_f32(t)
        self.heads: Dict[str, LoadedHead] = {}
        for h, se in ses.items():
            if h not in prs:
                raise BundleError(f"head {h!r} has no predictor")
            smd, pmd = metadata(se), metadata(prs[h])
            self.heads[h] = LoadedHead(h, smd["dashrank.kernel"], smd["dashrank.target"],
                                       Schema(smd["dashrank.schedule_schema"]),
                                       pmd["dashrank.score_polarity"], se, prs[h])

    def shape_features(self, rows: int, cols: int, nnz: int) -> np.ndarray:
        vals = {"rows": rows, "cols": cols, "nnz": nnz}
        x = np.array([vals[f] for f in self.norm["features"]], dtype=np.float64)
        return ((x - np.asarray(self.norm["mean"])) / np.asarray(self.norm["std"])).astype(np.float32)[None, :]

    def embed_matrix(self, pat: Pattern):
        r, c = pat.coords()
        conv = run_featurizer(self.featurizer, r, c)
        shape = self.shape_features(pat.rows, pat.cols, pat.nnz)
        memb = run_dense(self.matrix_model, {"conv_features": conv, "shape_features": shape})["matrix_embedding"]
        return conv, shape, memb

    def score(self, head: str, memb: np.ndarray, lines: Sequence[str]):
        h = self.heads[head]
        enc, ok, errs = h.schema.encode(lines)
        if not ok:
            return enc, np.zeros((0, 0), np.float32), np.zeros(0, np.float32), ok, errs
        semb = h.embed(enc)
        return enc, semb, h.predict(memb, semb)[:, 0], ok, errs


def read_bundle(directory, allow_provenance_mismatch: bool = False) -> LoadedBundle:
    return LoadedBundle(directory, allow_provenance_mismatch)
