"""Read a trained COGNATE/DASH state dict into a reference :class:`~dashrank_onnx.reference.Model`.

The naming convention, the mapping file and the metadata file are documented in
``onnx/COGNATE_CHECKPOINTS.md``. In short, with ``<n>`` any integer (sorted ascending; gaps
such as ReLU or pooling modules of an ``nn.Sequential`` are fine) and ``<head>`` =
``<target>__<kernel>``:

=====================================  ===============================================
``ife.<n>.kernel`` (``.bias``)          MinkowskiConvolution kernels ``[kernel_volume, in, out]``
``shape_mlp.<n>.weight`` / ``.bias``    shape MLP (Linear layers, ``[out, in]``)
``matrix_mlp.<n>.weight`` / ``.bias``   matrix embedder MLP over ``concat(conv features, shape)``
``mapper.<n>.weight`` / ``.bias``       configuration mapper FM (52 or 53 inputs)
``latent.<head>.<n>.weight`` / ``.bias``  latent encoder LE of a head
``predictor.<head>.<n>.weight`` / ``.bias``  predictor of a head (last output 1)
=====================================  ===============================================

Every dimension is read from the tensors and checked along the chain; everything a state dict
cannot hold (pool placement, strides, normalization constants, the schedule encoding) comes
from the metadata file. Nothing here needs torch.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import cognate as C
from .export import LayerSpec, build_featurizer
from .reference import (CognateScheduleEmbedder, Head, Linear, MatrixEmbedder, Model, Predictor, Schema,
                        check_pool)

SPLIT_ENCODINGS = ("log2", "linear")
ONEHOT_LAYOUTS = ("segment_major", "position_major")
PREDICTOR_PARTS = ("matrix", "config", "latent")
SHAPE_FEATURES = ("rows", "cols", "nnz")


class CheckpointError(ValueError):
    """A checkpoint, mapping file or metadata file that cannot be converted; the message names
    the tensor (with its checkpoint name), the file or the key."""


# --------------------------------------------------------------------------------------
# Mapping file: our names → the checkpoint's names
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Rule:
    ours: str
    theirs: str
    transpose: bool


def read_mapping(path) -> List[_Rule]:
    """A JSON object ``{our name or prefix: their name or prefix, …}``; a value may also be
    ``{"name": their name, "transpose": true}``. Prefixes end with ``.`` on both sides; keys
    starting with ``_`` are comments."""
    try:
        obj = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"mapping file {path}: {e}") from None
    if not isinstance(obj, dict):
        raise CheckpointError(f"mapping file {path}: expected a JSON object (our name → their name)")
    rules = []
    for ours, v in obj.items():
        if ours.startswith("_"):
            continue
        if isinstance(v, str):
            theirs, tr = v, False
        elif isinstance(v, dict) and isinstance(v.get("name"), str) and set(v) <= {"name", "transpose"} \
                and isinstance(v.get("transpose", False), bool):
            theirs, tr = v["name"], v.get("transpose", False)
        else:
            raise CheckpointError(f"mapping file {path}: entry {ours!r}: value must be a name or "
                                  '{"name": ..., "transpose": true|false}')
        if ours.endswith(".") != theirs.endswith("."):
            raise CheckpointError(f"mapping file {path}: entry {ours!r} → {theirs!r}: a prefix (ending in '.') "
                                  "must map to a prefix")
        rules.append(_Rule(ours, theirs, tr))
    return rules


class Tensors:
    """The checkpoint under our names; remembers each tensor's checkpoint name for messages."""

    def __init__(self, state_dict: Mapping[str, np.ndarray], rules: Sequence[_Rule] = ()):
        exact = {r.theirs: r for r in rules if not r.theirs.endswith(".")}
        prefixes = sorted((r for r in rules if r.theirs.endswith(".")), key=lambda r: -len(r.theirs))
        self.arrays: Dict[str, np.ndarray] = {}
        self.origin: Dict[str, str] = {}
        self.used: set = set()
        used = set()
        for theirs, a in state_dict.items():
            rule = exact.get(theirs) or next((r for r in prefixes if theirs.startswith(r.theirs)), None)
            a = np.asarray(a)
            if rule is None:
                ours = theirs
            else:
                used.add(rule)
                ours = rule.ours + theirs[len(rule.theirs):] if rule.theirs.endswith(".") else rule.ours
                if rule.transpose and not (rule.theirs.endswith(".") and a.ndim < 2):
                    if a.ndim < 2:
                        raise CheckpointError(f"mapping: {theirs!r} has shape {a.shape}: only a tensor of 2 or "
                                              "more dimensions can be transposed")
                    a = np.swapaxes(a, -1, -2)
            if ours in self.arrays:
                raise CheckpointError(f"mapping: both {self.origin[ours]!r} and {theirs!r} become {ours!r}")
            self.arrays[ours] = np.ascontiguousarray(a)
            self.origin[ours] = theirs
        for r in rules:
            if r not in used:
                raise CheckpointError(f"mapping: {r.theirs!r} (for {r.ours!r}) matches no tensor of the checkpoint")

    def name(self, ours: str) -> str:
        theirs = self.origin.get(ours, ours)
        return ours if theirs == ours else f"{ours} (checkpoint name {theirs!r})"

    def indexed(self, prefix: str, leaf: str) -> List[Tuple[int, str]]:
        """``(n, name)`` of the tensors ``<prefix><n>.<leaf>``, sorted by ``n``."""
        pat = re.compile(re.escape(prefix) + r"(\d+)\." + re.escape(leaf) + "$")
        return sorted((int(m.group(1)), k) for k in self.arrays if (m := pat.match(k)))

    def has_prefix(self, prefix: str) -> bool:
        return any(k.startswith(prefix) for k in self.arrays)

    def unused(self) -> List[str]:
        """Checkpoint names of the tensors no conversion step read (e.g. autoencoder decoders)."""
        return sorted(self.origin[k] for k in self.arrays if k not in self.used)

    def float32(self, name: str) -> np.ndarray:
        self.used.add(name)
        a = self.arrays[name]
        if a.dtype.kind != "f":
            raise CheckpointError(f"{self.name(name)}: dtype {a.dtype}, expected floating point weights")
        a = a.astype(np.float32)
        if not np.isfinite(a).all():
            raise CheckpointError(f"{self.name(name)}: non-finite values")
        return a

    def mlp(self, prefix: str, what: str, n_in: Optional[int] = None, n_out: Optional[int] = None,
            in_text: str = "") -> List[Linear]:
        """The Linear layers ``<prefix><n>.weight/.bias`` as ``[(W [out, in], b [out]), …]``, every
        width checked along the chain (``n_in``/``n_out``: the expected first input / last output)."""
        found = self.indexed(prefix, "weight")
        if not found:
            raise CheckpointError(f"{what}: no tensors named {prefix}<n>.weight in the checkpoint")
        layers = []
        prev = n_in
        for i, (_, wname) in enumerate(found):
            W = self.float32(wname)
            if W.ndim != 2:
                raise CheckpointError(f"{what}: {self.name(wname)} has shape {W.shape}, expected [out, in] "
                                      "(a Linear weight; if it is stored [in, out], map it with \"transpose\": true)")
            if prev is not None and W.shape[1] != prev:
                where = in_text if i == 0 and in_text else (f"the previous layer's output {prev}" if i else str(prev))
                raise CheckpointError(f"{what}: {self.name(wname)} has shape {tuple(W.shape)}: its input width "
                                      f"{W.shape[1]} should be {where}")
            bname = wname[: -len("weight")] + "bias"
            if bname in self.arrays:
                b = self.float32(bname).reshape(-1)
                if b.shape != (W.shape[0],):
                    raise CheckpointError(f"{what}: {self.name(bname)} has shape {self.arrays[bname].shape}, "
                                          f"expected ({W.shape[0]},)")
            else:
                b = np.zeros(W.shape[0], np.float32)
            layers.append((W, b))
            prev = W.shape[0]
        if n_out is not None and prev != n_out:
            raise CheckpointError(f"{what}: the last layer {self.name(found[-1][1])} outputs {prev}, expected {n_out}")
        return layers


# --------------------------------------------------------------------------------------
# Metadata file
# --------------------------------------------------------------------------------------

_TOP_KEYS = {"model_name", "shape_normalization", "featurizer", "mapper", "predictor_input", "heads"}
_FEAT_KEYS = {"conv_stride", "pool_after", "pool_kernel", "pool_stride", "taps", "relu"}
_MAPPER_KEYS = {"split_encode", "onehot", "constant_columns"}
_HEAD_KEYS = {"schema", "mapper_fields", "polarity", "score_meaning"}


def _keys(obj, allowed, where):
    if not isinstance(obj, dict):
        raise CheckpointError(f"metadata: {where} must be a JSON object")
    extra = sorted(set(obj) - set(allowed) - {k for k in obj if k.startswith("_")})
    if extra:
        raise CheckpointError(f"metadata: {where}: unknown key(s) {extra} (known: {sorted(allowed)})")
    return obj


@dataclass
class HeadMeta:
    schema: Schema
    mapper_fields: int
    mapper_width: int                # encoded columns of the first `mapper_fields` fields
    polarity: str
    meaning: str


@dataclass
class Metadata:
    raw: dict
    mapper: dict
    predictor_input: List[str]
    heads: Dict[str, dict]

    @classmethod
    def read(cls, path) -> "Metadata":
        try:
            obj = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise CheckpointError(f"metadata file {path}: {e}") from None
        return cls.parse(obj)

    @classmethod
    def parse(cls, obj) -> "Metadata":
        _keys(obj, _TOP_KEYS, "the top level")
        mapper = dict(_keys(obj.get("mapper", {}), _MAPPER_KEYS, "mapper"))
        mapper.setdefault("split_encode", "log2")
        mapper.setdefault("onehot", "segment_major")
        mapper.setdefault("constant_columns", [])
        if mapper["split_encode"] not in SPLIT_ENCODINGS:
            raise CheckpointError(f"metadata: mapper.split_encode must be one of {SPLIT_ENCODINGS}")
        if mapper["onehot"] not in ONEHOT_LAYOUTS:
            raise CheckpointError(f"metadata: mapper.onehot must be one of {ONEHOT_LAYOUTS}")
        consts = mapper["constant_columns"]
        if not isinstance(consts, list) or not all(
                isinstance(c, dict) and isinstance(c.get("index"), int) and not isinstance(c.get("index"), bool)
                and isinstance(c.get("value"), (int, float)) and not isinstance(c.get("value"), bool)
                and set(c) <= {"index", "value", "meaning"} for c in consts):
            raise CheckpointError('metadata: mapper.constant_columns must be a list of {"index": int, '
                                  '"value": number, "meaning": text}')
        order = obj.get("predictor_input", list(PREDICTOR_PARTS))
        if not isinstance(order, list) or sorted(order) != sorted(PREDICTOR_PARTS):
            raise CheckpointError(f"metadata: predictor_input must be a permutation of {list(PREDICTOR_PARTS)}")
        heads = obj.get("heads", {})
        if not isinstance(heads, dict):
            raise CheckpointError("metadata: heads must be a JSON object (head name → settings)")
        for h, hv in heads.items():
            if not re.fullmatch(r"[a-z0-9-]+/[a-z0-9]+", h):
                raise CheckpointError(f"metadata: heads: {h!r} is not a head name (<target>/<kernel>)")
            _keys(hv, _HEAD_KEYS, f"heads.{h}")
        return cls(obj, mapper, order, heads)

    def head(self, name: str) -> HeadMeta:
        target, _, kernel = name.partition("/")
        hv = self.heads.get(name, {})
        spec = hv.get("schema", "unified")
        if spec == "unified":
            if (target, kernel) not in C.HETERO:
                raise CheckpointError(f"head {name!r}: no unified schema for this (target, kernel); give "
                                      f"heads.{name}.schema as a schema object (docs/bundle-format.md §5.1)")
            fields = C.unified_fields()
            for f in fields:
                if f["kind"] == "integer":
                    f["encode"] = self.mapper["split_encode"]
            fields += [{"name": n, "kind": "choice", "values": list(v)} for n, v in C.HETERO[(target, kernel)]]
            schema = Schema({"name": f"cognate-unified-{target}-{kernel}", "version": 1, "text_format": "waco",
                             "fields": fields})
            n_fields = 4
        else:
            try:
                schema = Schema(spec)
            except (ValueError, KeyError, TypeError) as e:
                raise CheckpointError(f"metadata: heads.{name}.schema: {e}") from None
            n_fields = hv.get("mapper_fields", 4)
        if not isinstance(n_fields, int) or not 1 <= n_fields < len(schema.fields):
            raise CheckpointError(f"metadata: heads.{name}.mapper_fields must be an integer in [1, "
                                  f"{len(schema.fields) - 1}]")
        cols = schema.columns()
        width = cols[schema.fields[n_fields - 1]["name"]][1]
        polarity = hv.get("polarity", "lower_is_better")
        if polarity not in ("lower_is_better", "higher_is_better"):
            raise CheckpointError(f"metadata: heads.{name}.polarity must be lower_is_better or higher_is_better")
        return HeadMeta(schema, n_fields, width, polarity, hv.get("score_meaning", C.MEANING))

    def normalization(self, n_in: int) -> Tuple[List[str], List[float], List[float], str]:
        sn = self.raw.get("shape_normalization")
        if sn is None:
            raise CheckpointError("metadata: shape_normalization is required (the mean and std of rows, cols "
                                  "and nnz the model was trained with)")
        _keys(sn, {"features", "mean", "std", "source"}, "shape_normalization")
        feats = sn.get("features", list(SHAPE_FEATURES))
        mean, std = sn.get("mean"), sn.get("std")
        ok = (isinstance(feats, list) and all(f in SHAPE_FEATURES for f in feats) and isinstance(mean, list)
              and isinstance(std, list) and len(mean) == len(std) == len(feats)
              and all(isinstance(x, (int, float)) and math.isfinite(x) for x in mean + std)
              and all(s > 0 for s in std))
        if not ok:
            raise CheckpointError(f"metadata: shape_normalization needs features ⊆ {list(SHAPE_FEATURES)} and "
                                  "mean / std of the same length, finite, std > 0")
        if len(feats) != n_in:
            raise CheckpointError(f"metadata: shape_normalization lists {len(feats)} features but the shape MLP "
                                  f"takes {n_in} inputs")
        return list(feats), [float(x) for x in mean], [float(x) for x in std], \
            str(sn.get("source", "given in the conversion metadata"))


# --------------------------------------------------------------------------------------
# Parts
# --------------------------------------------------------------------------------------

def featurizer(t: Tensors, meta: Metadata):
    """(FeaturizerGraph, F) from ``ife.<n>.kernel`` and the metadata's featurizer section."""
    fm = _keys(meta.raw.get("featurizer", {}), _FEAT_KEYS, "featurizer")
    kernels = t.indexed("ife.", "kernel")
    if not kernels:
        raise CheckpointError("featurizer: no tensors named ife.<n>.kernel in the checkpoint")
    n = len(kernels)
    stride = fm.get("conv_stride", 1)
    strides = stride if isinstance(stride, list) else [stride] * n
    pools = fm.get("pool_after", [3, 6, 9] if n == 12 else [])
    taps = fm.get("taps", [n])
    pk, ps = fm.get("pool_kernel", 2), fm.get("pool_stride", 2)
    relu = fm.get("relu", True)
    for key, v in [("conv_stride", strides), ("pool_after", pools), ("taps", taps)]:
        if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            raise CheckpointError(f"metadata: featurizer.{key} must be an integer or a list of integers")
    if len(strides) != n or any(s < 1 for s in strides):
        raise CheckpointError(f"metadata: featurizer.conv_stride lists {len(strides)} strides for {n} conv layers")
    for key, v in [("pool_after", pools), ("taps", taps)]:
        if any(not 1 <= x <= n for x in v) or len(set(v)) != len(v):
            raise CheckpointError(f"metadata: featurizer.{key} must name distinct conv layers 1…{n}, got {v}")
    if not taps:
        raise CheckpointError("metadata: featurizer.taps is empty: at least one layer must be pooled into F")
    try:
        if pools:
            check_pool(pk, ps)
    except ValueError as e:
        raise CheckpointError(f"metadata: featurizer pool {pk}/{ps}: {e}") from None
    layers, weights, biases = [], [], []
    cin = 1
    for i, (_, kname) in enumerate(kernels, start=1):
        W = t.float32(kname)
        if W.ndim != 3:
            raise CheckpointError(f"featurizer layer {i}: {t.name(kname)} has shape {W.shape}, expected "
                                  "[kernel_volume, in, out] (MinkowskiConvolution.kernel)")
        ks = math.isqrt(W.shape[0])
        if ks * ks != W.shape[0]:
            raise CheckpointError(f"featurizer layer {i}: {t.name(kname)} has kernel volume {W.shape[0]}, not a "
                                  "square: only 2-D convolutions are supported")
        if W.shape[1] != cin:
            src = ("dashrank feeds one input channel (1.0 per stored entry)" if i == 1
                   else f"layer {i - 1} outputs {cin} channels")
            raise CheckpointError(f"featurizer layer {i}: {t.name(kname)} has shape {tuple(W.shape)}: {W.shape[1]} "
                                  f"input channels, but {src}")
        bname = kname[: -len("kernel")] + "bias"
        b = None
        if bname in t.arrays:
            b = t.float32(bname).reshape(-1)
            if b.shape != (W.shape[2],):
                raise CheckpointError(f"featurizer layer {i}: {t.name(bname)} has shape {t.arrays[bname].shape}, "
                                      f"expected ({W.shape[2]},) or (1, {W.shape[2]})")
        layers.append(LayerSpec(ks, strides[i - 1], W.shape[1], W.shape[2], relu=bool(relu),
                                pool=(pk, ps) if i in pools else None, tap=i in taps, bias=b is not None))
        weights.append(W)
        biases.append(b)
        cin = W.shape[2]
    F = sum(L.cout for L in layers if L.tap)
    return build_featurizer(layers, weights, biases), F


def matrix_embedder(t: Tensors, meta: Metadata, F: int) -> MatrixEmbedder:
    first = t.indexed("shape_mlp.", "weight")
    if not first:
        raise CheckpointError("shape MLP: no tensors named shape_mlp.<n>.weight in the checkpoint")
    n_in = t.float32(first[0][1]).shape[-1]
    feats, mean, std, source = meta.normalization(n_in)
    shape = t.mlp("shape_mlp.", "shape MLP", n_in=len(feats))
    S = shape[-1][0].shape[0]
    embed = t.mlp("matrix_mlp.", "matrix embedder", n_in=F + S,
                  in_text=f"F + S = {F} + {S} = {F + S} (F: channels of the pooled featurizer layers, "
                          "S: the shape MLP's output)")
    return MatrixEmbedder(shape, embed, mean, std, feats, source)


def _onehot_perm(schema: Schema, n_fields: int) -> np.ndarray:
    """Column permutation taking a position-major one-hot (``[position, segment]``) to the
    schema's segment-major encoding, for every permutation field among the mapper fields."""
    cols = schema.columns()
    perm = np.arange(cols[schema.fields[n_fields - 1]["name"]][1])
    for f in schema.fields[:n_fields]:
        if f["kind"] == "permutation":
            s, _ = cols[f["name"]]
            n = len(f["symbols"])
            for k in range(n):
                for p in range(n):
                    perm[s + k * n + p] = s + p * n + k
    return perm


def mapper(t: Tensors, meta: Metadata, hm: HeadMeta) -> List[Linear]:
    """The configuration mapper with constant columns folded into the first bias and a
    position-major one-hot permuted into dashrank's segment-major encoding."""
    consts = meta.mapper["constant_columns"]
    n_in = hm.mapper_width + len(consts)
    hint = (f"{hm.mapper_width} encoded columns of the mapper fields"
            + (f" + {len(consts)} constant column(s) from the metadata" if consts else "")
            + (" (a 53-input mapper needs mapper.constant_columns, see COGNATE_CHECKPOINTS.md)"
               if not consts and hm.mapper_width == C.MAPPER_WIDTH else ""))
    layers = t.mlp("mapper.", "configuration mapper", n_in=n_in, in_text=f"{n_in} = {hint}")
    W, b = layers[0]
    idx = [c["index"] for c in consts]
    if len(set(idx)) != len(idx) or any(not 0 <= i < n_in for i in idx):
        raise CheckpointError(f"metadata: mapper.constant_columns indices {idx} must be distinct and in [0, {n_in})")
    W64 = W.astype(np.float64)
    b = (b.astype(np.float64) + sum(W64[:, c["index"]] * float(c["value"]) for c in consts)).astype(np.float32)
    W = np.delete(W, idx, axis=1)
    if meta.mapper["onehot"] == "position_major":
        W = W[:, _onehot_perm(hm.schema, hm.mapper_fields)]
    return [(np.ascontiguousarray(W), b)] + layers[1:]


def head_key(name: str) -> str:
    return name.replace("/", "__")


def checkpoint_heads(t: Tensors) -> List[str]:
    """Head names (``target/kernel``) found as ``latent.<head>.`` / ``predictor.<head>.``."""
    found = {}
    for k in t.arrays:
        m = re.match(r"(latent|predictor)\.([^.]+)\.\d+\.weight$", k)
        if m:
            found.setdefault(m.group(2), set()).add(m.group(1))
    out = []
    for key, parts in sorted(found.items()):
        if parts != {"latent", "predictor"}:
            missing = ({"latent", "predictor"} - parts).pop()
            raise CheckpointError(f"head {key!r}: {sorted(parts)[0]}.{key}.* found but no {missing}.{key}.* tensors")
        target, sep, kernel = key.partition("__")
        if not sep or target not in C.TARGETS or kernel not in ("spmm", "sddmm", "spmv"):
            raise CheckpointError(f"head {key!r}: expected <target>__<kernel> with target in {list(C.TARGETS)} and "
                                  "kernel spmm, sddmm or spmv (map the checkpoint's module names with a mapping file)")
        out.append(f"{target}/{kernel}")
    return out


def head(t: Tensors, meta: Metadata, name: str, mapper_layers: List[Linear], Em: int) -> Head:
    hm = meta.head(name)
    key = head_key(name)
    M = hm.mapper_width
    H = hm.schema.width - M
    latent = t.mlp(f"latent.{key}.", f"latent encoder of {name}", n_in=H,
                   in_text=f"{H} (the heterogeneous columns of the head's schema: {hm.schema.width} - {M})")
    se = CognateScheduleEmbedder([(W.copy(), b.copy()) for W, b in mapper_layers], latent, M, hm.schema.width)
    widths = {"matrix": Em, "config": se.config_width, "latent": se.latent_width}
    total = sum(widths.values())
    order = meta.predictor_input
    layers = t.mlp(f"predictor.{key}.", f"predictor of {name}", n_in=total, n_out=1,
                   in_text=" + ".join(f"{p} {widths[p]}" for p in order) + f" = {total}")
    W, b = layers[0]
    starts = {}
    s = 0
    for p in order:
        starts[p] = s
        s += widths[p]
    cols = np.concatenate([np.arange(starts[p], starts[p] + widths[p]) for p in PREDICTOR_PARTS])
    layers[0] = (np.ascontiguousarray(W[:, cols]), b)
    return Head(name, name.split("/")[1], name.split("/")[0], hm.schema, se, Predictor(layers), hm.polarity,
                hm.meaning)


def convert(t: Tensors, meta: Metadata, model_name: str) -> Model:
    """A whole bundle's model from a full checkpoint."""
    names = checkpoint_heads(t)
    if not names:
        raise CheckpointError("the checkpoint has no head (latent.<target>__<kernel>.* and "
                              "predictor.<target>__<kernel>.*)")
    unknown = sorted(set(meta.heads) - set(names))
    if unknown:
        raise CheckpointError(f"metadata: heads {unknown} are not in the checkpoint (it has {names})")
    feat, F = featurizer(t, meta)
    me = matrix_embedder(t, meta, F)
    Em = me.embed_mlp[-1][0].shape[0]
    metas = {n: meta.head(n) for n in names}
    widths = {hm.mapper_width for hm in metas.values()}
    if len(widths) != 1:
        raise CheckpointError(f"heads disagree on the mapper's input columns: "
                              f"{ {n: hm.mapper_width for n, hm in metas.items()} }; the mapper is shared")
    fm = mapper(t, meta, metas[names[0]])
    heads = {n: head(t, meta, n, fm, Em) for n in names}
    return Model("cognate", model_name, feat, me, heads)
