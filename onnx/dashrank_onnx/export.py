"""Build the ONNX graphs of a bundle from a reference :class:`~dashrank_onnx.reference.Model`.

* featurizer: a generic layer description (:class:`LayerSpec`) → node list in the custom
  domain ``ai.dashrank.sparse`` (WACO's 14-layer stride-2 pyramid with a tap per layer and
  DASH's 12-layer 4-block IFE with max pools both go through :func:`build_featurizer`);
* matrix embedder / schedule embedder / predictor: standard ONNX built only from
  ``Gemm, Relu, Concat, Gather, Cast, Slice`` (``Cast`` also turns FLOAT16 initializers
  into FLOAT when exporting with ``fp16=True``). The schedule embedder is either WACO's
  (embedding lookups + a linear map of the permutation block, then an MLP) or COGNATE's
  (:class:`~dashrank_onnx.reference.CognateScheduleEmbedder`: ``Slice`` of the 52 unified
  columns → configuration-mapper MLP, ``Slice`` of the heterogeneous columns → latent-encoder
  MLP, ``Concat``); see :mod:`dashrank_onnx.cognate` for the COGNATE/DASH model and its CLI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper

from . import SPARSE_DOMAIN
from .reference import (check_pool, CognateScheduleEmbedder, FeaturizerGraph, Head, MatrixEmbedder, Node,
                        Piece, Predictor, ScheduleEmbedder)

DENSE_OPSET = 17
SPARSE_OPSET = 1
IR_VERSION = 8

DENSE_OPS = ("Gemm", "Relu", "Concat", "Gather", "Cast", "Slice")


# --------------------------------------------------------------------------------------
# Featurizer
# --------------------------------------------------------------------------------------

@dataclass
class LayerSpec:
    """One featurizer layer: sparse conv (+ optional bias) → optional ReLU → optional max
    pool; ``tap`` adds a global average pool of the layer's output to the final concat."""

    kernel: int
    stride: int
    cin: int
    cout: int
    relu: bool = True
    pool: Optional[Tuple[int, int]] = None  # (kernel_size, stride)
    tap: bool = False
    bias: bool = False
    dilation: int = 1


def build_featurizer(layers: Sequence[LayerSpec], weights: Sequence[np.ndarray],
                     biases: Optional[Sequence[Optional[np.ndarray]]] = None) -> FeaturizerGraph:
    """Node list + initializers for a layer description. ``weights[i]`` is [k², cin, cout]."""
    if len(weights) != len(layers):
        raise ValueError(f"{len(layers)} layers but {len(weights)} weights")
    nodes: List[Node] = []
    inits: Dict[str, np.ndarray] = {}
    cur = "pattern"
    cin = 1
    taps = []
    for i, (L, W) in enumerate(zip(layers, weights), start=1):
        W = np.asarray(W, dtype=np.float32)
        if W.shape != (L.kernel * L.kernel, L.cin, L.cout):
            raise ValueError(f"layer {i}: weight shape {W.shape}, expected {(L.kernel ** 2, L.cin, L.cout)}")
        if L.cin != cin:
            raise ValueError(f"layer {i}: cin {L.cin} but {cin} channels flow in")
        wname = f"layer{i}.weight"
        inits[wname] = W
        ins = [cur, wname]
        if L.bias:
            b = biases[i - 1] if biases is not None else None
            if b is None:
                raise ValueError(f"layer {i}: bias requested but not given")
            inits[f"layer{i}.bias"] = np.asarray(b, dtype=np.float32)
            ins.append(f"layer{i}.bias")
        attrs = {"kernel_size": L.kernel, "stride": L.stride}
        if L.dilation != 1:
            attrs["dilation"] = L.dilation
        out = f"layer{i}.conv"
        nodes.append(Node("SparseConv", ins, [out], attrs, name=f"layer{i}.conv"))
        cur = out
        if L.relu:
            nodes.append(Node("SparseReLU", [cur], [f"layer{i}.relu"], {}, name=f"layer{i}.relu"))
            cur = f"layer{i}.relu"
        if L.pool is not None:
            check_pool(*L.pool)
            nodes.append(Node("SparseMaxPool", [cur], [f"layer{i}.pool"],
                              {"kernel_size": L.pool[0], "stride": L.pool[1]}, name=f"layer{i}.pool"))
            cur = f"layer{i}.pool"
        if L.tap:
            nodes.append(Node("SparseGlobalAvgPool", [cur], [f"layer{i}.gap"], {}, name=f"layer{i}.gap"))
            taps.append(f"layer{i}.gap")
        cin = L.cout
    if not taps:
        raise ValueError("featurizer has no tap (no global average pool)")
    nodes.append(Node("Concat", taps, ["conv_features"], {"axis": 1}, name="concat", domain=""))
    return FeaturizerGraph(nodes, inits)


def featurizer_width(graph: FeaturizerGraph) -> int:
    """F = sum of the channel counts of the tapped values."""
    ch = {"pattern": 1}
    for n in graph.nodes:
        if n.op_type == "SparseConv":
            ch[n.outputs[0]] = graph.initializers[n.inputs[1]].shape[2]
        elif n.op_type == "Concat":
            ch[n.outputs[0]] = sum(ch[i] for i in n.inputs)
        else:
            ch[n.outputs[0]] = ch[n.inputs[0]]
    return ch[graph.output]


def waco_layers(channels: int = 32, n_layers: int = 14, first_kernel: int = 5) -> List[LayerSpec]:
    """WACONet: conv k5 s1 1→C, then (n_layers-1) × conv k3 s2 C→C, ReLU after each, tap each."""
    out = [LayerSpec(first_kernel, 1, 1, channels, tap=True)]
    out += [LayerSpec(3, 2, channels, channels, tap=True) for _ in range(n_layers - 1)]
    return out


def dash_layers(widths=(32, 32, 64, 64, 64, 128, 128, 128, 256, 256, 256, 256), pools=(3, 6, 9),
                conv_stride: int = 1, pool=(2, 2)) -> List[LayerSpec]:
    """DASH/COGNATE IFE: 12 convs (k5 then k3) in 4 blocks, max pool after L3, L6, L9, global
    average pool of the last layer only. Strides/activations are not given by the papers; this
    uses stride-1 convs, ReLU, and 2×2 stride-2 max pools."""
    out, cin = [], 1
    for i, w in enumerate(widths, start=1):
        out.append(LayerSpec(5 if i == 1 else 3, conv_stride, cin, w,
                             pool=pool if i in pools else None, tap=(i == len(widths))))
        cin = w
    return out


def _attr(v):
    return v


def featurizer_proto(graph: FeaturizerGraph, fp16: bool = False) -> onnx.GraphProto:
    nodes = []
    for n in graph.nodes:
        nodes.append(helper.make_node(n.op_type, n.inputs, n.outputs, name=n.name,
                                      domain=n.domain, **n.attrs))
    inits = [_tensor(name, arr, fp16) for name, arr in graph.initializers.items()]
    F = featurizer_width(graph)
    inp = helper.make_tensor_value_info("pattern", TensorProto.FLOAT, ["nnz", 1])
    out = helper.make_tensor_value_info("conv_features", TensorProto.FLOAT, [1, F])
    return helper.make_graph(nodes, "featurizer", [inp], [out], initializer=inits)


# --------------------------------------------------------------------------------------
# Dense graphs
# --------------------------------------------------------------------------------------

def _tensor(name: str, arr: np.ndarray, fp16: bool) -> TensorProto:
    a = np.asarray(arr)
    if a.dtype.kind == "f":
        a = a.astype("<f2" if fp16 else "<f4")
    t = TensorProto()
    t.name = name
    t.dims.extend(a.shape)
    t.data_type = {np.dtype("<f4"): TensorProto.FLOAT, np.dtype("<f2"): TensorProto.FLOAT16,
                   np.dtype("<i8"): TensorProto.INT64}[a.dtype]
    t.raw_data = np.ascontiguousarray(a).tobytes()
    return t


class _DenseBuilder:
    def __init__(self, fp16: bool):
        self.fp16 = fp16
        self.nodes = []
        self.inits = []
        self._n = 0

    def fresh(self, base: str) -> str:
        self._n += 1
        return f"{base}_{self._n}"

    def weight(self, name: str, arr: np.ndarray) -> str:
        """A float initializer usable as FLOAT (Cast inserted for FLOAT16)."""
        if self.fp16:
            self.inits.append(_tensor(name + ".f16", arr, True))
            self.nodes.append(helper.make_node("Cast", [name + ".f16"], [name], name=f"cast_{name}",
                                               to=TensorProto.FLOAT))
        else:
            self.inits.append(_tensor(name, arr, False))
        return name

    def const_i64(self, name: str, arr) -> str:
        self.inits.append(_tensor(name, np.asarray(arr, dtype=np.int64), False))
        return name

    def gemm(self, x: str, W, b, prefix: str, out: Optional[str] = None) -> str:
        w = self.weight(f"{prefix}.weight", W)
        bb = self.weight(f"{prefix}.bias", b)
        out = out or f"{prefix}.out"
        self.nodes.append(helper.make_node("Gemm", [x, w, bb], [out], name=f"{prefix}.gemm", transB=1))
        return out

    def mlp(self, x: str, layers, prefix: str, out: str) -> str:
        h = x
        for i, (W, b) in enumerate(layers):
            last = i + 1 == len(layers)
            h = self.gemm(h, W, b, f"{prefix}.{i}", out if last else None)
            if not last:
                r = f"{prefix}.{i}.relu"
                self.nodes.append(helper.make_node("Relu", [h], [r], name=r))
                h = r
        return h


def matrix_embedder_proto(me: MatrixEmbedder, F: int, fp16: bool = False) -> onnx.GraphProto:
    b = _DenseBuilder(fp16)
    s = b.mlp("shape_features", me.shape_mlp, "feature", "shape_embedding")
    b.nodes.append(helper.make_node("Concat", ["conv_features", s], ["matrix_concat"], name="concat", axis=1))
    b.mlp("matrix_concat", me.embed_mlp, "matrix_embedding", "matrix_embedding")
    Em = me.embed_mlp[-1][0].shape[0]
    ins = [helper.make_tensor_value_info("conv_features", TensorProto.FLOAT, [1, F]),
           helper.make_tensor_value_info("shape_features", TensorProto.FLOAT, [1, len(me.features)])]
    outs = [helper.make_tensor_value_info("matrix_embedding", TensorProto.FLOAT, [1, Em])]
    return helper.make_graph(b.nodes, "matrix_embedder", ins, outs, initializer=b.inits)


def cognate_schedule_embedder_proto(se: CognateScheduleEmbedder, fp16: bool = False) -> onnx.GraphProto:
    """``schedule [N, D]`` → ``concat(mapper(schedule[:, :M]), latent(schedule[:, M:D]))``."""
    b = _DenseBuilder(fp16)
    ax = b.const_i64("axes", [1])
    parts = []
    for prefix, start, stop, layers, out in [("mapper", 0, se.mapper_width, se.mapper_layers, "config_embedding"),
                                             ("latent", se.mapper_width, se.width, se.latent_layers, "latent")]:
        st = b.const_i64(f"{prefix}.starts", [start])
        en = b.const_i64(f"{prefix}.ends", [stop])
        sl = f"{prefix}.input"
        b.nodes.append(helper.make_node("Slice", ["schedule", st, en, ax], [sl], name=f"{prefix}.slice"))
        parts.append(b.mlp(sl, layers, prefix, out))
    b.nodes.append(helper.make_node("Concat", parts, ["schedule_embedding"], name="concat", axis=1))
    ins = [helper.make_tensor_value_info("schedule", TensorProto.FLOAT, ["N", se.width])]
    outs = [helper.make_tensor_value_info("schedule_embedding", TensorProto.FLOAT, ["N", se.out_width])]
    return helper.make_graph(b.nodes, "schedule_embedder", ins, outs, initializer=b.inits)


def schedule_embedder_proto(se, fp16: bool = False) -> onnx.GraphProto:
    if isinstance(se, CognateScheduleEmbedder):
        return cognate_schedule_embedder_proto(se, fp16)
    b = _DenseBuilder(fp16)
    parts = []
    for p in se.pieces:
        if p.kind == "embedding":
            col = b.const_i64(f"{p.name}.column", np.int64(p.start))
            v = f"{p.name}.value"
            b.nodes.append(helper.make_node("Gather", ["schedule", col], [v], name=f"{p.name}.select", axis=1))
            idx = f"{p.name}.index"
            b.nodes.append(helper.make_node("Cast", [v], [idx], name=f"{p.name}.cast", to=TensorProto.INT64))
            tab = b.weight(f"{p.name}.table", p.table)
            e = f"{p.name}.embedding"
            b.nodes.append(helper.make_node("Gather", [tab, idx], [e], name=f"{p.name}.lookup", axis=0))
            parts.append(e)
        else:
            st = b.const_i64(f"{p.name}.starts", [p.start])
            en = b.const_i64(f"{p.name}.ends", [p.stop])
            ax = b.const_i64(f"{p.name}.axes", [1])
            sl = f"{p.name}.slice"
            b.nodes.append(helper.make_node("Slice", ["schedule", st, en, ax], [sl], name=sl))
            W, bias = p.linear
            parts.append(b.gemm(sl, W, bias, p.name, f"{p.name}.embedding"))
    b.nodes.append(helper.make_node("Concat", parts, ["schedule_concat"], name="concat", axis=1))
    b.mlp("schedule_concat", se.mlp_layers, "schedule_embedding", "schedule_embedding")
    Es = se.mlp_layers[-1][0].shape[0]
    ins = [helper.make_tensor_value_info("schedule", TensorProto.FLOAT, ["N", se.width])]
    outs = [helper.make_tensor_value_info("schedule_embedding", TensorProto.FLOAT, ["N", Es])]
    return helper.make_graph(b.nodes, "schedule_embedder", ins, outs, initializer=b.inits)


def predictor_proto(pr: Predictor, Em: int, Es: int, fp16: bool = False) -> onnx.GraphProto:
    b = _DenseBuilder(fp16)
    b.nodes.append(helper.make_node("Concat", ["matrix_embedding", "schedule_embedding"], ["final_concat"],
                                    name="concat", axis=1))
    b.mlp("final_concat", pr.mlp_layers, "final", "score")
    ins = [helper.make_tensor_value_info("matrix_embedding", TensorProto.FLOAT, ["N", Em]),
           helper.make_tensor_value_info("schedule_embedding", TensorProto.FLOAT, ["N", Es])]
    outs = [helper.make_tensor_value_info("score", TensorProto.FLOAT, ["N", 1])]
    return helper.make_graph(b.nodes, "predictor", ins, outs, initializer=b.inits)


def make_model(graph: onnx.GraphProto, metadata: Dict[str, str], sparse: bool = False) -> onnx.ModelProto:
    opsets = [helper.make_opsetid("", DENSE_OPSET)]
    if sparse:
        opsets.append(helper.make_opsetid(SPARSE_DOMAIN, SPARSE_OPSET))
    m = helper.make_model(graph, opset_imports=opsets, producer_name="dashrank-onnx",
                          producer_version="0.1.0")
    m.ir_version = IR_VERSION
    helper.set_model_props(m, dict(metadata))
    return m
