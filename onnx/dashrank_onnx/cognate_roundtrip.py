"""COGNATE checkpoint round trip on real matrices, for the Rust parity test
(``tests/cognate_convert.rs``) and as a worked example of ``onnx/COGNATE_CHECKPOINTS.md``.

Seeded weights of the papers' architecture (:func:`dashrank_onnx.cognate.cognate_model`) are
written as state dicts in PyTorch's zip layout (numpy only, :func:`pth.save_state_dict`) and
converted with the ``convert_cognate`` CLI, then scored by the numpy reference computed from
the *original* weights (never from the converted files) over each head's schedule space on
every real matrix:

* ``a/``: the naming convention, a 52-column mapper, three heads (``cpu-taco/spmm``,
  ``spade/spmm``, ``gpu-sparsetir/spmm``), plus a fourth head (``spade/sddmm``) added afterwards
  from a separate fine-tuning checkpoint with ``--head-only``;
* ``b/``: the same featurizer and matrix embedder under other module names (mapping file,
  Linear weights stored ``[in, out]``), a **53-column** mapper (a constant fourth split column
  at index 3, value 1), a position-major loop-order one-hot, and the predictor's input in the
  order (config, matrix, latent); its reference runs the mapper on the 53 columns as written.

CLI::

    python -m dashrank_onnx.cognate_roundtrip --out target/golden/cognate \\
        --matrices ../shared/data/waco/matrices [--tiny] [--seed 7]
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np

from . import cognate as C
from . import convert_cognate
from .pth import save_state_dict
from .reference import CognateScheduleEmbedder, Head, Model, Predictor, load_csr, mlp

HEADS = ("cpu-taco/spmm", "spade/spmm", "gpu-sparsetir/spmm")
ADDED = "spade/sddmm"
CONST_INDEX, CONST_VALUE = 3, 1.0
TOLERANCE = {"matrix_embedding": {"rtol": 1e-4, "vec_rtol": 1e-4}, "score": {"rtol": 1e-4, "vec_rtol": 1e-4}}


def _seq(layers, prefix: str, sd: Dict[str, np.ndarray], transpose: bool = False) -> None:
    """Linear layers as an ``nn.Sequential`` with a ReLU between: indices 0, 2, 4, …"""
    for i, (W, b) in enumerate(layers):
        sd[f"{prefix}{2 * i}.weight"] = np.ascontiguousarray(W.T if transpose else W)
        sd[f"{prefix}{2 * i}.bias"] = b


def state_dict_of(model: Model) -> "collections.OrderedDict[str, np.ndarray]":
    """The state dict of a reference COGNATE model under the naming convention (the IFE as an
    ``nn.Sequential`` of conv, ReLU and pool modules: kernels at indices 0, 2, …, so 10 sorts
    after 8 only numerically)."""
    sd = collections.OrderedDict()
    inits = model.featurizer.initializers
    n = sum(1 for k in inits if k.endswith(".weight"))
    for i in range(1, n + 1):
        sd[f"ife.{2 * (i - 1)}.kernel"] = inits[f"layer{i}.weight"]
        if f"layer{i}.bias" in inits:
            sd[f"ife.{2 * (i - 1)}.bias"] = inits[f"layer{i}.bias"].reshape(1, -1)
    _seq(model.matrix_embedder.shape_mlp, "shape_mlp.", sd)
    _seq(model.matrix_embedder.embed_mlp, "matrix_mlp.", sd)
    first = next(iter(model.heads.values())).schedule_embedder
    _seq(first.mapper_layers, "mapper.", sd)
    for name, h in model.heads.items():
        key = name.replace("/", "__")
        _seq(h.schedule_embedder.latent_layers, f"latent.{key}.", sd)
        _seq(h.predictor.mlp_layers, f"predictor.{key}.", sd)
    return sd


def metadata_of(model: Model, **extra) -> dict:
    me = model.matrix_embedder
    return {"model_name": model.model_name,
            "shape_normalization": {"features": list(me.features), "mean": list(me.mean), "std": list(me.std),
                                    "source": me.source},
            **extra}


def _position_major(x52: np.ndarray) -> np.ndarray:
    """Our 52 columns (segment-major one-hot) → I J K + the position-major one-hot."""
    oh = x52[:, 3:52].reshape(-1, 7, 7)              # [row, segment, position]
    return np.concatenate([x52[:, :3], oh.transpose(0, 2, 1).reshape(-1, 49)], axis=1)


class VariantB:
    """The user-layout variant of a model: 53-column mapper, position-major one-hot, predictor
    input (config, matrix, latent); scored directly in that layout."""

    def __init__(self, model: Model, rng):
        se = next(iter(model.heads.values())).schedule_embedder
        (W, b), rest = se.mapper_layers[0], se.mapper_layers[1:]
        Wp = np.concatenate([W[:, :3], W[:, 3:].reshape(-1, 7, 7).transpose(0, 2, 1).reshape(-1, 49)], axis=1)
        extra = rng.standard_normal((W.shape[0], 1)).astype(np.float32) * np.float32(0.5)
        self.mapper = [(np.ascontiguousarray(np.insert(Wp, CONST_INDEX, extra[:, 0], axis=1)), b)] + rest
        self.model = model
        self.predictors = {}
        for name, h in model.heads.items():
            (P, pb), prest = h.predictor.mlp_layers[0], h.predictor.mlp_layers[1:]
            Em = P.shape[1] - h.schedule_embedder.out_width
            Pc = se.config_width
            cols = np.concatenate([np.arange(Em, Em + Pc), np.arange(Em), np.arange(Em + Pc, P.shape[1])])
            self.predictors[name] = [(np.ascontiguousarray(P[:, cols]), pb)] + prest

    def mapper_input(self, enc: np.ndarray) -> np.ndarray:
        x = _position_major(enc[:, :52])
        return np.insert(x, CONST_INDEX, np.float32(CONST_VALUE), axis=1).astype(np.float32)

    def score(self, head: str, memb: np.ndarray, lines: Sequence[str]) -> np.ndarray:
        h = self.model.heads[head]
        enc, ok, errs = h.schema.encode(lines)
        assert not errs, errs
        cfg = mlp(self.mapper_input(enc), self.mapper)
        lat = mlp(enc[:, 52:], h.schedule_embedder.latent_layers)
        m = np.repeat(memb, len(lines), axis=0)
        return mlp(np.concatenate([cfg, m, lat], axis=1), self.predictors[head])[:, 0]

    def state_dict(self) -> "collections.OrderedDict[str, np.ndarray]":
        """Other module names; the mapper's Linear weights stored [in, out]."""
        ours = state_dict_of(self.model)
        sd = collections.OrderedDict()
        for k, v in ours.items():
            if k.startswith("ife."):
                sd["net.features." + k[4:]] = v
            elif k.startswith(("shape_mlp.", "matrix_mlp.")):
                sd["net.matrix." + k] = v
            elif k.startswith("latent."):
                _, key, rest = k.split(".", 2)
                tgt = key.replace("__", "_")
                sd[f"heads.{tgt}.enc.{rest}"] = v
                sd[f"heads.{tgt}.dec.{rest}"] = np.zeros((2, 2), np.float32)  # the decoder: not converted
        for i, (W, b) in enumerate(self.mapper):
            sd[f"fm.w{i}"] = np.ascontiguousarray(W.T)
            sd[f"fm.b{i}"] = b
        for name, layers in self.predictors.items():
            tgt = name.replace("/", "_")
            _seq(layers, f"heads.{tgt}.mlp.", sd)
        return sd

    def mapping(self) -> dict:
        m = {"_comment": "our name or prefix → the checkpoint's", "ife.": "net.features.",
             "shape_mlp.": "net.matrix.shape_mlp.", "matrix_mlp.": "net.matrix.matrix_mlp."}
        for i in range(len(self.mapper)):
            m[f"mapper.{2 * i}.weight"] = {"name": f"fm.w{i}", "transpose": True}
            m[f"mapper.{2 * i}.bias"] = f"fm.b{i}"
        for name in self.model.heads:
            key, tgt = name.replace("/", "__"), name.replace("/", "_")
            m[f"latent.{key}."] = f"heads.{tgt}.enc."
            m[f"predictor.{key}."] = f"heads.{tgt}.mlp."
        return m

    def metadata(self) -> dict:
        return metadata_of(self.model, mapper={
            "onehot": "position_major",
            "constant_columns": [{"index": CONST_INDEX, "value": CONST_VALUE,
                                  "meaning": "a fourth split column, constant 1 (the dummy segment π adds)"}]},
            predictor_input=["config", "matrix", "latent"])


def space_lines(head: str, ncols: int, limit: int = 300) -> List[str]:
    """A head's schedule space on a matrix, as unified lines (TACO: the first ``limit`` lines of
    the covering subset)."""
    target, kernel = head.split("/")
    if target == "spade":
        return C.spade_lines(ncols)
    if target == "gpu-sparsetir":
        return C.gpu_lines(kernel)
    return [C.waco_unified(kernel, ln) for ln in itertools.islice(C.taco_lines(kernel), limit)]


def fine_tuned_head(model: Model, rng, dims: C.CognateDims) -> Head:
    """A new ``spade/sddmm`` head trained against ``model``'s shared parts."""
    schema = C.cognate_schema("spade", "sddmm")
    se0 = next(iter(model.heads.values())).schedule_embedder
    latent = C._mlp(rng, [schema.width - C.MAPPER_WIDTH, *dims.latent])
    se = CognateScheduleEmbedder([(W.copy(), b.copy()) for W, b in se0.mapper_layers], latent, C.MAPPER_WIDTH,
                                 schema.width)
    Em = model.matrix_embedder.embed_mlp[-1][0].shape[0]
    pr = Predictor(C._mlp(rng, [Em + se.out_width, *dims.predictor, 1]))
    return Head(ADDED, "sddmm", "spade", schema, se, pr, "lower_is_better", C.MEANING)


def _f(a) -> list:
    return np.asarray(a, dtype=np.float32).astype(np.float64).tolist()


def _cli(args: List[str]) -> None:
    if convert_cognate.main(args) != 0:
        raise SystemExit(f"convert_cognate {' '.join(args)} failed")


def build(out: Path, matrices: Sequence[Path], seed: int = 7, dims: C.CognateDims = C.FULL) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed + 1000)
    model = C.cognate_model(seed, dims, HEADS, f"cognate round trip (seed {seed})")
    # a: the naming convention, then a fine-tuned head added with --head-only
    save_state_dict(state_dict_of(model), out / "a.pth")
    (out / "a.json").write_text(json.dumps(metadata_of(model), indent=1))
    _cli(["--checkpoint", str(out / "a.pth"), "--metadata", str(out / "a.json"), "--out", str(out / "a")])
    ft = fine_tuned_head(model, rng, dims)
    ft_model = Model("cognate", model.model_name, model.featurizer, model.matrix_embedder, {ADDED: ft})
    ft_sd = collections.OrderedDict((k, v) for k, v in state_dict_of(ft_model).items()
                                    if k.startswith(("mapper.", "latent.", "predictor.")))
    save_state_dict(ft_sd, out / "a-finetuned-spade-sddmm.pth")
    _cli(["--head-only", "--checkpoint", str(out / "a-finetuned-spade-sddmm.pth"), "--metadata",
          str(out / "a.json"), "--bundle", str(out / "a")])
    model.heads[ADDED] = ft
    # b: other names, 53 columns, position-major one-hot, predictor order (config, matrix, latent)
    vb = VariantB(Model("cognate", model.model_name, model.featurizer, model.matrix_embedder,
                        {h: model.heads[h] for h in HEADS}), rng)
    save_state_dict(vb.state_dict(), out / "b.pth")
    (out / "b.json").write_text(json.dumps(vb.metadata(), indent=1))
    (out / "b-mapping.json").write_text(json.dumps(vb.mapping(), indent=1))
    _cli(["--checkpoint", str(out / "b.pth"), "--metadata", str(out / "b.json"), "--mapping",
          str(out / "b-mapping.json"), "--out", str(out / "b")])
    golden = {"format": "dashrank-cognate-roundtrip-v1", "seed": seed, "dims": "full" if dims == C.FULL else "tiny",
              "bundles": {"a": str(out / "a"), "b": str(out / "b")}, "heads": {"a": [*HEADS, ADDED], "b": list(HEADS)},
              "tolerance": TOLERANCE,
              "notes": "scores of the numpy reference computed from the original weights (b: in the checkpoint's "
                       "own 53-column layout); lines are each head's space on the matrix",
              "matrices": []}
    for path in matrices:
        t0 = time.time()
        pat = load_csr(path)
        _, _, memb = model.embed_matrix(pat)
        entry = {"name": path.stem, "file": str(path), "nnz": pat.nnz, "matrix_embedding": _f(memb[0]),
                 "heads": {}}
        for h in [*HEADS, ADDED]:
            lines = space_lines(h, pat.cols)
            e = {"lines": lines, "a": _f(model.score(h, memb, lines)[2])}
            if h in HEADS:
                e["b"] = _f(vb.score(h, memb, lines))
            entry["heads"][h] = e
        golden["matrices"].append(entry)
        print(f"{path.stem}: {pat.nnz} nonzeros, {time.time() - t0:.1f} s", file=sys.stderr)
    return golden


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dashrank_onnx.cognate_roundtrip", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for the checkpoints, bundles and golden.json")
    ap.add_argument("--matrices", required=True, help="directory of .csr files (or one file)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--tiny", action="store_true", help="every width / 8 instead of the papers' dimensions")
    a = ap.parse_args(argv)
    src = Path(a.matrices)
    mats = sorted(src.glob("*.csr")) if src.is_dir() else [src]
    out = Path(a.out)
    g = build(out, mats, a.seed, C.TINY if a.tiny else C.FULL)
    (out / "golden.json").write_text(json.dumps(g) + "\n")
    print(f"wrote {out / 'golden.json'} ({len(mats)} matrices)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
