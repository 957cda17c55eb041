"""The Carrier base has real get_value(i) / set_value(i, v): the native
storage's slot read and write, which an override reaches with super()
(before, super().get_value was AttributeError). A slot access to the same
carrier from inside its own override (super().__getitem__(i), self[i] = v)
takes the native path too instead of recursing."""
import pytest

import strideweave as sw

from support.builders import F32, I32

BOOL = sw.DType.Bool
BASES = {"CPU": sw.CPU, "Generic": sw.Generic, "FileBacked": sw.FileBacked}


def build(cls, kind, n=3, dtype=F32):
    if kind == "CPU":
        return cls(n, dtype=dtype)
    if kind == "Generic":
        return cls([0.0] * n, dtype=dtype)
    c = cls(dtype=dtype)
    assert c._reserve(n)
    return c


KINDS = sorted(BASES)


@pytest.mark.parametrize("kind", KINDS)
def test_overrides_reach_the_native_slots_through_super(kind):
    class Doubling(BASES[kind]):
        def get_value(self, i):
            return super().get_value(i) * 2

        def set_value(self, i, v):
            super().set_value(i, v + 1)

    c = build(Doubling, kind)
    c[1] = 2.0
    assert c.version == 1
    assert c[1] == 6.0  # stored 3.0, read doubled
    assert [c[i] for i in range(3)] == [0.0, 6.0, 0.0]
    assert sw.Tensor(c, 0, sw.Layout.canonical(sw.Shape([3]))).tolist() == [0.0, 6.0, 0.0]
    # The built-in class's own method reads the storage directly.
    assert BASES[kind].get_value(c, 1) == 3.0


@pytest.mark.parametrize("kind", KINDS)
def test_super_getitem_and_setitem_inside_the_hooks_do_not_recurse(kind):
    class ViaItems(BASES[kind]):
        def get_value(self, i):
            return super().__getitem__(i) + 100

        def set_value(self, i, v):
            self[i] = v * 10  # the public write, nested in this carrier's own hook

    c = build(ViaItems, kind)
    c[2] = 1.5
    assert c[2] == 115.0
    assert c.version == 1  # one public write, counted once


def test_a_python_only_carrier_gets_not_implemented_from_super():
    class Plain(sw.Carrier):
        def size(self):
            return 2

        def dtype(self):
            return F32

        def get_value(self, i):
            return super().get_value(i)

        def set_value(self, i, v):
            super().__setitem__(i, v)

    c = Plain()
    with pytest.raises(NotImplementedError, match="does not implement the carrier hook get_value"):
        c[0]
    with pytest.raises(NotImplementedError, match="does not implement the carrier hook set_value"):
        c[0] = 1.0
    assert c.version == 0
    with pytest.raises(NotImplementedError, match="get_value"):
        sw.Carrier().get_value(0)


def test_base_get_value_and_set_value_check_like_slot_access():
    c = sw.CPU(2, dtype=I32)
    c.set_value(1, 7)
    assert c.get_value(1) == 7 and c[1] == 7
    assert c.version == 0  # the hook is not a public write; c[i] = v counts
    with pytest.raises(IndexError, match="out of range"):
        c.get_value(2)
    with pytest.raises(IndexError, match="out of range"):
        c.set_value(-1, 1)
    with pytest.raises(TypeError, match="integers"):
        c.get_value(True)
    with pytest.raises(OverflowError):
        c.set_value(0, 2**40)
    with pytest.raises(TypeError):
        c.set_value(0, 1.5)
    with pytest.raises(TypeError, match="2 arguments"):
        c.set_value(0)
    b = sw.CPU(1, dtype=BOOL)
    with pytest.raises(TypeError, match="bool"):
        b.set_value(0, 1)
    c.release()
    with pytest.raises(RuntimeError, match="released"):
        c.get_value(0)
    with pytest.raises(RuntimeError, match="released"):
        c.set_value(0, 1)


def test_base_get_value_checks_the_native_storage_not_a_size_override():
    class Claims(sw.CPU):
        def size(self):
            return 100  # more than the storage holds

        def get_value(self, i):
            return super().get_value(i)

    c = Claims(2)
    with pytest.raises(IndexError, match="out of range for size 2"):
        c[50]
