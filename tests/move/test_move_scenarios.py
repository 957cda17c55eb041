"""The movement scenarios written black-box from their specification alone:
public API and NumPy, no project test helpers (builders that pre-fill
slots, registered test operations), as a cross-check that the scenario
tests elsewhere did not lean on a helper's convenience for their result."""
import threading

import pytest

import strideweave as sw
from strideweave.carriers import move as move_mod


F32, I32 = sw.DType.Float32, sw.DType.Int32


def cpu(values, dtype=F32, mutable=True):
    c = sw.CPU(len(values), dtype=dtype)
    for i, v in enumerate(values):
        c[i] = v
    return c if mutable else c.new_like(values, mutable=False)


def flat(values, dtype=F32, mutable=True):
    return sw.Tensor(cpu(values, dtype, mutable), 0, sw.Layout(sw.Shape(len(values)), sw.Stride(1)))


def logical(t):
    return [t[i] for i in range(t.size())]


def test_move_and_release_the_source():
    t = flat([1.0, 2.0, 3.0])
    src, dest = t.carrier, sw.CPU(3)
    out = sw.move(t, dest)
    assert out.carrier is dest and out.offset == 0 and out.layout == t.layout
    assert logical(out) == [1.0, 2.0, 3.0] and src.is_released()


def test_allocate_an_empty_destination():
    lay = sw.Layout(sw.Shape(2), sw.Stride(3))  # cosize 4
    t = sw.Tensor(cpu([1.0, 0.0, 0.0, 2.0]), 0, lay)
    dest = sw.FileBacked(dtype=F32)
    out = sw.move(t, dest)
    assert dest.size() == lay.cosize == 4 and logical(out) == [1.0, 2.0]


def test_move_a_broadcast_view_without_materializing_it():
    lay = sw.Layout(sw.Shape(2, 3), sw.Stride(1, 0))
    t = sw.Tensor(cpu([1.0, 2.0]), 0, lay)
    out = sw.move(t, sw.CPU(2))
    assert out.layout == lay and logical(out) == [1.0, 2.0] * 3


@pytest.mark.parametrize("case", ["released", "immutable", "dtype", "own", "small"])
def test_reject_an_unusable_destination_before_copying(case):
    t = flat([1.0, 2.0])
    dest = {"released": sw.CPU(2), "immutable": sw.CPU(2, mutable=False), "dtype": sw.CPU(2, dtype=I32),
            "own": t.carrier, "small": sw.CPU(1)}[case]
    if case == "released":
        dest.release()
    exc = {"released": RuntimeError, "immutable": RuntimeError, "dtype": TypeError, "own": ValueError,
           "small": ValueError}[case]
    with pytest.raises(exc):
        sw.move(t, dest)
    assert not t.carrier.is_released() and logical(t) == [1.0, 2.0] and t.carrier.version == 2


def test_select_a_registered_bulk_operation():
    out = sw.move(flat([1.0]), sw.FileBacked(dtype=F32))
    assert type(out.autograd_ctx) is sw.CpuToFileBackedMoveOperation


def test_fall_back_for_an_unregistered_pair():
    out = sw.move(flat([1.0]), sw.Generic([0.0], dtype=F32))
    assert type(out.autograd_ctx) is sw.ElementwiseMoveOperation


def test_do_not_inherit_a_registration():
    class MyCPU(sw.CPU):
        pass

    assert move_mod.dispatch_move(MyCPU, sw.FileBacked) is sw.ElementwiseMoveOperation


class _Op(sw.MoveOperation):
    counts = []

    def _copy(self, tensor, destination, output, element_count):
        _Op.counts.append(element_count)
        for i in range(output.size()):
            output[i] = tensor[i]


class _A(sw.CPU):
    pass


class _B(sw.CPU):
    pass


def test_register_dispatch_overwrite_remove_and_scope():
    assert move_mod.register_move_operation(_A, _B, _Op) is None
    try:
        assert move_mod.dispatch_move(_A, _B) is _Op
        assert move_mod.dispatch_move(_B, _A) is sw.ElementwiseMoveOperation
        with pytest.raises(ValueError):
            move_mod.register_move_operation(_A, _B, sw.ElementwiseMoveOperation)
        assert move_mod.dispatch_move(_A, _B) is _Op
    finally:
        assert move_mod.unregister_move_operation(_A, _B) is _Op
    with pytest.raises(KeyError):
        move_mod.unregister_move_operation(_A, _B)
    with pytest.raises(ZeroDivisionError):
        with move_mod.registered_move_operation(_A, _B, _Op) as op:
            assert op is _Op and move_mod.dispatch_move(_A, _B) is _Op
            1 / 0
    assert move_mod.dispatch_move(_A, _B) is sw.ElementwiseMoveOperation


def test_run_a_custom_copy():
    _Op.counts.clear()
    src = _A(5)
    for i in range(5):
        src[i] = float(i)
    lay = sw.Layout(sw.Shape(2), sw.Stride(4))  # cosize 5
    with move_mod.registered_move_operation(_A, _B, _Op):
        out = sw.move(sw.Tensor(src, 0, lay), _B(5))
    assert _Op.counts == [5] and logical(out) == [0.0, 4.0]


def test_reject_a_mismatched_carrier_class():
    g = sw.Generic([1.0], dtype=F32)
    with pytest.raises(TypeError):
        sw.CpuToFileBackedMoveOperation().forward(sw.Tensor(g, 0, sw.Layout(sw.Shape(1), sw.Stride(1))),
                                                  sw.FileBacked(dtype=F32))
    assert not g.is_released()


def test_move_a_gradient_back_to_the_source_carrier_class():
    x = flat([1.0, 2.0])
    y = sw.move(x, sw.FileBacked(dtype=F32))
    y.backward(flat([5.0, 6.0]))  # ops run on CPU and Generic only (API.md 6): a direct cotangent
    assert type(x.grad.carrier) is sw.CPU and logical(x.grad) == [5.0, 6.0]
    assert x.grad.autograd_ctx is None


def test_reject_a_non_injective_cotangent():
    y = sw.move(flat([1.0, 2.0]), sw.CPU(2))
    g = sw.Tensor(cpu([1.0]), 0, sw.Layout(sw.Shape(2), sw.Stride(0)))
    with pytest.raises(ValueError, match="injective"):
        y.autograd_ctx.backward(g)


def test_initiate_one_move_and_wait_more_than_once():
    h = sw.move_async(flat([1.0, 2.0]), sw.CPU(2))
    assert isinstance(h, sw.AwaitMove) and isinstance(h, sw.AwaitResult)
    results = []
    threads = [threading.Thread(target=lambda: results.append(h.wait())) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(10)
    assert len(results) == 2 and results[0] is results[1] is h.wait()
    assert h.done is True
    assert not hasattr(h, "__await__")


def test_reject_batched_movement():
    with pytest.raises(TypeError):
        sw.move_async([flat([1.0]), flat([2.0])], [sw.CPU(1), sw.CPU(1)])


def test_fail_one_asynchronous_move():
    class Broken(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            raise OSError("device lost")

    t = sw.Tensor(_A(1), 0, sw.Layout(sw.Shape(1), sw.Stride(1)))
    with move_mod.registered_move_operation(_A, _B, Broken):
        h = sw.move_async(t, _B(1))
        with pytest.raises(OSError) as first:
            h.wait()
        with pytest.raises(OSError) as second:
            h.wait()
    assert first.value is second.value
    assert not t.carrier.is_released() and not t.carrier.is_owned()


def test_profiling_distinguishes_submission_from_completion():
    with sw.profile() as p:
        h = sw.move_async(flat([1.0]), sw.CPU(1))
        h.wait()
        h.wait()
    names = [e.name for e in p.events()]
    assert sorted(names) == ["move.complete", "move.submit"]
    submit = next(e for e in p.events() if e.name == "move.submit")
    complete = next(e for e in p.events() if e.name == "move.complete")
    assert complete.parent_id == submit.id
