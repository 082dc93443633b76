import numpy as np
import pytest

from dashrank_onnx.reference import Schema, ScheduleError, kendall_tau_b, spearman_rho
from dashrank_onnx.fixtures import tiny_schema


def test_waco_spmm_encoding_matches_loader():
    s = tiny_schema("spmm")
    row, rt = s.parse("16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16 = 14.815")
    assert rt == 14.815 and row.shape == (46,)
    assert row[:3].tolist() == [4, 8, 0]
    P = row[3:39].reshape(6, 6)
    idx = ["i1", "i0", "k1", "k0", "j1", "j0"]
    for pos, sym in enumerate(["k1", "k0", "i1", "i0", "j1", "j0"]):
        assert P[idx.index(sym), pos] == 1       # perm[index_.index(order[pos]), pos] = 1
    assert P.sum() == 6
    assert row[39:].tolist() == [1, 0, 0, 0, 0, 0, 4]


def test_errors_name_field():
    s = tiny_schema("spmm")
    with pytest.raises(ScheduleError) as e:
        s.parse("16 256 3 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16")
    assert e.value.field == "jsplit" and e.value.kind == "out_of_vocabulary"
    with pytest.raises(ScheduleError) as e:
        s.parse("16 256 1 k1 k1 i1 i0 j1 j0 1 0 0 0 i1 48 16")
    assert e.value.field == "order" and e.value.kind == "bad_permutation"
    with pytest.raises(ScheduleError) as e:
        s.parse("16 256 1")
    assert e.value.kind == "token_count"
    enc, ok, errs = s.encode(["16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16", "bad"])
    assert ok == [0] and list(errs) == [1]


def test_bad_schema_json():
    with pytest.raises(ValueError):
        Schema('{"fields": [')


def test_rank_stats():
    x = np.array([1, 2, 3, 4, 5.0])
    assert kendall_tau_b(x, x) == pytest.approx(1.0)
    assert kendall_tau_b(x, -x) == pytest.approx(-1.0)
    assert spearman_rho(x, x ** 3) == pytest.approx(1.0)
    # ties: tau-b of [1,1,2] vs [1,2,3] = 2 / sqrt(2*3)
    assert kendall_tau_b([1, 1, 2], [1, 2, 3]) == pytest.approx(2 / np.sqrt(6))
    assert spearman_rho([1, 1, 2], [1, 2, 3]) == pytest.approx(np.sqrt(3) / 2)
