"""Generic carrier (API.md 3.2)."""
import gc
import struct
import weakref

import pytest

from strideweave import DType, Generic


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


class TestConstruction:
    def test_defaults(self):
        g = Generic([1, 2.5])
        assert g.dtype() is DType.Floating
        assert g.size() == 2
        assert g[0] == 1.0 and type(g[0]) is float  # Floating stores float
        assert g.is_mutable() and g.version == 0

    def test_values_from_any_iterable(self):
        g = Generic(range(3))
        assert [g[i] for i in range(3)] == [0.0, 1.0, 2.0]
        assert Generic([]).size() == 0

    def test_values_must_be_iterable(self):
        with pytest.raises(TypeError):
            Generic(5)
        with pytest.raises(TypeError):
            Generic()

    def test_bad_dtypes(self):
        with pytest.raises(TypeError, match="DType"):
            Generic([1], dtype="Floating")
        for name in ["Integer", "Float64"]:
            with pytest.raises(ValueError, match="Generic"):
                Generic([1], dtype=DType.from_name(name))

    def test_immutable(self):
        g = Generic([1.0], mutable=False)
        assert not g.is_mutable()
        with pytest.raises(RuntimeError, match="not mutable"):
            g[0] = 2.0
        assert g[0] == 1.0

    def test_init_twice(self):
        g = Generic([1.0])
        with pytest.raises(RuntimeError, match="twice"):
            g.__init__([1.0, 2.0])
        assert g.size() == 1


class TestDTypes:
    def test_any_keeps_objects(self):
        obj = object()
        g = Generic([obj, "s", None], dtype=DType.Any)
        assert g[0] is obj and g[1] == "s" and g[2] is None
        g[2] = [1]
        assert g[2] == [1]

    def test_floating(self):
        g = Generic([0.0])
        g[0] = 3
        assert g[0] == 3.0 and type(g[0]) is float
        g[0] = 0.1
        assert g[0] == 0.1  # no binary32 rounding
        with pytest.raises(TypeError, match="Floating"):
            g[0] = "x"
        with pytest.raises(TypeError, match="bool"):
            g[0] = True
        with pytest.raises(TypeError):
            Generic(["1.0"])

    def test_float32_rounds_on_construction_and_write(self):
        g = Generic([0.1], dtype=DType.Float32)
        assert g[0] == f32(0.1)
        g[0] = 0.2
        assert g[0] == f32(0.2)
        g[0] = 1
        assert g[0] == 1.0 and type(g[0]) is float

    def test_int32(self):
        g = Generic([1, -(2**31)], dtype=DType.Int32)
        assert g[1] == -(2**31)
        with pytest.raises(OverflowError, match="Int32"):
            g[0] = 2**31
        with pytest.raises(TypeError, match="Int32"):
            g[0] = 1.0
        with pytest.raises(OverflowError):
            Generic([2**31], dtype=DType.Int32)
        assert g.version == 0

    def test_bool(self):
        g = Generic([True, False], dtype=DType.Bool)
        assert g[0] is True
        with pytest.raises(TypeError, match="bool"):
            g[0] = 1
        with pytest.raises(TypeError, match="bool"):
            Generic([1], dtype=DType.Bool)


class TestReleaseAndLike:
    def test_release(self):
        g = Generic([1.0, 2.0], dtype=DType.Float32)
        g.release()
        assert g.size() == 0 and g.is_released()
        assert g.dtype() is DType.Float32
        with pytest.raises(RuntimeError, match="released"):
            g[0]

    def test_release_drops_values(self):
        class Obj:
            pass

        o = Obj()
        r = weakref.ref(o)
        g = Generic([o], dtype=DType.Any)
        del o
        g.release()
        assert r() is None

    def test_new_like_and_allocate_like(self):
        g = Generic([1], dtype=DType.Int32)
        n = g.new_like([4, 5])
        assert n.dtype() is DType.Int32 and n[1] == 5
        a = g.allocate_like(2, dtype=DType.Bool, empty=True)
        assert a.dtype() is DType.Bool and a[0] is False and a[1] is False
        z = Generic([], dtype=DType.Any).allocate_like(1)
        assert z[0] == 0
        with pytest.raises(ValueError):
            g.new_like([1], dtype=DType.Integer)

    def test_reserve_grows_only_empty(self):
        g = Generic([], dtype=DType.Int32)
        assert g._reserve(3) is True
        assert g.size() == 3 and [g[i] for i in range(3)] == [0, 0, 0]
        assert g.version == 0
        assert g._reserve(5) is False
        assert g.size() == 3
        with pytest.raises(ValueError):
            Generic([])._reserve(-1)
        r = Generic([])
        r.release()
        with pytest.raises(RuntimeError, match="released"):
            r._reserve(1)

    def test_no_dlpack(self):
        with pytest.raises(BufferError, match="DLPack is not supported for this carrier"):
            Generic([1.0]).dlpack_info()


class TestGC:
    def test_cycle_through_values_is_collected(self):
        g = Generic([None], dtype=DType.Any)
        box = [g]
        g[0] = box
        r = weakref.ref(g)
        del g, box
        gc.collect()
        assert r() is None

    def test_self_reference(self):
        g = Generic([None], dtype=DType.Any)
        g[0] = g
        r = weakref.ref(g)
        del g
        gc.collect()
        assert r() is None

    def test_gc_sees_referents(self):
        inner = [1]
        g = Generic([inner], dtype=DType.Any)
        lists = [r for r in gc.get_referents(g) if isinstance(r, list)]
        assert any(x is inner for lst in lists for x in lst)
        assert gc.is_tracked(g)

    def test_subclass_cycle(self):
        class MyGeneric(Generic):
            pass

        g = MyGeneric([None], dtype=DType.Any)
        g.me = g
        g[0] = g
        r = weakref.ref(g)
        del g
        gc.collect()
        assert r() is None
