"""Every matrix form Model.embed accepts gives the embedding of the same pattern read by the
Rust library from its file; bad structures are PatternErrors naming the culprit; arrays of
the index dtypes are read in place."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import dashrank
from conftest import REPO, banded


def same(a: dashrank.Matrix, b: dashrank.Matrix) -> None:
    assert a.shape == b.shape
    assert a.embedding.tobytes() == b.embedding.tobytes()
    assert a.conv_features.tobytes() == b.conv_features.tobytes()


FORMS: dict[str, Callable[[sp.csr_array], Any]] = {
    "csr_array": lambda a: a,
    "csr_matrix": sp.csr_matrix,
    "csc_array": lambda a: a.tocsc(),
    "csc_matrix": lambda a: sp.csc_matrix(a),
    "coo_array": lambda a: a.tocoo(),
    "coo_matrix": lambda a: sp.coo_matrix(a),
    "triple": lambda a: (a.indptr, a.indices, a.shape),
    "triple of lists": lambda a: (a.indptr.tolist(), a.indices.tolist(), a.shape),
    "triple int64": lambda a: (a.indptr.astype(np.int64), a.indices.astype(np.int64), a.shape),
    "triple uint32": lambda a: (a.indptr.astype(np.uint32), a.indices.astype(np.uint32), a.shape),
    "triple uint64": lambda a: (a.indptr.astype(np.uint64), a.indices.astype(np.uint64), a.shape),
    "triple int16 (converted)": lambda a: (a.indptr, a.indices.astype(np.int16), a.shape),
    "triple mixed dtypes": lambda a: (a.indptr.astype(np.int64), a.indices, a.shape),
    "triple strided": lambda a: (np.repeat(a.indptr, 2)[::2], np.repeat(a.indices, 2)[::2], a.shape),
}


@pytest.fixture(scope="module")
def uncached(real_data: Path) -> dashrank.Model:
    """The real SpMM model without its embedding cache: every call featurizes."""
    return dashrank.Model(REPO / "models/waco-spmm", matrix_cache=0)


@pytest.mark.parametrize("form", FORMS)
def test_every_form_embeds_like_the_file(uncached: dashrank.Model, trec: sp.csr_array,
                                         real_data: Path, form: str) -> None:
    from_file = uncached.embed(real_data / "Trec6_16x16_9.csr")
    assert from_file.name == "Trec6_16x16_9"
    m = uncached.embed(FORMS[form](trec))
    assert m.name == "matrix"
    same(m, from_file)


def test_dense_masks_in_any_layout(tiny: dashrank.Model) -> None:
    rng = np.random.default_rng(3)
    dense = (rng.random((60, 45)) < 0.1) * rng.random((60, 45))
    want = tiny.embed(sp.csr_array(dense))
    for mask in (dense, dense != 0, (dense != 0).astype(np.int8), np.asfortranarray(dense),
                 dense.astype(np.float32), np.asarray(dense != 0, dtype=np.uint16)):
        same(tiny.embed(mask), want)
    # A strided view reads the view's entries.
    wide = np.zeros((60, 90))
    wide[:, ::2] = dense
    same(tiny.embed(wide[:, ::2]), want)
    # NaN is not zero (as numpy's nonzero counts it).
    with_nan = np.zeros((3, 3))
    with_nan[1, 2] = np.nan
    assert tiny.embed(with_nan).nnz == 1


def test_matrix_market_and_pathlike(tiny: dashrank.Model, tmp_path: Path) -> None:
    a = banded(50, 2)
    scipy.io.mmwrite(tmp_path / "band.mtx", a)
    m = tiny.embed(tmp_path / "band.mtx")
    assert (m.name, m.shape) == ("band", (50, 50, a.nnz))
    same(m, tiny.embed(str(tmp_path / "band.mtx"), name="other"))
    assert tiny.embed(a, name="mine").name == "mine"
    assert tiny.embed(m) is m


def test_empty_and_unusual_shapes(tiny: dashrank.Model) -> None:
    assert tiny.embed(sp.csr_array((7, 3))).shape == (7, 3, 0)
    assert tiny.embed(([0], [], (0, 0))).shape == (0, 0, 0)
    # Duplicated COO coordinates are one entry, as scipy's conversions make them.
    coo = sp.coo_array((np.ones(3), ([1, 1, 0], [2, 2, 0])), shape=(3, 3))
    assert tiny.embed(coo).nnz == 2


def test_matrix_attributes(tiny: dashrank.Model) -> None:
    m = tiny.embed(banded(30), name="b")
    assert (m.rows, m.cols, m.nnz) == (30, 30, 88)
    assert m.embedding.dtype == np.float32 and m.embedding.shape == (tiny.info.matrix_embedding_dim,)
    assert m.conv_features.shape == (tiny.info.featurizer_dim,)
    assert repr(m) == "<dashrank.Matrix 'b': 30 x 30, 88 nonzeros>"


@pytest.mark.parametrize("bad, message", [
    (([0, 2, 1], [0, 1], (2, 2)),
     "invalid sparsity pattern: row_ptr decreases at row 1: row_ptr[1] = 2 > row_ptr[2] = 1"),
    (([0, 1, 2], [0, 5], (2, 2)),
     "invalid sparsity pattern: column index 5 at position 1 (row 1) is out of range for 2 columns"),
    (([0, 2], [1, 1], (1, 3)), "invalid sparsity pattern: duplicate column 1 in row 0"),
    (([0, 1], [0], (2, 2)),
     "invalid sparsity pattern: row_ptr has 2 entries, expected nrows + 1 = 3"),
    (([0, -1], [], (1, 1)), "invalid sparsity pattern: row_ptr[1] = -1 is negative or too large"),
])
def test_bad_csr_is_a_pattern_error(tiny: dashrank.Model, bad: Any, message: str) -> None:
    with pytest.raises(dashrank.PatternError) as e:
        tiny.embed(bad)
    assert str(e.value) == message
    assert e.value.line is None and message.endswith(e.value.reason)
    assert isinstance(e.value, ValueError)


def test_bad_csc_coo_and_files(tiny: dashrank.Model) -> None:
    csc = sp.csc_array((np.ones(2), np.array([0, 7]), np.array([0, 1, 2])), shape=(3, 2))
    with pytest.raises(dashrank.PatternError, match=r"^invalid sparsity pattern: CSC arrays "
                       r"\(checked as the CSR arrays of the transpose: rows are columns\): "
                       r"column index 7 at position 1 \(row 1\) is out of range for 3 columns$"):
        tiny.embed(csc)
    # scipy checks coordinates when it builds a COO array, not after: edit them.
    coo = sp.coo_array((np.ones(1), (np.array([1]), np.array([0]))), shape=(2, 2))
    coo.row[0] = -1
    with pytest.raises(dashrank.PatternError,
                       match="row index -1 at position 0 is negative or too large"):
        tiny.embed(coo)
    coo.row[0] = 5
    with pytest.raises(dashrank.PatternError, match=r"coordinate \(5, 0\) at position 0 is "
                       r"outside 2 x 2"):
        tiny.embed(coo)
    with pytest.raises(dashrank.PatternError) as e:
        tiny.embed(REPO / "tests/data/bad/malformed.mtx")
    assert e.value.line is not None
    assert str(e.value).startswith(f"invalid sparsity pattern at line {e.value.line}: ")
    with pytest.raises(dashrank.PatternError, match="WACO .csr"):
        tiny.embed(REPO / "tests/data/bad/truncated.csr")
    with pytest.raises(dashrank.IoError) as io:
        tiny.embed("no/such/matrix.mtx")
    assert io.value.path == "no/such/matrix.mtx" and isinstance(io.value, OSError)
    with pytest.raises(dashrank.InvalidArgumentError, match=r"unknown matrix file extension"):
        tiny.embed("matrix.txt")


@pytest.mark.parametrize("bad, message", [
    ((np.array([0.0, 1.0]), np.array([0]), (1, 1)), "indptr must hold integers, not float64"),
    (np.zeros(4), "a dense mask is two-dimensional, got 1 dimensions"),
    (np.zeros((2, 2), dtype=complex), "a dense mask must be a two-dimensional numpy array of "
     "bool, integers or floats; got a 2-dimensional complex128 array"),
    (sp.lil_array((2, 2)), "scipy.sparse 'lil' matrices are not read directly: pass m.tocsr()"),
    ([[0, 1]], "a matrix is a scipy.sparse CSR, CSC or COO array or matrix"),
    (([0], [], (1, 1, 1)), "invalid argument: a matrix shape has two dimensions, got (1, 1, 1)"),
    (([0, 1], [0], (2,)), "invalid argument: a matrix shape has two dimensions, got (2,)"),
])
def test_wrong_kinds_are_named(tiny: dashrank.Model, bad: Any, message: str) -> None:
    with pytest.raises((TypeError, dashrank.InvalidArgumentError)) as e:
        tiny.embed(bad)
    assert str(e.value).startswith(message)


def test_index_arrays_are_read_in_place(tiny: dashrank.Model) -> None:
    """No numpy copy of int32 or int64 index arrays (numpy reports its allocations to
    tracemalloc); a dtype the native module cannot read is converted, which does show."""
    a = sp.random_array((20_000, 20_000), density=5e-4, format="csr", rng=2, dtype=np.float32)
    indices = a.indices.astype(np.int64)
    indptr = a.indptr.astype(np.int64)
    small = tiny.embed((indptr[:2], indices[: indptr[1]], (1, 20_000)))  # warm-up
    assert small.rows == 1

    def peak(matrix: Any) -> int:
        tracemalloc.start()
        try:
            tiny.embed(matrix)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    size = indices.nbytes
    assert peak((indptr, indices, a.shape)) < size // 20
    assert peak(a) < size // 20  # scipy's own int32 arrays
    assert peak(a.tocsc()) < size // 20
    assert peak((indptr, indices.astype(np.int16), a.shape)) >= size
