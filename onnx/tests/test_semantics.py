"""MinkowskiEngine semantics of the numpy reference: hand-computed cases and a brute-force
dict-based implementation of docs/bundle-format.md §3.1 on random patterns."""

import numpy as np
import pytest

from dashrank_onnx import reference as R


def brute_conv(points, feats, t, W, k, s, d=1, bias=None):
    """points: list of (r, c) at tensor stride t; feats: dict point → vector."""
    if s == 1:
        outs, t2 = list(points), t
    else:
        t2 = t * s
        outs = sorted({(r // t2 * t2, c // t2 * t2) for r, c in points})
    if k % 2:
        A = [(i - k // 2) * d * t for i in range(k)]
    else:
        A = [i * d * t for i in range(k)]
    res = {}
    for p in outs:
        acc = np.zeros(W.shape[2], dtype=np.float64)
        for ic in range(k):
            for ir in range(k):
                q = (p[0] + A[ir], p[1] + A[ic])
                if q in feats:
                    acc += feats[q] @ W[ir + k * ic]
        if bias is not None:
            acc += bias
        res[p] = acc
    return res, t2


def test_offset_order_row_fastest():
    off = R.kernel_offsets(3, 1, 1)
    assert off.tolist() == [[-1, -1], [0, -1], [1, -1], [-1, 0], [0, 0], [1, 0], [-1, 1], [0, 1], [1, 1]]
    off = R.kernel_offsets(3, 1, 4)       # deeper layer: step = tensor stride of the input
    assert off[:3].tolist() == [[-4, -4], [0, -4], [4, -4]]
    off = R.kernel_offsets(2, 1, 2)       # even kernel: [0, (k-1)·d·t]
    assert off.tolist() == [[0, 0], [2, 0], [0, 2], [2, 2]]
    off = R.kernel_offsets(5, 2, 1)
    assert off[:5, 0].tolist() == [-4, -2, 0, 2, 4]


def test_single_point_conv_picks_center_weight():
    x = R.pattern_tensor([3], [7])
    W = np.arange(25 * 2, dtype=np.float32).reshape(25, 1, 2)
    y = R.sparse_conv(x, W, None, 5)
    assert y.rows.tolist() == [3] and y.cols.tolist() == [7]
    assert y.feats.tolist() == [W[12, 0].tolist()]   # centre: i_r = i_c = 2 → κ = 12


def test_row_neighbour_uses_row_axis_index():
    # points (0,0) and (1,0): for output (0,0), the input (1,0) is at row offset +1 → i_r = 2, i_c = 1 → κ = 5
    x = R.pattern_tensor([0, 1], [0, 0])
    W = np.zeros((9, 1, 1), np.float32)
    W[5, 0, 0] = 10.0   # row +1
    W[7, 0, 0] = 100.0  # col +1 (i_r = 1, i_c = 2 → κ = 7)
    W[4, 0, 0] = 1.0
    y = R.sparse_conv(x, W, None, 3)
    assert dict(zip(y.rows.tolist(), y.feats[:, 0].tolist())) == {0: 11.0, 1: 1.0}


def test_strided_coordinates_and_tensor_stride():
    x = R.pattern_tensor([0, 1, 2, 3, 5], [0, 1, 3, 2, 5])
    r, c, t2, inv = R.strided_coords(x, 2)
    assert t2 == 2
    assert list(zip(r.tolist(), c.tolist())) == [(0, 0), (2, 2), (4, 4)]
    x2 = R.SparseTensor(r, c, 2, np.ones((3, 1), np.float32))
    r2, c2, t4, _ = R.strided_coords(x2, 2)
    assert t4 == 4 and list(zip(r2.tolist(), c2.tolist())) == [(0, 0), (4, 4)]


def test_strided_conv_kernel_at_input_stride():
    # input at tensor stride 2: points (0,0), (2,0), (4,4); conv k3 s2 → output stride 4:
    # (0,0) gets neighbours at offsets ±2 (the input stride), i.e. (0,0) κ=4 and (2,0) κ=5.
    x = R.SparseTensor(np.array([0, 2, 4]), np.array([0, 0, 4]), 2, np.array([[1.], [2.], [3.]], np.float32))
    W = np.zeros((9, 1, 1), np.float32)
    W[4] = 1.0
    W[5] = 10.0
    y = R.sparse_conv(x, W, None, 3, stride=2)
    assert y.stride == 4
    got = {(a, b): v for a, b, v in zip(y.rows.tolist(), y.cols.tolist(), y.feats[:, 0].tolist())}
    assert got == {(0, 0): 1.0 + 20.0, (4, 4): 3.0}


def test_even_kernel_and_bias():
    x = R.pattern_tensor([0, 1], [0, 1])
    W = np.ones((4, 1, 1), np.float32)
    y = R.sparse_conv(x, W, np.array([0.5], np.float32), 2)
    got = dict(zip(y.rows.tolist(), y.feats[:, 0].tolist()))
    assert got == {0: 2.5, 1: 1.5}   # (0,0) sees itself and (1,1); (1,1) only itself


def test_max_pool_stride_map_and_kernel_path():
    x = R.SparseTensor(np.array([0, 0, 1, 3]), np.array([0, 1, 1, 3]), 1,
                       np.array([[1., -1.], [5., -2.], [2., 7.], [4., 0.]], np.float32))
    y = R.sparse_max_pool(x, 2, 2)    # kernel == stride: stride map
    assert y.stride == 2 and y.feats.tolist() == [[5., 7.], [4., 0.]]
    y3 = R.sparse_max_pool(x, 3, 3)   # odd kernel == stride: every point pools into its voxel
    assert y3.rows.tolist() == [0, 3] and y3.feats.tolist() == [[5., 7.], [4., 0.]]
    y1 = R.sparse_max_pool(x, 3, 1)
    assert y1.feats[0].tolist() == [5., 7.]


def test_global_avg_pool():
    x = R.SparseTensor(np.array([0, 1]), np.array([0, 0]), 1, np.array([[1., 2.], [3., 6.]], np.float32))
    assert R.global_avg_pool(x).tolist() == [[2., 4.]]


@pytest.mark.parametrize("seed", range(4))
def test_random_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    rr = rng.integers(0, 40, n)
    cc = rng.integers(0, 30, n)
    x = R.pattern_tensor(rr, cc)
    pts = list(zip(x.rows.tolist(), x.cols.tolist()))
    feats = {p: np.ones(1) for p in pts}
    t = 1
    layers = [(5, 1, 1, 3), (3, 2, 3, 4), (3, 2, 4, 4), (2, 2, 4, 2), (3, 1, 2, 2)]
    for k, s, cin, cout in layers:
        W = rng.standard_normal((k * k, cin, cout)).astype(np.float32)
        b = rng.standard_normal(cout).astype(np.float32)
        exp, t2 = brute_conv(pts, feats, t, W.astype(np.float64), k, s, bias=b)
        x = R.sparse_conv(x, W, b, k, s)
        assert x.stride == t2
        got = {p: v for p, v in zip(zip(x.rows.tolist(), x.cols.tolist()), x.feats)}
        assert set(got) == set(exp)
        for p in exp:
            np.testing.assert_allclose(got[p], exp[p], rtol=1e-5, atol=1e-5)
        x = R.sparse_relu(x)
        pts = list(got)
        feats = {p: np.maximum(exp[p], 0) for p in pts}
        t = t2


def test_dilation_window():
    rng = np.random.default_rng(9)
    x = R.pattern_tensor(rng.integers(0, 20, 40), rng.integers(0, 20, 40))
    pts = list(zip(x.rows.tolist(), x.cols.tolist()))
    feats = {p: np.ones(1) for p in pts}
    W = rng.standard_normal((9, 1, 2)).astype(np.float32)
    exp, _ = brute_conv(pts, feats, 1, W.astype(np.float64), 3, 1, d=2)
    y = R.sparse_conv(x, W, None, 3, 1, 2)
    for p, v in zip(zip(y.rows.tolist(), y.cols.tolist()), y.feats):
        np.testing.assert_allclose(v, exp[p], rtol=1e-5, atol=1e-6)
