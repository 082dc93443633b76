"""Exported bundles vs the numpy reference: checker, metadata, and dense-graph parity under
onnx.reference.ReferenceEvaluator, onnxruntime (if installed) and the numpy executor.
Tolerance: relative 1e-5 (absolute 1e-6) for fp32 graphs."""

import json

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

from dashrank_onnx.bundle import BundleError, bundle_models, read_bundle, run_dense, write_bundle
from dashrank_onnx.export import DENSE_OPS, IR_VERSION
from dashrank_onnx.fixtures import golden_patterns, tiny_dash, tiny_waco, to_fp16

RTOL, ATOL = 1e-5, 1e-6


def _ort(m):
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])


def _dense_inputs(model, rng, n=7):
    head = next(iter(model.heads.values()))
    lines = head.schema.random_lines(n, 3)
    enc, ok, _ = head.schema.encode(lines)
    F = sum(model.featurizer.initializers[nd.inputs[1]].shape[2] for nd in model.featurizer.nodes
            if nd.op_type == "SparseConv")
    return head, enc


def _check_parity(model, fp16=False):
    ref = to_fp16(model) if fp16 else model
    files = bundle_models(model, fp16)
    rng = np.random.default_rng(0)
    pat = golden_patterns(1)["random_1"]
    conv, shape, memb = ref.embed_matrix(pat)
    me = files["matrix_embedder.onnx"]
    feeds = {"conv_features": conv, "shape_features": shape}
    outs = [run_dense(me, feeds)["matrix_embedding"], ReferenceEvaluator(me).run(None, feeds)[0],
            _ort(me).run(None, feeds)[0]]
    for o in outs:
        np.testing.assert_allclose(o, memb, rtol=RTOL, atol=ATOL)
    for hn, h in ref.heads.items():
        stem = hn.replace("/", "__")
        lines = h.schema.random_lines(9, 5)
        enc, _, _ = h.schema.encode(lines)
        semb = h.schedule_embedder(enc)
        se = files[f"{stem}.schedule_embedder.onnx"]
        for o in [run_dense(se, {"schedule": enc})["schedule_embedding"],
                  ReferenceEvaluator(se).run(None, {"schedule": enc})[0],
                  _ort(se).run(None, {"schedule": enc})[0]]:
            np.testing.assert_allclose(o, semb, rtol=RTOL, atol=ATOL)
        score = h.predictor(memb, semb)
        pr = files[f"{stem}.predictor.onnx"]
        f2 = {"matrix_embedding": np.repeat(memb, len(lines), 0), "schedule_embedding": semb}
        for o in [run_dense(pr, f2)["score"], ReferenceEvaluator(pr).run(None, f2)[0], _ort(pr).run(None, f2)[0]]:
            assert o.shape == (len(lines), 1)
            np.testing.assert_allclose(o, score, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("fp16", [False, True])
def test_tiny_waco_parity(fp16):
    _check_parity(tiny_waco(1), fp16)


def test_tiny_dash_parity():
    _check_parity(tiny_dash(1))


def test_checker_opsets_ops_metadata(tmp_path):
    model = tiny_dash(2)
    paths = write_bundle(model, tmp_path, fp16=False)
    assert sorted(p.name for p in paths) == sorted(
        ["featurizer.onnx", "matrix_embedder.onnx", "gpu-sparsetir__sddmm.schedule_embedder.onnx",
         "gpu-sparsetir__sddmm.predictor.onnx", "spade__spmv.schedule_embedder.onnx", "spade__spmv.predictor.onnx",
         "manifest.json"])
    assert paths[-1].name == "manifest.json"
    hashes = set()
    for p in paths[:-1]:
        m = onnx.load(str(p))
        onnx.checker.check_model(m)
        assert m.ir_version == IR_VERSION
        md = {e.key: e.value for e in m.metadata_props}
        assert md["dashrank.format_version"] == "1" and md["dashrank.family"] == "cognate"
        hashes.add((md["dashrank.featurizer_sha256"], md["dashrank.mapper_sha256"]))
        ops = {n.op_type for n in m.graph.node}
        if md["dashrank.role"] == "featurizer":
            assert {o.domain: o.version for o in m.opset_import} == {"": 17, "ai.dashrank.sparse": 1}
            assert ops <= {"SparseConv", "SparseReLU", "SparseMaxPool", "SparseGlobalAvgPool", "Concat"}
        else:
            assert ops <= set(DENSE_OPS)
            assert {o.domain: o.version for o in m.opset_import} == {"": 17}
        if md["dashrank.role"] == "matrix_embedder":
            norm = json.loads(md["dashrank.shape_normalization"])
            assert norm["features"] == ["rows", "cols", "nnz"] and all(s > 0 for s in norm["std"])
        if md["dashrank.role"] == "schedule_embedder":
            assert json.loads(md["dashrank.schedule_schema"])["fields"]
            assert md["dashrank.head"] in ("gpu-sparsetir/sddmm", "spade/spmv")
        if md["dashrank.role"] == "predictor":
            assert md["dashrank.score_polarity"] == "lower_is_better"
    assert len(hashes) == 1, "every file records the same provenance"
    # round trip through the reader
    b = read_bundle(tmp_path)
    assert (b.featurizer_sha256, b.mapper_sha256) == hashes.pop()
    pat = golden_patterns(2)["banded_80"]
    _, _, m1 = b.embed_matrix(pat)
    _, _, m2 = model.embed_matrix(pat)
    np.testing.assert_allclose(m1, m2, rtol=RTOL, atol=ATOL)


def test_fp16_initializers(tmp_path):
    write_bundle(tiny_waco(3), tmp_path, fp16=True)
    for p in tmp_path.glob("*.onnx"):
        m = onnx.load(str(p))
        assert all(t.data_type == onnx.TensorProto.FLOAT16 for t in m.graph.initializer
                   if t.data_type != onnx.TensorProto.INT64)


def test_reader_rejects_bad_bundles():
    from conftest import TESTDATA
    bad = TESTDATA / "bad"
    if not bad.is_dir():
        pytest.skip("tests/data/bad not generated")
    with pytest.raises(BundleError, match="99"):
        read_bundle(bad / "wrong-format-version")
    with pytest.raises(BundleError, match="role"):
        read_bundle(bad / "missing-role")
    with pytest.raises(BundleError, match="non-finite"):
        read_bundle(bad / "nan-weight")
    with pytest.raises(Exception):
        read_bundle(bad / "truncated-onnx")
    with pytest.raises(ValueError):
        read_bundle(bad / "malformed-schema-json")
    pat = golden_patterns(0)["random_0"]
    for name, msg in [("unknown-featurizer-op", "SparseGELU"), ("conv-weight-shape-mismatch", "channels"),
                      ("missing-weight-initializer", "layer2.weight")]:
        b = read_bundle(bad / name)
        with pytest.raises(ValueError, match=msg):
            b.embed_matrix(pat)
