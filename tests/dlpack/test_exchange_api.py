"""The DLPack C exchange API (API.md section 15): the capsule and its struct
read through ctypes, each function checked against __dlpack__(max_version=
(1, 0)), and tvm_ffi.from_dlpack as a real consumer."""
import ctypes
import gc
import sys

import numpy as np
import pytest

import strideweave as sw

from support.dlpack import (
    DLManagedTensorVersioned, DLPackVersion, DLTensor, InfoCarrier, READ_ONLY, _api, cpu_tensor, inspect, kDLCPU,
    layout,
)

F32 = sw.DType.Float32
I32 = sw.DType.Int32
EXPORT_ONLY = "export-only"

P_MANAGED = ctypes.POINTER(DLManagedTensorVersioned)
SET_ERROR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
# PYFUNCTYPE: called with the GIL held, and a Python error the function set
# is raised by ctypes, as a C consumer would see it.
ALLOCATOR = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.POINTER(DLTensor), ctypes.POINTER(P_MANAGED), ctypes.c_void_p,
                              SET_ERROR)
MANAGED_FROM = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(P_MANAGED))
TO_OBJECT = ctypes.PYFUNCTYPE(ctypes.c_int, P_MANAGED, ctypes.POINTER(ctypes.c_void_p))
DLTENSOR_FROM = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLTensor))
CURRENT_STREAM = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))
DELETER = ctypes.PYFUNCTYPE(None, P_MANAGED)


class Header(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("prev_api", ctypes.c_void_p)]


class ExchangeAPI(ctypes.Structure):
    _fields_ = [
        ("header", Header),
        ("managed_tensor_allocator", ctypes.c_void_p),
        ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
        ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
        ("dltensor_from_py_object_no_sync", ctypes.c_void_p),
        ("current_work_stream", ctypes.c_void_p),
    ]


def api():
    cap = sw.Tensor.__dlpack_c_exchange_api__
    ptr = _api.PyCapsule_GetPointer(cap, b"dlpack_exchange_api")
    assert ptr
    return ExchangeAPI.from_address(ptr)


def fn(kind, name):
    return kind(getattr(api(), name))


def managed_from(t):
    out = P_MANAGED()
    rc = fn(MANAGED_FROM, "managed_tensor_from_py_object_no_sync")(t, ctypes.byref(out))
    assert rc == 0 and out
    return out


def delete(m):
    DELETER(m.contents.deleter)(m)


def fields(dl):
    return {
        "data": dl.data or 0,
        "device": (dl.device.device_type, dl.device.device_id),
        "ndim": dl.ndim,
        "dtype": (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes),
        "shape": [dl.shape[i] for i in range(dl.ndim)],
        "strides": [dl.strides[i] for i in range(dl.ndim)],
        "byte_offset": dl.byte_offset,
    }


def expected(t):
    e = inspect(t.__dlpack__(max_version=(1, 0)))
    return {k: e[k] for k in ("data", "device", "ndim", "dtype", "shape", "strides", "byte_offset")}, e


def sample_tensors():
    # Offsets, strides with holes, a broadcast mode, rank 0, Int32, read-only.
    return [
        cpu_tensor(range(12), layout([3, 4], [4, 1])),
        cpu_tensor(range(20), layout([3, 2], [6, 2]), offset=3),
        cpu_tensor(range(4), layout([3, 4], [0, 1])),
        cpu_tensor([7.0], layout([], [])),
        cpu_tensor(range(6), dtype=I32),
        cpu_tensor(range(6), mutable=False),
    ]


# ------------------------------------------------------------ the capsule

def test_capsule_holds_a_static_dlpack_1_3_exchange_api():
    cap = sw.Tensor.__dlpack_c_exchange_api__
    assert type(cap).__name__ == "PyCapsule"
    assert _api.PyCapsule_GetName(cap) == b"dlpack_exchange_api"
    a = api()
    assert (a.header.version.major, a.header.version.minor) == (1, 3)
    assert not a.header.prev_api
    for name, _ in ExchangeAPI._fields_[1:]:
        assert getattr(a, name), name
    # Static: the same struct from every tensor and every lookup.
    t = cpu_tensor([1.0])
    assert _api.PyCapsule_GetPointer(t.__dlpack_c_exchange_api__, b"dlpack_exchange_api") == ctypes.addressof(a)


# ------------------------------------------------------------ managed tensor

@pytest.mark.parametrize("k", range(6))
def test_managed_tensor_is_what_dlpack_v1_exports(k):
    t = sample_tensors()[k]
    want, cap_fields = expected(t)
    before = sys.getrefcount(t)
    m = managed_from(t)
    assert sys.getrefcount(t) == before + 1  # the managed tensor owns a reference
    mt = m.contents
    assert (mt.version.major, mt.version.minor) == (1, 0) == cap_fields["version"]
    assert mt.flags == cap_fields["flags"]
    assert bool(mt.flags & READ_ONLY) == (not t.is_mutable())
    assert fields(mt.dl_tensor) == want
    delete(m)
    gc.collect()
    assert sys.getrefcount(t) == before


def test_managed_tensor_keeps_the_tensor_alive_until_deleted():
    t = cpu_tensor([1.0, 2.0, 3.0])
    carrier = t.carrier
    m = managed_from(t)
    del t
    gc.collect()
    data = m.contents.dl_tensor.data
    assert (ctypes.c_float * 3).from_address(data)[:] == [1.0, 2.0, 3.0]
    carrier[1] = 9.0
    assert (ctypes.c_float * 3).from_address(data)[1] == 9.0  # aliases, no copy
    delete(m)


def failure(call):
    with pytest.raises(Exception) as info:
        call()
    return type(info.value), str(info.value)


def failing_tensors():
    released = cpu_tensor([1.0, 2.0])
    released.carrier.release()
    boolean = sw.Tensor(sw.CPU(2, dtype=sw.DType.Bool), 0, layout([2], [1]))
    no_info = sw.Tensor(InfoCarrier(2, info=None), 0, layout([2], [1]))
    return [released, boolean, no_info]


@pytest.mark.parametrize("k", range(3))
def test_managed_tensor_fails_exactly_as_dlpack_v1(k):
    t = failing_tensors()[k]
    want = failure(lambda: t.__dlpack__(max_version=(1, 0)))
    before = sys.getrefcount(t)
    out = P_MANAGED()
    got = failure(lambda: fn(MANAGED_FROM, "managed_tensor_from_py_object_no_sync")(t, ctypes.byref(out)))
    assert got == want
    assert not out
    assert sys.getrefcount(t) == before


def test_non_tensor_objects_are_refused():
    out = P_MANAGED()
    with pytest.raises(TypeError, match="exports Tensor objects, not ndarray"):
        fn(MANAGED_FROM, "managed_tensor_from_py_object_no_sync")(np.zeros(2), ctypes.byref(out))
    with pytest.raises(TypeError, match="exports Tensor objects, not int"):
        fn(DLTENSOR_FROM, "dltensor_from_py_object_no_sync")(3, ctypes.byref(DLTensor()))


# ------------------------------------------------------------ borrowed DLTensor

@pytest.mark.parametrize("k", range(6))
def test_dltensor_is_what_dlpack_v1_exports_without_a_reference(k):
    t = sample_tensors()[k]
    want, _ = expected(t)
    before = sys.getrefcount(t)
    dl = DLTensor()
    assert fn(DLTENSOR_FROM, "dltensor_from_py_object_no_sync")(t, ctypes.byref(dl)) == 0
    assert sys.getrefcount(t) == before
    assert fields(dl) == want
    # Two views of tensors sharing a layout stay valid side by side (a
    # consumer converts every argument of a call before using any).
    u = sw.Tensor(t.carrier, t.offset, t.layout)
    dl2 = DLTensor()
    assert fn(DLTENSOR_FROM, "dltensor_from_py_object_no_sync")(u, ctypes.byref(dl2)) == 0
    assert fields(dl) == fields(dl2) == want


@pytest.mark.parametrize("k", range(3))
def test_dltensor_fails_exactly_as_dlpack_v1(k):
    t = failing_tensors()[k]
    want = failure(lambda: t.__dlpack__(max_version=(1, 0)))
    got = failure(lambda: fn(DLTENSOR_FROM, "dltensor_from_py_object_no_sync")(t, ctypes.byref(DLTensor())))
    assert got == want


# ------------------------------------------------------------ export-only, streams

def test_allocator_reports_export_only_through_set_error():
    seen = []

    @SET_ERROR
    def set_error(ctx, kind, message):
        seen.append((ctx, kind.decode(), message.decode()))

    proto = DLTensor()
    out = P_MANAGED()
    rc = fn(ALLOCATOR, "managed_tensor_allocator")(ctypes.byref(proto), ctypes.byref(out), 1234, set_error)
    assert rc == -1 and not out
    [(ctx, kind, message)] = seen
    assert ctx == 1234 and kind == "BufferError" and EXPORT_ONLY in message and "StrideWeave" in message


def test_allocator_without_set_error_raises_buffer_error():
    with pytest.raises(BufferError, match=EXPORT_ONLY):
        fn(ALLOCATOR, "managed_tensor_allocator")(ctypes.byref(DLTensor()), ctypes.byref(P_MANAGED()), None,
                                                  SET_ERROR())


def test_to_py_object_raises_buffer_error_and_disposes_of_the_tensor():
    t = cpu_tensor([1.0, 2.0])
    before = sys.getrefcount(t)
    m = managed_from(t)
    out = ctypes.c_void_p(5)
    with pytest.raises(BufferError, match=EXPORT_ONLY):
        fn(TO_OBJECT, "managed_tensor_to_py_object_no_sync")(m, ctypes.byref(out))
    assert not out.value
    gc.collect()
    assert sys.getrefcount(t) == before  # ownership was taken: the deleter ran


def test_current_work_stream_is_none_for_cpu():
    stream = ctypes.c_void_p(99)
    assert fn(CURRENT_STREAM, "current_work_stream")(kDLCPU, 0, ctypes.byref(stream)) == 0
    assert stream.value is None


# ------------------------------------------------------------ a real consumer

def test_tvm_ffi_from_dlpack_uses_the_exchange_api():
    tvm_ffi = pytest.importorskip("tvm_ffi")
    t = cpu_tensor(range(20), layout([3, 2], [6, 2]), offset=3)
    x = tvm_ffi.from_dlpack(t)
    assert tuple(x.shape) == (3, 2) and tuple(x.strides) == (6, 2)
    back = np.from_dlpack(x)
    assert back.tolist() == [[3.0, 5.0], [9.0, 11.0], [15.0, 17.0]]
    carrier = t.carrier
    del t
    gc.collect()
    carrier[9] = -1.0  # the consumer's tensor aliases the carrier, which it keeps alive
    assert np.from_dlpack(x)[1, 0] == -1.0


def test_tvm_ffi_sees_the_read_only_export_errors():
    tvm_ffi = pytest.importorskip("tvm_ffi")
    released = cpu_tensor([1.0])
    released.carrier.release()
    with pytest.raises(BufferError, match="non-null"):
        tvm_ffi.from_dlpack(released)
