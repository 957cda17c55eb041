"""The Tensor object: construction (positional and keyword), its members,
reads and writes through the carrier, mutability, differentiability and
grad access, repr, weak references and collection."""
import gc
import weakref

import pytest

import strideweave as sw
from strideweave import CPU, DType, Generic, Layout, Shape, Stride, Tensor

from support.process import snippet_stdout


F32, I32 = DType.Float32, DType.Int32


def lay(*extents):
    return Layout.canonical(Shape(*extents))


def test_tensor_positional_and_keyword_forms_keep_identity():
    c, layout = CPU(8), Layout(Shape(2, 3), Stride(1, 2))
    for t in (Tensor(c, 1, layout), Tensor(carrier=c, offset=1, layout=layout), Tensor(c, layout=layout, offset=1)):
        assert t.carrier is c and t.offset == 1 and t.layout is layout
        assert t.size() == 6 and t.dtype() is F32


@pytest.mark.parametrize("args,exc,fragment", [
    ((5, 0, lay(2)), TypeError, "Carrier"),
    ((CPU(2), 0, (2,)), TypeError, "Layout"),
    ((CPU(2), 0, Shape(2)), TypeError, "Layout"),
    ((CPU(2), -1, lay(2)), ValueError, "offset must be non-negative"),
    ((CPU(2), -2**70, lay(2)), ValueError, "offset must be non-negative"),
    ((CPU(2), 1, lay(2)), ValueError, "exceeds carrier size"),
    ((CPU(2), 2**70, lay(2)), ValueError, "exceeds carrier size"),
    ((CPU(2), 2**62, lay(2)), ValueError, "exceeds carrier size"),
    ((CPU(2), 1.0, lay(2)), TypeError, "offset"),
    ((CPU(2), True, lay(2)), TypeError, "offset"),
])
def test_tensor_construction_errors(args, exc, fragment):
    with pytest.raises(exc, match=fragment):
        Tensor(*args)


def test_tensor_span_fits_exactly_and_released_carrier_is_too_small():
    c = CPU(7)
    assert Tensor(c, 1, Layout(Shape(2, 3), Stride(1, 2))).offset == 1  # 1 + cosize 6 == 7
    c.release()
    with pytest.raises(ValueError, match="exceeds carrier size"):
        Tensor(c, 0, lay(1))


def test_tensor_reads_return_python_scalars_and_writes_go_through_the_carrier():
    c = CPU(4)
    t = Tensor(c, 1, lay(3))
    t[(1,)] = 2
    assert c[2] == 2.0 and type(t[1]) is float
    assert t.version == c.version == 1
    i = Tensor(CPU(2, dtype=I32), 0, lay(2))
    i[0] = 5
    assert type(i[0]) is int and i[0] == 5
    b = Tensor(CPU(1, dtype=DType.Bool), 0, lay(1))
    b[0] = True
    assert b[0] is True
    obj = object()
    a = Tensor(Generic([obj], dtype=DType.Any), 0, lay(1))
    assert a[0] is obj


def test_tensor_is_mutable_follows_public_mutability():
    assert Tensor(CPU(1), 0, lay(1)).is_mutable()
    assert not Tensor(CPU(1, mutable=False), 0, lay(1)).is_mutable()
    c = CPU(1)
    t = Tensor(c, 0, lay(1))
    token = c._claim_ownership()
    assert not t.is_mutable()
    c._begin_owner_access(token)
    assert t.is_mutable()
    c._end_owner_access(token)
    c._relinquish_ownership(token)
    assert t.is_mutable()


@pytest.mark.parametrize("make,diff", [
    (lambda: CPU(1), True), (lambda: Generic([1.0]), True), (lambda: Generic([1.0], dtype=F32), True),
    (lambda: CPU(1, dtype=I32), False), (lambda: CPU(1, dtype=DType.Bool), False),
    (lambda: Generic([1], dtype=DType.Any), False)])
def test_is_differentiable_and_grad_access(make, diff):
    t = Tensor(make(), 0, lay(1))
    assert t.is_differentiable() is diff
    assert t.autograd_ctx is None
    if diff:
        assert t.grad is None
    else:
        with pytest.raises(RuntimeError):
            t.grad


def test_tensor_carrier_offset_layout_read_only():
    t = Tensor(CPU(2), 0, lay(2))
    for name, value in (("carrier", CPU(2)), ("offset", 1), ("layout", lay(2)), ("version", 3)):
        with pytest.raises(AttributeError):
            setattr(t, name, value)


def test_tensor_repr():
    r = repr(Tensor(CPU(8), 1, Layout(Shape(2, 3), Stride(1, 2))))
    assert r.startswith("Tensor(") and "CPU" in r and "offset=1" in r
    assert "Layout<Shape<(2, 3)>, Stride<(1, 2)>>" in r and "DType.Float32" in r


def test_tensor_weakref_and_cycle_collection():
    g = Generic([None], dtype=DType.Any)
    t = Tensor(g, 0, lay(1))
    t[0] = t  # tensor -> carrier -> tensor
    ref = weakref.ref(t)
    assert ref() is t
    del t, g
    gc.collect()
    assert ref() is None


def test_graph_collected_after_backward():
    x = Tensor(CPU(2), 0, lay(2))
    y = sw.reduce_sum(sw.mul(x, x))
    refs = [weakref.ref(y), weakref.ref(y.autograd_ctx), weakref.ref(y.autograd_ctx.inputs()[0].autograd_ctx)]
    y.backward()
    del y
    gc.collect()
    assert [r() for r in refs] == [None, None, None]
    assert x.grad is not None


# ------------------------------------------------------------ Python subclasses of Tensor


def test_tensor_subclass_dealloc_keeps_type_refcount():
    # Tensor_dealloc dropped the heap subclass's type reference a second time
    # (subtype_dealloc already does it), so the class soon died under live code.
    snippet_stdout("""
        import sys
        from strideweave import CPU, Layout, Shape, Stride, Tensor
        class T(Tensor): pass
        c = CPU(4)
        l = Layout(Shape(2), Stride(1))
        before = sys.getrefcount(T)
        for _ in range(50):
            t = T(c, 0, l)
            del t
        assert sys.getrefcount(T) == before, (before, sys.getrefcount(T))
    """, dev=True)


def test_tensor_subclass_traverse_visits_type_once():
    # subtype_traverse visits the heap type already; a second visit from the
    # static base's tp_traverse under-counts the type's references in the GC.
    class T(Tensor):
        pass

    t = T(CPU(2), 0, Layout(Shape(2), Stride(1)))
    assert [r for r in gc.get_referents(t) if r is T] == [T]
