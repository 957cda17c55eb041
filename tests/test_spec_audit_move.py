"""Conformance audit of the movement half of spec interop-movement: scenario
clauses the tests in test_move*.py assert only in part (see
docs/spec_coverage_interop.md for the full map)."""
import typing

import pytest

import strideweave as sw
from support.builders import F32, I32, canonical, cpu_tensor, layout, slots, values
from support.carriers import DstCPU, SrcCPU
from support.moves import WAIT


def _state(c):
    return (c.version, c.is_released(), c.is_owned(), slots(c))


# ------------------------------------------------ Reject an unusable destination before copying

def _released():
    d = sw.CPU(3)
    d.release()
    return d


@pytest.mark.parametrize("make_dest, exc, fragment", [
    (_released, RuntimeError, "released"),
    (lambda: sw.CPU(3, mutable=False), RuntimeError, "mutable"),
    (lambda: sw.CPU(3, dtype=I32), TypeError, "dtype must match"),
    (None, ValueError, "own carrier"),
    (lambda: sw.CPU(2), ValueError, "too small"),
    (lambda: sw.Generic([0.5, 0.5], dtype=F32, mutable=False), RuntimeError, "mutable"),
], ids=["released", "immutable", "dtype", "own-carrier", "too-small", "immutable-generic"])
@pytest.mark.parametrize("call", [sw.move, sw.move_async], ids=["move", "move_async"])
def test_an_unusable_destination_modifies_and_releases_neither_carrier(make_dest, exc, fragment, call):
    t = cpu_tensor([1.0, 2.0, 3.0])
    dest = t.carrier if make_dest is None else make_dest()
    before_src, before_dst = _state(t.carrier), _state(dest)
    with sw.profile() as p:
        with pytest.raises(exc, match=fragment):
            call(t, dest)
    assert _state(t.carrier) == before_src and _state(dest) == before_dst
    assert t.autograd_ctx is None
    assert [e for e in p.events() if e.name.startswith("move.")] == []  # nothing was submitted
    assert values(sw.move(t, sw.CPU(3))) == [1.0, 2.0, 3.0]  # the source is still usable


def test_a_source_owned_by_an_evictable_cannot_be_moved_directly():
    primary = sw.CPU(2)
    primary[0], primary[1] = 1.0, 2.0
    ev = sw.Evictable(primary, sw.FileBacked(dtype=F32))
    t = sw.Tensor(primary, 0, canonical([2]))
    dest = sw.CPU(2)
    with pytest.raises(RuntimeError, match="owned"):
        sw.move(t, dest)
    # The owned-source row precedes the destination rows of the table.
    with pytest.raises(RuntimeError, match="owned"):
        sw.move(t, "not a carrier")
    assert not primary.is_released() and primary.is_owned() and not ev.is_evicted()
    assert slots(dest) == [0.0, 0.0] and not dest.is_owned()


def test_batched_movement_allocates_nothing():
    t = cpu_tensor([1.0, 2.0])
    empty = sw.FileBacked(dtype=F32)
    for args in [([t], empty), (t, [empty]), ((t,), (empty,))]:
        with pytest.raises(TypeError):
            sw.move_async(*args)
        with pytest.raises(TypeError):
            sw.move(*args)
    assert empty.size() == 0 and not empty.is_owned()
    assert not t.carrier.is_released() and not t.carrier.is_owned()


# ------------------------------------------------ move is move_async(...).wait()

def test_move_and_move_async_publish_the_same_result_shape():
    lay = layout([2, [2, 2]], [1, [2, 4]])
    results = []
    for how in ("move", "move_async"):
        t = cpu_tensor([float(i) for i in range(8)], lay)
        dest = sw.FileBacked(dtype=F32)
        out = sw.move(t, dest) if how == "move" else sw.move_async(t, dest).wait(timeout=WAIT)
        assert out.carrier is dest and out.offset == 0 and out.layout is lay
        assert dest.size() == lay.cosize
        assert t.carrier.is_released()
        assert type(out.autograd_ctx) is sw.CpuToFileBackedMoveOperation
        results.append(values(out))
    assert results[0] == results[1] == [float(i) for i in range(8)]


# ------------------------------------------------ the registry's scoped form

def test_a_scoped_registration_registers_on_entry_and_reraises_the_same_exception():
    class Op(sw.ElementwiseMoveOperation):
        pass

    cm = sw.registered_move_operation(SrcCPU, DstCPU, Op)
    assert sw.dispatch_move(SrcCPU, DstCPU) is sw.ElementwiseMoveOperation  # not entered yet
    boom = LookupError("from the body")
    with pytest.raises(LookupError) as e:
        with cm as yielded:
            assert yielded is Op and sw.dispatch_move(SrcCPU, DstCPU) is Op
            raise boom
    assert e.value is boom
    assert sw.dispatch_move(SrcCPU, DstCPU) is sw.ElementwiseMoveOperation
    with pytest.raises(KeyError):
        sw.unregister_move_operation(SrcCPU, DstCPU)


# ------------------------------------------------ autograd boundary

def test_a_non_injective_cotangent_message_requires_an_injective_gradient_layout():
    x = cpu_tensor([1.0, 2.0])
    y = sw.move(x, sw.FileBacked(dtype=F32))
    with pytest.raises(ValueError, match="injective gradient Layout"):
        y.autograd_ctx.backward(cpu_tensor([1.0], layout([2], [0])))
    assert x.grad is None


def test_a_cotangent_of_any_carrier_class_reaches_the_source_class():
    x = cpu_tensor([1.0, 2.0])
    y = sw.move(x, sw.FileBacked(dtype=F32))
    y.backward(cpu_tensor([3.0, 4.0]))  # a CPU cotangent for a FileBacked result
    assert type(x.grad.carrier) is sw.CPU and values(x.grad) == [3.0, 4.0]
    assert x.grad.autograd_ctx is None


# ------------------------------------------------ AwaitResult[T]

def test_await_types_are_subscriptable_as_the_spec_writes_them():
    alias = sw.AwaitMove[sw.Tensor]
    assert typing.get_origin(alias) is sw.AwaitMove and typing.get_args(alias) == (sw.Tensor,)
    assert typing.get_origin(sw.AwaitResult[sw.Tensor]) is sw.AwaitResult

    def submit(t: sw.Tensor, d: sw.Carrier) -> "sw.AwaitMove[sw.Tensor]":
        return sw.move_async(t, d)

    assert typing.get_type_hints(submit)["return"] == sw.AwaitMove[sw.Tensor]
    h = submit(cpu_tensor([1.0]), sw.CPU(1))
    assert isinstance(h, sw.AwaitMove) and isinstance(h, sw.AwaitResult)
    assert values(h.wait(timeout=WAIT)) == [1.0]
    assert not hasattr(h, "__await__")
