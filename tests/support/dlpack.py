"""The DLPack tests' helpers: ctypes views of the DLPack 1.0 structs,
capsule access through the C API, producers of capsules, and small
tensor/carrier builders. Subprocess scripts import it too (``from
support.dlpack import ...`` with tests/ on their PYTHONPATH)."""
import ctypes

import strideweave as sw

# A private handle on the interpreter's C API, so setting argtypes here does
# not affect ctypes.pythonapi users elsewhere.
_api = ctypes.PyDLL(None)
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]

# PyCapsule_SetName keeps the pointer, so the names must outlive the capsules.
USED_LEGACY = ctypes.create_string_buffer(b"used_dltensor")
USED_VERSIONED = ctypes.create_string_buffer(b"used_dltensor_versioned")

kDLCPU, kDLCUDA = 1, 2
kDLInt, kDLFloat = 0, 2
READ_ONLY = 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


assert ctypes.sizeof(DLTensor) == 48
assert ctypes.sizeof(DLManagedTensor) == 64
assert ctypes.sizeof(DLManagedTensorVersioned) == 80


def capsule_name(capsule):
    return _api.PyCapsule_GetName(capsule).decode()


def managed(capsule):
    """The managed tensor struct inside a capsule (legacy or versioned)."""
    name = _api.PyCapsule_GetName(capsule)
    ptr = _api.PyCapsule_GetPointer(capsule, name)
    assert ptr
    cls = DLManagedTensorVersioned if name.endswith(b"_versioned") else DLManagedTensor
    return cls.from_address(ptr), ptr


def inspect(capsule):
    """Every field a consumer reads, as plain Python values."""
    m, ptr = managed(capsule)
    t = m.dl_tensor
    out = {
        "name": capsule_name(capsule),
        "data": t.data or 0,
        "device": (t.device.device_type, t.device.device_id),
        "ndim": t.ndim,
        "dtype": (t.dtype.code, t.dtype.bits, t.dtype.lanes),
        "shape": [t.shape[i] for i in range(t.ndim)],
        "strides": [t.strides[i] for i in range(t.ndim)],
        "byte_offset": t.byte_offset,
        "address": ptr,
    }
    if isinstance(m, DLManagedTensorVersioned):
        out["version"] = (m.version.major, m.version.minor)
        out["flags"] = m.flags
    return out


def consume(capsule):
    """Take ownership as a DLPack consumer does: rename the capsule and return
    (managed-tensor address, deleter address) for a later deleter call."""
    name = capsule_name(capsule)
    m, ptr = managed(capsule)
    new = USED_VERSIONED if name == "dltensor_versioned" else USED_LEGACY
    assert _api.PyCapsule_SetName(capsule, new) == 0
    return ptr, m.deleter


# ctypes.CFUNCTYPE calls release the GIL for the duration of the foreign call.
DELETER_NOGIL = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# PYFUNCTYPE keeps the GIL held across the call.
DELETER_GIL = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)


def layout(shape, stride):
    return sw.Layout(sw.Shape(shape), sw.Stride(stride))


def cpu_carrier(values, dtype=None, mutable=True):
    dtype = dtype or sw.DType.Float32
    seed = sw.CPU(1, dtype=dtype)
    return seed.new_like(list(values), mutable=mutable, dtype=dtype)


def cpu_tensor(values, lay=None, offset=0, dtype=None, mutable=True):
    values = list(values)
    c = cpu_carrier(values, dtype=dtype, mutable=mutable)
    if lay is None:
        lay = sw.Layout.canonical(sw.Shape(len(values) - offset))
    return sw.Tensor(c, offset, lay)


class InfoCarrier(sw.Carrier):
    """A Python carrier whose dlpack_info hook returns whatever it is given
    (or raises it when it is an exception). Float32 slots of a backing CPU
    carrier, so the pointer it reports is real memory."""

    def __init__(self, n, info=None, backing=None):
        super().__init__()
        self._n = n
        self._backing = backing
        self.info = info

    def size(self):
        return self._n

    def dtype(self):
        return sw.DType.Float32

    def get_value(self, i):
        return self._backing[i] if self._backing is not None else 0.0

    def set_value(self, i, v):
        if self._backing is not None:
            self._backing[i] = v

    def dlpack_info(self):
        if isinstance(self.info, BaseException):
            raise self.info
        return self.info


class TypedCarrier(sw.Carrier):
    """A Python carrier with a chosen dtype and a CPU-like dlpack_info."""

    def __init__(self, n, dtype, pointer=0x1000):
        super().__init__()
        self._n, self._dtype, self._pointer = n, dtype, pointer

    def size(self):
        return self._n

    def dtype(self):
        return self._dtype

    def get_value(self, i):
        return False

    def set_value(self, i, v):
        pass

    def dlpack_info(self):
        return {"pointer": self._pointer, "device_type": 1, "device_id": 0}


# ------------------------------------------------------------ import (from_dlpack)

IS_COPIED = 2


def _testing():
    """strideweave._testing (the counting producer) through the skip helper:
    a test that needs it skips, with the reason, where the wheel left it out."""
    from support.doubles import testing_extension

    return testing_extension()


def producer_capsule(values, shape, strides=None, *, np_dtype="float32", **kw):
    """A capsule of strideweave._testing's counting producer over a private
    copy of values (numpy dtype np_dtype); kw as dlpack_capsule takes."""
    import numpy as np

    return _testing().dlpack_capsule(np.asarray(values, np_dtype).tobytes(), shape, strides, **kw)


def deleted():
    """Deleter calls of the counting producer so far."""
    return _testing().dlpack_deleted()


class Producer:
    """An object with __dlpack__ over the counting producer. Records the
    keyword arguments of every call; answers versioned or legacy as
    max_version asks. ``when_host`` (keyword arguments for dlpack_capsule)
    replaces the capsule's settings when dl_device=(1, 0) is asked for (a
    device producer that can copy to the host)."""

    def __init__(self, values, shape, strides=None, *, np_dtype="float32", when_host=None, **kw):
        self.args = (values, shape, strides)
        self.np_dtype = np_dtype
        self.kw = kw
        self.when_host = when_host
        self.calls = []

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        call = {k: v for k, v in dict(stream=stream, max_version=max_version, dl_device=dl_device,
                                      copy=copy).items() if v is not None}
        self.calls.append(call)
        kw = dict(self.kw)
        if dl_device is not None and self.when_host is not None:
            kw.update(self.when_host)
        kw.setdefault("versioned", max_version is not None and max_version[0] >= 1)
        return producer_capsule(*self.args, np_dtype=self.np_dtype, **kw)

    def __dlpack_device__(self):
        return self.kw.get("device", (1, 0))


class LegacyProducer:
    """A producer from before max_version: __dlpack__ takes no arguments
    (any keyword is a TypeError) and returns a legacy capsule."""

    def __init__(self, values, shape, strides=None, *, np_dtype="float32", **kw):
        self.args = (values, shape, strides)
        self.np_dtype = np_dtype
        self.kw = kw
        self.calls = 0

    def __dlpack__(self):
        self.calls += 1
        return producer_capsule(*self.args, np_dtype=self.np_dtype, versioned=False, **self.kw)
