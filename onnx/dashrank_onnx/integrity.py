"""Bundle integrity and head provenance (``docs/bundle-format.md`` §7).

* **Weight hashes.** ``featurizer_sha256`` covers the float initializers of the featurizer and
  the matrix embedder (everything the matrix embedding a predictor consumes depends on);
  ``mapper_sha256`` covers the ``mapper.*`` initializers of a COGNATE schedule embedder (the
  shared configuration mapper; the empty set for WACO heads). Both are SHA-256 over a canonical
  byte string of the weights *as stored* (converted to float32), never over file bytes, so they
  can be written into the files they describe. Every bundle file records both
  (``dashrank.featurizer_sha256``, ``dashrank.mapper_sha256``): the values of the model it was
  exported with.
* **Manifest.** ``manifest.json`` lists every ``.onnx`` file of the bundle with its size and
  the SHA-256 of its bytes; the loader refuses a file that differs from it, an unlisted file and
  a listed file that is missing.

The Rust loader (``src/bundle/integrity.rs``) implements the same definitions; the committed
fixtures, written here and checked there, keep the two in agreement.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import onnx
from onnx import numpy_helper

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "dashrank-manifest"
MANIFEST_VERSION = 1
FEATURIZER_KEY = "dashrank.featurizer_sha256"
MAPPER_KEY = "dashrank.mapper_sha256"
#: Initializers of a schedule embedder that belong to the shared configuration mapper.
MAPPER_PREFIX = "mapper."
_DOMAIN = b"dashrank-weights-v1\x00"
_FLOAT_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE)


class IntegrityError(ValueError):
    """A bundle whose files differ from its manifest or whose provenance does not match."""


def _u32(n: int) -> bytes:
    return struct.pack("<I", n)


def _f32(arr) -> np.ndarray:
    """Little-endian float32, C order, keeping 0-d arrays 0-d (ascontiguousarray would not)."""
    return np.array(arr, dtype="<f4", order="C")


def _float_initializers(m: onnx.ModelProto, prefix: str = "") -> List[Tuple[str, np.ndarray]]:
    out = []
    for t in m.graph.initializer:
        if t.data_type in _FLOAT_TYPES and t.name.startswith(prefix):
            out.append((t.name, _f32(numpy_helper.to_array(t))))
    # Byte order of the UTF-8 names (what Rust's `str` ordering is); stable for duplicates.
    out.sort(key=lambda nt: nt[0].encode("utf-8"))
    return out


def weights_sha256(sections: Sequence[Tuple[str, Sequence[Tuple[str, np.ndarray]]]]) -> str:
    """SHA-256 (hex) of the canonical byte string of named tensor sections:

    ``"dashrank-weights-v1\\0"``, then per section ``u32 len(tag) · tag · u32 count``, then per
    tensor (in the order given) ``u32 len(name) · name · u32 ndim · u64 dim… · f32 value…``
    (all integers and floats little-endian, names and tags UTF-8, values row-major)."""
    h = hashlib.sha256(_DOMAIN)
    for tag, tensors in sections:
        t = tag.encode("utf-8")
        h.update(_u32(len(t)) + t + _u32(len(tensors)))
        for name, arr in tensors:
            n = name.encode("utf-8")
            a = _f32(arr)
            h.update(_u32(len(n)) + n + _u32(a.ndim) + b"".join(struct.pack("<Q", d) for d in a.shape))
            h.update(a.tobytes())
    return h.hexdigest()


def featurizer_sha256(featurizer: onnx.ModelProto, matrix_embedder: onnx.ModelProto) -> str:
    """The featurizer hash of a bundle: sections ``featurizer`` and ``matrix_embedder``."""
    return weights_sha256([("featurizer", _float_initializers(featurizer)),
                           ("matrix_embedder", _float_initializers(matrix_embedder))])


def mapper_sha256(schedule_embedder: Optional[onnx.ModelProto]) -> str:
    """The mapper hash of a head: section ``mapper`` with the schedule embedder's ``mapper.*``
    initializers (none for a WACO head, or ``None``: the hash of the empty section)."""
    tensors = _float_initializers(schedule_embedder, MAPPER_PREFIX) if schedule_embedder is not None else []
    return weights_sha256([("mapper", tensors)])


def metadata(m: onnx.ModelProto) -> Dict[str, str]:
    return {p.key: p.value for p in m.metadata_props}


def set_metadata(m: onnx.ModelProto, values: Mapping[str, Optional[str]]) -> None:
    """Sets (or, for ``None``, removes) metadata keys, keeping the other keys in order."""
    props = [(p.key, p.value) for p in m.metadata_props if p.key not in values]
    props += [(k, v) for k, v in values.items() if v is not None]
    del m.metadata_props[:]
    for k, v in props:
        e = m.metadata_props.add()
        e.key, e.value = k, v


def _role(m: onnx.ModelProto) -> Optional[str]:
    return metadata(m).get("dashrank.role")


def bundle_mapper_sha256(files: Mapping[str, onnx.ModelProto]) -> str:
    """The one mapper hash shared by every head of ``files`` (file name → model); a bundle
    whose heads hold different mappers is refused, naming two of them."""
    seen: Dict[str, str] = {}
    for fname, m in sorted(files.items()):
        if _role(m) == "schedule_embedder":
            seen[fname] = mapper_sha256(m)
    if not seen:
        return mapper_sha256(None)
    values = sorted(set(seen.values()))
    if len(values) > 1:
        a = next(f for f, v in seen.items() if v == values[0])
        b = next(f for f, v in seen.items() if v == values[1])
        raise IntegrityError(f"heads hold different configuration mappers: {a} has mapper {values[0]}, "
                             f"{b} has {values[1]}; every head of a bundle shares one mapper")
    return values[0]


def stamp_provenance(files: Mapping[str, onnx.ModelProto]) -> Tuple[str, str]:
    """Computes the bundle's featurizer and mapper hashes from ``files`` (name → model, one
    featurizer and one matrix embedder among them) and records them in every file."""
    by_role = {}
    for fname, m in files.items():
        by_role.setdefault(_role(m), []).append(m)
    if len(by_role.get("featurizer", [])) != 1 or len(by_role.get("matrix_embedder", [])) != 1:
        raise IntegrityError("a bundle needs exactly one featurizer and one matrix embedder to be stamped")
    f = featurizer_sha256(by_role["featurizer"][0], by_role["matrix_embedder"][0])
    mp = bundle_mapper_sha256(files)
    for m in files.values():
        set_metadata(m, {FEATURIZER_KEY: f, MAPPER_KEY: mp})
    return f, mp


# --------------------------------------------------------------------------------------
# Manifest
# --------------------------------------------------------------------------------------

def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def manifest_of(directory) -> dict:
    """The manifest of the ``.onnx`` files of a directory as they are now."""
    d = Path(directory)
    files = {}
    for p in sorted(d.glob("*.onnx")):
        data = p.read_bytes()
        files[p.name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return {"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "algorithm": "sha256", "files": files}


def write_manifest(directory) -> Path:
    """Writes ``manifest.json`` vouching for the ``.onnx`` files of ``directory`` as they are."""
    p = Path(directory) / MANIFEST
    p.write_text(json.dumps(manifest_of(directory), indent=1, sort_keys=True) + "\n")
    return p


def read_manifest(directory) -> dict:
    p = Path(directory) / MANIFEST
    if not p.is_file():
        raise IntegrityError(
            f"{directory}: no {MANIFEST}: the bundle's files cannot be checked for corruption. Bundles "
            "written before manifests existed: re-export them, or vouch for the files as they are with "
            "`python -m dashrank_onnx.manifest DIR --stamp`")
    try:
        man = json.loads(p.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise IntegrityError(f"{p}: not valid JSON: {e}") from None
    if not isinstance(man, dict) or man.get("format") != MANIFEST_FORMAT or man.get("version") != MANIFEST_VERSION \
            or man.get("algorithm") != "sha256" or not isinstance(man.get("files"), dict):
        raise IntegrityError(f"{p}: not a {MANIFEST_FORMAT} version {MANIFEST_VERSION} (sha256) manifest")
    return man


def check_manifest(directory) -> None:
    """Every ``.onnx`` file matches ``manifest.json`` and every listed file exists."""
    d = Path(directory)
    listed = read_manifest(d)["files"]
    present = {p.name for p in d.glob("*.onnx")}
    for name in sorted(present - set(listed)):
        raise IntegrityError(f"{name}: not listed in {MANIFEST} (copied in after export? rewrite the manifest "
                             "with `python -m dashrank_onnx.manifest DIR --write` if this is deliberate)")
    for name in sorted(set(listed) - present):
        raise IntegrityError(f"{name}: listed in {MANIFEST} but missing from the bundle")
    for name in sorted(present):
        data = (d / name).read_bytes()
        got = hashlib.sha256(data).hexdigest()
        want = listed[name].get("sha256")
        if got != want or len(data) != listed[name].get("bytes"):
            raise IntegrityError(f"{name}: content does not match {MANIFEST} (sha256 {got}, {len(data)} bytes; "
                                 f"manifest: {want}, {listed[name].get('bytes')} bytes): the file is corrupted "
                                 "or was modified after export (if the edit is deliberate: "
                                 "`python -m dashrank_onnx.manifest DIR --write`)")


# --------------------------------------------------------------------------------------
# Provenance check (mirror of the Rust loader)
# --------------------------------------------------------------------------------------

def check_provenance(featurizer: onnx.ModelProto, matrix_embedder: onnx.ModelProto,
                     heads: Mapping[str, Tuple[str, onnx.ModelProto, str, onnx.ModelProto]],
                     allow_mismatch: bool = False) -> Tuple[str, str, List[str]]:
    """Checks the provenance of a bundle; ``heads``: head → (schedule embedder file name, model,
    predictor file name, model). Returns (featurizer hash, mapper hash, warnings)."""
    fmd, mmd = metadata(featurizer), metadata(matrix_embedder)
    for what, md in [("featurizer.onnx", fmd), ("matrix embedder", mmd)]:
        for k in (FEATURIZER_KEY, MAPPER_KEY):
            if k not in md:
                raise IntegrityError(f"{what}: missing metadata key {k} (written before provenance existed? "
                                     "re-export, or `python -m dashrank_onnx.manifest DIR --stamp`)")
    F, M = fmd[FEATURIZER_KEY], fmd[MAPPER_KEY]
    if mmd[FEATURIZER_KEY] != F or mmd[MAPPER_KEY] != M:
        raise IntegrityError(f"matrix embedder records featurizer {mmd[FEATURIZER_KEY]} / mapper {mmd[MAPPER_KEY]}, "
                             f"the featurizer {F} / {M}: the two come from different exports")
    warnings = []
    for head, (se_name, se, pr_name, pr) in sorted(heads.items()):
        for fname, m in [(se_name, se), (pr_name, pr)]:
            md = metadata(m)
            for k, want, what in [(FEATURIZER_KEY, F, "featurizer"), (MAPPER_KEY, M, "mapper")]:
                got = md.get(k)
                if got is None:
                    raise IntegrityError(f"head {head!r} ({fname}): missing metadata key {k}")
                if got != want:
                    msg = (f"head {head!r} ({fname}) was trained with {what} {got}, but this bundle's {what} is "
                           f"{want}: the head belongs to another model")
                    if not allow_mismatch:
                        raise IntegrityError(msg)
                    warnings.append(msg)
    return F, M, warnings


def check_weights(featurizer: onnx.ModelProto, matrix_embedder: onnx.ModelProto,
                  heads: Mapping[str, Tuple[str, onnx.ModelProto, str, onnx.ModelProto]]) -> None:
    """The recorded hashes match the weights (a file edited after export is refused even when
    its manifest was rewritten)."""
    F = metadata(featurizer)[FEATURIZER_KEY]
    computed_f = featurizer_sha256(featurizer, matrix_embedder)
    if computed_f != F:
        raise IntegrityError(f"featurizer.onnx and the matrix embedder record featurizer {F}, but their weights "
                             f"hash to {computed_f}: a file was modified after export or is corrupted")
    for head, (se_name, se, _, _) in sorted(heads.items()):
        got = mapper_sha256(se)
        want = metadata(se)[MAPPER_KEY]
        if got != want:
            raise IntegrityError(f"head {head!r} ({se_name}) records mapper {want}, but its mapper weights hash to "
                                 f"{got}: the file was modified after export or is corrupted")


def stamp_directory(directory) -> Tuple[str, str]:
    """Records provenance hashes computed from the bundle's own files in every file, then writes
    the manifest: vouches for the bundle exactly as it is (for bundles written before manifests
    and provenance existed, or edited deliberately)."""
    d = Path(directory)
    files = {p.name: onnx.load(str(p)) for p in sorted(d.glob("*.onnx"))}
    f, mp = stamp_provenance(files)
    for name, m in files.items():
        (d / name).write_bytes(m.SerializeToString())
    write_manifest(d)
    return f, mp


def describe(directory) -> Iterable[str]:
    """Human-readable lines: the manifest and the recorded provenance of each file."""
    d = Path(directory)
    man = read_manifest(d)
    for name, e in sorted(man["files"].items()):
        md = metadata(onnx.load(str(d / name), load_external_data=False)) if (d / name).is_file() else {}
        yield (f"{name}: {e['bytes']} bytes, sha256 {e['sha256']}; role {md.get('dashrank.role')}, "
               f"featurizer {md.get(FEATURIZER_KEY)}, mapper {md.get(MAPPER_KEY)}")
