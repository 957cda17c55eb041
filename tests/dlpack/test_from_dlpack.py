"""strideweave.from_dlpack with NumPy and DLPack capsules: what the result
is (an exact CPU carrier viewing the producer's memory, one Layout mode per
dimension), dtypes, copy and device semantics, mutability, the consumer
protocol (arguments, the TypeError fallback, capsules) and its refusals.
Lifetime is test_from_dlpack_lifetime.py; torch, JAX and tvm-ffi are
test_from_dlpack_producers.py."""
import itertools

import numpy as np
import pytest

import strideweave as sw

from support import doubles
from support.dlpack import (
    IS_COPIED, LegacyProducer, Producer, READ_ONLY, capsule_name, cpu_tensor, deleted, inspect, layout,
    producer_capsule,
)

F32, I32, BOOL = sw.DType.Float32, sw.DType.Int32, sw.DType.Bool


def leaves(t):
    return t.layout.leaves()


def assert_same_values(t, a):
    """Every element by full-rank key, as t[(i, j, ...)] == a[i, j, ...]."""
    for idx in itertools.product(*[range(n) for n in a.shape]):
        assert t[idx] == a[idx], idx
    assert t.tolist() == a.tolist()


def element_strides(a):
    return [s // a.itemsize for s in a.strides]


# ------------------------------------------------------------ views of NumPy arrays


@pytest.mark.parametrize("order", ["C", "F"])
def test_a_contiguous_array_is_viewed_in_place(order):
    a = np.asarray(np.arange(12, dtype=np.float32).reshape(3, 4), order=order)
    t = sw.from_dlpack(a)
    assert type(t.carrier) is sw.CPU
    assert t.carrier.pointer() == a.ctypes.data
    assert t.offset == 0
    assert leaves(t) == [(3, element_strides(a)[0]), (4, element_strides(a)[1])]
    assert t.layout == layout([3, 4], element_strides(a))
    assert t.dtype() is F32 and t.is_mutable()
    assert_same_values(t, a)


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a[1:, 2:],
        lambda a: a[::2, 1::3],
        lambda a: a.T,
        lambda a: a[:, 3],
        lambda a: a.reshape(2, 3, 4).transpose(2, 0, 1)[1:, :, ::2],
    ],
    ids=["sliced", "stepped", "transposed", "column", "3d"],
)
def test_sliced_and_strided_arrays_keep_their_strides(view):
    base = np.arange(24, dtype=np.int32).reshape(4, 6)
    a = view(base)
    t = sw.from_dlpack(a)
    assert t.carrier.pointer() == a.ctypes.data
    assert leaves(t) == list(zip(a.shape, element_strides(a)))
    assert t.dtype() is I32
    assert_same_values(t, a)


def test_writes_go_both_ways():
    a = np.zeros((2, 3), np.float32)
    t = sw.from_dlpack(a)
    v0 = t.version
    t[(1, 2)] = 5.0
    assert a[1, 2] == 5.0
    assert t.version == v0 + 1
    a[0, 1] = -1.0
    assert t[(0, 1)] == -1.0


def test_a_broadcast_array_keeps_its_stride_zero():
    a = np.broadcast_to(np.arange(3, dtype=np.float32), (4, 3))
    t = sw.from_dlpack(a)
    assert leaves(t) == [(4, 0), (3, 1)]
    assert not t.layout.is_injective
    assert t.carrier.size() == 3
    assert_same_values(t, a)


def test_rank_zero():
    a = np.array(2.5, np.float32)
    t = sw.from_dlpack(a)
    assert t.layout == sw.Layout(sw.Shape(), sw.Stride())
    assert t.item() == 2.5 and t.tolist() == 2.5
    assert t.carrier.pointer() == a.ctypes.data


@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0), (2, 0, 4)])
def test_zero_size_arrays(shape):
    a = np.zeros(shape, np.float32)
    t = sw.from_dlpack(a)
    assert t.size() == 0
    assert [e for e, _ in leaves(t)] == list(shape)
    assert t.tolist() == a.tolist()
    assert t.carrier.size() == 0 and t.layout.cosize == 0
    back = np.from_dlpack(t)
    assert back.shape == shape and back.dtype == np.float32
    with pytest.raises(ValueError):
        t.item()
    with pytest.raises(ValueError, match="not in domain"):
        t[tuple(0 for _ in shape)]


def test_a_zero_size_array_with_a_negative_stride_needs_no_copy():
    # (NumPy zeroes an empty array's strides itself; the producer keeps them.)
    before = deleted()
    t = sw.from_dlpack(producer_capsule([], [0, 3], [3, -1]), copy=False)
    assert t.size() == 0 and leaves(t) == [(0, 3), (3, 0)]
    assert deleted() == before + 1


def test_a_zero_size_array_gives_the_producer_back_at_once():
    before = deleted()
    t = sw.from_dlpack(producer_capsule([], [3, 0], [0, 1]))
    assert deleted() == before + 1
    assert t.size() == 0 and t.tolist() == [[], [], []]


def test_byte_offset_is_honoured():
    data = np.arange(8, dtype=np.float32)
    t = sw.from_dlpack(producer_capsule(data, [2, 2], [2, 1], byte_offset=3 * 4))
    assert t.tolist() == [[3.0, 4.0], [5.0, 6.0]]
    assert t.carrier.size() == 4  # the span from the first element


def test_strides_absent_mean_row_major():
    t = sw.from_dlpack(producer_capsule(np.arange(6), [2, 3], None))
    assert leaves(t) == [(2, 3), (3, 1)]
    assert t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_a_negative_stride_on_an_extent_one_mode_is_still_a_view():
    a = np.arange(4, dtype=np.float32).reshape(1, 4)[::-1]
    t = sw.from_dlpack(a)
    assert t.carrier.pointer() == a.ctypes.data
    # NumPy 2.4 passes the extent-1 mode's stride as it is (-16 bytes), which
    # the import makes 0; NumPy 2.2 exports this C-contiguous array without
    # strides, which means row-major (4, 1). Never a negative stride.
    assert leaves(t) in ([(1, 0), (4, 1)], [(1, 4), (4, 1)])
    assert t.tolist() == a.tolist()


# ------------------------------------------------------------ dtypes


@pytest.mark.parametrize("np_dtype,dtype", [("float32", F32), ("int32", I32), ("bool", BOOL)])
def test_supported_dtypes_map_to_storage_dtypes(np_dtype, dtype):
    a = np.array([[1, 0, 1]], dtype=np_dtype)
    t = sw.from_dlpack(a)
    assert t.dtype() is dtype and t.carrier.dtype() is dtype
    assert t.tolist() == a.tolist()


@pytest.mark.parametrize(
    "np_dtype,name,target",
    [("float64", "float64", "float32"), ("int64", "int64", "int32"), ("uint8", "uint8", "int32"),
     ("float16", "float16", "float32"), ("complex64", "complex64", "float32"), ("int16", "int16", "int32")],
)
@pytest.mark.parametrize("copy", [None, True, False])
def test_other_dtypes_are_a_type_error_naming_the_fix(np_dtype, name, target, copy):
    a = np.zeros(3, np_dtype)
    with pytest.raises(TypeError) as e:
        sw.from_dlpack(a, copy=copy)
    msg = str(e.value)
    assert name in msg and f"strideweave.tensor(np.asarray(x, np.{target}))" in msg


def test_a_refused_dtype_gives_the_producer_back():
    before = deleted()
    with pytest.raises(TypeError, match="float64"):
        sw.from_dlpack(producer_capsule([1.0, 2.0], [2], np_dtype="float64", dtype=(2, 64, 1)))
    assert deleted() == before + 1
    with pytest.raises(TypeError, match="float32x4"):
        sw.from_dlpack(producer_capsule(np.zeros(4), [1], dtype=(2, 32, 4)))
    assert deleted() == before + 2


# ------------------------------------------------------------ copies


def test_copy_none_copies_what_a_layout_cannot_express():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)[:, ::-1]
    t = sw.from_dlpack(a)
    assert t.carrier.pointer() != a.ctypes.data
    assert leaves(t) == [(2, 3), (3, 1)]  # fresh row-major storage
    assert t.is_mutable()
    assert_same_values(t, a)
    t[(0, 0)] = 99.0
    assert a[0, 0] == 2.0  # the copy is its own


def test_copy_false_refuses_what_needs_a_copy():
    before = deleted()
    with pytest.raises(BufferError, match="negative stride"):
        sw.from_dlpack(producer_capsule(np.arange(4), [4], [-1], byte_offset=12), copy=False)
    with pytest.raises(BufferError, match="aligned"):
        sw.from_dlpack(producer_capsule(np.arange(4), [3], [1], byte_offset=2), copy=False)
    assert deleted() == before + 2  # each refused tensor went back


def test_a_misaligned_first_element_is_copied():
    raw = np.arange(5, dtype=np.float32).view(np.uint8)
    before = deleted()
    t = sw.from_dlpack(producer_capsule(raw, [3], [1], np_dtype="uint8", byte_offset=4 + 2))
    assert deleted() == before + 1  # copied, then given back at once
    want = np.frombuffer(raw.tobytes()[6:18], np.float32).tolist()
    assert t.tolist() == want


def test_a_negative_stride_copy_reads_backwards():
    t = sw.from_dlpack(producer_capsule(np.arange(6), [2, 3], [-3, -1], byte_offset=5 * 4))
    assert t.tolist() == [[5.0, 4.0, 3.0], [2.0, 1.0, 0.0]]


def test_copy_true_always_gives_fresh_storage_the_result_owns():
    a = np.arange(4, dtype=np.int32)
    a.flags.writeable = False
    t = sw.from_dlpack(a, copy=True)
    assert t.carrier.pointer() != a.ctypes.data
    assert t.is_mutable()
    t[(0,)] = 7
    assert a[0] == 0 and t.tolist() == [7, 1, 2, 3]


def test_copy_false_with_a_viewable_array_is_the_alias():
    a = np.arange(4, dtype=np.float32)
    assert sw.from_dlpack(a, copy=False).carrier.pointer() == a.ctypes.data


def test_copy_true_adopts_a_copy_the_producer_flags_as_its_own():
    p = Producer(np.arange(3), [3], flags=IS_COPIED)
    before = deleted()
    t = sw.from_dlpack(p, copy=True)
    assert p.calls == [{"max_version": (1, 3), "copy": True}]
    assert deleted() == before  # adopted, not copied again
    assert t.tolist() == [0.0, 1.0, 2.0] and t.is_mutable()
    t.carrier.release()
    assert deleted() == before + 1


def test_copy_true_copies_a_producer_copy_flagged_read_only():
    # JAX 0.12 answers copy=True with a copy flagged IS_COPIED | READ_ONLY:
    # the caller asked for a copy of its own, which is mutable.
    p = Producer(np.arange(3), [3], flags=IS_COPIED | READ_ONLY)
    before = deleted()
    t = sw.from_dlpack(p, copy=True)
    assert deleted() == before + 1  # copied and given back at once
    assert t.tolist() == [0.0, 1.0, 2.0] and t.is_mutable()
    t[(0,)] = 5.0
    assert t.tolist() == [5.0, 1.0, 2.0]


def test_copy_true_copies_when_the_producer_did_not():
    p = Producer(np.arange(3), [3])
    before = deleted()
    t = sw.from_dlpack(p, copy=True)
    assert deleted() == before + 1  # StrideWeave copied and gave the alias back
    assert t.tolist() == [0.0, 1.0, 2.0] and t.is_mutable()


def test_copy_takes_zero_and_one_as_false_and_true():
    a = np.arange(3, dtype=np.float32)
    assert sw.from_dlpack(a, copy=0).carrier.pointer() == a.ctypes.data
    assert sw.from_dlpack(a, copy=1).carrier.pointer() != a.ctypes.data


# ------------------------------------------------------------ devices


@pytest.mark.parametrize("device", [(1, 0), [1, 0], (np.int64(1), np.int32(0))])
def test_the_cpu_device_is_passed_on_as_dl_device(device):
    p = Producer([1.0, 2.0], [2])
    t = sw.from_dlpack(p, device=device)
    assert p.calls == [{"max_version": (1, 3), "dl_device": (1, 0)}]
    assert t.tolist() == [1.0, 2.0]


def test_device_must_be_the_cpu_device():
    a = np.zeros(2, np.float32)
    with pytest.raises(ValueError, match=r"CPU device \(1, 0\)"):
        sw.from_dlpack(a, device=(2, 0))
    with pytest.raises(ValueError, match=r"CPU device \(1, 0\)"):
        sw.from_dlpack(a, device=(1, 1))
    with pytest.raises(TypeError, match="tuple or list"):
        sw.from_dlpack(a, device="cpu")
    with pytest.raises(ValueError, match="two elements"):
        sw.from_dlpack(a, device=(1,))


@pytest.mark.parametrize("device", [(3, 0), (11, 0)], ids=["cuda-host", "rocm-host"])
def test_host_memory_of_a_gpu_runtime_is_viewed(device):
    before = deleted()
    t = sw.from_dlpack(producer_capsule([1.0, 2.0], [2], device=device))
    assert t.tolist() == [1.0, 2.0]
    assert deleted() == before  # adopted, not copied


def test_device_memory_is_asked_for_again_as_a_host_copy():
    p = Producer([1.0, 2.0, 3.0], [3], device=(2, 0), when_host={"device": (1, 0), "flags": IS_COPIED})
    before = deleted()
    t = sw.from_dlpack(p)
    assert p.calls == [{"max_version": (1, 3)}, {"max_version": (1, 3), "dl_device": (1, 0), "copy": True}]
    assert t.tolist() == [1.0, 2.0, 3.0] and t.is_mutable()
    assert deleted() == before + 1  # the device tensor went back; the host copy is adopted


def test_device_memory_with_copy_false_is_refused():
    p = Producer([1.0], [1], device=(2, 0), when_host={"device": (1, 0)})
    before = deleted()
    with pytest.raises(BufferError, match=r"device \(2, 0\)"):
        sw.from_dlpack(p, copy=False)
    assert len(p.calls) == 1 and deleted() == before + 1


def test_a_producer_that_cannot_bring_memory_to_the_host():
    p = Producer([1.0], [1], device=(2, 0))
    before = deleted()
    with pytest.raises(BufferError, match=r"returned memory on device \(2, 0\)"):
        sw.from_dlpack(p)
    assert deleted() == before + 2
    with pytest.raises(BufferError, match=r"device \(2, 0\)"):
        sw.from_dlpack(producer_capsule([1.0], [1], device=(2, 0)))  # a bare capsule: nobody to ask


# ------------------------------------------------------------ mutability


def test_a_read_only_export_gives_a_carrier_that_is_not_mutable():
    a = np.arange(3, dtype=np.float32)
    a.flags.writeable = False
    t = sw.from_dlpack(a)
    assert t.carrier.pointer() == a.ctypes.data
    assert not t.carrier.is_mutable() and not t.is_mutable()
    with pytest.raises(RuntimeError, match="not mutable"):
        t[(0,)] = 1.0
    with pytest.raises(RuntimeError, match="not mutable"):
        t.carrier[0] = 1.0
    assert inspect(t.__dlpack__(max_version=(1, 0)))["flags"] & READ_ONLY
    assert not np.from_dlpack(t).flags.writeable


def test_a_legacy_capsule_is_imported_read_only():
    a = np.arange(3, dtype=np.float32)
    t = sw.from_dlpack(a.__dlpack__())
    assert t.carrier.pointer() == a.ctypes.data
    assert not t.is_mutable()
    t = sw.from_dlpack(a.__dlpack__(), copy=True)
    assert t.is_mutable()


def test_a_versioned_read_only_flag_from_any_producer():
    t = sw.from_dlpack(producer_capsule([1.0], [1], flags=READ_ONLY))
    assert not t.is_mutable()
    assert sw.from_dlpack(producer_capsule([1.0], [1])).is_mutable()


# ------------------------------------------------------------ the protocol


def test_only_the_given_arguments_are_passed():
    for kw, want in [({}, {}), ({"copy": False}, {"copy": False}), ({"device": (1, 0), "copy": None},
                                                                    {"dl_device": (1, 0)}),
                     ({"device": (1, 0), "copy": False}, {"dl_device": (1, 0), "copy": False})]:
        p = Producer([1.0], [1])
        sw.from_dlpack(p, **kw)
        assert p.calls == [{"max_version": (1, 3), **want}], kw


def test_a_producer_without_max_version_gets_a_plain_call():
    p = LegacyProducer([1.0, 2.0], [2])
    t = sw.from_dlpack(p)
    assert p.calls == 1 and t.tolist() == [1.0, 2.0]
    assert not t.is_mutable()  # legacy: no flags to say otherwise


def test_the_fallback_still_honours_copy_and_device():
    p = LegacyProducer([1.0, 2.0], [2])
    t = sw.from_dlpack(p, copy=True, device=(1, 0))
    assert t.is_mutable() and t.tolist() == [1.0, 2.0]
    p = LegacyProducer([1.0, 2.0], [2], device=(2, 0))
    with pytest.raises(BufferError, match=r"device \(2, 0\)"):
        sw.from_dlpack(p, device=(1, 0))


def test_a_type_error_from_both_calls_propagates():
    class Broken:
        def __dlpack__(self, *args, **kw):
            raise TypeError("broken producer")

    with pytest.raises(TypeError, match="broken producer"):
        sw.from_dlpack(Broken())


def test_a_producer_refusal_propagates():
    class Refuses:
        def __dlpack__(self, **kw):
            raise BufferError("cannot export this")

    with pytest.raises(BufferError, match="cannot export this"):
        sw.from_dlpack(Refuses())


def test_a_producer_that_cannot_copy_is_asked_for_the_alias():
    class NoCopy(Producer):
        def __dlpack__(self, **kw):
            if kw.get("copy"):
                self.calls.append(kw)
                raise BufferError("copy not yet supported")
            return super().__dlpack__(**kw)

    p = NoCopy([1.0, 2.0], [2])
    before = deleted()
    t = sw.from_dlpack(p, copy=True)
    assert [c.get("copy") for c in p.calls] == [True, None]
    assert t.tolist() == [1.0, 2.0] and t.is_mutable()
    assert deleted() == before + 1  # copied by StrideWeave


def test_when_the_alias_is_refused_too_the_first_refusal_stands():
    class Never:
        def __dlpack__(self, **kw):
            raise BufferError("first" if kw.get("copy") else "second")

    with pytest.raises(BufferError, match="first"):
        sw.from_dlpack(Never(), copy=True)


def test_an_instance_level_dlpack_method_counts():
    class Empty:
        pass

    e = Empty()
    e.__dlpack__ = lambda **kw: producer_capsule([4.0], [1], versioned=True)
    assert sw.from_dlpack(e).tolist() == [4.0]


class ExchangeProducer(Producer):
    """A producer with the counting producer's DLPack C exchange API."""

    __dlpack_c_exchange_api__ = None  # set per test (the settings are process-wide)


@pytest.fixture
def exchange():
    _testing = doubles.testing_extension()

    def install(**kw):
        ExchangeProducer.__dlpack_c_exchange_api__ = _testing.dlpack_exchange_api(**kw)
        return ExchangeProducer([9.0], [1])

    yield install
    ExchangeProducer.__dlpack_c_exchange_api__ = None
    _testing.dlpack_exchange_api()  # the defaults again


def test_the_exchange_api_is_used_without_a_capsule(exchange):
    p = exchange()
    before = deleted()
    t = sw.from_dlpack(p)
    assert p.calls == []  # __dlpack__ was not asked
    assert t.tolist() == [1.0, 2.0] and t.is_mutable()
    assert deleted() == before
    t.carrier.release()
    assert deleted() == before + 1


def test_an_exchange_export_of_another_major_version_is_refused_and_given_back(exchange):
    p = exchange(tensor_major=2)
    before = deleted()
    with pytest.raises(BufferError, match="exchange API exported version 2.0"):
        sw.from_dlpack(p)
    assert deleted() == before + 1 and p.calls == []


@pytest.mark.parametrize("kw", [{"api_minor": 2}, {"fails": True}], ids=["older-api", "refusing-api"])
def test_an_exchange_api_that_is_older_or_refuses_leaves_the_protocol(exchange, kw):
    p = exchange(**kw)
    assert sw.from_dlpack(p).tolist() == [9.0]
    assert p.calls == [{"max_version": (1, 3)}]


def test_an_exchange_api_that_fails_or_does_not_fit_leaves_the_protocol():
    class Borrowed(Producer):  # StrideWeave's API refuses objects that are not Tensors
        __dlpack_c_exchange_api__ = sw.Tensor.__dlpack_c_exchange_api__

    class NotACapsule(Producer):
        __dlpack_c_exchange_api__ = 5

    for cls in (Borrowed, NotACapsule):
        p = cls([1.0, 2.0], [2])
        assert sw.from_dlpack(p).tolist() == [1.0, 2.0]
        assert p.calls == [{"max_version": (1, 3)}], cls


def test_dlpack_must_return_a_capsule():
    class NotACapsule:
        def __dlpack__(self, **kw):
            return [1.0]

    with pytest.raises(TypeError, match="NotACapsule.__dlpack__.. returned list, not a DLPack capsule"):
        sw.from_dlpack(NotACapsule())


@pytest.mark.parametrize("x", [[1.0, 2.0], 3.0, "abc", None, memoryview(b"ab")])
def test_an_object_without_dlpack_is_a_type_error_suggesting_tensor(x):
    with pytest.raises(TypeError) as e:
        sw.from_dlpack(x)
    assert "__dlpack__" in str(e.value) and "strideweave.tensor(x)" in str(e.value)
    assert type(x).__name__ in str(e.value)


# ------------------------------------------------------------ capsules


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_a_capsule_is_consumed_and_renamed(max_version):
    a = np.arange(3, dtype=np.float32)
    cap = a.__dlpack__(max_version=max_version)
    name = capsule_name(cap)
    t = sw.from_dlpack(cap)
    assert capsule_name(cap) == "used_" + name
    assert t.carrier.pointer() == a.ctypes.data
    with pytest.raises(BufferError, match="already consumed"):
        sw.from_dlpack(cap)


def test_a_capsule_of_another_kind_is_a_type_error():
    import ctypes

    cap = ctypes.pythonapi.PyCapsule_New
    cap.restype = ctypes.py_object
    cap.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    name = ctypes.create_string_buffer(b"something_else")
    other = cap(ctypes.addressof(name), name, None)
    with pytest.raises(TypeError, match="dltensor or dltensor_versioned, not something_else"):
        sw.from_dlpack(other)


def test_a_newer_major_version_is_refused_and_left_to_its_producer():
    cap = producer_capsule([1.0], [1], versioned=True, major=2)
    before = deleted()
    with pytest.raises(BufferError, match="version 2.0"):
        sw.from_dlpack(cap)
    assert capsule_name(cap) == "dltensor_versioned"  # not consumed
    assert deleted() == before
    del cap
    assert deleted() == before + 1  # its own destructor deleted it


@pytest.mark.parametrize(
    "kw,match",
    [({"shape": [-2], "strides": [1]}, "negative extent"),
     ({"shape": [2, 2], "strides": [1 << 62, 1 << 62]}, "too large")],
)
def test_a_malformed_tensor_is_refused(kw, match):
    before = deleted()
    with pytest.raises(BufferError, match=match):
        sw.from_dlpack(producer_capsule([1.0], **kw))
    assert deleted() == before + 1


def test_a_null_data_pointer_with_elements_is_refused():
    with pytest.raises(BufferError, match="null data pointer"):
        sw.from_dlpack(producer_capsule([], [2], [1]))


# ------------------------------------------------------------ StrideWeave as producer


def test_a_strideweave_tensor_imports_like_any_producer():
    src = cpu_tensor([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    view = sw.Tensor(src.carrier, 1, layout([2, 3], [1, 2]))
    t = sw.from_dlpack(view)
    assert t is not view and type(t.carrier) is sw.CPU and t.carrier is not src.carrier
    assert t.carrier.pointer() == src.carrier.pointer() + 4
    assert leaves(t) == leaves(view)
    assert t.tolist() == view.tolist()
    t[(1, 2)] = 60.0
    assert src.carrier[6] == 60.0


def test_a_read_only_strideweave_tensor_imports_read_only():
    c = sw.CPU(2, mutable=False)
    t = sw.from_dlpack(sw.Tensor(c, 0, layout([2], [1])))
    assert not t.is_mutable()


def test_a_bool_strideweave_tensor_is_refused_by_its_export():
    t = sw.tensor([True, False])
    with pytest.raises(BufferError, match="supports only Float32 and Int32"):
        sw.from_dlpack(t)


def test_tensor_points_dlpack_data_to_from_dlpack():
    with pytest.raises(TypeError, match=r"strideweave.from_dlpack\(x\) imports it"):
        sw.tensor(np.arange(2, dtype=np.float32).__dlpack__())
    with pytest.raises(TypeError, match=r"strideweave.from_dlpack\(x\) imports it"):
        sw.tensor(Producer([1.0], [1]))


# ------------------------------------------------------------ arguments


def test_argument_errors():
    a = np.zeros(1, np.float32)
    with pytest.raises(TypeError, match="exactly 1 positional"):
        sw.from_dlpack()
    with pytest.raises(TypeError, match="exactly 1 positional"):
        sw.from_dlpack(a, None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'stream'"):
        sw.from_dlpack(a, stream=None)
    with pytest.raises(TypeError, match="positional-only arguments passed as keyword arguments: 'x'"):
        sw.from_dlpack(x=a)
