"""Pure numpy reference implementation (the oracle) of a dashrank bundle.

* CSR loading (WACO ``.csr``: little-endian int32 ``rows, cols, nnz, row_ptr, col_idx``);
* MinkowskiEngine 0.5 sparse conv / ReLU / max-pool / global-average-pool, exactly as
  ``docs/bundle-format.md`` §3.1 (evidence in ``onnx/MINKOWSKI_SEMANTICS.md``);
* an interpreter for featurizer graphs (the node list of a featurizer file);
* the dense parts (matrix embedder, schedule embedder, predictor) from a plain description
  shared with the exporter;
* schedule-text parsing and encoding per the schema JSON of §5.1 (``choice``, ``permutation``
  and ``integer`` fields);
* COGNATE/DASH's split schedule embedder (configuration mapper + latent encoder,
  :class:`CognateScheduleEmbedder`).

Everything is vectorized: a coordinate is hashed into one int64 key ``row * 2**31 + col``; sets
of coordinates are kept sorted by key and neighbours are found with ``np.searchsorted``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import SPARSE_DOMAIN

# key = row * 2**32 + (col + 2**30): order = (row, col) lexicographic, and adding the key of an
# offset (dr * 2**32 + dc) to a key gives the neighbour's key with no wrap-around for
# |dc| < 2**30, col < 2**31, row < 2**31 (a negative row gives a negative, never-present key).
_KEY_SHIFT = np.int64(1) << np.int64(32)
_COL_PAD = np.int64(1) << np.int64(30)


def _key(r: np.ndarray, c: np.ndarray) -> np.ndarray:
    return r * _KEY_SHIFT + (c + _COL_PAD)


def _unkey(k: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    r, c = np.divmod(k, _KEY_SHIFT)
    return r, c - _COL_PAD


class PatternError(ValueError):
    """A malformed sparsity pattern / CSR file."""


class ScheduleError(ValueError):
    """One schedule line that cannot be encoded; ``field`` names the offending field."""

    def __init__(self, message: str, field: Optional[str] = None, value: Optional[str] = None,
                 kind: str = "invalid"):
        super().__init__(message)
        self.field = field
        self.value = value
        self.kind = kind


class GraphError(ValueError):
    """A featurizer graph that cannot be interpreted."""


# --------------------------------------------------------------------------------------
# Patterns
# --------------------------------------------------------------------------------------

@dataclass
class Pattern:
    """A sparsity pattern in CSR form (values ignored)."""

    rows: int
    cols: int
    row_ptr: np.ndarray  # int64 [rows+1]
    col_idx: np.ndarray  # int64 [nnz]

    @property
    def nnz(self) -> int:
        return int(self.col_idx.size)

    def coords(self) -> Tuple[np.ndarray, np.ndarray]:
        """(row, col) int64 arrays of the stored entries, CSR order."""
        r = np.repeat(np.arange(self.rows, dtype=np.int64), np.diff(self.row_ptr))
        return r, self.col_idx.astype(np.int64, copy=False)


def validate_csr(rows: int, cols: int, row_ptr, col_idx) -> Pattern:
    row_ptr = np.asarray(row_ptr, dtype=np.int64)
    col_idx = np.asarray(col_idx, dtype=np.int64)
    if rows < 0 or cols < 0:
        raise PatternError(f"negative shape {rows}x{cols}")
    if row_ptr.shape != (rows + 1,):
        raise PatternError(f"row_ptr has {row_ptr.size} entries, expected {rows + 1}")
    if row_ptr[0] != 0:
        raise PatternError(f"row_ptr[0] = {row_ptr[0]}, expected 0")
    d = np.diff(row_ptr)
    if (d < 0).any():
        i = int(np.argmax(d < 0))
        raise PatternError(f"row_ptr is not monotone at row {i}: {row_ptr[i]} > {row_ptr[i + 1]}")
    if row_ptr[-1] != col_idx.size:
        raise PatternError(f"row_ptr[rows] = {row_ptr[-1]} but nnz = {col_idx.size}")
    if col_idx.size and (col_idx.min() < 0 or col_idx.max() >= cols):
        bad = col_idx[(col_idx < 0) | (col_idx >= cols)][0]
        raise PatternError(f"column index {bad} out of range [0, {cols})")
    return Pattern(int(rows), int(cols), row_ptr, col_idx)


def load_csr(path) -> Pattern:
    """Read a WACO ``.csr`` file, validating it."""
    raw = np.fromfile(path, dtype="<i4")
    if raw.size < 3:
        raise PatternError(f"{path}: truncated header ({raw.size * 4} bytes)")
    rows, cols, nnz = (int(x) for x in raw[:3])
    if rows < 0 or cols < 0 or nnz < 0:
        raise PatternError(f"{path}: negative header value {rows}, {cols}, {nnz}")
    need = 3 + rows + 1 + nnz
    if raw.size != need:
        raise PatternError(f"{path}: {raw.size} int32 words, header implies {need} (truncated or trailing data)")
    row_ptr = raw[3:3 + rows + 1]
    col_idx = raw[3 + rows + 1:]
    try:
        return validate_csr(rows, cols, row_ptr, col_idx)
    except PatternError as e:
        raise PatternError(f"{path}: {e}") from None


def write_csr(path, pat: Pattern) -> None:
    hdr = np.array([pat.rows, pat.cols, pat.nnz], dtype="<i4")
    np.concatenate([hdr, pat.row_ptr.astype("<i4"), pat.col_idx.astype("<i4")]).tofile(path)


# --------------------------------------------------------------------------------------
# Sparse tensors (MinkowskiEngine semantics, 2-D, one batch)
# --------------------------------------------------------------------------------------

@dataclass
class SparseTensor:
    """Coordinates sorted by (row, col) (unique), tensor stride, features."""

    rows: np.ndarray    # int64 [n]
    cols: np.ndarray    # int64 [n]
    stride: int
    feats: np.ndarray   # float32 [n, C]

    @property
    def keys(self) -> np.ndarray:
        return _key(self.rows, self.cols)


def pattern_tensor(rows: np.ndarray, cols: np.ndarray) -> SparseTensor:
    """The input tensor of a pattern: one point per distinct stored entry, feature 1.0."""
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    if rows.size and (rows.min() < 0 or cols.min() < 0 or rows.max() >= 2**31 or cols.max() >= 2**31):
        raise PatternError("coordinates must lie in [0, 2**31)")
    keys = np.unique(_key(rows, cols))
    r, c = _unkey(keys)
    return SparseTensor(r, c, 1, np.ones((keys.size, 1), dtype=np.float32))


def kernel_offsets(kernel_size: int, dilation: int, tensor_stride: int) -> np.ndarray:
    """Offsets [K, 2] (row, col) in ME's order: kernel index κ = i_r + k·i_c (row fastest)."""
    k = int(kernel_size)
    step = int(dilation) * int(tensor_stride)
    if k % 2 == 1:
        a = (np.arange(k, dtype=np.int64) - k // 2) * step
    else:
        a = np.arange(k, dtype=np.int64) * step
    ir = np.tile(np.arange(k), k)          # fastest
    ic = np.repeat(np.arange(k), k)
    return np.stack([a[ir], a[ic]], axis=1)


def strided_coords(x: SparseTensor, stride: int) -> Tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """Output coordinates of a stride-``stride`` op: (rows, cols, tensor stride, inverse map
    input point → output point)."""
    if stride == 1:
        return x.rows, x.cols, x.stride, np.arange(x.rows.size)
    t2 = x.stride * stride
    keys = _key(x.rows // t2 * t2, x.cols // t2 * t2)
    uk, inv = np.unique(keys, return_inverse=True)
    r, c = _unkey(uk)
    return r, c, t2, inv.reshape(-1)


def neighbour_table(x: SparseTensor, out_r: np.ndarray, out_c: np.ndarray, kernel_size: int,
                    dilation: int = 1) -> np.ndarray:
    """[K, n_out] int64: index of the input point at ``out + offset(κ)`` (κ as in
    :func:`kernel_offsets`), or ``n_in`` if absent.

    Per row offset, one ``searchsorted`` finds the first input point at or after the left end
    of the column window; the window holds at most ``(k-1)·d + 1`` input points (input
    coordinates are multiples of the tensor stride), which are checked in turn."""
    k = int(kernel_size)
    step = int(dilation) * int(x.stride)
    A = kernel_offsets(k, dilation, x.stride)[:k, 0]      # per-axis offsets, ascending
    in_keys = x.keys
    n_in = in_keys.size
    out_keys = _key(out_r, out_c)
    n_out = out_keys.size
    nb = np.full((k * k, n_out), n_in, dtype=np.int64)
    if n_in == 0 or n_out == 0:
        return nb
    last = n_in - 1
    span = int(A[-1] - A[0])
    count = span // int(x.stride) + 1
    cols = np.arange(n_out, dtype=np.int64)
    flat = nb.reshape(-1)
    for i_r, a_r in enumerate(A):
        lo = out_keys + (np.int64(a_r) * _KEY_SHIFT + np.int64(A[0]))
        base = np.searchsorted(in_keys, lo)
        for j in range(count):
            p = base + j
            kv = in_keys[np.minimum(p, last)]
            d = kv - lo
            ok = (p <= last) & (d >= 0) & (d <= span)
            if step != 1:
                ok &= (d % step) == 0
            idx = np.nonzero(ok)[0]
            if idx.size == 0:
                continue
            i_c = d[idx] // step
            flat[(i_r + k * i_c) * n_out + cols[idx]] = p[idx]
    return nb


_CHUNK = 1 << 15


def sparse_conv(x: SparseTensor, weight: np.ndarray, bias: Optional[np.ndarray], kernel_size: int,
                stride: int = 1, dilation: int = 1) -> SparseTensor:
    W = np.asarray(weight, dtype=np.float32)
    K, cin, cout = W.shape
    if K != kernel_size * kernel_size:
        raise GraphError(f"conv weight has {K} kernel entries, kernel_size {kernel_size} needs {kernel_size ** 2}")
    if cin != x.feats.shape[1]:
        raise GraphError(f"conv weight expects {cin} input channels, got {x.feats.shape[1]}")
    r, c, t2, _ = strided_coords(x, stride)
    nb = neighbour_table(x, r, c, kernel_size, dilation)
    # gather-GEMM: out[p] = sum_κ in[nb[κ, p]] · W[κ] (missing neighbours read a zero row)
    fpad = np.vstack([x.feats.astype(np.float32, copy=False), np.zeros((1, cin), np.float32)])
    W2 = W.reshape(K * cin, cout)
    if cin == 1:
        out = (W2.T @ fpad[nb, 0]).T
    else:
        out = np.empty((r.size, cout), dtype=np.float32)
        for s in range(0, r.size, _CHUNK):
            g = fpad[nb[:, s:s + _CHUNK].T].reshape(-1, K * cin)
            np.matmul(g, W2, out=out[s:s + _CHUNK])
    if bias is not None:
        out += np.asarray(bias, dtype=np.float32)[None, :]
    return SparseTensor(r, c, t2, out)


def sparse_relu(x: SparseTensor) -> SparseTensor:
    return SparseTensor(x.rows, x.cols, x.stride, np.maximum(x.feats, 0.0))


def check_pool(kernel: int, stride: int) -> None:
    """Refuse max pools under which an output point could have no neighbour (spec §3.1)."""
    ok = stride == 1 or kernel == stride or (kernel % 2 == 0 and kernel >= stride) or \
        (kernel % 2 == 1 and kernel // 2 >= stride - 1)
    if not ok:
        raise GraphError(f"max pool kernel {kernel} stride {stride}: output points could lack neighbours")


def sparse_max_pool(x: SparseTensor, kernel_size: int, stride: int = 1, dilation: int = 1) -> SparseTensor:
    r, c, t2, inv = strided_coords(x, stride)
    C = x.feats.shape[1]
    if stride > 1 and kernel_size == stride:
        # ME uses the stride map here: every input point pools into its strided voxel.
        order = np.argsort(inv, kind="stable")
        starts = np.searchsorted(inv[order], np.arange(r.size))
        out = np.maximum.reduceat(x.feats[order], starts, axis=0).astype(np.float32)
        return SparseTensor(r, c, t2, out)
    nb = neighbour_table(x, r, c, kernel_size, dilation)
    fpad = np.vstack([x.feats.astype(np.float32, copy=False), np.full((1, C), -np.inf, np.float32)])
    out = np.full((r.size, C), -np.inf, dtype=np.float32)
    for kappa in range(nb.shape[0]):
        np.maximum(out, fpad[nb[kappa]], out=out)
    if r.size and not (nb < x.rows.size).any(axis=0).all():
        raise GraphError(f"max pool (kernel {kernel_size}, stride {stride}) left output points without neighbours")
    return SparseTensor(r, c, t2, out)


def global_avg_pool(x: SparseTensor) -> np.ndarray:
    if x.feats.shape[0] == 0:
        return np.zeros((1, x.feats.shape[1]), dtype=np.float32)
    return x.feats.astype(np.float64).mean(axis=0, keepdims=True).astype(np.float32)


# --------------------------------------------------------------------------------------
# Featurizer graph interpreter
# --------------------------------------------------------------------------------------

@dataclass
class Node:
    op_type: str
    inputs: List[str]
    outputs: List[str]
    attrs: Dict[str, Any] = field(default_factory=dict)
    name: str = ""
    domain: str = SPARSE_DOMAIN


@dataclass
class FeaturizerGraph:
    """The featurizer as a node list (what a featurizer file holds)."""

    nodes: List[Node]
    initializers: Dict[str, np.ndarray]
    input: str = "pattern"
    output: str = "conv_features"


def _run_conv(node: Node, get) -> SparseTensor:
    x, W = get(node.inputs[0]), get(node.inputs[1])
    b = get(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    if not np.isfinite(W).all() or (b is not None and not np.isfinite(b).all()):
        raise GraphError("non-finite weight")
    return sparse_conv(x, W, b, int(node.attrs["kernel_size"]), int(node.attrs.get("stride", 1)),
                       int(node.attrs.get("dilation", 1)))


def _run_max_pool(node: Node, get) -> SparseTensor:
    check_pool(int(node.attrs["kernel_size"]), int(node.attrs.get("stride", 1)))
    return sparse_max_pool(get(node.inputs[0]), int(node.attrs["kernel_size"]),
                           int(node.attrs.get("stride", 1)), int(node.attrs.get("dilation", 1)))


def _run_concat(node: Node, get) -> np.ndarray:
    return np.concatenate([get(i) for i in node.inputs], axis=1).astype(np.float32)


#: Node types by (domain, op_type): required attributes and the function that runs the node
#: (one registration line per type, like the Rust registry in src/featurize/ops/mod.rs).
_OPS: Dict[Tuple[str, str], Tuple[Tuple[str, ...], Callable[[Node, Callable], Any]]] = {
    (SPARSE_DOMAIN, "SparseConv"): (("kernel_size",), _run_conv),
    (SPARSE_DOMAIN, "SparseReLU"): ((), lambda n, get: sparse_relu(get(n.inputs[0]))),
    (SPARSE_DOMAIN, "SparseMaxPool"): (("kernel_size", "stride"), _run_max_pool),
    (SPARSE_DOMAIN, "SparseGlobalAvgPool"): ((), lambda n, get: global_avg_pool(get(n.inputs[0]))),
    ("", "Concat"): (("axis",), _run_concat),
}


def run_featurizer(graph: FeaturizerGraph, rows, cols, trace: Optional[Dict[str, Any]] = None) -> np.ndarray:
    """Run a featurizer graph on pattern coordinates; returns conv_features [1, F] float32."""
    env: Dict[str, Any] = {graph.input: pattern_tensor(rows, cols)}

    for node in graph.nodes:
        def get(name, node=node):
            if name in env:
                return env[name]
            if name in graph.initializers:
                return graph.initializers[name]
            raise GraphError(f"node {node.name!r}: input {name!r} is not defined")

        if node.op_type == "Concat" and node.domain in ("", "ai.onnx"):
            dom = ""
        elif node.domain != SPARSE_DOMAIN:
            raise GraphError(f"node {node.name!r}: unknown domain {node.domain!r}")
        else:
            dom = SPARSE_DOMAIN
        entry = _OPS.get((dom, node.op_type))
        if entry is None:
            raise GraphError(f"node {node.name!r}: unknown op type {node.op_type!r}")
        required, run = entry
        for a in required:
            if a not in node.attrs:
                raise GraphError(f"node {node.name!r}: missing attribute {a!r}")
        try:
            y = run(node, get)
        except GraphError as e:
            if str(e).startswith(f"node {node.name!r}"):
                raise
            raise GraphError(f"node {node.name!r}: {e}") from None
        env[node.outputs[0]] = y
        if trace is not None:
            trace[node.outputs[0]] = y
    out = env.get(graph.output)
    if out is None:
        raise GraphError(f"graph output {graph.output!r} is never produced")
    return np.asarray(out, dtype=np.float32)


# --------------------------------------------------------------------------------------
# Dense parts
# --------------------------------------------------------------------------------------

Linear = Tuple[np.ndarray, np.ndarray]  # (W [out, in], b [out]), torch layout


def mlp(x: np.ndarray, layers: Sequence[Linear]) -> np.ndarray:
    """Linear → ReLU → … → Linear (no activation after the last layer)."""
    h = np.asarray(x, dtype=np.float32)
    for i, (W, b) in enumerate(layers):
        h = h @ np.asarray(W, dtype=np.float32).T + np.asarray(b, dtype=np.float32)
        if i + 1 < len(layers):
            h = np.maximum(h, 0.0)
    return h.astype(np.float32)


@dataclass
class MatrixEmbedder:
    """matrix_embedding = embed_mlp(concat(conv_features, shape_mlp(shape_features)))."""

    shape_mlp: List[Linear]
    embed_mlp: List[Linear]
    mean: List[float]
    std: List[float]
    features: List[str] = field(default_factory=lambda: ["rows", "cols", "nnz"])
    source: str = ""

    def normalize(self, rows: int, cols: int, nnz: int) -> np.ndarray:
        vals = {"rows": rows, "cols": cols, "nnz": nnz}
        x = np.array([vals[f] for f in self.features], dtype=np.float64)
        return ((x - np.asarray(self.mean)) / np.asarray(self.std)).astype(np.float32)[None, :]

    def __call__(self, conv_features: np.ndarray, shape_features: np.ndarray) -> np.ndarray:
        s = mlp(shape_features, self.shape_mlp)
        return mlp(np.concatenate([conv_features, s], axis=1), self.embed_mlp)


@dataclass
class Piece:
    """One piece of the schedule embedder's concat: an embedding lookup of one index column
    (``table`` [V, E]) or a linear map of a column range (``linear``)."""

    kind: str                      # "embedding" | "linear"
    name: str
    start: int                     # first column
    stop: int                      # one past the last column (start+1 for embeddings)
    table: Optional[np.ndarray] = None
    linear: Optional[Linear] = None


@dataclass
class ScheduleEmbedder:
    pieces: List[Piece]
    mlp_layers: List[Linear]
    width: int                     # D

    def __call__(self, schedule: np.ndarray) -> np.ndarray:
        y = np.asarray(schedule, dtype=np.float32)
        parts = []
        for p in self.pieces:
            if p.kind == "embedding":
                idx = y[:, p.start].astype(np.int64)  # truncation toward zero, like .long()
                if (idx < 0).any() or (idx >= p.table.shape[0]).any():
                    raise ScheduleError(f"index out of range for embedding {p.name}", p.name)
                parts.append(np.asarray(p.table, dtype=np.float32)[idx])
            else:
                parts.append(mlp(y[:, p.start:p.stop], [p.linear]))
        return mlp(np.concatenate(parts, axis=1), self.mlp_layers)

    @property
    def out_width(self) -> int:
        """Es, the width of ``schedule_embedding``."""
        return int(self.mlp_layers[-1][0].shape[0])


@dataclass
class CognateScheduleEmbedder:
    """COGNATE/DASH schedule embedder of one head (seed 001 §3, Figure 3(b)):

    ``schedule_embedding = concat(mapper(x[:, :mapper_width]), latent(x[:, mapper_width:]))``

    * ``mapper_layers``: the configuration mapper FM, an MLP over the homogeneous unified
      columns (``I J K`` and the 7×7 loop-order one-hot = 52 columns); shared across heads
      (each head file holds a copy of the same weights);
    * ``latent_layers``: the encoder half of the head's autoencoder LE, an MLP over the
      heterogeneous (platform-specific) columns ``[mapper_width, width)``.

    Both MLPs are Linear → ReLU → … → Linear (no activation after the last layer)."""

    mapper_layers: List[Linear]
    latent_layers: List[Linear]
    mapper_width: int
    width: int

    @property
    def config_width(self) -> int:
        return int(self.mapper_layers[-1][0].shape[0])

    @property
    def latent_width(self) -> int:
        return int(self.latent_layers[-1][0].shape[0])

    @property
    def out_width(self) -> int:
        return self.config_width + self.latent_width

    def config_embedding(self, schedule: np.ndarray) -> np.ndarray:
        y = np.asarray(schedule, dtype=np.float32)
        return mlp(y[:, :self.mapper_width], self.mapper_layers)

    def latent(self, schedule: np.ndarray) -> np.ndarray:
        y = np.asarray(schedule, dtype=np.float32)
        return mlp(y[:, self.mapper_width:self.width], self.latent_layers)

    def __call__(self, schedule: np.ndarray) -> np.ndarray:
        y = np.asarray(schedule, dtype=np.float32)
        if y.ndim != 2 or y.shape[1] != self.width:
            raise ValueError(f"schedule rows have {y.shape[-1]} columns, expected {self.width}")
        return np.concatenate([self.config_embedding(y), self.latent(y)], axis=1).astype(np.float32)


@dataclass
class Predictor:
    mlp_layers: List[Linear]

    def __call__(self, matrix_embedding: np.ndarray, schedule_embedding: np.ndarray) -> np.ndarray:
        m = np.asarray(matrix_embedding, dtype=np.float32)
        if m.shape[0] != schedule_embedding.shape[0]:
            m = np.repeat(m, schedule_embedding.shape[0], axis=0)
        return mlp(np.concatenate([m, schedule_embedding], axis=1), self.mlp_layers)


# --------------------------------------------------------------------------------------
# Schedule schema (§5.1)
# --------------------------------------------------------------------------------------

INTEGER_ENCODINGS = ("log2", "linear")
_DECIMAL = re.compile(r"[+-]?[0-9]+")


def encode_integer(f: dict, tok: str) -> np.float32:
    """The encoded column of one ``integer`` field token (§5.1): a decimal integer (optional
    sign, ASCII digits only: no ``1e3``, ``0x10``, ``1.0``, ``_``) in ``[min, max]``, written as
    ``log2(x)`` (computed in float64, rounded to float32) or ``x``. Errors: kind
    ``not_an_integer`` for a token that is no decimal integer, ``out_of_range`` outside
    ``[min, max]``."""
    lo, hi = f["min"], f["max"]
    if not _DECIMAL.fullmatch(tok):
        raise ScheduleError(f"field {f['name']}: value {tok!r} is not a decimal integer in [{lo}, {hi}]",
                            f["name"], tok, "not_an_integer")
    x = int(tok)
    if not lo <= x <= hi:
        raise ScheduleError(f"field {f['name']}: value {tok!r} out of range [{lo}, {hi}]",
                            f["name"], tok, "out_of_range")
    if f["encode"] == "log2":
        return np.float32(math.log2(x))
    return np.float32(x)


def _random_integer(f: dict, rng) -> int:
    """A deterministic draw: a power of two in range (log2), else uniform in [min, max]."""
    lo, hi = f["min"], f["max"]
    if f["encode"] == "log2":
        e_lo, e_hi = math.ceil(math.log2(lo)), math.floor(math.log2(hi))
        if e_lo <= e_hi:
            return 1 << int(rng.integers(e_lo, e_hi + 1))
    return int(rng.integers(lo, hi + 1))


class Schema:
    def __init__(self, obj: Union[str, dict]):
        if isinstance(obj, str):
            try:
                obj = json.loads(obj)
            except json.JSONDecodeError as e:
                raise ValueError(f"schedule schema is not valid JSON: {e}") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("fields"), list) or not obj["fields"]:
            raise ValueError("schedule schema needs a non-empty 'fields' list")
        self.obj = obj
        self.fields = obj["fields"]
        for f in self.fields:
            if f.get("kind") == "choice":
                if not isinstance(f.get("values"), list) or not f["values"]:
                    raise ValueError(f"choice field {f.get('name')!r} needs non-empty 'values'")
            elif f.get("kind") == "permutation":
                s = f.get("symbols")
                if not isinstance(s, list) or not s or len(set(s)) != len(s):
                    raise ValueError(f"permutation field {f.get('name')!r} needs distinct 'symbols'")
            elif f.get("kind") == "integer":
                lo, hi, enc = f.get("min"), f.get("max"), f.get("encode")
                if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi)) or lo > hi:
                    raise ValueError(f"integer field {f.get('name')!r} needs integers 'min' <= 'max'")
                if enc not in INTEGER_ENCODINGS:
                    raise ValueError(f"integer field {f.get('name')!r}: 'encode' must be one of "
                                     f"{list(INTEGER_ENCODINGS)}, got {enc!r}")
                if enc == "log2" and lo < 1:
                    raise ValueError(f"integer field {f.get('name')!r}: log2 encoding needs 'min' >= 1")
            else:
                raise ValueError(f"field {f.get('name')!r}: unknown kind {f.get('kind')!r}")

    def to_json(self) -> str:
        return json.dumps(self.obj, separators=(",", ":"))

    @staticmethod
    def field_tokens(f: dict) -> int:
        return len(f["symbols"]) if f["kind"] == "permutation" else 1

    @staticmethod
    def field_width(f: dict) -> int:
        return len(f["symbols"]) ** 2 if f["kind"] == "permutation" else 1

    @property
    def tokens(self) -> int:
        return sum(self.field_tokens(f) for f in self.fields)

    @property
    def width(self) -> int:
        return sum(self.field_width(f) for f in self.fields)

    def columns(self) -> Dict[str, Tuple[int, int]]:
        """Field name → (start, stop) column range in the encoded row."""
        out, c = {}, 0
        for f in self.fields:
            w = self.field_width(f)
            out[f["name"]] = (c, c + w)
            c += w
        return out

    @staticmethod
    def _match(values, tok: str) -> Optional[int]:
        ival = None
        try:
            ival = int(tok)
        except ValueError:
            pass
        for i, v in enumerate(values):
            if isinstance(v, bool):
                continue
            if isinstance(v, int):
                if ival is not None and ival == v:
                    return i
            elif v == tok:
                return i
        return None

    def parse(self, line: str) -> Tuple[np.ndarray, Optional[float]]:
        """Encode one SuperSchedule line → (row [D] float32, runtime or None)."""
        runtime = None
        text = line
        if "=" in text:
            text, _, rt = text.partition("=")
            rt = rt.strip()
            try:
                runtime = float(rt)
            except ValueError:
                raise ScheduleError(f"bad runtime {rt!r} after '='", None, rt, "runtime") from None
        toks = text.split()
        if len(toks) != self.tokens:
            raise ScheduleError(f"expected {self.tokens} tokens, got {len(toks)}", None, str(len(toks)),
                                "token_count")
        row = np.zeros(self.width, dtype=np.float32)
        t = c = 0
        for f in self.fields:
            if f["kind"] == "choice":
                i = self._match(f["values"], toks[t])
                if i is None:
                    raise ScheduleError(f"field {f['name']}: value {toks[t]!r} out of vocabulary",
                                        f["name"], toks[t], "out_of_vocabulary")
                row[c] = i
                t += 1
                c += 1
            elif f["kind"] == "integer":
                row[c] = encode_integer(f, toks[t])
                t += 1
                c += 1
            else:
                syms = f["symbols"]
                n = len(syms)
                seq = toks[t:t + n]
                for s in seq:
                    if s not in syms:
                        raise ScheduleError(f"field {f['name']}: unknown symbol {s!r}", f["name"], s,
                                            "bad_permutation")
                if len(set(seq)) != n:
                    dup = next(s for s in seq if seq.count(s) > 1)
                    raise ScheduleError(f"field {f['name']}: symbol {dup!r} repeated", f["name"], dup,
                                        "bad_permutation")
                P = np.zeros((n, n), dtype=np.float32)
                for pos, s in enumerate(seq):
                    P[syms.index(s), pos] = 1.0
                row[c:c + n * n] = P.reshape(-1)
                t += n
                c += n * n
        return row, runtime

    def encode(self, lines: Sequence[str]):
        """Encode a batch → (rows [n_ok, D], ok line indices, {line index: ScheduleError})."""
        rows, ok, errs = [], [], {}
        for i, ln in enumerate(lines):
            try:
                r, _ = self.parse(ln)
            except ScheduleError as e:
                errs[i] = e
                continue
            rows.append(r)
            ok.append(i)
        arr = np.stack(rows) if rows else np.zeros((0, self.width), dtype=np.float32)
        return arr, ok, errs

    def random_lines(self, n: int, seed: int) -> List[str]:
        """Deterministic valid lines drawn uniformly from the schema."""
        rng = np.random.default_rng(seed)
        out = []
        for _ in range(n):
            toks = []
            for f in self.fields:
                if f["kind"] == "choice":
                    toks.append(str(f["values"][int(rng.integers(len(f["values"])))]))
                elif f["kind"] == "integer":
                    toks.append(str(_random_integer(f, rng)))
                else:
                    toks.extend(f["symbols"][int(i)] for i in rng.permutation(len(f["symbols"])))
            out.append(" ".join(toks))
        return out


# --------------------------------------------------------------------------------------
# Whole model
# --------------------------------------------------------------------------------------

@dataclass
class Head:
    name: str
    kernel: str
    target: str
    schema: Schema
    schedule_embedder: ScheduleEmbedder
    predictor: Predictor
    polarity: str = "lower_is_better"
    meaning: str = "pairwise ranking score (hinge, margin 1); comparable within one matrix only"


@dataclass
class Model:
    family: str
    model_name: str
    featurizer: FeaturizerGraph
    matrix_embedder: MatrixEmbedder
    heads: Dict[str, Head]

    def embed_matrix(self, pat: Pattern, trace: Optional[dict] = None):
        r, c = pat.coords()
        conv = run_featurizer(self.featurizer, r, c, trace)
        shape = self.matrix_embedder.normalize(pat.rows, pat.cols, pat.nnz)
        return conv, shape, self.matrix_embedder(conv, shape)

    def score(self, head: str, matrix_embedding: np.ndarray, lines: Sequence[str]):
        h = self.heads[head]
        enc, ok, errs = h.schema.encode(lines)
        semb = h.schedule_embedder(enc) if len(ok) else np.zeros((0, 0), np.float32)
        scores = h.predictor(matrix_embedding, semb)[:, 0] if len(ok) else np.zeros(0, np.float32)
        return enc, semb, scores, ok, errs


# --------------------------------------------------------------------------------------
# Rank statistics (no scipy)
# --------------------------------------------------------------------------------------

def _rankdata(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(x.size, dtype=np.float64)
    xs = x[order]
    i = 0
    while i < x.size:
        j = i
        while j + 1 < x.size and xs[j + 1] == xs[i]:
            j += 1
        ranks[order[i:j + 1]] = 0.5 * (i + j) + 1.0
        i = j + 1
    return ranks


def spearman_rho(x, y) -> float:
    rx, ry = _rankdata(x), _rankdata(y)
    rx -= rx.mean()
    ry -= ry.mean()
    d = math.sqrt(float((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / d) if d > 0 else float("nan")


def kendall_tau_b(x, y) -> float:
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    i, j = np.triu_indices(x.size, k=1)
    dx = np.sign(x[i] - x[j])
    dy = np.sign(y[i] - y[j])
    s = float((dx * dy).sum())
    n1 = float((dx != 0).sum())
    n2 = float((dy != 0).sum())
    return s / math.sqrt(n1 * n2) if n1 > 0 and n2 > 0 else float("nan")
