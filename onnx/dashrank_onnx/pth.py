"""Read (and, for tests and examples, write) PyTorch zip checkpoints of state dicts without torch.

Only the zip format (``<archive>/data.pkl`` + ``<archive>/data/<key>``) is supported. The
pickle is loaded with a restricted unpickler: the only globals it may name are the few that
a plain state dict of dense float tensors needs; anything else is a clear error and nothing
is ever executed. :func:`save_state_dict` writes the same layout ``torch.save`` does (protocol-2
pickle of an ``OrderedDict`` of ``torch._utils._rebuild_tensor_v2`` calls on persistent
storages, one zip record per storage, 64-byte aligned), with numpy only.
"""

from __future__ import annotations

import collections
import io
import pickle
import struct
import zipfile
from typing import Dict, Mapping

import numpy as np

__all__ = ["PthError", "load_state_dict", "save_state_dict"]


class PthError(ValueError):
    """A checkpoint that cannot be read (bad format, forbidden global, bad storage)."""


_STORAGE_DTYPES = {
    "FloatStorage": np.dtype("<f4"),
    "HalfStorage": np.dtype("<f2"),
    "DoubleStorage": np.dtype("<f8"),
    "BFloat16Storage": None,  # recognised, refused with a clear message
    "LongStorage": np.dtype("<i8"),
    "IntStorage": np.dtype("<i4"),
}


class _StorageType:
    def __init__(self, name: str):
        self.name = name
        if _STORAGE_DTYPES.get(name) is None:
            raise PthError(f"storage type torch.{name} is not supported")
        self.dtype = _STORAGE_DTYPES[name]


class _Storage:
    def __init__(self, data: np.ndarray):
        self.data = data


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
    if not isinstance(storage, _Storage):
        raise PthError("tensor rebuilt from something that is not a storage")
    data = storage.data
    size = tuple(int(s) for s in size)
    stride = tuple(int(s) for s in stride)
    offset = int(storage_offset)
    if len(size) != len(stride):
        raise PthError(f"tensor size {size} and stride {stride} differ in rank")
    if any(s < 0 for s in size) or any(s < 0 for s in stride) or offset < 0:
        raise PthError("negative size, stride or offset")
    n = int(np.prod(size)) if size else 1
    if n == 0:
        return np.zeros(size, dtype=data.dtype)
    last = offset + sum((sz - 1) * st for sz, st in zip(size, stride))
    if last >= data.size:
        raise PthError(
            f"tensor (offset {offset}, size {size}, stride {stride}) exceeds its storage "
            f"of {data.size} elements")
    item = data.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(
        data[offset:], shape=size, strides=tuple(st * item for st in stride), writeable=False)
    return np.array(view, order="C")  # a copy; keeps 0-d tensors 0-d (ascontiguousarray would not)


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None):
    return data


_ALLOWED = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
}


class _Unpickler(pickle.Unpickler):
    def __init__(self, fp, zf: zipfile.ZipFile, prefix: str):
        super().__init__(fp)
        self._zf = zf
        self._prefix = prefix
        self._cache: Dict[str, _Storage] = {}

    def find_class(self, module, name):
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name)
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise PthError(
                f"checkpoint references the global {module}.{name}, which is not allowed "
                "(only plain state dicts of tensors are supported)") from None

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or len(pid) < 5 or pid[0] != "storage":
            raise PthError(f"unsupported persistent id {pid!r}")
        _, stype, key, _location, numel = pid[:5]
        if not isinstance(stype, _StorageType):
            raise PthError(f"storage type {stype!r} is not supported")
        key = str(key)
        if key in self._cache:
            return self._cache[key]
        name = f"{self._prefix}data/{key}"
        try:
            raw = self._zf.read(name)
        except KeyError:
            raise PthError(f"storage record {name} missing from the archive") from None
        need = int(numel) * stype.dtype.itemsize
        if len(raw) < need:
            raise PthError(f"storage {key}: {len(raw)} bytes, expected {need}")
        st = _Storage(np.frombuffer(raw[:need], dtype=stype.dtype))
        self._cache[key] = st
        return st


def load_state_dict(path) -> "collections.OrderedDict[str, np.ndarray]":
    """Load a torch zip checkpoint holding a state dict; returns name → numpy array
    (contiguous, the storage's dtype, e.g. float32)."""
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        with open(path, "rb") as f:
            head = f.read(2)
        if head[:1] == b"\x80":
            raise PthError(
                f"{path}: legacy (non-zip) torch serialization is unsupported; re-save it with "
                "torch.save(..., _use_new_zipfile_serialization=True)") from None
        raise PthError(f"{path}: not a torch zip checkpoint") from None
    with zf:
        pkls = [n for n in zf.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(pkls) != 1:
            raise PthError(f"{path}: expected exactly one data.pkl, found {len(pkls)}")
        prefix = pkls[0][: -len("data.pkl")]
        up = _Unpickler(io.BytesIO(zf.read(pkls[0])), zf, prefix)
        try:
            obj = up.load()
        except PthError:
            raise
        except Exception as e:  # malformed pickle stream
            raise PthError(f"{path}: cannot unpickle: {e}") from e
    if not isinstance(obj, dict):
        raise PthError(f"{path}: top-level object is {type(obj).__name__}, not a state dict")
    out = collections.OrderedDict()
    for k, v in obj.items():
        if not isinstance(v, np.ndarray):
            raise PthError(f"{path}: entry {k!r} is not a tensor")
        out[str(k)] = v
    return out


# --------------------------------------------------------------------------------------
# Writing (numpy only)
# --------------------------------------------------------------------------------------

_WRITE_STORAGE = {np.dtype("<f4"): "FloatStorage", np.dtype("<f2"): "HalfStorage",
                  np.dtype("<f8"): "DoubleStorage", np.dtype("<i8"): "LongStorage",
                  np.dtype("<i4"): "IntStorage"}


class _Ops:
    """A protocol-2 pickle stream written opcode by opcode (no memo, no globals looked up)."""

    def __init__(self):
        self.b = bytearray(b"\x80\x02")

    def glob(self, module: str, name: str):
        self.b += b"c" + module.encode() + b"\n" + name.encode() + b"\n"

    def text(self, s: str):
        e = s.encode("utf-8")
        self.b += b"X" + struct.pack("<I", len(e)) + e

    def int(self, n: int):
        if 0 <= n < 256:
            self.b += b"K" + bytes([n])
        elif -2 ** 31 <= n < 2 ** 31:
            self.b += b"J" + struct.pack("<i", n)
        else:
            raw = int(n).to_bytes((int(n).bit_length() + 8) // 8, "little", signed=True)
            self.b += b"\x8a" + bytes([len(raw)]) + raw

    def tuple_of_ints(self, xs):
        self.b += b"("
        for x in xs:
            self.int(int(x))
        self.b += b"t"

    def op(self, code: bytes):
        self.b += code


def _pickle_state_dict(names, arrays, keys) -> bytes:
    p = _Ops()
    p.glob("collections", "OrderedDict")
    p.op(b")R(")                                   # OrderedDict() then MARK for SETITEMS
    for name, a, key in zip(names, arrays, keys):
        p.text(name)
        p.glob("torch._utils", "_rebuild_tensor_v2")
        p.op(b"(")                                 # MARK: the argument tuple
        p.op(b"(")                                 # MARK: the persistent id tuple
        p.text("storage")
        p.glob("torch", _WRITE_STORAGE[a.dtype])
        p.text(key)
        p.text("cpu")
        p.int(a.size)
        p.op(b"tQ")                                # TUPLE, BINPERSID
        p.int(0)                                   # storage offset
        p.tuple_of_ints(a.shape)
        p.tuple_of_ints([s // a.itemsize for s in a.strides] if a.size else [1] * a.ndim)
        p.op(b"\x89")                              # requires_grad = False
        p.glob("collections", "OrderedDict")
        p.op(b")R")                                # backward hooks: OrderedDict()
        p.op(b"tR")                                # TUPLE, REDUCE
    p.op(b"u.")                                    # SETITEMS, STOP
    return bytes(p.b)


def _aligned_record(zf: zipfile.ZipFile, name: str, data: bytes, align: int = 64) -> None:
    """A stored (uncompressed) record whose data starts on an ``align``-byte boundary, padded
    with an extra field as torch's writer does."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    start = zf.fp.tell() + 30 + len(name.encode())
    pad = (-(start + 4)) % align
    info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
    zf.writestr(info, data)


def save_state_dict(state_dict: Mapping[str, np.ndarray], path, archive: str = "archive") -> None:
    """Writes ``name → array`` in torch's zip checkpoint layout (``torch.load`` reads it back as
    a state dict of CPU tensors; :func:`load_state_dict` returns the same arrays). Arrays are
    stored little-endian and contiguous, one storage each; dtypes float32/16/64, int64, int32."""
    names, arrays = [], []
    for k, v in state_dict.items():
        a = np.asarray(v)
        a = a.astype(a.dtype.newbyteorder("<"), order="C", copy=False)
        if a.dtype not in _WRITE_STORAGE:
            raise PthError(f"{k}: dtype {a.dtype} cannot be written (float32/16/64, int64, int32)")
        names.append(str(k))
        arrays.append(a)
    keys = [str(i) for i in range(len(arrays))]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        _aligned_record(zf, f"{archive}/data.pkl", _pickle_state_dict(names, arrays, keys))
        _aligned_record(zf, f"{archive}/byteorder", b"little")
        for key, a in zip(keys, arrays):
            _aligned_record(zf, f"{archive}/data/{key}", a.tobytes())
        _aligned_record(zf, f"{archive}/version", b"3\n")
