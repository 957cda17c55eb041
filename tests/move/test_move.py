"""move / move_async: relocation, validation order, routes and the copy hook
(spec: interop-movement, "move relocates values ..." onwards; API.md 8)."""
import pytest

import strideweave as sw
import strideweave.carriers.move as cm

from support.builders import F32, I32, canonical, cpu_tensor, layout, slots, values
from support.carriers import DstCPU, ReleasingListCarrier, SrcCPU
from support.extension import RouteLog, define, fresh, list_storage, route, tensor_of
from support.moves import WAIT


# ------------------------------------------------------------ import paths

def test_names_are_reachable_under_every_path():
    for name in ["move", "move_async", "AwaitResult", "AwaitMove", "MoveOperation",
                 "ElementwiseMoveOperation", "CpuToFileBackedMoveOperation",
                 "FileBackedToCpuMoveOperation"]:
        assert getattr(sw, name) is getattr(cm, name)
    for name in ["dispatch_move", "register_move_operation", "unregister_move_operation",
                 "registered_move_operation"]:
        assert callable(getattr(cm, name))
    assert sw.move is cm.move
    assert issubclass(sw.MoveOperation, sw.Operation)
    assert issubclass(sw.AwaitMove, sw.AwaitResult)


# ------------------------------------------------------------ Requirement: move relocates values

def test_move_and_release_the_source():
    lay = layout([2, [2, 2]], [1, [2, 4]])
    t = cpu_tensor([float(i) for i in range(8)], lay)
    src = t.carrier
    dest = sw.CPU(8, empty=True)
    out = sw.move(t, dest)
    assert out.carrier is dest
    assert out.offset == 0
    assert out.layout is t.layout
    assert values(out) == [float(i) for i in range(8)]
    assert src.is_released()
    assert not dest.is_released() and not dest.is_owned()


def test_move_is_move_async_wait():
    t = cpu_tensor([1.0, 2.0])
    h = sw.move_async(t, sw.CPU(2))
    assert isinstance(h, sw.AwaitMove)
    out = h.wait(timeout=WAIT)
    assert values(out) == [1.0, 2.0]
    assert h.wait(timeout=WAIT) is out


def test_allocate_an_empty_destination():
    lay = layout([2, 3], [1, 4])  # cosize 10 with holes
    t = cpu_tensor([float(i) for i in range(10)], lay)
    fb = sw.FileBacked(dtype=F32)
    assert fb.size() == 0
    out = sw.move(t, fb)
    assert fb.size() == lay.cosize == 10
    assert out.layout is lay
    assert values(out) == [0.0, 1.0, 4.0, 5.0, 8.0, 9.0]
    # Generic grows too.
    g_src = sw.Tensor(sw.Generic([1.0, 2.0, 3.0]), 0, canonical([3]))
    g_dst = sw.Generic([])
    out2 = sw.move(g_src, g_dst)
    assert g_dst.size() == 3 and values(out2) == [1.0, 2.0, 3.0]


def test_move_a_broadcast_view_without_materializing_it():
    lay = layout([2, 3], [1, 0])
    assert lay.size == 6 and lay.cosize == 2
    t = cpu_tensor([7.0, 8.0], lay)
    dest = sw.CPU(2)
    out = sw.move(t, dest)
    assert dest.size() == 2
    assert out.layout == lay and out.layout is lay
    assert values(out) == [7.0, 8.0] * 3
    fb = sw.FileBacked(dtype=F32)
    out_fb = sw.move(out, fb)
    assert fb.size() == 2 and values(out_fb) == [7.0, 8.0] * 3


def test_move_honours_the_source_offset():
    t = cpu_tensor([3.0, 4.0, 5.0], offset=4, size=9)
    out = sw.move(t, sw.CPU(3))
    assert values(out) == [3.0, 4.0, 5.0]
    fb_out = sw.move(out, sw.FileBacked(dtype=F32))
    # A source offset inside a file: move FileBacked -> CPU from a window.
    c = sw.FileBacked(dtype=F32)
    sw.move(cpu_tensor([9.0, 1.0, 2.0, 3.0]), c)
    window = sw.Tensor(c, 1, canonical([3]))
    back = sw.move(window, sw.CPU(3))
    assert values(back) == [1.0, 2.0, 3.0]
    assert values(fb_out) == [3.0, 4.0, 5.0]


def test_larger_destination_keeps_extra_slots():
    t = cpu_tensor([1.0, 2.0])
    dest = sw.CPU(5)
    for i in range(5):
        dest[i] = 9.0
    out = sw.move(t, dest)
    assert values(out) == [1.0, 2.0]
    assert slots(dest)[2:] == [9.0, 9.0, 9.0]


def test_moves_are_not_writes():
    t = cpu_tensor([1.0, 2.0])
    dest = sw.CPU(2)
    dest[0] = 5.0
    v_dst, v_src = dest.version, t.carrier.version
    out = sw.move(t, dest)
    assert dest.version == v_dst
    assert t.carrier.version == v_src
    assert out.version == v_dst


@pytest.mark.parametrize("dtype, vals", [(F32, [1.5, -2.25, 3.0]), (I32, [1, -2, 2**31 - 1])])
def test_round_trip_through_a_file_keeps_values(dtype, vals):
    t = cpu_tensor(vals, dtype=dtype)
    fb = sw.FileBacked(dtype=dtype)
    mid = sw.move(t, fb)
    assert values(mid) == vals
    back = sw.move(mid, sw.CPU(3, dtype=dtype))
    assert values(back) == vals
    assert fb.is_released()


# ------------------------------------------------------------ validation order

def test_reject_an_unusable_destination_before_copying():
    def fresh():
        return cpu_tensor([1.0, 2.0, 3.0])

    # released
    t, d = fresh(), sw.CPU(3)
    d.release()
    with pytest.raises(RuntimeError, match="released"):
        sw.move(t, d)
    assert not t.carrier.is_released() and not t.carrier.is_owned()
    # immutable
    t, d = fresh(), sw.CPU(3, mutable=False)
    with pytest.raises(RuntimeError, match="mutable"):
        sw.move(t, d)
    assert slots(d) == [0.0, 0.0, 0.0]
    # another dtype
    t, d = fresh(), sw.CPU(3, dtype=I32)
    with pytest.raises(TypeError, match="dtype must match"):
        sw.move(t, d)
    # the tensor's own carrier
    t = fresh()
    with pytest.raises(ValueError, match="own carrier"):
        sw.move(t, t.carrier)
    # too small (a fixed-size carrier cannot allocate)
    t, d = fresh(), sw.CPU(2)
    with pytest.raises(ValueError, match="too small"):
        sw.move(t, d)
    # too small and empty but cannot allocate (CPU has a fixed size)
    t, d = fresh(), sw.CPU(0)
    with pytest.raises(ValueError, match="too small"):
        sw.move(t, d)
    assert d.size() == 0 and not d.is_owned()
    # neither carrier was modified or released by any of these
    assert values(t) == [1.0, 2.0, 3.0]
    assert t.carrier.version == fresh().carrier.version
    assert not t.carrier.is_released() and not t.carrier.is_owned()
    assert d.version == 0 and not d.is_released()


def test_non_empty_file_destination_too_small():
    fb = sw.FileBacked(dtype=F32)
    sw.move(cpu_tensor([1.0]), fb)
    with pytest.raises(ValueError, match="too small"):
        sw.move(cpu_tensor([1.0, 2.0]), fb)
    assert fb.size() == 1


def test_tensor_must_be_a_tensor():
    with pytest.raises(TypeError, match="Tensor"):
        sw.move([1.0], sw.CPU(1))
    with pytest.raises(TypeError):
        sw.move_async(sw.CPU(1), sw.CPU(1))


def test_source_released_or_owned():
    t = cpu_tensor([1.0])
    t.carrier.release()
    with pytest.raises(RuntimeError, match="released"):
        sw.move(t, sw.CPU(1))
    t = cpu_tensor([1.0])
    token = t.carrier._claim_ownership()
    try:
        with pytest.raises(RuntimeError, match="owned") as e:
            sw.move(t, sw.CPU(1))
        assert "cannot be moved directly" in str(e.value)
    finally:
        t.carrier._relinquish_ownership(token)
    assert values(sw.move(t, sw.CPU(1))) == [1.0]


def test_destination_must_be_a_carrier_instance():
    t = cpu_tensor([1.0])
    for bad in [None, 3, sw.CPU, [sw.CPU(1)]]:
        with pytest.raises(TypeError, match="Carrier instance"):
            sw.move_async(t, bad)
    assert not t.carrier.is_owned() and not t.carrier.is_released()


def test_owned_destination_is_not_mutable():
    t = cpu_tensor([1.0])
    d = sw.CPU(1)
    token = d._claim_ownership()
    try:
        with pytest.raises(RuntimeError, match="mutable"):
            sw.move(t, d)
    finally:
        d._relinquish_ownership(token)


def test_validation_order():
    """Each row of the spec's table wins over every later row."""
    rel_src = cpu_tensor([1.0])
    rel_src.carrier.release()
    released_dest = sw.CPU(1)
    released_dest.release()
    # not a Tensor beats a bad destination
    with pytest.raises(TypeError, match="Tensor"):
        sw.move("x", "y")
    # source released beats a non-Carrier destination
    with pytest.raises(RuntimeError, match="released"):
        sw.move(rel_src, "y")
    # source owned beats a non-Carrier destination
    t = cpu_tensor([1.0])
    tok = t.carrier._claim_ownership()
    with pytest.raises(RuntimeError, match="owned"):
        sw.move(t, "y")
    t.carrier._relinquish_ownership(tok)
    # not a Carrier beats everything about the destination
    with pytest.raises(TypeError, match="Carrier instance"):
        sw.move(t, 1.5)
    # own carrier (a released-looking check would come later)
    with pytest.raises(ValueError, match="own carrier"):
        sw.move(t, t.carrier)
    # released destination beats immutability, dtype and size
    with pytest.raises(RuntimeError, match="released"):
        sw.move(t, released_dest)
    # immutable beats dtype and size
    with pytest.raises(RuntimeError, match="mutable"):
        sw.move(t, sw.CPU(0, dtype=I32, mutable=False))
    # dtype beats the pin check and the size
    with sw.registered_move_operation(sw.CPU, DstCPU, sw.CpuToFileBackedMoveOperation):
        with pytest.raises(TypeError, match="dtype must match"):
            sw.move(t, DstCPU(0, dtype=I32))
        # the pin check beats the size check
        with pytest.raises(TypeError, match="CpuToFileBackedMoveOperation"):
            sw.move(t, DstCPU(0))
    with pytest.raises(ValueError, match="too small"):
        sw.move(cpu_tensor([1.0, 2.0]), DstCPU(1))


def test_multi_subtensor_tensor_is_rejected_first():
    from strideweave.core import Subtensor, TensorRepresentation

    class Pair(sw.CompoundDType):
        simple_types = (F32, F32)

    lay = canonical([2])
    a, b = sw.CPU(2), sw.CPU(2)
    rep = TensorRepresentation(Pair(), [Subtensor(F32, a, 0, lay), Subtensor(F32, b, 0, lay)], [lay])
    t = sw.Tensor._from_representation(rep)
    for fn in (sw.move, sw.move_async):
        with pytest.raises(NotImplementedError, match="Multi-subtensor Tensor move"):
            fn(t, "not even a carrier")
    assert a.version == b.version == 0
    assert not a.is_released() and not b.is_released() and not a.is_owned()


# ------------------------------------------------------------ Requirement: move_async validates one request

def test_initiate_one_move():
    t = cpu_tensor([1.0, 2.0, 3.0])
    h = sw.move_async(t, sw.CPU(3))
    assert type(h) is sw.AwaitMove
    out = h.wait(timeout=WAIT)
    assert h.done
    assert values(out) == [1.0, 2.0, 3.0]


def test_reject_batched_movement():
    t1, t2 = cpu_tensor([1.0]), cpu_tensor([2.0])
    d1, d2 = sw.CPU(1), sw.CPU(1)
    before = [c.version for c in (t1.carrier, t2.carrier, d1, d2)]
    for args in [([t1, t2], [d1, d2]), ((t1,), d1), (t1, [d1]), (t1, (d1, d2))]:
        with pytest.raises(TypeError):
            sw.move_async(*args)
    for c, v in zip((t1.carrier, t2.carrier, d1, d2), before):
        assert not c.is_released() and not c.is_owned() and c.version == v
    assert d1[0] == 0.0 and d2[0] == 0.0


# ------------------------------------------------------------ Requirement: exact-pair dispatch

class CountingBulk(sw.MoveOperation):
    calls = []

    def _copy(self, tensor, destination, output, element_count):
        type(self).calls.append((type(tensor.carrier), type(destination), element_count))
        for i in range(output.size()):
            output[i] = tensor[i]


def test_select_a_registered_bulk_operation():
    # The legacy built-in bulk pairs are selected for their exact classes.
    assert sw.dispatch_move(sw.CPU, sw.FileBacked) is sw.CpuToFileBackedMoveOperation
    assert sw.dispatch_move(sw.FileBacked, sw.CPU) is sw.FileBackedToCpuMoveOperation
    t = cpu_tensor([1.0, 2.0])
    with sw.profile() as p:
        out = sw.move(t, sw.FileBacked(dtype=F32))
    impls = {e.implementation_type for e in p.events() if e.name.startswith("move.")}
    assert impls == {sw.CpuToFileBackedMoveOperation}
    assert type(out.autograd_ctx) is sw.CpuToFileBackedMoveOperation
    # A registered user operation prepares the move for its exact pair.
    CountingBulk.calls.clear()
    with sw.registered_move_operation(SrcCPU, DstCPU, CountingBulk):
        src = SrcCPU(3)
        for i in range(3):
            src[i] = float(i)
        out = sw.move(sw.Tensor(src, 0, canonical([3])), DstCPU(3))
    assert CountingBulk.calls == [(SrcCPU, DstCPU, 3)]
    assert values(out) == [0.0, 1.0, 2.0]


def test_fall_back_for_an_unregistered_pair():
    assert sw.dispatch_move(sw.CPU, sw.CPU) is sw.ElementwiseMoveOperation
    assert sw.dispatch_move(sw.CPU, sw.Generic) is sw.ElementwiseMoveOperation
    lay = layout([2, 2], [1, 3])  # holes at 2
    t = cpu_tensor([1.0, 2.0, 99.0, 3.0, 4.0], lay)
    g = sw.Generic([0.5] * 5, dtype=F32)
    out = sw.move(t, g)
    assert type(out.autograd_ctx) is sw.ElementwiseMoveOperation
    assert values(out) == [1.0, 2.0, 3.0, 4.0]
    assert g[2] == 0.5  # the fallback leaves holes as they were
    back = sw.move(out, sw.CPU(5))
    assert values(back) == [1.0, 2.0, 3.0, 4.0]


def test_do_not_inherit_a_registration():
    class SubFile(sw.FileBacked):
        pass

    class SubCPU(sw.CPU):
        pass

    assert sw.dispatch_move(SubCPU, sw.FileBacked) is sw.ElementwiseMoveOperation
    assert sw.dispatch_move(sw.CPU, SubFile) is sw.ElementwiseMoveOperation
    src = SubCPU(2)
    src[0], src[1] = 1.0, 2.0
    out = sw.move(sw.Tensor(src, 0, canonical([2])), sw.FileBacked(dtype=F32))
    assert type(out.autograd_ctx) is sw.ElementwiseMoveOperation
    out2 = sw.move(cpu_tensor([3.0]), SubFile(dtype=F32))
    assert type(out2.autograd_ctx) is sw.ElementwiseMoveOperation
    assert values(out) == [1.0, 2.0] and values(out2) == [3.0]


# ------------------------------------------------------------ Requirement: the copy hook

def test_run_a_custom_copy():
    seen = []

    class Doubling(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            seen.append((tensor, destination, output, element_count, sw.is_grad_enabled(),
                         destination.is_mutable(), output.carrier is destination))
            for i in range(output.size()):
                output[i] = 2 * tensor[i]

    lay = layout([2, 2], [1, 3])  # size 4, cosize 5
    t = cpu_tensor([1.0, 2.0, 0.0, 3.0, 4.0], lay)
    d = sw.CPU(5)
    with sw.registered_move_operation(sw.CPU, sw.CPU, Doubling):
        out = sw.move(t, d)
    [(tensor, destination, output, count, grad, mutable, bound)] = seen
    assert tensor is t and destination is d and output is out
    assert count == lay.cosize == 5
    assert grad is False and mutable is True and bound
    assert values(out) == [2.0, 4.0, 6.0, 8.0]
    assert d.version == 0  # hook writes do not count: a move is not a write
    assert t.carrier.is_released()


def test_copy_hook_must_return_none():
    class Bad(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            return 1

    t = cpu_tensor([1.0])
    with sw.registered_move_operation(SrcCPU, sw.CPU, Bad):
        src = SrcCPU(1)
        with pytest.raises(TypeError, match="must return None"):
            sw.move(sw.Tensor(src, 0, canonical([1])), sw.CPU(1))
        assert not src.is_released() and not src.is_owned()
    assert not t.carrier.is_released()


def test_base_move_operation_has_no_copy():
    with sw.registered_move_operation(SrcCPU, sw.CPU, sw.MoveOperation):
        src = SrcCPU(1)
        h = sw.move_async(sw.Tensor(src, 0, canonical([1])), sw.CPU(1))
        with pytest.raises(NotImplementedError, match="_copy"):
            h.wait(timeout=WAIT)
        assert not src.is_released()


def test_hook_exception_leaves_source_live():
    class Boom(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            output[0] = 42.0
            raise OSError("disk on fire")

    t = cpu_tensor([1.0, 2.0])
    d = sw.CPU(2)
    with sw.registered_move_operation(sw.CPU, sw.CPU, Boom):
        with pytest.raises(OSError, match="disk on fire"):
            sw.move(t, d)
    assert not t.carrier.is_released() and not t.carrier.is_owned()
    assert values(t) == [1.0, 2.0]
    assert not d.is_owned() and d.is_mutable() and d.version == 0
    d[0] = 1.0  # usable again


# ------------------------------------------------------------ Requirement: pins

def test_reject_a_mismatched_carrier_class():
    g = sw.Generic([1.0, 2.0], dtype=F32)
    t = sw.Tensor(g, 0, canonical([2]))
    with sw.registered_move_operation(sw.Generic, sw.FileBacked, sw.CpuToFileBackedMoveOperation):
        with pytest.raises(TypeError, match="CpuToFileBackedMoveOperation") as e:
            sw.move(t, sw.FileBacked(dtype=F32))
    assert "CPU" in str(e.value)
    assert not g.is_released() and not g.is_owned()
    # Invoked directly through forward on a pinned operation.
    with pytest.raises(TypeError, match="CPU"):
        sw.CpuToFileBackedMoveOperation().forward(t, sw.FileBacked(dtype=F32))
    assert not g.is_released()
    # Destination pin.
    with pytest.raises(TypeError, match="FileBacked"):
        sw.CpuToFileBackedMoveOperation().forward(cpu_tensor([1.0]), sw.CPU(1))


def test_pins_and_unpinned_defaults():
    assert sw.CpuToFileBackedMoveOperation.source_class is sw.CPU
    assert sw.CpuToFileBackedMoveOperation.destination_class is sw.FileBacked
    assert sw.FileBackedToCpuMoveOperation.source_class is sw.FileBacked
    assert sw.FileBackedToCpuMoveOperation.destination_class is sw.CPU
    assert sw.MoveOperation.source_class is None
    assert sw.ElementwiseMoveOperation.destination_class is None

    class PinnedToSrc(sw.ElementwiseMoveOperation):
        source_class = SrcCPU

    with sw.registered_move_operation(SrcCPU, sw.CPU, PinnedToSrc):
        src = SrcCPU(1)
        out = sw.move(sw.Tensor(src, 0, canonical([1])), sw.CPU(1))
    assert type(out.autograd_ctx) is PinnedToSrc


def test_forward_performs_one_move_per_instance():
    op = sw.ElementwiseMoveOperation()
    out = op.forward(cpu_tensor([5.0]), sw.CPU(1))
    assert values(out) == [5.0]
    assert out.autograd_ctx is op
    with pytest.raises(RuntimeError, match="new operation"):
        op.forward(cpu_tensor([1.0]), sw.CPU(1))


def test_builtin_copy_is_callable_from_a_subclass_hook():
    class Logged(sw.CpuToFileBackedMoveOperation):
        log = []

        def _copy(self, tensor, destination, output, element_count):
            type(self).log.append(element_count)
            super()._copy(tensor, destination, output, element_count)

    fb = sw.FileBacked(dtype=F32)
    op = Logged()
    out = op.forward(cpu_tensor([1.0, 2.0]), fb)
    assert Logged.log == [2] and values(out) == [1.0, 2.0]


def test_python_carriers_move_through_their_hooks():
    dest = ReleasingListCarrier([0.0] * 3, cast=float)
    out = sw.move(cpu_tensor([1.0, 2.0, 3.0]), dest)
    assert dest.vals == [1.0, 2.0, 3.0] and values(out) == [1.0, 2.0, 3.0]
    assert dest.version == 0
    src = ReleasingListCarrier([4.0, 5.0], cast=float)
    back = sw.move(sw.Tensor(src, 0, canonical([2])), sw.CPU(2))
    assert values(back) == [4.0, 5.0]
    assert src.is_released() and src.released == 1
    # An empty Python carrier cannot allocate.
    with pytest.raises(ValueError, match="too small"):
        sw.move(cpu_tensor([1.0]), ReleasingListCarrier([], cast=float))


# ------------------------------------------------------------ validation order of the destination


def test_an_empty_destination_that_cannot_allocate_fails_validation_before_any_route_work():
    """The last row of the validation table fails before a route is
    prepared (API.md 10: prepare runs after all validation) and before
    anything is submitted, so no move.submit is recorded either."""
    log = RouteLog()
    Host = fresh("TooSmallHost")
    define(Host, list_storage(), route(Host, sw.CPU, "host-to-cpu", log))
    t = tensor_of(Host, [1.0, 2.0])
    dest = sw.CPU(0)
    with sw.no_grad(), sw.profile() as p:
        with pytest.raises(ValueError, match="too small"):
            sw.move_async(t, dest)
    assert log.prepared == [] and log.submitted == []
    assert p.events() == []
    assert not t.carrier.is_released() and not t.carrier.is_owned()
    assert dest.size() == 0 and not dest.is_owned()
    # The same check for a built-in source: no failed submission event.
    with sw.profile() as p:
        with pytest.raises(ValueError, match="too small"):
            sw.move(cpu_tensor([1.0, 2.0]), sw.CPU(0))
    assert p.events() == []


def test_too_small_wins_over_a_missing_reverse_route():
    """Reverse-route capture is not a validation row: an empty fixed-size
    destination is reported as too small even when the differentiable move
    would have no reverse route."""
    log = RouteLog()
    Host = fresh("OneWayHost")
    define(Host, list_storage(), route(Host, sw.CPU, "one-way", log))  # no CPU -> Host route
    t = tensor_of(Host, [1.0])
    assert sw.is_grad_enabled()
    with pytest.raises(ValueError, match="too small"):
        sw.move_async(t, sw.CPU(0))
    with pytest.raises(NotImplementedError):
        sw.move_async(t, sw.CPU(1))
    assert log.prepared == []


# ------------------------------------------------------------ unusable destinations, Evictable-owned sources, batched movement, one result shape


def _state(c):
    return (c.version, c.is_released(), c.is_owned(), slots(c))


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


def test_a_destination_write_during_the_source_release_keeps_its_version_bump():
    # The destination is given back before the source is released (the
    # ordering contract), so a Python release hook lets another thread write
    # it; the commit restored both versions only afterwards, erasing that
    # public write's version bump (autograd would miss the modification).
    import threading

    in_release = threading.Event()
    proceed = threading.Event()

    class ReleaseHookCPU(sw.CPU):
        def _release(self):
            if threading.current_thread() is not threading.main_thread():
                in_release.set()
                assert proceed.wait(WAIT)
            return super()._release()

    t = sw.Tensor(ReleaseHookCPU(4, dtype=F32), 0, sw.Layout.canonical(sw.Shape([4])))
    dest = sw.CPU(4, dtype=F32)
    h = sw.move_async(t, dest)
    try:
        assert in_release.wait(WAIT)
        assert not h.done
        dest[0] = 7.0
        assert dest.version == 1
    finally:
        proceed.set()
    out = h.wait(timeout=WAIT)
    assert out.carrier is dest
    assert dest[0] == 7.0
    assert dest.version == 1
