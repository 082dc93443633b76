"""Convert a trained COGNATE/DASH state dict into a dashrank bundle, or add one fine-tuned head
to an existing bundle. torch is not needed (``pth.load_state_dict``). The naming convention,
the mapping file and the metadata file are in ``onnx/COGNATE_CHECKPOINTS.md``.

Whole model::

    python -m dashrank_onnx.convert_cognate --checkpoint model.pth --metadata meta.json \\
        --out models/my-cognate [--mapping names.json] [--fp16] [--model-name TEXT]

One fine-tuned head into an existing bundle (its two files are added or replaced, the manifest
rewritten; the bundle's featurizer, matrix embedder and mapper stay as they are)::

    python -m dashrank_onnx.convert_cognate --head-only --checkpoint spade-finetuned.pth \\
        --metadata meta.json --bundle models/my-cognate [--head spade/spmm] [--mapping names.json]

In head-only mode the checkpoint must hold the head's ``latent.<head>.*`` and
``predictor.<head>.*``. If it also holds the configuration mapper or the featurizer and matrix
embedder (a full fine-tuned checkpoint), they must be the bundle's own (same weight hashes):
a head trained against other shared parts is refused, naming both hashes.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import onnx
from onnx import numpy_helper

from . import cognate_checkpoint as CC
from .bundle import BundleError, head_file_stem, head_models, read_bundle, save, write_bundle
from .export import featurizer_proto, matrix_embedder_proto, schedule_embedder_proto
from .integrity import (FEATURIZER_KEY, MAPPER_KEY, IntegrityError, featurizer_sha256, mapper_sha256,
                        metadata as md_of, set_metadata, write_manifest)
from .pth import PthError, load_state_dict
from .reference import CognateScheduleEmbedder, MatrixEmbedder, Model

__all__ = ["convert_checkpoint", "add_head"]


def _tensors(checkpoint, mapping) -> CC.Tensors:
    rules = CC.read_mapping(mapping) if mapping else []
    return CC.Tensors(load_state_dict(checkpoint), rules)


def _report_unused(t: CC.Tensors) -> None:
    unused = t.unused()
    if unused:
        shown = ", ".join(unused[:8]) + (f", … ({len(unused) - 8} more)" if len(unused) > 8 else "")
        print(f"note: {len(unused)} checkpoint tensor(s) are not part of the converted model: {shown}",
              file=sys.stderr)


def convert_checkpoint(checkpoint, metadata, mapping=None, model_name: Optional[str] = None) -> Model:
    """The reference model of a full checkpoint (write it with ``bundle.write_bundle``)."""
    meta = CC.Metadata.read(metadata)
    name = model_name or meta.raw.get("model_name") or f"cognate ({Path(checkpoint).name})"
    t = _tensors(checkpoint, mapping)
    model = CC.convert(t, meta, str(name))
    _report_unused(t)
    return model


# --------------------------------------------------------------------------------------
# Head-only mode
# --------------------------------------------------------------------------------------

def _is_fp16(m: onnx.ModelProto) -> bool:
    return any(t.data_type == onnx.TensorProto.FLOAT16 for t in m.graph.initializer)


def _bundle_mapper(b) -> List[Tuple[np.ndarray, np.ndarray]]:
    """The shared mapper's layers as stored in the bundle (from any head's schedule embedder)."""
    for h in b.heads.values():
        got: Dict[Tuple[int, str], np.ndarray] = {}
        for t in h.schedule_embedder.graph.initializer:
            m = re.fullmatch(r"mapper\.(\d+)\.(weight|bias)(\.f16)?", t.name)
            if m:
                got[(int(m.group(1)), m.group(2))] = numpy_helper.to_array(t).astype(np.float32)
        if got:
            n = 1 + max(i for i, _ in got)
            return [(got[(i, "weight")], got[(i, "bias")]) for i in range(n)]
    raise CC.CheckpointError("the bundle has no configuration mapper (mapper.* in a schedule embedder): "
                             "it is not a COGNATE bundle")


def _output_width(m: onnx.ModelProto) -> int:
    return int(m.graph.output[0].type.tensor_type.shape.dim[1].dim_value)


def _check_shared_parts(t: CC.Tensors, meta: CC.Metadata, b, fp16: bool) -> None:
    """If the head checkpoint carries the featurizer and matrix embedder, they must hash to the
    bundle's featurizer hash."""
    parts = [p for p in ("ife.", "shape_mlp.", "matrix_mlp.") if t.has_prefix(p)]
    if not parts:
        return
    if len(parts) != 3:
        raise CC.CheckpointError(f"the checkpoint holds {parts} but not all of ife., shape_mlp., matrix_mlp.: "
                                 "give the whole featurizer and matrix embedder or none of them")
    feat, F = CC.featurizer(t, meta)
    shape = t.mlp("shape_mlp.", "shape MLP", n_in=len(b.norm["features"]))
    embed = t.mlp("matrix_mlp.", "matrix embedder", n_in=F + shape[-1][0].shape[0])
    me = MatrixEmbedder(shape, embed, b.norm["mean"], b.norm["std"], b.norm["features"], "")
    got = featurizer_sha256(onnx.helper.make_model(featurizer_proto(feat, fp16)),
                            onnx.helper.make_model(matrix_embedder_proto(me, F, fp16)))
    if got != b.featurizer_sha256:
        raise IntegrityError(f"the checkpoint's featurizer and matrix embedder hash to {got}, but the bundle's "
                             f"featurizer is {b.featurizer_sha256}: this head was trained against other shared "
                             "weights (fine-tuning updated them?); convert the whole checkpoint into a new bundle")


def add_head(bundle_dir, checkpoint, metadata, mapping=None, head: Optional[str] = None) -> List[Path]:
    """Converts one head of ``checkpoint`` and adds (or replaces) it in ``bundle_dir``; returns
    the files written (the head's two files and the manifest)."""
    d = Path(bundle_dir)
    b = read_bundle(d)
    if b.family != "cognate":
        raise BundleError(f"{d}: family {b.family!r}; heads can only be added to COGNATE bundles")
    meta = CC.Metadata.read(metadata)
    t = _tensors(checkpoint, mapping)
    names = CC.checkpoint_heads(t)
    if head is None:
        if len(names) != 1:
            raise CC.CheckpointError(f"the checkpoint has heads {names}: choose one with --head")
        head = names[0]
    if head not in names:
        raise CC.CheckpointError(f"the checkpoint has no head {head!r} (it has {names})")
    fp16 = _is_fp16(b.featurizer_model)
    _check_shared_parts(t, meta, b, fp16)
    hm = meta.head(head)
    stored = _bundle_mapper(b)
    if stored[0][0].shape[1] != hm.mapper_width:
        raise CC.CheckpointError(f"head {head!r}: its schema gives the mapper {hm.mapper_width} columns, the "
                                 f"bundle's mapper takes {stored[0][0].shape[1]}")
    fm = CC.mapper(t, meta, hm) if t.has_prefix("mapper.") else stored
    Em = _output_width(b.matrix_model)
    h = CC.head(t, meta, head, fm, Em)
    files = head_models(b.family, b.model_name, h, Em, fp16)
    se_name = f"{head_file_stem(head)}.schedule_embedder.onnx"
    got = mapper_sha256(files[se_name])
    if got != b.mapper_sha256:
        raise IntegrityError(f"the checkpoint's configuration mapper hashes to {got}, but the bundle's mapper is "
                             f"{b.mapper_sha256}: fine-tuning updated the shared mapper, so this head does not "
                             "fit the bundle; convert the whole checkpoint into a new bundle")
    _report_unused(t)
    written = []
    for fname, m in files.items():
        set_metadata(m, {FEATURIZER_KEY: b.featurizer_sha256, MAPPER_KEY: b.mapper_sha256})
        save(m, d / fname)
        written.append(d / fname)
    written.append(write_manifest(d))
    read_bundle(d)  # the bundle as it now is passes every check
    return written


# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dashrank_onnx.convert_cognate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True, help="PyTorch zip checkpoint of a state dict")
    ap.add_argument("--metadata", required=True, help="metadata JSON (COGNATE_CHECKPOINTS.md §3)")
    ap.add_argument("--mapping", help="JSON: our tensor name (or prefix) → the checkpoint's (COGNATE_CHECKPOINTS.md §2)")
    ap.add_argument("--out", help="bundle directory to write (whole-model mode)")
    ap.add_argument("--fp16", action="store_true", help="store weights as FLOAT16 (whole-model mode)")
    ap.add_argument("--model-name")
    ap.add_argument("--head-only", action="store_true", help="add one head to the bundle given by --bundle")
    ap.add_argument("--bundle", help="existing bundle directory (head-only mode)")
    ap.add_argument("--head", help="head to take from the checkpoint (head-only mode), e.g. spade/spmm")
    a = ap.parse_args(argv)
    try:
        if a.head_only:
            if not a.bundle or a.out or a.fp16 or a.model_name:
                ap.error("--head-only takes --bundle (and not --out, --fp16 or --model-name)")
            for p in add_head(a.bundle, a.checkpoint, a.metadata, a.mapping, a.head):
                print(p)
        else:
            if not a.out or a.bundle or a.head:
                ap.error("give --out (or --head-only with --bundle)")
            model = convert_checkpoint(a.checkpoint, a.metadata, a.mapping, a.model_name)
            for p in write_bundle(model, a.out, fp16=a.fp16):
                print(p)
            print(f"heads: {', '.join(model.heads)}")
    except (CC.CheckpointError, PthError, BundleError, IntegrityError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
