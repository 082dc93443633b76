"""COGNATE state-dict converter (convert_cognate, cognate_checkpoint): checkpoints written in
PyTorch's zip layout with numpy only (and by real torch.save when torch is installed),
conversion vs the numpy reference, the mapping file, the 53-column mapper, head-only mode,
and errors that name the tensor.

Tolerance of the score comparisons: the converted graphs and the reference compute the same
float32 products in possibly different BLAS orders (dot products of at most ~60 terms in the
tiny model), relative ~n·2^-24 ≈ 4e-6 worst case per value, so vectors are compared with
rtol 1e-5 plus 1e-5 of the vector's scale (as test_fixtures.py). Weights themselves must be
copied exactly (compared with ==)."""

import collections
import json
import shutil
import zipfile

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from dashrank_onnx import cognate as C
from dashrank_onnx import cognate_roundtrip as RT
from dashrank_onnx.bundle import read_bundle, write_bundle
from dashrank_onnx.cognate_checkpoint import CheckpointError
from dashrank_onnx.convert_cognate import add_head, convert_checkpoint, main as convert_main
from dashrank_onnx.fixtures import golden_patterns
from dashrank_onnx.integrity import IntegrityError, mapper_sha256
from dashrank_onnx.pth import load_state_dict, save_state_dict

HEADS = ("cpu-taco/spmm", "spade/spmm", "gpu-sparsetir/spmm")
RTOL = VEC_RTOL = 1e-5


def _close(got, want, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = float(np.abs(want).max()) if want.size else 0.0
    bad = np.abs(got - want) > RTOL * np.abs(want) + VEC_RTOL * scale
    assert not bad.any(), f"{what}: {got[bad][:3]} vs {want[bad][:3]} (scale {scale:.3g})"


@pytest.fixture(scope="module")
def model():
    return C.cognate_model(11, C.TINY, HEADS, "converter test")


def _write(tmp_path, sd, meta, name="m"):
    save_state_dict(sd, tmp_path / f"{name}.pth")
    (tmp_path / f"{name}.json").write_text(json.dumps(meta))
    return tmp_path / f"{name}.pth", tmp_path / f"{name}.json"


def _check_scores(bundle_dir, reference_score, heads=HEADS, memb_model=None):
    b = read_bundle(bundle_dir)
    for pname in ("random_2", "banded_80"):
        pat = golden_patterns(3)[pname]
        _, _, memb = b.embed_matrix(pat)
        if memb_model is not None:
            _close(memb, memb_model.embed_matrix(pat)[2], f"{pname} matrix embedding")
        for h in heads:
            lines = RT.space_lines(h, pat.cols, limit=120)
            _, _, got, ok, errs = b.score(h, memb, lines)
            assert not errs and len(ok) == len(lines)
            _close(got, reference_score(h, memb, lines), f"{pname} {h}")


# ---------------------------------------------------------------- the zip/pickle layout

def test_numpy_writer_round_trip(tmp_path):
    sd = collections.OrderedDict([("w", np.arange(12, dtype=np.float32).reshape(3, 4).T),
                                  ("h", np.ones((2, 2), np.float16)), ("i", np.array([1, 2 ** 40])),
                                  ("scalar", np.float32(2.5)), ("empty", np.zeros((0, 3), np.float32))])
    save_state_dict(sd, tmp_path / "x.pth")
    back = load_state_dict(tmp_path / "x.pth")
    assert list(back) == list(sd)
    for k, v in sd.items():
        assert back[k].dtype == np.asarray(v).dtype and back[k].shape == np.shape(v)
        assert np.array_equal(back[k], v)
    with zipfile.ZipFile(tmp_path / "x.pth") as z:
        names = z.namelist()
        assert names[0] == "archive/data.pkl" and "archive/version" in names and "archive/data/4" in names
        raw = (tmp_path / "x.pth").read_bytes()
        for info in z.infolist():                     # storage records start 64-byte aligned
            n, e = np.frombuffer(raw[info.header_offset + 26:info.header_offset + 30], "<u2")
            assert (info.header_offset + 30 + int(n) + int(e)) % 64 == 0, info.filename


def test_real_torch_reads_and_writes_the_layout(tmp_path, model):
    torch = pytest.importorskip("torch")
    sd = RT.state_dict_of(model)
    save_state_dict(sd, tmp_path / "ours.pth")
    theirs = torch.load(tmp_path / "ours.pth", weights_only=True)
    assert list(theirs) == list(sd) and all(np.array_equal(theirs[k].numpy(), v) for k, v in sd.items())
    torch.save({k: torch.from_numpy(np.array(v)) for k, v in sd.items()}, tmp_path / "torch.pth")
    back = load_state_dict(tmp_path / "torch.pth")
    assert all(np.array_equal(back[k], v) for k, v in sd.items())
    ck, meta = _write(tmp_path, {}, RT.metadata_of(model))
    m = convert_checkpoint(tmp_path / "torch.pth", meta)
    write_bundle(m, tmp_path / "b")
    _check_scores(tmp_path / "b", lambda h, memb, lines: model.score(h, memb, lines)[2])


# ---------------------------------------------------------------- conversion

def test_convert_matches_reference_and_copies_weights_exactly(tmp_path, model):
    ck, meta = _write(tmp_path, RT.state_dict_of(model), RT.metadata_of(model))
    assert convert_main(["--checkpoint", str(ck), "--metadata", str(meta), "--out", str(tmp_path / "b")]) == 0
    b = read_bundle(tmp_path / "b")
    assert sorted(b.heads) == sorted(HEADS) and b.family == "cognate"
    feat = {t.name: numpy_helper.to_array(t) for t in b.featurizer_model.graph.initializer}
    for name, w in model.featurizer.initializers.items():
        assert np.array_equal(feat[name], w), name
    se = {t.name: numpy_helper.to_array(t) for t in b.heads["spade/spmm"].schedule_embedder.graph.initializer}
    ref = model.heads["spade/spmm"].schedule_embedder
    assert np.array_equal(se["mapper.0.weight"], ref.mapper_layers[0][0])
    assert np.array_equal(se["latent.1.bias"], ref.latent_layers[1][1])
    assert b.norm["mean"] == list(model.matrix_embedder.mean)
    _check_scores(tmp_path / "b", lambda h, memb, lines: model.score(h, memb, lines)[2], memb_model=model)


def test_mapping_file_gives_the_same_bundle(tmp_path, model):
    ck, meta = _write(tmp_path, RT.state_dict_of(model), RT.metadata_of(model))
    write_bundle(convert_checkpoint(ck, meta), tmp_path / "direct")
    # other names: a prefix rule for the IFE, Linear weights of the mapper stored [in, out]
    ours = RT.state_dict_of(model)
    theirs = collections.OrderedDict()
    for k, v in ours.items():
        if k.startswith("ife."):
            theirs["backbone.blocks." + k[4:]] = v
        elif k.startswith("mapper.") and k.endswith(".weight"):
            theirs["cfg_" + k.split(".")[1] + "_w"] = np.ascontiguousarray(v.T)
        else:
            theirs["model." + k] = v
    theirs["model.latent.spade__spmm.decoder.0.weight"] = np.zeros((3, 3), np.float32)
    mapping = {"_comment": "ours → theirs", "ife.": "backbone.blocks.", "shape_mlp.": "model.shape_mlp.",
               "matrix_mlp.": "model.matrix_mlp.", "mapper.": "model.mapper.", "latent.": "model.latent.",
               "predictor.": "model.predictor.",
               "mapper.0.weight": {"name": "cfg_0_w", "transpose": True},
               "mapper.2.weight": {"name": "cfg_2_w", "transpose": True}}
    ck2, _ = _write(tmp_path, theirs, RT.metadata_of(model), "theirs")
    (tmp_path / "map.json").write_text(json.dumps(mapping))
    write_bundle(convert_checkpoint(ck2, meta, tmp_path / "map.json"), tmp_path / "mapped")
    a, b = read_bundle(tmp_path / "direct"), read_bundle(tmp_path / "mapped")
    assert (a.featurizer_sha256, a.mapper_sha256) == (b.featurizer_sha256, b.mapper_sha256)
    for h in HEADS:
        for part in ("schedule_embedder", "predictor"):
            x = {t.name: numpy_helper.to_array(t) for t in getattr(a.heads[h], part).graph.initializer}
            y = {t.name: numpy_helper.to_array(t) for t in getattr(b.heads[h], part).graph.initializer}
            assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x), (h, part)
    # a rule that matches nothing, and a transposed 1-D tensor, are errors naming the entry
    (tmp_path / "bad.json").write_text(json.dumps({**mapping, "shape_mlp.": "nothing.here."}))
    with pytest.raises(CheckpointError, match="nothing.here."):
        convert_checkpoint(ck2, meta, tmp_path / "bad.json")
    (tmp_path / "bad.json").write_text(json.dumps({**mapping, "mapper.0.bias": {"name": "model.mapper.0.bias",
                                                                                  "transpose": True}}))
    with pytest.raises(CheckpointError, match="model.mapper.0.bias.*transposed"):
        convert_checkpoint(ck2, meta, tmp_path / "bad.json")


def test_53_column_mapper(tmp_path, model):
    vb = RT.VariantB(model, np.random.default_rng(5))
    ck, meta = _write(tmp_path, vb.state_dict(), vb.metadata())
    (tmp_path / "map.json").write_text(json.dumps(vb.mapping()))
    write_bundle(convert_checkpoint(ck, meta, tmp_path / "map.json"), tmp_path / "b")
    b = read_bundle(tmp_path / "b")
    se = {t.name: numpy_helper.to_array(t) for t in b.heads["spade/spmm"].schedule_embedder.graph.initializer}
    assert se["mapper.0.weight"].shape[1] == 52          # the constant column is folded into the bias
    _check_scores(tmp_path / "b", vb.score)
    # without constant_columns, a 53-input mapper is refused with an explanation
    plain = vb.metadata()
    del plain["mapper"]["constant_columns"]
    (tmp_path / "plain.json").write_text(json.dumps(plain))
    with pytest.raises(CheckpointError, match=r"mapper.0.weight.*fm.w0.*53.*should be 52.*constant_columns"):
        convert_checkpoint(ck, tmp_path / "plain.json", tmp_path / "map.json")


def test_wrong_shapes_name_the_tensor(tmp_path, model):
    meta = RT.metadata_of(model)
    cases = [
        ("mapper.0.weight", lambda a: a[:, :50], r"mapper.0.weight has shape \(8, 50\).*should be 52"),
        ("ife.4.kernel", lambda a: a[:, :3, :], r"layer 3: ife.4.kernel has shape \(9, 3, 8\).*layer 2 outputs 4"),
        ("ife.0.kernel", lambda a: a[:24], r"ife.0.kernel has kernel volume 24, not a square"),
        ("predictor.spade__spmm.0.weight", lambda a: a[:, 1:],
         r"predictor.spade__spmm.0.weight has shape \(16, 31\).*matrix 16 \+ config 8 \+ latent 8 = 32"),
        ("matrix_mlp.0.weight", lambda a: a[:, :-1], r"matrix_mlp.0.weight.*F \+ S = 32 \+ 4 = 36"),
        ("latent.gpu-sparsetir__spmm.0.bias", lambda a: a[:-1], r"latent.gpu-sparsetir__spmm.0.bias has shape"),
    ]
    for key, cut, msg in cases:
        sd = RT.state_dict_of(model)
        sd[key] = np.ascontiguousarray(cut(sd[key]))
        ck, mp = _write(tmp_path, sd, meta, "bad")
        with pytest.raises(CheckpointError, match=msg):
            convert_checkpoint(ck, mp)
    # the CLI reports it on stderr with status 2
    assert convert_main(["--checkpoint", str(ck), "--metadata", str(mp), "--out", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o").exists()


def test_metadata_errors(tmp_path, model):
    sd = RT.state_dict_of(model)
    for meta, msg in [({**RT.metadata_of(model), "mapper": {"onehot": "diagonal"}}, "onehot"),
                      ({**RT.metadata_of(model), "featurizr": {}}, r"unknown key\(s\) \['featurizr'\]"),
                      ({k: v for k, v in RT.metadata_of(model).items() if k != "shape_normalization"},
                       "shape_normalization is required"),
                      ({**RT.metadata_of(model), "heads": {"spade/spmv": {}}}, r"heads \['spade/spmv'\] are not"),
                      ({**RT.metadata_of(model), "featurizer": {"pool_after": [3, 13]}}, "conv layers 1…12"),
                      ({**RT.metadata_of(model), "predictor_input": ["matrix", "config"]}, "permutation")]:
        ck, mp = _write(tmp_path, sd, meta, "m")
        with pytest.raises(CheckpointError, match=msg):
            convert_checkpoint(ck, mp)


# ---------------------------------------------------------------- head-only mode

def _bundle(tmp_path, model, name="b"):
    ck, meta = _write(tmp_path, RT.state_dict_of(model), RT.metadata_of(model), name)
    write_bundle(convert_checkpoint(ck, meta), tmp_path / name)
    return tmp_path / name, meta


def test_head_only_adds_and_replaces_a_head(tmp_path, model):
    bdir, meta = _bundle(tmp_path, model)
    ft = RT.fine_tuned_head(model, np.random.default_rng(3), C.TINY)
    ft_model = C.Model("cognate", "x", model.featurizer, model.matrix_embedder, {RT.ADDED: ft})
    sd = {k: v for k, v in RT.state_dict_of(ft_model).items() if k.startswith(("latent.", "predictor."))}
    ck, _ = _write(tmp_path, sd, {}, "ft")
    assert convert_main(["--head-only", "--checkpoint", str(ck), "--metadata", str(meta), "--bundle", str(bdir)]) == 0
    b = read_bundle(bdir)
    assert sorted(b.heads) == sorted([*HEADS, RT.ADDED])
    full = C.Model("cognate", "x", model.featurizer, model.matrix_embedder, {**model.heads, RT.ADDED: ft})
    _check_scores(bdir, lambda h, memb, lines: full.score(h, memb, lines)[2], heads=[RT.ADDED, "spade/spmm"])
    # a full fine-tuned checkpoint (shared parts unchanged, spade/spmm retrained) replaces the head
    new = C.cognate_model(99, C.TINY, ("spade/spmm",))
    replaced = dict(model.heads)
    h = new.heads["spade/spmm"]
    h.schedule_embedder.mapper_layers = model.heads["spade/spmm"].schedule_embedder.mapper_layers
    replaced["spade/spmm"] = h
    sd = RT.state_dict_of(C.Model("cognate", "x", model.featurizer, model.matrix_embedder, replaced))
    ck, _ = _write(tmp_path, sd, {}, "ft2")
    add_head(bdir, ck, meta, head="spade/spmm")
    full.heads["spade/spmm"] = h
    _check_scores(bdir, lambda hn, memb, lines: full.score(hn, memb, lines)[2], heads=["spade/spmm"])
    with pytest.raises(CheckpointError, match="choose one with --head"):
        add_head(bdir, ck, meta)


def test_head_only_refuses_heads_of_other_shared_parts(tmp_path, model):
    bdir, meta = _bundle(tmp_path, model)
    before = {p.name: p.read_bytes() for p in bdir.iterdir()}
    other = C.cognate_model(12, C.TINY, ("spade/sddmm",))
    # the checkpoint's mapper differs from the bundle's
    sd = {k: v for k, v in RT.state_dict_of(other).items() if k.startswith(("mapper.", "latent.", "predictor."))}
    ck, _ = _write(tmp_path, sd, {}, "o1")
    b = read_bundle(bdir)
    with pytest.raises(IntegrityError, match=f"hashes to [0-9a-f]{{64}}, but the bundle's mapper is {b.mapper_sha256}"):
        add_head(bdir, ck, meta)
    # a full checkpoint whose featurizer differs (fine-tuning updated it)
    ck, _ = _write(tmp_path, RT.state_dict_of(other), {}, "o2")
    with pytest.raises(IntegrityError, match=f"but the bundle's featurizer is {b.featurizer_sha256}"):
        add_head(bdir, ck, meta)
    assert {p.name: p.read_bytes() for p in bdir.iterdir()} == before, "a refused head leaves the bundle as it was"


# ---------------------------------------------------------------- provenance and manifest (Python reader)

def test_reader_refuses_foreign_heads_and_corrupted_files(tmp_path, model):
    from dashrank_onnx.manifest import main as manifest_main
    bdir, _ = _bundle(tmp_path, model, "one")
    other, _ = _bundle(tmp_path, C.cognate_model(12, C.TINY, HEADS, "converter test"), "two")
    mixed = tmp_path / "mixed"
    shutil.copytree(bdir, mixed)
    for p in other.glob("spade__spmm.*"):
        shutil.copy(p, mixed / p.name)
    a, o = read_bundle(bdir), read_bundle(other)
    with pytest.raises(IntegrityError, match=f"head 'spade/spmm'.*featurizer {o.featurizer_sha256}.*"
                                             f"bundle's featurizer is {a.featurizer_sha256}"):
        read_bundle(mixed)
    with pytest.raises(IntegrityError, match="spade__spmm.*does not match manifest.json"):
        read_bundle(mixed, allow_provenance_mismatch=True)      # the copy also broke the manifest
    assert manifest_main([str(mixed), "--write", "--allow-provenance-mismatch"]) == 0
    b = read_bundle(mixed, allow_provenance_mismatch=True)
    assert len(b.provenance_warnings) == 4                      # 2 files × (featurizer, mapper)
    # one flipped byte in a weight
    bad = tmp_path / "flipped"
    shutil.copytree(bdir, bad)
    p = bad / "cpu-taco__spmm.predictor.onnx"
    raw = bytearray(p.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    p.write_bytes(bytes(raw))
    with pytest.raises(Exception, match="cpu-taco__spmm.predictor.onnx"):
        read_bundle(bad)
    # a bundle from before manifests: refused with the way out, which works
    old = tmp_path / "old"
    shutil.copytree(bdir, old)
    (old / "manifest.json").unlink()
    with pytest.raises(IntegrityError, match="no manifest.json.*--stamp"):
        read_bundle(old)
    assert manifest_main([str(old), "--stamp"]) == 0
    assert read_bundle(old).featurizer_sha256 == a.featurizer_sha256


def test_documented_example_metadata_converts(tmp_path):
    """onnx/examples/cognate_metadata.json (the example of COGNATE_CHECKPOINTS.md §4, whose JSON
    block must say the same) converts a checkpoint with a 53-input mapper."""
    import re
    from conftest import REPO
    example = json.loads((REPO / "onnx/examples/cognate_metadata.json").read_text())
    doc = (REPO / "onnx/COGNATE_CHECKPOINTS.md").read_text()
    block = re.search(r"## 4\. Metadata file.*?```json\n(.*?)```", doc, re.S).group(1)
    assert json.loads(block) == {k: v for k, v in example.items() if not k.startswith("_")}
    model = C.cognate_model(13, C.TINY, HEADS, "example")
    sd = RT.state_dict_of(model)
    W = sd["mapper.0.weight"]
    sd["mapper.0.weight"] = np.ascontiguousarray(np.insert(W, 3, 0.25, axis=1))   # 53 inputs
    save_state_dict(sd, tmp_path / "m.pth")
    m = convert_checkpoint(tmp_path / "m.pth", REPO / "onnx/examples/cognate_metadata.json")
    assert m.model_name == example["model_name"] and sorted(m.heads) == sorted(HEADS)
    se = m.heads["spade/spmm"].schedule_embedder
    assert np.array_equal(se.mapper_layers[0][0], W)         # value 0.0: folding leaves the bias as is
    assert m.matrix_embedder.mean == example["shape_normalization"]["mean"]


def test_writing_over_another_bundle_is_refused(tmp_path, model):
    from dashrank_onnx.bundle import BundleError
    write_bundle(model, tmp_path / "b")
    smaller = C.Model("cognate", "x", model.featurizer, model.matrix_embedder,
                      {"spade/spmm": model.heads["spade/spmm"]})
    with pytest.raises(BundleError, match=r"already holds \['cpu-taco__spmm.predictor.onnx'"):
        write_bundle(smaller, tmp_path / "b")
    write_bundle(model, tmp_path / "b")          # the same bundle again is fine
    read_bundle(tmp_path / "b")


def test_weight_hash_vectors():
    """Pinned in src/model/integrity.rs (canonical_weight_hash_vectors) as well."""
    from dashrank_onnx.integrity import weights_sha256
    assert mapper_sha256(None) == "d2929111e0e3b708344f21e78a5f0f0a1909c9b07a8da96c6adc5d65356f4026"
    assert weights_sha256([("mapper", [("mapper.0.bias", np.array([1.0, -0.5], np.float32)),
                                       ("mapper.0.weight", np.arange(6, dtype=np.float32).reshape(2, 3))])]) == \
        "ba81f87351df9ee880acc36220e79dab2b1fd44308b571ced4dc11eb2ecf5469"
    assert weights_sha256([("featurizer", []), ("matrix_embedder", [("s", np.float32(2.0))])]) == \
        "1892af85beb161e7e73d2ce148b90804dcf1fc64c1d9d0fbd173dc957ddfa8cd"
