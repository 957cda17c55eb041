"""The DType table: simple types, categories and their hierarchy, from_name,
immutability, and CompoundDType subclasses."""
import pytest

import strideweave as sw
from strideweave import CPU, DType, Generic

from support.process import snippet_stdout


F32, I32 = DType.Float32, DType.Int32


# name: (kind, bits, supertype name)
DTYPES = {
    "Any": ("category", None, None),
    "Floating": ("category", None, "Any"),
    "Integer": ("category", None, "Any"),
    "Float32": ("simple", 32, "Floating"),
    "Float64": ("simple", 64, "Floating"),
    "Int32": ("simple", 32, "Integer"),
    "Bool": ("simple", 8, "Any"),
}


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_dtype_table(name):
    kind, bits, parent = DTYPES[name]
    d = getattr(DType, name)
    assert isinstance(d, DType)
    assert d.name == name and repr(d) == f"DType.{name}"
    assert d.bits == bits
    assert d.is_simple() is (kind == "simple")
    assert d.is_category() is (kind == "category")
    assert d.is_compound() is False
    assert d.supertype is (getattr(DType, parent) if parent else None)
    assert DType.from_name(name) is d
    assert getattr(DType, name) is d  # a process-wide singleton


def test_dtype_hierarchy():
    assert F32.is_subtype_of(DType.Floating) and DType.Float64.is_subtype_of(DType.Floating)
    assert I32.is_subtype_of(DType.Integer)
    for d in (DType.Floating, DType.Integer, DType.Bool, F32, I32):
        assert d.is_subtype_of(DType.Any)
    assert F32.is_subtype_of(F32)
    assert not I32.is_subtype_of(DType.Floating)
    assert not DType.Floating.is_subtype_of(F32)
    assert not DType.Bool.is_subtype_of(DType.Integer)


def test_dtype_cannot_be_constructed_or_mutated():
    with pytest.raises(TypeError):
        DType()
    with pytest.raises(AttributeError):
        F32.name = "x"
    assert F32.name == "Float32"


def test_dtype_from_name_unknown():
    with pytest.raises(ValueError, match="float16"):
        DType.from_name("float16")


def test_integer_category_is_never_storage():
    for make in (lambda: CPU(1, dtype=DType.Integer), lambda: Generic([1], dtype=DType.Integer),
                 lambda: sw.FileBacked(dtype=DType.Integer)):
        with pytest.raises(ValueError):
            make()


class Planar(sw.CompoundDType):
    simple_types = (F32, I32)


def test_compound_dtype_subclass():
    p = Planar()
    assert isinstance(p, DType) and isinstance(p, sw.CompoundDType)
    assert p.is_compound() and not p.is_simple() and not p.is_category()
    assert p.simple_types == (F32, I32)
    with pytest.raises(TypeError):
        Planar(1)
    with pytest.raises(TypeError):
        sw.CompoundDType()


@pytest.mark.parametrize("planes,exc", [((DType.Floating,), TypeError), ((F32, 3), TypeError),
                                        (None, TypeError), ((), ValueError)])
def test_compound_dtype_rejects_bad_planes(planes, exc):
    class Bad(sw.CompoundDType):
        simple_types = planes

    with pytest.raises(exc, match="simple_types"):
        Bad()


def test_compound_dtype_name_survives_class_rename():
    # The compound's name pointer borrowed the class's tp_name, freed when
    # the class is renamed; the grad error message then read freed memory.
    out = snippet_stdout("""
        import gc, sys
        from strideweave import CPU, DType, Layout, Shape, Stride, Tensor, CompoundDType
        from strideweave.core import Subtensor, TensorRepresentation
        C = type("".join(["Cmp", "q" * 40]), (CompoundDType,), {"simple_types": (DType.Float32,)})
        rep = TensorRepresentation(C(), [Subtensor(DType.Float32, CPU(2), 0, Layout(Shape(2), Stride(1)))], [])
        t = Tensor._from_representation(rep)
        C.__name__ = "".join(["Renamed", "z" * 40])
        C.__qualname__ = "Q"
        gc.collect()
        filler = ["".join(["y", str(i)]) * 20 for i in range(1000)]
        try:
            t.grad
        except RuntimeError as e:
            print(str(e).encode("ascii", "backslashreplace").decode())
    """, dev=True)
    assert "Renamed" + "z" * 40 in out and "not differentiable" in out
