import collections
import io
import pickle
import sys
import types
import zipfile

import numpy as np
import pytest

from dashrank_onnx.pth import PthError, load_state_dict


class _StorageRef:
    def __init__(self, key, numel):
        self.key, self.numel = key, numel


def _make_checkpoint(path, entries, storages, extra_global=None):
    """Write a torch-style zip checkpoint without torch: fake ``torch`` modules are installed
    in sys.modules only while pickling so that globals are written by name."""
    torch_mod = types.ModuleType("torch")
    utils_mod = types.ModuleType("torch._utils")

    class FloatStorage:  # noqa: D401 - stand-in
        pass
    FloatStorage.__module__ = "torch"
    FloatStorage.__qualname__ = "FloatStorage"
    torch_mod.FloatStorage = FloatStorage

    def _rebuild_tensor_v2(*a):
        raise AssertionError
    _rebuild_tensor_v2.__module__ = "torch._utils"
    _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
    utils_mod._rebuild_tensor_v2 = _rebuild_tensor_v2

    class _T:
        def __init__(self, ref, off, size, stride):
            self.args = (ref, off, size, stride, False, collections.OrderedDict())

        def __reduce__(self):
            return (_rebuild_tensor_v2, self.args)

    class P(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, _StorageRef):
                return ("storage", FloatStorage, obj.key, "cuda:0", obj.numel)
            return None

    saved = {k: sys.modules.get(k) for k in ("torch", "torch._utils")}
    sys.modules["torch"], sys.modules["torch._utils"] = torch_mod, utils_mod
    try:
        sd = collections.OrderedDict((k, _T(*v)) for k, v in entries.items())
        if extra_global is not None:
            sd["evil"] = extra_global
        buf = io.BytesIO()
        P(buf, protocol=2).dump(sd)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        for key, arr in storages.items():
            z.writestr(f"archive/data/{key}", np.asarray(arr, "<f4").tobytes())


def test_offsets_strides_shared_storage(tmp_path):
    st = np.arange(20, dtype=np.float32)
    ref = _StorageRef("0", 20)
    p = tmp_path / "ck.pth"
    _make_checkpoint(p, {"a": (ref, 2, (2, 3), (1, 2)), "b": (ref, 10, (4,), (1,)),
                         "c": (_StorageRef("1", 6), 0, (3, 2), (2, 1))},
                     {"0": st, "1": np.arange(6) * 0.5})
    sd = load_state_dict(p)
    assert list(sd) == ["a", "b", "c"]
    np.testing.assert_array_equal(sd["a"], np.array([[2, 4, 6], [3, 5, 7]], np.float32))
    assert sd["a"].flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(sd["b"], [10, 11, 12, 13])
    np.testing.assert_array_equal(sd["c"], (np.arange(6) * 0.5).reshape(3, 2))


def test_out_of_bounds_tensor(tmp_path):
    p = tmp_path / "ck.pth"
    _make_checkpoint(p, {"a": (_StorageRef("0", 4), 2, (3,), (1,))}, {"0": np.zeros(4)})
    with pytest.raises(PthError, match="exceeds its storage"):
        load_state_dict(p)


def test_forbidden_global(tmp_path):
    import os
    p = tmp_path / "ck.pth"
    _make_checkpoint(p, {}, {}, extra_global=os.getcwd)
    with pytest.raises(PthError, match="not allowed"):
        load_state_dict(p)


def test_legacy_format(tmp_path):
    p = tmp_path / "legacy.pth"
    p.write_bytes(pickle.dumps({"a": 1}, protocol=2))
    with pytest.raises(PthError, match="legacy"):
        load_state_dict(p)


@pytest.mark.parametrize("kernel,order_in,extra", [("SpMM", 36, []), ("SDDMM", 36, ["paridx.weight"]),
                                                   ("SpMV", 16, [])])
def test_real_checkpoints(shared, kernel, order_in, extra):
    sd = load_state_dict(shared / "weights" / kernel / "resnet.pth")
    assert sd["layer1.0.kernel"].shape == (25, 1, 32)
    for i in range(2, 15):
        assert sd[f"layer{i}.0.kernel"].shape == (9, 32, 32)
    assert sd["order.weight"].shape == (32, order_in)
    assert sd["matrix_embedding.0.weight"].shape == (256, 480)
    for k in extra:
        assert k in sd
    assert all(np.isfinite(v).all() and v.dtype == np.float32 for v in sd.values())
