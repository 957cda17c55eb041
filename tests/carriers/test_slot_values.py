"""Slot values through every native codec (CPU, FileBacked, Metal with the
fake runtime, Generic's coercion): one set of rules, the engine's slot codec."""
import struct

import pytest

import strideweave as sw
from strideweave import DType

F32, I32 = DType.Float32, DType.Int32


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def make(kind, dtype):
    if kind == "cpu":
        return sw.CPU(1, dtype=dtype)
    if kind == "file":
        f = sw.FileBacked(dtype=dtype)
        f._reserve(1)
        return f
    if kind == "metal":
        return sw.Metal(1, dtype=dtype)
    return sw.Generic([False if dtype == DType.Bool else 0], dtype=dtype)


KINDS = ["cpu", "file", "metal", "generic"]


class Floaty:
    def __float__(self):
        return 0.1


class Indexy:
    def __index__(self):
        return 7


@pytest.mark.parametrize("kind", KINDS)
def test_float32_rounds_the_same_everywhere(fake, kind):
    c = make(kind, F32)
    for v, expected in [(0.1, f32(0.1)), (2**24 + 1, 16777216.0), (float("-inf"), float("-inf")), (-3, -3.0),
                        (Floaty(), f32(0.1)), (Indexy(), 7.0)]:
        c[0] = v
        assert c[0] == expected and type(c[0]) is float
    with pytest.raises(OverflowError, match="out of range for Float32"):
        c[0] = 1e300  # finite beyond binary32, as an Int32 slot refuses 2**31
    assert c[0] == 7.0
    with pytest.raises(TypeError, match="bool"):
        c[0] = True
    with pytest.raises(TypeError):
        c[0] = "1.0"


@pytest.mark.parametrize("kind", KINDS)
def test_int32_range_and_type_everywhere(fake, kind):
    c = make(kind, I32)
    for v in [-2**31, 2**31 - 1, Indexy()]:
        c[0] = v
        assert c[0] == int(v.__index__() if isinstance(v, Indexy) else v) and type(c[0]) is int
    for v in [2**31, -2**31 - 1, 2**70]:
        with pytest.raises(OverflowError, match="out of range for Int32"):
            c[0] = v
    for v in [1.0, True, Floaty()]:
        with pytest.raises(TypeError, match="Int32 slot"):
            c[0] = v
    assert c[0] == 7


@pytest.mark.parametrize("kind", ["cpu", "metal", "generic"])
def test_bool_slots_are_strict(fake, kind):
    c = make(kind, DType.Bool)
    c[0] = True
    assert c[0] is True
    for v in [1, 1.0, Indexy()]:
        with pytest.raises(TypeError, match="Bool slot expects a bool"):
            c[0] = v


def test_floating_files_keep_the_double():
    f = make("file", DType.Floating)
    f[0] = 0.1
    assert f[0] == 0.1
    assert struct.unpack("=d", f.path.read_bytes()) == (0.1,)
    f[0] = 2**70  # a big int goes through double
    assert f[0] == float(2**70)


def test_a_metal_write_whose_conversion_releases_the_carrier(fake):
    m = sw.Metal(2)

    class Releasing:
        def __float__(self):
            m.release()
            return 1.0

    with pytest.raises(RuntimeError, match="changed during the write"):
        m[1] = Releasing()
    assert m.is_released() and fake.live_buffers() == 0


@pytest.mark.parametrize("kind", ["cpu", "file", "metal"])
def test_new_like_encodes_through_the_codec(fake, kind):
    c = make(kind, F32)
    n = c.new_like([0.1, 2, Floaty()])
    assert [n[i] for i in range(3)] == [f32(0.1), 2.0, f32(0.1)]
    with pytest.raises(OverflowError, match="Int32"):
        c.new_like([1, 2**40], dtype=I32)
