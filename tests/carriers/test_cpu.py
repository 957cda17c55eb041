"""CPU carrier (API.md 3.2, 10)."""
import ctypes
import struct

import pytest

from strideweave import CPU, DType

from support.process import snippet_stdout

MESSAGE_ALIGNMENT = 64


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


class TestConstruction:
    def test_defaults(self):
        c = CPU(4)
        assert c.size() == 4
        assert c.dtype() is DType.Float32
        assert c.is_mutable() and not c.is_owned() and not c.is_released()
        assert c.version == 0
        assert [c[i] for i in range(4)] == [0.0] * 4
        assert all(type(c[i]) is float for i in range(4))

    @pytest.mark.parametrize(
        "dtype,zero,kind", [(DType.Float32, 0.0, float), (DType.Int32, 0, int), (DType.Bool, False, bool)]
    )
    def test_dtypes_zero_filled(self, dtype, zero, kind):
        c = CPU(5, dtype=dtype)
        assert c.dtype() is dtype
        for i in range(5):
            assert c[i] == zero and type(c[i]) is kind

    def test_zero_filled_memory(self):
        c = CPU(100, dtype=DType.Int32)
        raw = (ctypes.c_int32 * 100).from_address(c.pointer())
        assert list(raw) == [0] * 100

    def test_empty_allocates_without_error(self):
        c = CPU(8, empty=True)
        assert c.size() == 8
        c[7] = 1.5
        assert c[7] == 1.5

    def test_immutable(self):
        c = CPU(2, mutable=False)
        assert not c.is_mutable()
        with pytest.raises(RuntimeError, match="not mutable"):
            c[0] = 1.0

    def test_negative_size(self):
        with pytest.raises(ValueError):
            CPU(-1)

    def test_non_dtype(self):
        with pytest.raises(TypeError, match="DType"):
            CPU(1, dtype="Float32")
        with pytest.raises(TypeError):
            CPU(1, dtype=float)

    @pytest.mark.parametrize("name", ["Any", "Floating", "Integer", "Float64"])
    def test_unsupported_dtype(self, name):
        with pytest.raises(ValueError, match="Float32"):
            CPU(1, dtype=DType.from_name(name))

    def test_size_must_be_int(self):
        with pytest.raises(TypeError):
            CPU(1.5)
        with pytest.raises(TypeError):
            CPU()

    def test_dtype_is_keyword_only(self):
        with pytest.raises(TypeError):
            CPU(1, DType.Int32)

    def test_init_twice(self):
        c = CPU(1)
        with pytest.raises(RuntimeError, match="twice"):
            c.__init__(2)
        assert c.size() == 1

    def test_huge_size(self):
        with pytest.raises(MemoryError):
            CPU(2**62)


class TestAlignment:
    @pytest.mark.parametrize("dtype", [DType.Float32, DType.Int32, DType.Bool])
    def test_pointer_aligned_for_many_sizes(self, dtype):
        keep = []
        for n in [0, 1, 2, 3, 7, 15, 16, 17, 63, 64, 65, 100, 1000, 4097]:
            c = CPU(n, dtype=dtype)
            keep.append(c)
            assert c.pointer() != 0, n
            assert c.pointer() % MESSAGE_ALIGNMENT == 0, n

    def test_allocate_like_aligned(self):
        for n in [0, 1, 5, 33]:
            assert CPU(1).allocate_like(n).pointer() % 64 == 0


class TestValues:
    def test_float32_rounds_to_binary32(self):
        c = CPU(3)
        c[0] = 0.1
        assert c[0] == f32(0.1) and c[0] != 0.1
        c[1] = 16777217  # int, not representable in binary32
        assert c[1] == 16777216.0 and type(c[1]) is float
        with pytest.raises(OverflowError, match="out of range for Float32"):
            c[2] = 1e39  # finite beyond binary32: refused, as Int32 refuses 2**31
        assert c[2] == 0.0
        c[2] = float("inf")
        assert c[2] == float("inf")

    def test_float32_rejects_non_numbers(self):
        c = CPU(1)
        for bad in ["1.0", None, [1.0], 1j]:
            with pytest.raises(TypeError, match="Float32"):
                c[0] = bad
        assert c.version == 0

    def test_float32_rejects_bool(self):
        with pytest.raises(TypeError, match="bool"):
            CPU(1)[0] = True

    def test_float32_huge_int(self):
        with pytest.raises(OverflowError):
            CPU(1)[0] = 10**400

    def test_int32_range_and_type(self):
        c = CPU(2, dtype=DType.Int32)
        c[0] = 2**31 - 1
        c[1] = -(2**31)
        assert (c[0], c[1]) == (2**31 - 1, -(2**31))
        for bad in [2**31, -(2**31) - 1, 10**30]:
            with pytest.raises(OverflowError, match="Int32"):
                c[0] = bad
        for bad in [1.0, "1", True, None]:
            with pytest.raises(TypeError, match="Int32"):
                c[0] = bad
        assert c[0] == 2**31 - 1
        assert c.version == 2

    def test_int32_accepts_index_objects(self):
        class Idx:
            def __index__(self):
                return 9

        c = CPU(1, dtype=DType.Int32)
        c[0] = Idx()
        assert c[0] == 9

    def test_bool_requires_bool(self):
        c = CPU(2, dtype=DType.Bool)
        c[1] = True
        assert c[1] is True and c[0] is False
        for bad in [1, 0, 1.0, None, "True"]:
            with pytest.raises(TypeError, match="bool"):
                c[0] = bad
        assert c.version == 1

    def test_values_visible_through_pointer(self):
        c = CPU(2, dtype=DType.Int32)
        c[1] = 42
        raw = (ctypes.c_int32 * 2).from_address(c.pointer())
        assert raw[1] == 42
        raw[0] = 7  # a foreign write: not a version change
        assert c[0] == 7
        assert c.version == 1


class TestRelease:
    def test_release_frees_and_zeroes(self):
        c = CPU(10, dtype=DType.Int32)
        assert c.pointer() != 0
        c.release()
        assert c.pointer() == 0
        assert c.size() == 0
        assert c.dtype() is DType.Int32  # kept for new_like on a released receiver
        with pytest.raises(RuntimeError, match="released"):
            c[0]

    def test_repr(self):
        c = CPU(2)
        assert "CPU" in repr(c) and "size=2" in repr(c)
        c.release()
        assert "released" in repr(c)


class TestLike:
    def test_new_like_keeps_dtype_and_converts(self):
        c = CPU(1, dtype=DType.Int32)
        n = c.new_like([1, 2, 3])
        assert n.dtype() is DType.Int32 and [n[i] for i in range(3)] == [1, 2, 3]
        with pytest.raises(TypeError, match="Int32"):
            c.new_like([1.5])
        with pytest.raises(OverflowError):
            c.new_like([2**40])

    def test_new_like_dtype_and_mutability(self):
        n = CPU(1).new_like([True, False], dtype=DType.Bool, mutable=False)
        assert n.dtype() is DType.Bool and n[0] is True and not n.is_mutable()
        with pytest.raises(ValueError):
            CPU(1).new_like([1.0], dtype=DType.Floating)
        with pytest.raises(TypeError):
            CPU(1).new_like(5)

    def test_new_like_accepts_iterables(self):
        n = CPU(1).new_like(x * 0.5 for x in range(3))
        assert [n[i] for i in range(3)] == [0.0, 0.5, 1.0]

    def test_allocate_like(self):
        a = CPU(1, dtype=DType.Bool).allocate_like(3, dtype=DType.Int32, mutable=False)
        assert a.dtype() is DType.Int32 and a.size() == 3 and not a.is_mutable()
        assert [a[i] for i in range(3)] == [0, 0, 0]
        e = CPU(1).allocate_like(3, empty=True)
        assert e.size() == 3

    def test_reserve_is_refused(self):
        c = CPU(0)
        assert c._reserve(4) is False
        assert c.size() == 0


class TestDLPackInfo:
    def test_dlpack_info(self):
        c = CPU(3)
        assert c.dlpack_info() == {"pointer": c.pointer(), "device_type": 1, "device_id": 0}

    def test_dlpack_info_after_release(self):
        c = CPU(3)
        c.release()
        assert c.dlpack_info()["pointer"] == 0

    def test_python_subclass_override(self):
        class Remote(CPU):
            def dlpack_info(self):
                return {"pointer": self.pointer(), "device_type": 2, "device_id": 1}

        r = Remote(1)
        assert r.dlpack_info()["device_type"] == 2


def test_cpu_write_whose_conversion_releases_the_carrier():
    out = snippet_stdout("""
        from strideweave import CPU
        c = CPU(4)
        class Releasing:
            def __float__(self):
                c.release()
                return 1.0
        try:
            c[0] = Releasing()
        except RuntimeError as e:
            print("RuntimeError", e)
        assert c.is_released()
    """, dev=True)
    assert "RuntimeError" in out and "changed during the write" in out
