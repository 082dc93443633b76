"""COGNATE/DASH: the `integer` schema kind, the unified-form schemas vs the Rust spaces' lines,
the split schedule embedder (shared mapper ‖ per-head latent encoder) in the exported graphs
vs the numpy reference, dimensions, the CLI."""

import json

import numpy as np
import onnx
import pytest

from conftest import TESTDATA
from test_bundle import _check_parity, RTOL, ATOL
from dashrank_onnx import cognate as C
from dashrank_onnx.bundle import bundle_models, read_bundle, run_dense
from dashrank_onnx.export import DENSE_OPS, featurizer_width
from dashrank_onnx.fixtures import COGNATE_HEADS, golden_patterns, tiny_cognate
from dashrank_onnx.reference import CognateScheduleEmbedder, Schema, ScheduleError


# ---------------------------------------------------------------- integer kind

def _int_schema(**kw):
    f = {"name": "x", "kind": "integer", "min": 1, "max": 1 << 20, "encode": "log2"}
    f.update(kw)
    return Schema({"name": "t", "version": 1, "text_format": "waco", "fields": [f]})


def test_integer_kind_encodes_log2_and_linear():
    s = _int_schema()
    assert s.tokens == 1 and s.width == 1
    assert s.parse("1024")[0].tolist() == [10.0]
    assert s.parse("+0016")[0].tolist() == [4.0]
    assert s.parse("1")[0].tolist() == [0.0]
    assert s.parse("1048576")[0].tolist() == [20.0]
    assert s.parse("48")[0][0] == np.float32(np.log2(48.0))
    lin = _int_schema(min=-3, max=3, encode="linear")
    assert lin.parse("-3")[0].tolist() == [-3.0]


def test_integer_kind_errors():
    s = _int_schema()
    for bad in ["0", "-4", "1048577", "99999999999999999999"]:
        with pytest.raises(ScheduleError) as e:
            s.parse(bad)
        assert (e.value.kind, e.value.field, e.value.value) == ("out_of_range", "x", bad)
    for bad in ["1.0", "1e3", "0x10", "+", "ten", "1_000", "NUM_MATRIX_COLS", "١٢"]:
        with pytest.raises(ScheduleError) as e:
            s.parse(bad)
        assert (e.value.kind, e.value.field, e.value.value) == ("not_an_integer", "x", bad)
    with pytest.raises(ScheduleError) as e:
        _int_schema(min=-3, max=3, encode="linear").parse("4")
    assert e.value.kind == "out_of_range"


@pytest.mark.parametrize("kw", [{"min": 0}, {"min": 5, "max": 4}, {"encode": "log10"}, {"encode": None},
                                {"min": 1.0}, {"max": True}, {"max": "8"}])
def test_integer_kind_bad_schema(kw):
    with pytest.raises(ValueError):
        _int_schema(**kw)


# ---------------------------------------------------------------- unified form

def test_mapping_mirror_reproduces_rust_pinned_lines():
    # src/schedule/space/tests.rs and the papers' appendix E
    assert C.spade_unified(4, 1024, 32, 0, 0, 0) == "4 1024 32 6 7 2 4 1 3 5 0 0 0"
    assert C.spade_unified(32, 16384, 256, 1, 1, 0) == "32 16384 256 6 7 4 2 1 3 5 1 1 0"
    assert C.gpu_unified("spmm", 8, 32, 2, 1, 0, 1, 1) == "8 1 64 1 2 5 7 3 4 6 32 2 1 1 1"
    assert C.waco_unified("spmm", "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16 = 14.815") == \
        "16 256 1 3 4 1 2 5 6 7 1 0 0 0 1 48 16"
    for kernel in ("spmm", "sddmm"):
        for ln in C.gpu_lines(kernel):
            order = ln.split()[3:10]
            assert ln.split()[1] == "1" and order[order.index("3") + 1] == "4"   # j' right after j


def test_schema_dimensions():
    for (t, k), het in C.HETERO.items():
        s = Schema(C.cognate_schema(t, k).to_json())
        assert s.columns()["loop_order"] == (3, 52) and C.MAPPER_WIDTH == 52
        assert s.width == 52 + len(het) and s.tokens == 10 + len(het)
        assert [f["kind"] for f in s.fields[:4]] == ["integer"] * 3 + ["permutation"]


def _parses_all(schema, lines):
    enc, ok, errs = schema.encode(lines)
    assert not errs, {lines[i]: str(e) for i, e in list(errs.items())[:3]}
    return enc


@pytest.mark.parametrize("kernel", ["spmm", "sddmm"])
def test_every_rust_space_line_parses(kernel):
    spade = C.cognate_schema("spade", kernel)
    for ncols in (1, 777, 1024, 100_000, 2 ** 31 - 1):
        lines = C.spade_lines(ncols)
        assert len(lines) == 256
        _parses_all(spade, lines)
    gpu = C.cognate_schema("gpu-sparsetir", kernel)
    lines = C.gpu_lines(kernel)
    assert len(lines) == 288 and len(set(lines)) == 288
    enc = _parses_all(gpu, lines)
    # the vocabularies are exactly what the space emits
    for f in gpu.fields[4:]:
        c = gpu.columns()[f["name"]][0]
        assert sorted(set(enc[:, c].astype(int))) == list(range(len(f["values"]))), f["name"]
    cpu = C.cognate_schema("cpu-taco", kernel)
    lines = [C.waco_unified(kernel, ln) for ln in C.taco_lines(kernel)]
    assert len(lines) > 4000
    enc = _parses_all(cpu, lines)
    for name in ("parnum", "parchunk") + tuple(f["name"] for f in cpu.fields[4:8]):
        f = next(f for f in cpu.fields if f["name"] == name)
        c = cpu.columns()[name][0]
        assert sorted(set(enc[:, c].astype(int))) == list(range(len(f["values"]))), name


def test_collected_waco_lines_parse(shared):
    for kernel, sub in (("spmm", "SpMM"), ("sddmm", "SDDMM")):
        d = shared / "collected" / sub
        if not d.is_dir():
            pytest.skip(f"{d} absent")
        lines = []
        for p in sorted(d.glob("*.txt"))[:20]:
            lines += [ln for ln in p.read_text().splitlines() if ln.strip()]
        assert len(lines) > 100
        _parses_all(C.cognate_schema("cpu-taco", kernel), [C.waco_unified(kernel, ln) for ln in lines])


# ---------------------------------------------------------------- model and graphs

def test_tiny_cognate_parity():
    _check_parity(tiny_cognate(1))


def test_tiny_cognate_fp16_parity():
    _check_parity(tiny_cognate(2), fp16=True)


def test_bundle_files_checker_ops_and_shared_mapper():
    model = tiny_cognate(3)
    files = bundle_models(model)
    assert sorted(files) == sorted(["featurizer.onnx", "matrix_embedder.onnx"] + [
        f"{h.replace('/', '__')}.{r}.onnx" for h in COGNATE_HEADS for r in ("schedule_embedder", "predictor")])
    mappers = []
    for name, m in files.items():
        onnx.checker.check_model(m, full_check=True)
        md = {e.key: e.value for e in m.metadata_props}
        assert md["dashrank.family"] == "cognate"
        if md["dashrank.role"] in ("featurizer",):
            continue
        assert {n.op_type for n in m.graph.node} <= set(DENSE_OPS)
        if md["dashrank.role"] == "schedule_embedder":
            schema = json.loads(md["dashrank.schedule_schema"])
            assert schema["fields"][0] == {"name": "i_split", "kind": "integer", "min": 1, "max": 2 ** 31 - 1,
                                           "encode": "log2"}
            inits = {t.name: t.raw_data for t in m.graph.initializer if t.name.startswith("mapper.") and t.name.endswith(("weight", "bias"))}
            assert sorted(inits) == ["mapper.0.bias", "mapper.0.weight", "mapper.1.bias", "mapper.1.weight"]
            mappers.append(inits)
    assert len(mappers) == 4 and all(m == mappers[0] for m in mappers)


def test_schedule_embedding_is_config_then_latent():
    model = tiny_cognate(4)
    files = bundle_models(model)
    # the same homogeneous part gives the same config embedding under every head
    line0 = "4 1024 32 6 7 2 4 1 3 5"
    extra = {"cpu-taco/spmm": " 1 0 0 0 1 48 16", "spade/spmm": " 0 1 1", "spade/sddmm": " 1 0 0",
             "gpu-sparsetir/spmm": " 32 2 1 1 1"}
    cfg = []
    for hn, h in model.heads.items():
        se = h.schedule_embedder
        assert isinstance(se, CognateScheduleEmbedder)
        enc, ok, errs = h.schema.encode([line0 + extra[hn]])
        assert ok == [0], errs
        out = run_dense(files[f"{hn.replace('/', '__')}.schedule_embedder.onnx"], {"schedule": enc})
        e = out["schedule_embedding"]
        assert e.shape == (1, se.config_width + se.latent_width) == (1, 16)
        np.testing.assert_allclose(e[:, :8], se.config_embedding(enc), rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(e[:, 8:], se.latent(enc), rtol=RTOL, atol=ATOL)
        cfg.append(e[:, :8])
    for c in cfg[1:]:
        np.testing.assert_array_equal(c, cfg[0])


def _dims(model):
    F = featurizer_width(model.featurizer)
    me = model.matrix_embedder
    out = {"F": F, "Em": me.embed_mlp[-1][0].shape[0], "shape_in": me.shape_mlp[0][0].shape[1]}
    for hn, h in model.heads.items():
        se = h.schedule_embedder
        out[hn] = {"D": se.width, "mapper": [W.shape[::-1] for W, _ in se.mapper_layers],
                   "latent": [W.shape[::-1] for W, _ in se.latent_layers],
                   "predictor": [W.shape[::-1] for W, _ in h.predictor.mlp_layers]}
    return out


def test_dimensions_tiny_and_full():
    d = _dims(tiny_cognate(0))
    assert (d["F"], d["Em"]) == (32, 16)
    assert d["spade/spmm"] == {"D": 55, "mapper": [(52, 8), (8, 8)], "latent": [(3, 8), (8, 8)],
                               "predictor": [(32, 16), (16, 8), (8, 1)]}
    assert d["cpu-taco/spmm"]["latent"][0] == (7, 8) and d["gpu-sparsetir/spmm"]["latent"][0] == (5, 8)
    full = C.cognate_model(0, C.FULL, ["spade/spmm", "gpu-sparsetir/spmm"])
    d = _dims(full)
    assert (d["F"], d["Em"]) == (256, 128)
    assert d["spade/spmm"] == {"D": 55, "mapper": [(52, 64), (64, 64)], "latent": [(3, 64), (64, 64)],
                               "predictor": [(256, 128), (128, 64), (64, 1)]}
    convs = [n for n in full.featurizer.nodes if n.op_type == "SparseConv"]
    assert [full.featurizer.initializers[n.inputs[1]].shape for n in convs] == [
        (25, 1, 32), (9, 32, 32), (9, 32, 64), (9, 64, 64), (9, 64, 64), (9, 64, 128), (9, 128, 128),
        (9, 128, 128), (9, 128, 256), (9, 256, 256), (9, 256, 256), (9, 256, 256)]
    assert all(n.attrs["stride"] == 1 for n in convs)
    pools = [(n.name, n.attrs) for n in full.featurizer.nodes if n.op_type == "SparseMaxPool"]
    assert pools == [(f"layer{i}.pool", {"kernel_size": 2, "stride": 2}) for i in (3, 6, 9)]
    assert [n.op_type for n in full.featurizer.nodes].count("SparseReLU") == 12
    assert [n.name for n in full.featurizer.nodes if n.op_type == "SparseGlobalAvgPool"] == ["layer12.gap"]


def test_cli_full_size_round_trip(tmp_path):
    out = tmp_path / "full"
    assert C.main(["--out", str(out), "--full-size", "--heads", "spade/spmm,gpu-sparsetir/spmm"]) == 0
    b = read_bundle(out)
    assert sorted(b.heads) == ["gpu-sparsetir/spmm", "spade/spmm"]
    pat = golden_patterns(0)["random_1"]
    conv, _, memb = b.embed_matrix(pat)
    assert conv.shape == (1, 256) and memb.shape == (1, 128)
    ref = C.cognate_model(1, C.FULL, ["spade/spmm", "gpu-sparsetir/spmm"])
    _, _, m2 = ref.embed_matrix(pat)
    np.testing.assert_allclose(memb, m2, rtol=RTOL, atol=ATOL)
    lines = C.spade_lines(pat.cols)[:16]
    _, semb, sc, ok, _ = b.score("spade/spmm", memb, lines)
    _, semb2, sc2, ok2, _ = ref.score("spade/spmm", m2, lines)
    assert ok == ok2 == list(range(16)) and semb.shape == (16, 128)
    np.testing.assert_allclose(sc, sc2, rtol=RTOL, atol=ATOL)
    with pytest.raises(SystemExit):
        C.main(["--out", str(tmp_path / "x"), "--heads", "spade/spmv"])


# ---------------------------------------------------------------- committed fixture

def test_committed_golden_lines():
    p = TESTDATA / "fixtures" / "tiny-cognate" / "golden.json"
    if not p.is_file():
        pytest.skip("tests/data/fixtures not generated")
    g = json.loads(p.read_text())
    assert sorted(g["heads"]) == sorted(COGNATE_HEADS)
    spade = {s["line"]: s for s in g["heads"]["spade/spmm"]["schedules"]}
    ex = spade["4 1024 32 6 7 2 4 1 3 5 0 0 0"]
    assert ex["valid"] and ex["encoded"][:3] == [2.0, 10.0, 5.0] and len(ex["encoded"]) == 55
    kinds = {s["error"]["kind"] for h in g["heads"].values() for s in h["schedules"] if not s["valid"]}
    assert kinds == {"token_count", "out_of_vocabulary", "bad_permutation", "out_of_range", "not_an_integer"}
    assert spade["4 2147483648 32 6 7 2 4 1 3 5 0 0 0"]["error"]["field"] == "j_split"
    for h in g["heads"].values():
        assert sum(s["valid"] for s in h["schedules"]) >= 3
