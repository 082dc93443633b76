"""Converter on the real WACO checkpoints and ranking quality on real data."""

import json

import numpy as np
import onnx
import pytest

from dashrank_onnx.bundle import read_bundle, run_dense, write_bundle
from dashrank_onnx.reference import load_csr
from dashrank_onnx.waco import CASE_MATRICES, convert, normalization_proxy, rank_quality, read_collected

# measured with the numpy reference: tau 0.85-0.95 (see onnx/README.md); conservative bound
TAU_MIN = 0.6


def _model(shared, kernel):
    mean, std, src = normalization_proxy(shared / "matrix_stats.csv", shared / "weights" / kernel / "train.txt")
    return convert(shared / "weights" / kernel / "resnet.pth", kernel.lower(), mean, std, src)


@pytest.mark.parametrize("kernel,D,pieces", [("SpMM", 46, 9), ("SDDMM", 46, 10), ("SpMV", 25, 8)])
def test_convert_real(shared, tmp_path, kernel, D, pieces):
    m = _model(shared, kernel)
    h = m.heads[f"cpu-taco/{kernel.lower()}"]
    assert h.schema.width == D and len(h.schedule_embedder.pieces) == pieces
    write_bundle(m, tmp_path)
    b = read_bundle(tmp_path)
    assert b.family == "waco" and list(b.heads) == [f"cpu-taco/{kernel.lower()}"]
    md = {e.key: e.value for e in onnx.load(str(tmp_path / "matrix_embedder.onnx")).metadata_props}
    assert "proxy" in json.loads(md["dashrank.shape_normalization"])["source"]
    # dense parity on the real weights with random inputs
    rng = np.random.default_rng(0)
    conv = rng.random((1, 448), dtype=np.float32)
    shape = rng.standard_normal((1, 3)).astype(np.float32)
    memb = m.matrix_embedder(conv, shape)
    np.testing.assert_allclose(run_dense(b.matrix_model, {"conv_features": conv, "shape_features": shape})
                               ["matrix_embedding"], memb, rtol=1e-5, atol=1e-5)
    lines = h.schema.random_lines(16, 1)
    enc, _, _ = h.schema.encode(lines)
    np.testing.assert_allclose(b.heads[h.name].embed(enc), h.schedule_embedder(enc), rtol=1e-5, atol=1e-5)
    try:
        import onnxruntime as ort
    except ImportError:
        return
    s = ort.InferenceSession(b.heads[h.name].schedule_embedder.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(s.run(None, {"schedule": enc})[0], h.schedule_embedder(enc), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kernel", ["SpMM", "SDDMM"])
def test_ranking_quality(shared, kernel):
    m = _model(shared, kernel)
    head = f"cpu-taco/{kernel.lower()}"
    for name in ("Trec6_16x16_9", "nemspmm1_16x4_0"):
        pat = load_csr(shared / "matrices" / f"{name}.csr")
        lines, rt = read_collected(shared / "collected" / kernel / f"{name}.txt")
        q = rank_quality(m, head, pat, lines, rt)
        assert q["invalid"] == 0
        assert q["tau"] > TAU_MIN, (kernel, name, q)
        assert q["rho"] > TAU_MIN, (kernel, name, q)


def test_cli_convert_and_golden(shared, tmp_path):
    from dashrank_onnx.convert_waco import main as convert_main
    from dashrank_onnx.golden import main as golden_main
    out = tmp_path / "spmv"
    assert convert_main(["--checkpoint", str(shared / "weights" / "SpMV" / "resnet.pth"), "--kernel", "spmv",
                         "--out", str(out), "--fp16"]) == 0
    assert len(list(out.glob("*.onnx"))) == 4
    gj = tmp_path / "g.json"
    assert golden_main(["--bundle", str(out), "--matrices", str(shared / "matrices" / "mhd4800a.csr"),
                        "--random", "20", "--seed", "3", "--out", str(gj)]) == 0
    g = json.loads(gj.read_text())
    m = g["matrices"][0]
    assert len(m["conv_features"]) == 448 and len(m["scores"]) == 20 and None not in m["scores"]
