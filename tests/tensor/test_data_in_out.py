"""API.md section 11: strideweave.tensor(), Tensor.tolist/item/__array__,
__index__ keys and the messages that name what is wrong."""
import array
import struct

import numpy as np
import pytest

import strideweave as sw
from strideweave import CPU, DType, FileBacked, Generic, Layout, Shape, Stride, Tensor


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def row_major(*shape):
    strides = []
    acc = 1
    for e in reversed(shape):
        strides.insert(0, acc)
        acc *= e
    return Layout(Shape(list(shape)), Stride(strides))


# ------------------------------------------------------------ tensor(): data in


def test_tensor_from_numpy_gives_row_major_layout_and_equal_export():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = sw.tensor(a)
    assert type(t.carrier) is CPU
    assert t.dtype() is DType.Float32
    assert t.layout == row_major(2, 3, 4)
    assert t.offset == 0
    assert np.array_equal(np.from_dlpack(t), a)
    assert t.carrier.pointer() != a.ctypes.data  # a copy
    a[0, 0, 0] = 99
    assert t.tolist()[0][0][0] == 0.0


@pytest.mark.parametrize("view", [
    lambda a: a[::-1],
    lambda a: a[:, ::-2],
    lambda a: a.T,
    lambda a: a[1:, 2:5],
    lambda a: np.broadcast_to(a[:1], (3, 6)),
    lambda a: a[::-1, ::-1].T,
])
def test_tensor_from_non_contiguous_and_negative_stride_views(view):
    a = np.arange(18, dtype=np.float64).reshape(3, 6) * 0.5
    v = view(a)
    t = sw.tensor(v)
    assert t.dtype() is DType.Float32
    assert np.array_equal(np.from_dlpack(t), v.astype(np.float32))
    assert t.tolist() == v.astype(np.float32).tolist()


@pytest.mark.parametrize("np_dtype, expected", [
    (np.float16, DType.Float32), (np.float32, DType.Float32), (np.float64, DType.Float32),
    (np.int8, DType.Int32), (np.int16, DType.Int32), (np.int32, DType.Int32), (np.int64, DType.Int32),
    (np.uint8, DType.Int32), (np.uint16, DType.Int32), (np.uint32, DType.Int32), (np.uint64, DType.Int32),
    (np.bool_, DType.Bool),
])
def test_dtype_inference_from_buffers(np_dtype, expected):
    a = (np.arange(6) % 2 == 1) if np_dtype is np.bool_ else np.arange(6).astype(np_dtype)
    t = sw.tensor(a)
    assert t.dtype() is expected
    assert t.tolist() == a.tolist()


def test_byte_swapped_buffers_convert():
    a = np.arange(5, dtype=">f8") - 2.5
    assert sw.tensor(a).tolist() == [-2.5, -1.5, -0.5, 0.5, 1.5]
    b = np.array([1, -70000], dtype=">i4")
    assert sw.tensor(b).tolist() == [1, -70000]


def test_float64_rounds_to_binary32():
    t = sw.tensor(np.array([0.1, np.inf, -1e-50]))
    assert t.tolist() == [f32(0.1), float("inf"), -0.0]


def test_memoryview_array_array_bytes_and_scalars():
    assert sw.tensor(array.array("i", [1, 2, 3])).tolist() == [1, 2, 3]
    assert sw.tensor(array.array("d", [1.5, 2.5])).dtype() is DType.Float32
    assert sw.tensor(memoryview(bytes([1, 2, 255]))).tolist() == [1, 2, 255]
    m = memoryview(array.array("f", range(12))).cast("B").cast("f", [3, 4])
    assert sw.tensor(m).tolist() == np.arange(12, dtype=np.float32).reshape(3, 4).tolist()
    r0 = sw.tensor(2.5)
    assert r0.layout == Layout(Shape(), Stride()) and r0.tolist() == 2.5 and r0.item() == 2.5
    assert sw.tensor(7).dtype() is DType.Int32 and sw.tensor(7).item() == 7
    assert sw.tensor(True).dtype() is DType.Bool and sw.tensor(True).item() is True
    assert sw.tensor(np.float32(1.25)).item() == 1.25
    assert sw.tensor(np.array(3)).layout == Layout(Shape(), Stride())


def test_nested_sequences():
    t = sw.tensor([[1, 2, 3], [4, 5, 6]])
    assert t.dtype() is DType.Int32 and t.layout == row_major(2, 3)
    assert t.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert sw.tensor([[1, 2.5], (3, 4)]).dtype() is DType.Float32
    assert sw.tensor([True, False]).tolist() == [True, False]
    assert sw.tensor([np.int64(3), np.float32(0.5)]).tolist() == [3.0, 0.5]
    assert sw.tensor([[[1.0]]]).layout == row_major(1, 1, 1)


def test_explicit_dtype_converts_like_a_slot_write():
    assert sw.tensor([1, 2], dtype=DType.Float32).tolist() == [1.0, 2.0]
    assert sw.tensor(np.arange(3), dtype=DType.Float32).dtype() is DType.Float32
    with pytest.raises(TypeError, match="Int32"):
        sw.tensor([1.5], dtype=DType.Int32)
    with pytest.raises(TypeError, match="float"):
        sw.tensor(np.array([1.5]), dtype=DType.Int32)
    with pytest.raises(TypeError, match="bool"):
        sw.tensor(np.array([True]), dtype=DType.Float32)
    with pytest.raises(TypeError, match="Bool slot expects a bool"):
        sw.tensor([1], dtype=DType.Bool)
    with pytest.raises(ValueError, match="cannot hold dtype"):
        sw.tensor([1.0], dtype=DType.Floating)
    with pytest.raises(ValueError, match="cannot hold dtype"):
        sw.tensor([1.0], dtype=DType.Float64)
    with pytest.raises(TypeError, match="DType"):
        sw.tensor([1.0], dtype="float32")


def test_int32_range_is_checked():
    with pytest.raises(OverflowError, match=r"Int32 at index \(1,\) of data with shape \(2,\)"):
        sw.tensor(np.array([1, 2**31], dtype=np.int64))
    with pytest.raises(OverflowError, match="Int32"):
        sw.tensor(np.array([2**32 - 1], dtype=np.uint32))
    with pytest.raises(OverflowError, match=r"Int32.*index \(0, 1\)"):
        sw.tensor([[1, 2**40]])
    with pytest.raises(OverflowError):
        sw.tensor(2**31)
    assert sw.tensor(np.array([-2**31, 2**31 - 1], dtype=np.int64)).tolist() == [-2**31, 2**31 - 1]


def test_given_layout_places_elements_at_leaf_coordinates_with_zero_holes():
    a = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    lay = Layout(Shape([2, 3]), Stride([1, 4]))  # column-major with a hole per column
    t = sw.tensor(a, layout=lay)
    assert t.layout is lay
    assert t.carrier.size() == lay.cosize == 10
    assert np.array_equal(np.from_dlpack(t), a)
    raw = [t.carrier[i] for i in range(10)]
    assert raw == [1.0, 4.0, 0.0, 0.0, 2.0, 5.0, 0.0, 0.0, 3.0, 6.0]
    nested = Layout(Shape([2, [3]]), Stride([3, [1]]))
    assert sw.tensor([[1, 2, 3], [4, 5, 6]], layout=nested).tolist() == [[1, 2, 3], [4, 5, 6]]


def test_given_layout_errors():
    a = np.zeros((2, 3), dtype=np.float32)
    with pytest.raises(ValueError, match=r"leaf extents \(3, 2\).*shape \(2, 3\)"):
        sw.tensor(a, layout=Layout(Shape([3, 2]), Stride([1, 3])))
    with pytest.raises(ValueError, match="not injective"):
        sw.tensor(a, layout=Layout(Shape([2, 3]), Stride([0, 1])))
    with pytest.raises(TypeError, match="Layout"):
        sw.tensor(a, layout=Shape([2, 3]))
    with pytest.raises(ValueError, match=r"shape \(\)"):
        sw.tensor(1.0, layout=Layout(Shape(1), Stride(1)))


def test_bad_data_names_the_shape_or_format():
    with pytest.raises(ValueError, match=r"rectangular.*index \(1,\).*shape so far \(2, 2\)"):
        sw.tensor([[1, 2], [3]])
    with pytest.raises(ValueError, match="rectangular"):
        sw.tensor([1, [2]])
    with pytest.raises(ValueError, match="rectangular"):
        sw.tensor([[1], 2])
    with pytest.raises(ValueError, match=r"rectangular.*index \(1,\).*shape so far \(2, 0\)"):
        sw.tensor([[], [1]])
    with pytest.raises(TypeError, match="format 'Zd'"):
        sw.tensor(np.zeros(3, dtype=complex))
    with pytest.raises(TypeError, match="complex"):
        sw.tensor(1j)
    with pytest.raises(TypeError, match="format 'O'"):
        sw.tensor(np.array([1, None], dtype=object))
    with pytest.raises(TypeError, match=r"str \(at index \(1,\) of data with shape \(2,\)\)"):
        sw.tensor([1, "a"])
    with pytest.raises(TypeError, match="str"):
        sw.tensor("abc")
    with pytest.raises(TypeError, match="NoneType"):
        sw.tensor(None)
    with pytest.raises(TypeError, match="format"):
        sw.tensor(np.zeros(2, dtype=[("a", "f4"), ("b", "i4")]))
    with pytest.raises(TypeError, match=r"float.*Int32|Int32.*float"):
        sw.tensor([[1, 2], [3, 4.5]], dtype=DType.Int32)


def test_a_failure_allocates_nothing():
    import gc

    def live_cpus():
        gc.collect()
        return sum(1 for o in gc.get_objects() if type(o) is CPU)

    before = live_cpus()
    for bad in ([[1, 2], [3]], [1, 2**40], np.array([2**33]), np.zeros(3, complex), [1.0, None]):
        with pytest.raises((TypeError, ValueError, OverflowError)):
            sw.tensor(bad)
    assert live_cpus() == before


def test_objects_with_array_protocol_and_tensors():
    class ArrayLike:
        def __array__(self, dtype=None, copy=None):
            return np.array([[1.5, 2.5]])

    assert sw.tensor(ArrayLike()).tolist() == [[1.5, 2.5]]

    class NotAnArray:
        def __array__(self):
            return [1, 2]

    with pytest.raises(TypeError, match="no buffer"):
        sw.tensor(NotAnArray())
    g = Tensor(Generic([1.0, 2.0, 3.0]), 0, Layout(Shape(3), Stride(1)))
    copy = sw.tensor(g)
    assert type(copy.carrier) is CPU and copy.tolist() == [1.0, 2.0, 3.0]
    torch = pytest.importorskip("torch")
    assert sw.tensor(torch.arange(4, dtype=torch.float32)).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_tensor_is_native_and_reexported():
    assert sw.tensor is sw._core.tensor
    assert type(sw.tensor).__name__ == "builtin_function_or_method"


def test_importing_strideweave_does_not_import_numpy():
    import subprocess
    import sys

    code = "import sys, strideweave as sw; sw.tensor([[1.0, 2.0]]).tolist(); print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------ data out


def test_tolist_follows_leaf_modes_like_an_export():
    lay = Layout(Shape([2, [3, 4]]), Stride([1, [2, 6]]))
    t = Tensor(CPU(lay.cosize), 0, lay)
    for i in range(lay.size):
        t[i] = float(i)
    assert t.tolist() == np.from_dlpack(t).tolist()
    assert len(t.tolist()) == 2 and len(t.tolist()[0]) == 3 and len(t.tolist()[0][0]) == 4


def test_tolist_with_offset_broadcast_and_every_dtype():
    c = CPU(8, dtype=DType.Int32)
    for i in range(8):
        c[i] = i * 10
    t = Tensor(c, 2, Layout(Shape([3, 2]), Stride([1, 0])))
    assert t.tolist() == [[20, 20], [30, 30], [40, 40]]
    b = CPU(2, dtype=DType.Bool)
    b[1] = True
    assert Tensor(b, 0, Layout(Shape(2), Stride(1))).tolist() == [False, True]
    assert Tensor(b, 1, Layout(Shape(), Stride())).tolist() is True


def test_tolist_on_other_carriers():
    lay = row_major(2, 2)
    vals = [0.5, 1.5, 2.5, 3.5]
    g = Tensor(Generic(vals), 0, lay)
    assert g.tolist() == [[0.5, 1.5], [2.5, 3.5]]
    fb = sw.move(sw.tensor([[0.5, 1.5], [2.5, 3.5]]), FileBacked(dtype=DType.Float32))
    assert fb.tolist() == [[0.5, 1.5], [2.5, 3.5]]
    fbf = sw.move(Tensor(Generic(vals), 0, lay), FileBacked())
    assert fbf.dtype() is DType.Floating and fbf.tolist() == [[0.5, 1.5], [2.5, 3.5]]
    e = sw.Evictable(CPU(4), FileBacked(dtype=DType.Float32))
    et = Tensor(e, 0, lay)
    et[(1, 1)] = 7.0
    assert et.tolist() == [[0.0, 0.0], [0.0, 7.0]]
    e.evict()
    with pytest.raises(RuntimeError, match="evicted"):
        et.tolist()
    e.promote()
    assert et.tolist() == [[0.0, 0.0], [0.0, 7.0]]


def test_tolist_released_and_multi_subtensor():
    t = sw.tensor([1.0, 2.0])
    t.carrier.release()
    with pytest.raises(RuntimeError, match="released"):
        t.tolist()
    f = sw.move(sw.tensor([1.0]), FileBacked(dtype=DType.Float32))
    f.carrier.release()
    with pytest.raises(RuntimeError, match="released"):
        f.tolist()


def test_tolist_python_subclass_hooks_are_honoured():
    class Constant(CPU):
        def get_value(self, i):
            return 42.0 + i

    c = Constant(2)
    assert Tensor(c, 0, Layout(Shape(2), Stride(1))).tolist() == [42.0, 43.0] == [c[0], c[1]]


def test_item():
    assert sw.tensor([[4.5]]).item() == 4.5
    assert sw.tensor([3]).item() == 3
    s = sw.reduce_sum(sw.tensor([1.0, 2.0]))
    assert s.item() == 3.0
    with pytest.raises(ValueError, match=r"exactly one element.*has 2"):
        sw.tensor([1.0, 2.0]).item()


def test_array_protocol_zero_copy_for_cpu_float32_and_int32():
    for data in ([[1.0, 2.0], [3.0, 4.0]], [[1, 2], [3, 4]]):
        t = sw.tensor(data)
        a = np.asarray(t)
        assert a.ctypes.data == t.carrier.pointer()
        assert a.tolist() == data
        assert np.array(t, copy=False).ctypes.data == t.carrier.pointer()
        c = np.array(t)  # copy=True
        assert c.ctypes.data != t.carrier.pointer() and c.tolist() == data
        c2 = t.__array__(copy=True)
        assert c2.ctypes.data != t.carrier.pointer()
    t = sw.tensor([1.0, 2.0])
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError):
        t.__array__(dtype=np.float64, copy=False)


def test_array_protocol_copies_other_carriers_and_refuses_copy_false():
    g = Tensor(Generic([1.0, 2.0]), 0, Layout(Shape(2), Stride(1)))
    a = np.asarray(g)
    assert a.dtype == np.float64 and a.tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="without a copy"):
        g.__array__(copy=False)
    with pytest.raises(ValueError, match="without a copy"):
        np.array(g, copy=False)
    b = sw.tensor([True, False])
    assert np.asarray(b).dtype == np.bool_ and np.asarray(b).tolist() == [True, False]
    with pytest.raises(ValueError, match="Bool"):
        b.__array__(copy=False)
    fb = sw.move(sw.tensor([[1.0, 2.0]]), FileBacked(dtype=DType.Float32))
    assert np.asarray(fb).dtype == np.float32 and np.asarray(fb).tolist() == [[1.0, 2.0]]
    assert np.asarray(fb, dtype=np.int64).dtype == np.int64
    r0 = sw.reduce_sum(sw.tensor([1.0, 2.0]))
    assert np.asarray(r0).shape == () and float(np.asarray(r0)) == 3.0


# ------------------------------------------------------------ keys and messages


def test_keys_accept_index_objects_not_bools():
    lay = Layout(Shape([2, [3, 4]]), Stride([1, [2, 6]]))
    assert lay.index([np.int64(1), [np.int32(2), np.uint8(3)]]) == 23
    assert lay.index((1, np.int16(11))) == 23
    assert lay(np.int64(23)) == 23

    class Idx:
        def __index__(self):
            return 5

    assert lay.index(Idx()) == lay.index(5)
    t = sw.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert t[np.int64(1)] == t[1]
    assert t[(np.int64(1), np.int64(2))] == 5.0
    t[(np.int32(0), np.int32(0))] = 9.0
    assert t[0] == 9.0
    with pytest.raises(TypeError):
        lay.index(True)
    with pytest.raises(TypeError):
        lay.index((np.True_, 0))
    with pytest.raises(TypeError):
        t[(1, 1.0)]


def test_numpy_bool_is_refused_wherever_bool_is():
    # NumPy before 2.3 gives np.bool_ an __index__; it must not pass as 1.
    lay = Layout(Shape([2, 3]), Stride([1, 2]))
    for key in (np.True_, (np.False_, 0), [1, np.True_]):
        with pytest.raises(TypeError):
            lay.index(key)
    with pytest.raises(TypeError):
        Shape([2, 3]).encode((np.True_, 0))
    with pytest.raises(TypeError, match="int ordinal"):
        Shape([2, 3]).decode(np.True_)
    with pytest.raises(TypeError, match="carrier indices must be integers"):
        sw.CPU(2)[np.True_]
    with pytest.raises(TypeError, match="size must be an int, not bool"):
        sw.CPU(np.True_)
    t = sw.tensor([1.0, 2.0])
    with pytest.raises(TypeError):
        t[np.True_]


def test_index_part_that_mutates_a_list_key_is_safe():
    lay = Layout(Shape([2, 3]), Stride([1, 2]))
    key = [0, None]

    class Evil:
        def __index__(self):
            key.clear()
            return 1

    key[1] = Evil()
    assert lay.index(key) == 2


def test_out_of_domain_message_names_key_and_shape():
    lay = Layout(Shape([2, [3, 4]]), Stride([1, [2, 6]]))
    with pytest.raises(ValueError, match="Key is not in domain of shape") as e:
        lay.index([1, [3, 0]])
    assert "[1, [3, 0]]" in str(e.value) and "Shape<(2, (3, 4))>" in str(e.value)
    t = sw.tensor([[1.0, 2.0]])
    with pytest.raises(ValueError, match=r"Key is not in domain of shape: key 2 is outside Shape<\(1, 2\)>"):
        t[2]
    with pytest.raises(ValueError, match="Key is not in domain of shape.*np.int64"):
        t[np.int64(-1)]


def test_dlpack_refusal_names_the_class_and_the_move_to_cpu():
    fb = sw.move(sw.tensor([[1.0, 2.0]]), FileBacked(dtype=DType.Float32))
    with pytest.raises(BufferError, match="DLPack is not supported") as e:
        np.from_dlpack(fb)
    msg = str(e.value)
    assert "FileBacked" in msg and "strideweave.move(t, strideweave.CPU(2)) first" in msg
    gi = Tensor(Generic([1, 2], dtype=DType.Int32), 0, Layout(Shape(2), Stride(1)))
    with pytest.raises(BufferError, match=r"Generic.*strideweave.CPU\(2, dtype=strideweave.DType.Int32\)"):
        gi.__dlpack__()
    gf = Tensor(Generic([1.0]), 0, Layout(Shape(1), Stride(1)))
    with pytest.raises(BufferError, match=r"DLPack is not supported.*Generic.*Floating.*np.asarray"):
        gf.__dlpack__()
    ev = Tensor(sw.Evictable(CPU(2), FileBacked(dtype=DType.Float32)), 0, Layout(Shape(2), Stride(1)))
    with pytest.raises(BufferError, match="not supported") as e:
        ev.__dlpack__()
    assert "Evictable" in str(e.value) and "move it to a CPU carrier" in str(e.value)


def test_bool_export_refusal_is_unchanged():
    with pytest.raises(BufferError, match="supports only Float32 and Int32"):
        sw.tensor([True]).__dlpack__()


def test_numpy_method_is_asarray():
    t = sw.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    a = t.numpy()
    assert a.ctypes.data == t.carrier.pointer() and a.tolist() == np.asarray(t).tolist()  # the zero-copy view
    f = sw.move(sw.tensor([1.0, 2.0]), sw.FileBacked(dtype=DType.Float32))
    assert f.numpy().tolist() == [1.0, 2.0] and f.numpy().dtype == np.float32  # a copy
