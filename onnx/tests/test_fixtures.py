"""Committed fixtures: regeneration is deterministic, and reading the committed bundles with
the bundle reader reproduces the committed goldens."""

import json

import numpy as np
import pytest

from conftest import TESTDATA
from dashrank_onnx.bundle import read_bundle
from dashrank_onnx.fixtures import DEFAULT_SEED, generate
from dashrank_onnx.reference import PatternError, load_csr, validate_csr

FIXTURES = ["tiny-waco-spmm", "tiny-waco-fp16", "tiny-dash", "tiny-cognate"]


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    generate(out, DEFAULT_SEED)
    return out


def _committed():
    if not (TESTDATA / "fixtures").is_dir():
        pytest.skip("tests/data/fixtures not generated")
    return TESTDATA


#: Goldens are float32 results of numpy/BLAS reductions (dot products over at most a few hundred
#: terms). Another CPU or BLAS kernel (OpenBLAS picks Haswell, SkylakeX or Zen kernels at run time)
#: sums in another order: each value may then move by up to ~n·2^-24·Σ|terms|, which is relative
#: to the *scale of the vector*, not to the value itself (a value near 0 that is a sum of O(1) terms
#: moves as much as a large one). So a float vector is compared with
#: |a - b| <= RTOL·|b| + VEC_RTOL·max|b| over the vector: VEC_RTOL = 1e-5 ≈ 170 float32 ulps of the
#: vector's scale, ~10x the largest drift observed across AVX2/AVX-512 kernels (4e-6 relative on a
#: 0.07 entry of a vector of scale ~1), and still far below any real change of a weight or an op.
RTOL = 1e-5
VEC_RTOL = 1e-5


def _close(a, b, path="golden"):
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and a and all(isinstance(x, float) for x in a + b):
        assert len(a) == len(b), path
        x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        scale = float(np.max(np.abs(y))) if y.size else 0.0
        bad = np.abs(x - y) > RTOL * np.abs(y) + VEC_RTOL * scale + 1e-30
        assert not bad.any(), (f"{path}[{int(np.argmax(bad))}]: {x[bad][0]} vs {y[bad][0]} "
                               f"(vector scale {scale:.3g})")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert np.isclose(a, b, rtol=RTOL, atol=VEC_RTOL * max(1.0, abs(b))), f"{path}: {a} vs {b}"
    else:
        assert a == b, f"{path}: {a!r} vs {b!r}"


def test_regeneration_is_deterministic(regenerated):
    data = _committed()
    committed = sorted(p.relative_to(data) for p in data.rglob("*") if p.is_file())
    fresh = sorted(p.relative_to(regenerated) for p in regenerated.rglob("*") if p.is_file())
    assert committed == fresh
    for rel in committed:
        if rel.name == "golden.json":
            _close(json.loads((data / rel).read_text()), json.loads((regenerated / rel).read_text()), str(rel))
        else:
            assert (data / rel).read_bytes() == (regenerated / rel).read_bytes(), str(rel)


def test_size_budget():
    data = _committed()
    assert sum(p.stat().st_size for p in data.rglob("*") if p.is_file()) < 1_000_000


@pytest.mark.parametrize("name", FIXTURES)
def test_bundle_reproduces_golden(name):
    d = _committed() / "fixtures" / name
    g = json.loads((d / "golden.json").read_text())
    b = read_bundle(d)
    tol = g["tolerance"]
    for h, hv in g["heads"].items():
        lines = [s["line"] for s in hv["schedules"]]
        enc, ok, errs = b.heads[h].schema.encode(lines)
        assert ok == [i for i, s in enumerate(hv["schedules"]) if s["valid"]]
        for i, s in enumerate(hv["schedules"]):
            if not s["valid"]:
                assert errs[i].kind == s["error"]["kind"] and errs[i].field == s["error"]["field"]
    for p in g["patterns"]:
        pat = validate_csr(p["rows"], p["cols"], p["row_ptr"], p["col_idx"])
        conv, shape, memb = b.embed_matrix(pat)
        np.testing.assert_allclose(conv[0], p["conv_features"], **tol)
        np.testing.assert_allclose(shape[0], p["shape_features"], **tol)
        np.testing.assert_allclose(memb[0], p["matrix_embedding"], **tol)
        for h, scores in p["scores"].items():
            lines = [s["line"] for s in g["heads"][h]["schedules"]]
            _, _, sc, ok, _ = b.score(h, memb, lines)
            np.testing.assert_allclose(sc, [scores[i] for i in ok], **tol)


def test_bad_csr_files():
    bad = _committed() / "bad"
    load_csr(bad / "good-small.csr")
    for name, msg in [("truncated.csr", "truncated"), ("column-out-of-range.csr", "out of range"),
                      ("row-ptr-not-monotone.csr", "monotone")]:
        with pytest.raises(PatternError, match=msg):
            load_csr(bad / name)
