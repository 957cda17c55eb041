"""Move across the autograd boundary (spec: "Move participates in autograd
across the carrier boundary"; API.md 8)."""
import pytest

import strideweave as sw

from support.builders import F32, I32, canonical, cpu_tensor, layout, values
from support.moves import WAIT
from support.process import assert_child_ok, run_snippet


def file_tensor(vals, lay=None):
    """A FileBacked Float32 tensor (built without recording a node)."""
    with sw.no_grad():
        return sw.move(cpu_tensor(vals, lay), sw.FileBacked(dtype=F32))


def test_move_records_one_node_with_the_source_as_input():
    x = cpu_tensor([1.0, 2.0])
    v = x.version
    y = sw.move(x, sw.FileBacked(dtype=F32))
    node = y.autograd_ctx
    assert isinstance(node, sw.MoveOperation)
    assert type(node) is sw.CpuToFileBackedMoveOperation
    assert node.inputs() == (x,) and node.inputs()[0] is x
    assert node.input_versions() == (v,)
    assert x.autograd_ctx is None


def test_no_node_without_grad_mode_or_for_non_differentiable_dtypes():
    with sw.no_grad():
        y = sw.move(cpu_tensor([1.0]), sw.CPU(1))
    assert y.autograd_ctx is None
    z = sw.move(cpu_tensor([1, 2], dtype=I32), sw.CPU(2, dtype=I32))
    assert z.autograd_ctx is None


def test_move_a_gradient_back_to_the_source_carrier_class():
    lay = layout([2, 2], [1, 3])  # injective with a hole
    x = cpu_tensor([1.0, 2.0, 0.0, 3.0, 4.0], lay)
    x_carrier = x.carrier
    y = sw.move(x, sw.FileBacked(dtype=F32))
    assert x_carrier.is_released()
    g = file_tensor([10.0, 20.0, 0.0, 30.0, 40.0], lay)
    with sw.profile() as p:
        y.backward(g)
    grad = x.grad
    assert type(grad.carrier) is sw.CPU  # the source carrier's exact class
    assert grad.carrier is not x_carrier and not grad.carrier.is_released()
    assert grad.autograd_ctx is None  # detached
    assert grad.layout == lay  # source layout: it is injective
    assert values(grad) == [10.0, 20.0, 30.0, 40.0]
    # The gradient came back through the captured reverse route, and the
    # caller's cotangent was neither released nor changed.
    impls = [e.implementation_type for e in p.events() if e.name == "move.complete"]
    assert impls == [sw.FileBackedToCpuMoveOperation]
    assert not g.carrier.is_released() and values(g) == [10.0, 20.0, 30.0, 40.0]


def test_gradient_flows_through_ops_and_moves():
    x = cpu_tensor([1.0, 2.0, 3.0])
    z = sw.mul(x, 2.0)
    y = sw.move(z, sw.FileBacked(dtype=F32))
    back = sw.move(y, sw.CPU(3))
    s = sw.reduce_sum(back)
    s.backward()
    assert values(x.grad) == [2.0, 2.0, 2.0]
    assert type(x.grad.carrier) is sw.CPU


def test_reverse_route_is_captured_at_submission():
    x = cpu_tensor([1.0, 2.0])
    y = sw.move(x, sw.FileBacked(dtype=F32))
    assert y.autograd_ctx.inputs() == (x,)
    g = file_tensor([5.0, 6.0])

    class Other(sw.MoveOperation):
        used = False

        def _copy(self, tensor, destination, output, element_count):  # pragma: no cover - must not run
            type(self).used = True

    removed = sw.unregister_move_operation(sw.FileBacked, sw.CPU)
    try:
        sw.register_move_operation(sw.FileBacked, sw.CPU, Other)
        y.backward(g)
    finally:
        sw.unregister_move_operation(sw.FileBacked, sw.CPU)
        sw.register_move_operation(sw.FileBacked, sw.CPU, removed)
    assert not Other.used
    assert values(x.grad) == [5.0, 6.0]


def test_moved_broadcast_view_hands_an_injective_gradient_to_the_broadcast_node():
    x = cpu_tensor([1.0, 2.0], layout([2, 1], [1, 1]))
    b = sw.broadcast_to(x, sw.Shape([2, 3]))
    assert b.layout == layout([2, 3], [1, 0])
    y = sw.move(b, sw.CPU(2))
    assert y.layout == b.layout
    node = y.autograd_ctx
    g = cpu_tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], canonical([2, 3]))
    (direct,) = node.backward(g)
    assert direct.layout == canonical([2, 3])  # canonical: the source is not injective
    assert values(direct) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    y.backward(g, retain_graph=True)
    assert values(x.grad) == [1.0 + 3.0 + 5.0, 2.0 + 4.0 + 6.0]


def test_reject_a_non_injective_cotangent():
    x = cpu_tensor([1.0, 2.0])
    y = sw.move(x, sw.CPU(2))
    node = y.autograd_ctx
    stride0 = cpu_tensor([1.0], layout([2], [0]))
    with pytest.raises(ValueError, match="injective"):
        node.backward(stride0)


def test_backward_cotangent_checks():
    x = cpu_tensor([1.0, 2.0])
    y = sw.move(x, sw.CPU(2))
    node = y.autograd_ctx
    with pytest.raises(TypeError, match="Tensor"):
        node.backward([1.0, 2.0])
    with pytest.raises(ValueError, match="shape"):
        node.backward(cpu_tensor([1.0, 2.0, 3.0]))
    dead = cpu_tensor([1.0, 2.0])
    dead.carrier.release()
    with pytest.raises(RuntimeError, match="released"):
        node.backward(dead)
    with pytest.raises(TypeError):
        node.backward()
    with pytest.raises(TypeError):
        node.backward(cpu_tensor([1.0, 2.0]), cpu_tensor([1.0, 2.0]))
    (ok,) = node.backward(cpu_tensor([3.0, 4.0]))
    assert values(ok) == [3.0, 4.0] and type(ok.carrier) is sw.CPU


def test_backward_of_an_unused_operation():
    with pytest.raises(RuntimeError, match="has not recorded"):
        sw.ElementwiseMoveOperation().backward(cpu_tensor([1.0]))


def test_generic_source_gets_a_generic_gradient():
    x = sw.Tensor(sw.Generic([1.0, 2.0], dtype=F32), 0, canonical([2]))
    y = sw.move(x, sw.CPU(2))
    y.backward(cpu_tensor([7.0, 8.0]))
    assert type(x.grad.carrier) is sw.Generic
    assert values(x.grad) == [7.0, 8.0]


def test_differentiable_move_from_a_worker_wait():
    h = sw.move_async(cpu_tensor([1.0, 2.0]), sw.FileBacked(dtype=F32))
    y = h.wait(timeout=WAIT)
    assert isinstance(y.autograd_ctx, sw.CpuToFileBackedMoveOperation)


@pytest.mark.skipif(not hasattr(sw, "register_carrier_definition"),
                    reason="one-way routes need CarrierDefinition (carrier-extension issue, extension.cpp)")
def test_reject_a_differentiable_one_way_route_early():
    from strideweave.carriers.extension import (CarrierDefinition, PreparedTransfer, StorageProvider,
                                                TransferProvider, TransferRoute)

    submitted = []

    class OneWay(sw.Carrier):
        pass

    def prepare(request):
        return PreparedTransfer(lambda: submitted.append(1))

    store = {}
    storage = StorageProvider(lambda c, d: True, lambda c: len(store.get(id(c), [])),
                              lambda c, n: store.__setitem__(id(c), [0.0] * n), lambda c: None,
                              lambda c, i: store[id(c)][i], lambda c, i, v: None)
    route = TransferRoute(OneWay, sw.CPU, "one-way", TransferProvider(prepare))
    sw.register_carrier_definition(OneWay, CarrierDefinition(storage, (route,)))
    src = OneWay(2, dtype=F32)
    with pytest.raises(NotImplementedError):
        sw.move_async(sw.Tensor(src, 0, canonical([2])), sw.CPU(2))
    assert submitted == []


@pytest.mark.parametrize("dest_factory", [lambda: sw.CPU(4), lambda: sw.FileBacked(dtype=F32),
                                          lambda: sw.Generic([0.0] * 4, dtype=F32)])
def test_backward_relayouts_a_differently_laid_out_cotangent(dest_factory):
    lay = layout([2, 2], [2, 1])  # row-major
    x = cpu_tensor([1.0, 2.0, 3.0, 4.0], lay)
    y = sw.move(x, dest_factory())
    g = cpu_tensor([10.0, 20.0, 30.0, 40.0], canonical([2, 2]))  # column-major, same shape
    (grad,) = y.autograd_ctx.backward(g)
    assert grad.layout == lay and type(grad.carrier) is sw.CPU
    assert values(grad) == [10.0, 20.0, 30.0, 40.0]  # logical order is kept
    assert [grad.carrier[i] for i in range(4)] == [10.0, 30.0, 20.0, 40.0]


def test_backward_reads_the_cotangent_owned_or_not_and_leaves_it_as_it_was():
    """The move node claims the caller's cotangent carrier while it copies
    out of it (so no other thread can release it mid-copy) and gives it back;
    a cotangent whose carrier is already owned is copied all the same."""
    import strideweave as sw

    layout = sw.Layout(sw.Shape(4), sw.Stride(1))
    for pre_owned in (False, True):
        src = sw.CPU(4)
        for i in range(4):
            src[i] = float(i)
        moved = sw.move(sw.Tensor(src, 0, layout), sw.FileBacked(dtype=sw.DType.Float32))
        node = moved.autograd_ctx
        gc_carrier = sw.CPU(4)
        for i in range(4):
            gc_carrier[i] = 10.0 + i
        g = sw.Tensor(gc_carrier, 0, layout)
        token = gc_carrier._claim_ownership() if pre_owned else None
        (grad,) = node.backward(g)
        assert [grad[i] for i in range(4)] == [10.0, 11.0, 12.0, 13.0]
        assert type(grad.carrier) is sw.CPU
        assert gc_carrier.is_owned() is pre_owned
        if token is not None:
            gc_carrier._relinquish_ownership(token)
        assert not gc_carrier.is_released() and gc_carrier.version == 4


# ------------------------------------------------------------ cotangents


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


def test_move_node_dealloc_survives_collector_run_by_a_field_finalizer():
    # The last reference to the destination carrier is the move node's; the
    # carrier's __del__ runs the collector while the node is being freed. A
    # node still tracked then is seen with refcount 0 and freed twice.
    r = run_snippet("""
        import gc
        import strideweave as sw
        F32 = sw.DType.Float32

        class CollectingCPU(sw.CPU):
            def __del__(self):
                gc.collect()

        t = sw.Tensor(sw.CPU(4, dtype=F32), 0, sw.Layout.canonical(sw.Shape([4])))
        dest = CollectingCPU(4, dtype=F32)
        r = sw.move(t, dest)
        op = r.autograd_ctx
        assert type(op) is sw.ElementwiseMoveOperation
        del r, dest
        del op
        print("ok")
    """, dev=True)
    assert_child_ok(r)
    assert r.stdout.strip() == "ok"
