"""The DLPack export scenarios written black-box from their specification
alone: public API, NumPy and a ctypes capsule reader, no project test
helpers. A cross-check that the scenario tests elsewhere did not lean on a
helper's convenience (builders that pre-fill slots) for their result; the
movement half is tests/move/test_move_scenarios.py."""
import ctypes
import gc
import sys
import weakref

import numpy as np
import pytest

import strideweave as sw

F32, I32 = sw.DType.Float32, sw.DType.Int32

_api = ctypes.PyDLL(None)
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class _Dev(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Dev), ("ndim", ctypes.c_int32), ("dtype", _DType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _Legacy(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _Versioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


def read(capsule):
    name = _api.PyCapsule_GetName(capsule)
    ptr = _api.PyCapsule_GetPointer(capsule, name)
    m = (_Versioned if name == b"dltensor_versioned" else _Legacy).from_address(ptr)
    t = m.dl_tensor
    out = dict(name=name.decode(), data=t.data or 0, device=(t.device.device_type, t.device.device_id),
               dtype=(t.dtype.code, t.dtype.bits, t.dtype.lanes), shape=[t.shape[i] for i in range(t.ndim)],
               strides=[t.strides[i] for i in range(t.ndim)], byte_offset=t.byte_offset)
    if name == b"dltensor_versioned":
        out.update(version=(m.major, m.minor), flags=m.flags)
    return out


def cpu(values, dtype=F32, mutable=True):
    c = sw.CPU(len(values), dtype=dtype)
    for i, v in enumerate(values):
        c[i] = v
    return c if mutable else c.new_like(values, mutable=False)


def flat(values, dtype=F32, mutable=True):
    return sw.Tensor(cpu(values, dtype, mutable), 0, sw.Layout(sw.Shape(len(values)), sw.Stride(1)))


def logical(t):
    return [t[i] for i in range(t.size())]


# ------------------------------------------------------------ DLPack

@pytest.mark.parametrize("ceiling", [(1, 0), (1, 3), (2, 0), (42, 42)])
def test_produce_a_versioned_capsule_for_a_1x_consumer(ceiling):
    info = read(flat([1.0, 2.0]).__dlpack__(max_version=ceiling))
    assert info["name"] == "dltensor_versioned" and info["version"] == (1, 0)


@pytest.mark.parametrize("kwargs", [{}, {"max_version": (0, 5)}])
def test_fall_back_to_the_legacy_structure(kwargs):
    info = read(flat([1.0, 2.0]).__dlpack__(**kwargs))
    assert info["name"] == "dltensor" and "version" not in info


def test_reject_a_malformed_version_ceiling():
    t = flat([1.0])
    with pytest.raises(TypeError):
        t.__dlpack__(max_version=1)
    with pytest.raises(ValueError):
        t.__dlpack__(max_version=(1, 0, 0))
    with pytest.raises(ValueError):
        t.__dlpack__(max_version=(1, -1))


def test_report_a_device_for_a_non_exportable_dtype():
    t = sw.Tensor(sw.CPU(2, dtype=sw.DType.Bool), 0, sw.Layout(sw.Shape(2), sw.Stride(1)))
    assert t.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError, match="Float32 and Int32"):
        t.__dlpack__()


def test_refuse_a_copy_export():
    with pytest.raises(BufferError, match="copy exports are not supported"):
        flat([1.0]).__dlpack__(copy=True)


def test_refuse_a_cross_device_export():
    with pytest.raises(BufferError, match="cross-device exports are not supported"):
        flat([1.0]).__dlpack__(dl_device=(2, 0))


def test_accept_the_tensors_own_device():
    t = flat([1.0, 2.0])
    info = read(t.__dlpack__(dl_device=t.__dlpack_device__()))
    assert info["data"] == t.carrier.pointer()


def test_flatten_a_hierarchical_layout():
    lay = sw.Layout(sw.Shape(2, [3, 2]), sw.Stride(6, [1, 3]))
    t = sw.Tensor(cpu([float(i) for i in range(12)]), 0, lay)
    info = read(t.__dlpack__(max_version=(1, 0)))
    assert info["shape"] == [2, 3, 2] and info["strides"] == [6, 1, 3]
    a = np.from_dlpack(t)
    assert a[1, 2, 1] == t[(1, (2, 1))] == 6 + 2 + 3


def test_preserve_broadcast_strides():
    c = cpu([5.0, 6.0])
    t = sw.Tensor(c, 0, sw.Layout(sw.Shape(2, 3), sw.Stride(1, 0)))
    assert read(t.__dlpack__())["strides"] == [1, 0]
    assert np.from_dlpack(t).tolist() == [[5.0] * 3, [6.0] * 3]


def test_address_the_tensors_window():
    c = cpu([0.0, 1.0, 2.0, 3.0])
    t = sw.Tensor(c, 2, sw.Layout(sw.Shape(2), sw.Stride(1)))
    info = read(t.__dlpack__())
    assert info["data"] == c.pointer() and info["byte_offset"] == 8
    assert np.from_dlpack(t)[0] == t[0] == 2.0


@pytest.mark.parametrize("dtype, code", [(F32, 2), (I32, 0)])
def test_export_a_supported_dtype(dtype, code):
    t = flat([1, 2], dtype)
    assert read(t.__dlpack__())["dtype"] == (code, 32, 1)
    assert np.from_dlpack(t).ctypes.data == t.carrier.pointer()


def test_reject_an_unsupported_dtype():
    t = sw.Tensor(sw.CPU(2, dtype=sw.DType.Bool), 0, sw.Layout(sw.Shape(2), sw.Stride(1)))
    with pytest.raises(BufferError, match="supports only Float32 and Int32"):
        t.__dlpack__(max_version=(1, 0))


def test_export_a_cpu_tensor():
    t = flat([1.0, 2.0])
    assert t.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(t)
    a[0] = 9.0
    assert t[0] == 9.0


def _non_exporting():
    g = sw.Generic([1.0, 2.0], dtype=F32)
    fb = sw.move(flat([1.0, 2.0]), sw.FileBacked(dtype=F32)).carrier
    ev = sw.Evictable(cpu([1.0, 2.0]), sw.FileBacked(dtype=F32))
    return [g, fb, ev]


def test_reject_a_non_exporting_carrier():
    for c in _non_exporting():
        t = sw.Tensor(c, 0, sw.Layout(sw.Shape(2), sw.Stride(1)))
        for call in (t.__dlpack__, t.__dlpack_device__):
            with pytest.raises(BufferError, match="not supported"):
                call()


def test_report_a_foreign_device_verbatim():
    arr = np.arange(3, dtype=np.float32)

    class Accelerator(sw.Carrier):
        def __init__(self):
            super().__init__()

        def size(self):
            return 3

        def dtype(self):
            return F32

        def get_value(self, i):
            return float(arr[i])

        def dlpack_info(self):
            return {"pointer": arr.ctypes.data, "device_type": 4, "device_id": 1}

    t = sw.Tensor(Accelerator(), 0, sw.Layout(sw.Shape(3), sw.Stride(1)))
    assert t.__dlpack_device__() == (4, 1)
    assert read(t.__dlpack__(max_version=(1, 0)))["device"] == (4, 1)
    assert read(t.__dlpack__(dl_device=(4, 1)))["device"] == (4, 1)


def test_mark_an_immutable_tensor_read_only():
    t = flat([1.0, 2.0], mutable=False)
    assert read(t.__dlpack__(max_version=(1, 0)))["flags"] & 1
    assert not np.from_dlpack(t).flags.writeable


def test_leave_a_mutable_tensor_writable():
    t = flat([1.0, 2.0])
    assert read(t.__dlpack__(max_version=(1, 0)))["flags"] == 0
    np.from_dlpack(t)[1] = 7.0
    assert t[1] == 7.0


def test_lose_the_signal_on_a_legacy_export():
    info = read(flat([1.0], mutable=False).__dlpack__())
    assert info["name"] == "dltensor" and "flags" not in info


def test_leave_the_version_unchanged_across_export():
    t = flat([1.0, 2.0])
    v = t.carrier.version
    np.from_dlpack(t).sum()
    t.__dlpack__(max_version=(1, 0))
    assert t.carrier.version == v


def test_miss_a_foreign_write_during_backward():
    x = flat([1.0, 2.0])
    w = flat([3.0, 4.0])
    y = sw.mul(x, w)
    v = x.carrier.version
    np.from_dlpack(x)[:] = [10.0, 20.0]
    assert x.carrier.version == v
    y.backward(flat([1.0, 1.0]))
    assert logical(w.grad) == [10.0, 20.0]


def test_export_without_disturbing_the_graph():
    x = flat([1.0, 2.0])
    y = sw.mul(x, 2.0)
    ctx, grad = y.autograd_ctx, y.grad
    np.from_dlpack(y)
    assert y.autograd_ctx is ctx and y.grad is grad
    sw.reduce_sum(y).backward()
    assert logical(x.grad) == [2.0, 2.0]


def test_outlive_the_producing_expression():
    a = np.from_dlpack(flat([4.0, 5.0]))
    gc.collect()
    assert a.tolist() == [4.0, 5.0]


def test_free_once_for_an_unconsumed_capsule():
    t = flat([1.0])
    ref = weakref.ref(t)
    before = sys.getrefcount(t)
    cap = t.__dlpack__()
    assert sys.getrefcount(t) == before + 1
    del cap
    gc.collect()
    assert sys.getrefcount(t) == before
    del t
    assert ref() is None


@pytest.mark.parametrize("how", ["release", "move"])
def test_do_not_outlive_released_storage(how):
    t = flat([1.0, 2.0])
    old = t.carrier.pointer()
    cap = t.__dlpack__(max_version=(1, 0))
    if how == "release":
        t.carrier.release()
    else:
        sw.move(t, sw.CPU(2))
    assert t.carrier.is_released() and t.carrier.pointer() != old
    assert read(cap)["data"] == old
    del cap


def test_reject_a_multi_subtensor_export():
    from strideweave.core import Subtensor, TensorRepresentation

    class Pair(sw.CompoundDType):
        simple_types = (F32, I32)

    lay = sw.Layout(sw.Shape(2), sw.Stride(1))
    a, b = cpu([1.0, 2.0]), cpu([1, 2], I32)
    t = sw.Tensor._from_representation(TensorRepresentation(Pair(), [Subtensor(F32, a, 0, lay),
                                                                     Subtensor(I32, b, 0, lay)], [lay]))
    for call in (t.__dlpack__, t.__dlpack_device__):
        with pytest.raises(NotImplementedError, match="DLPack export"):
            call()
    assert (a.version, b.version, a.is_released(), b.is_released()) == (2, 2, False, False)


def test_adoption_goes_through_from_dlpack_only():
    with pytest.raises(TypeError):
        sw.Tensor(flat([1.0]).__dlpack__(), 0, sw.Layout(sw.Shape(1), sw.Stride(1)))
    t = sw.from_dlpack(flat([1.0]).__dlpack__())
    assert t.tolist() == [1.0]
