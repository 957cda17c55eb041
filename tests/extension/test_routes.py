"""Carrier extension: moves through exact definition-owned routes (spec:
"Move routes are exact and definition-owned", "Move dispatches on the exact
carrier class pair", "Move registration is explicit, validated, and
process-global", "move_async validates one movement request", "Move
submission is eager ...", "One asynchronous move publishes at one terminal
boundary", "Move participates in autograd ...", "Profiling distinguishes
submission from completion"; API.md 8, 9, 10).
"""
import gc
import threading
import time
import weakref

import pytest

import strideweave as sw
from strideweave.carriers import extension as ext, move as move_api

from support.builders import F32, I32, slots, values
from support.extension import (
    HeldCompletion, RouteLog, define, family, fresh, list_storage, packed_storage, route, tensor_of,
)
from support.moves import WAIT


def canonical(n):
    return sw.Layout.canonical(sw.Shape([n]))


def route_ids(log):
    return [rid for rid, _ in log.prepared]


def assert_intact(c, vals):
    """A source after a failed or refused move: live, unowned, writable,
    its values unchanged."""
    assert not c.is_released() and not c.is_owned() and c.is_mutable()
    assert slots(c)[:len(vals)] == vals


def settle(pred):
    deadline = time.monotonic() + WAIT
    while not pred():
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(0.005)


# ------------------------------------------------------------ exact routes

def test_resolve_an_exact_custom_route():
    """A definition-backed source prepares its own route to the exact
    destination class, not one declared for a parent or sibling class."""
    log = RouteLog()
    Host, Packed = fresh("HostSlots"), fresh("PackedSlots")
    SubHost, Sibling = fresh("SubHostSlots", Host), fresh("SiblingSlots", Host)
    SubPacked = fresh("SubPackedSlots", Packed)
    define(Host, list_storage(), route(Host, Packed, "host-to-packed", log),
           route(Host, SubPacked, "host-to-subpacked", log))
    define(SubHost, list_storage(), route(SubHost, Packed, "subhost-to-packed", log))
    define(Sibling, list_storage(), route(Sibling, Packed, "sibling-to-packed", log))
    define(Packed, packed_storage())
    define(SubPacked, packed_storage())
    with sw.no_grad():
        for src_cls, dst_cls, expected in [(SubHost, Packed, "subhost-to-packed"),
                                           (Host, SubPacked, "host-to-subpacked"),
                                           (Host, Packed, "host-to-packed"),
                                           (Sibling, Packed, "sibling-to-packed")]:
            log.prepared.clear()
            t = tensor_of(src_cls, [1.0, 2.0])
            y = sw.move(t, dst_cls(2, dtype=F32))
            assert route_ids(log) == [expected]
            assert type(y.carrier) is dst_cls and values(y) == [1.0, 2.0]
            assert t.carrier.is_released()


def test_refuse_inherited_transfer_support():
    """A subclass without its own route for a pair its parent supports does
    not get the parent's route."""
    Host, Packed, log, _ = family()
    SubHost = define(fresh("SubHostSlots", Host), list_storage())  # a definition, no routes
    with sw.no_grad():
        with pytest.raises(NotImplementedError) as info:
            sw.move_async(tensor_of(SubHost, [1.0]), Packed(1, dtype=F32))
    assert "SubHostSlots" in str(info.value) and "PackedSlots" in str(info.value)
    assert log.prepared == []


def test_do_not_inherit_a_registration():
    """The parent's route is not selected when a subclass is the source or
    the destination; with fallback permitted the elementwise operation runs
    instead. (A subclass needs its own definition to be built at all,
    API.md 8, so each subclass here has one without routes.)"""
    Host, Packed, log, _ = family(host_fallback=True, packed_fallback=True)
    SubHost = define(fresh("SubHostSlots", Host), list_storage(fallback=True))
    SubPacked = define(fresh("SubPackedSlots", Packed), packed_storage(fallback=True))
    for src_cls, dst_cls in [(SubHost, Packed), (Host, SubPacked)]:
        t = tensor_of(src_cls, [1.0, 2.0])
        with sw.profile() as p:
            y = sw.move(t, dst_cls(2, dtype=F32))  # grad mode on: the reverse pair falls back too
        assert values(y) == [1.0, 2.0] and type(y.carrier) is dst_cls
        assert type(y.autograd_ctx) is sw.ElementwiseMoveOperation
        submit = [e for e in p.events() if e.name == "move.submit"]
        assert [e.implementation_type for e in submit] == [sw.ElementwiseMoveOperation]
    assert log.prepared == []


def test_select_a_registered_bulk_operation():
    """The exact route prepares the move and receives the whole physical
    span: a gapped layout at an offset moves its holes too."""
    Host, Packed, log, _ = family()
    lay = sw.Layout(sw.Shape([2, 2]), sw.Stride([1, 3]))  # cosize 5, slots 2 (and 5, 6, 7) are holes
    t = tensor_of(Host, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], layout=lay, offset=1, size=8)
    dst = Packed(0, dtype=F32)  # empty: allocated to the cosize through the provider
    with sw.no_grad():
        y = sw.move(t, dst)
    (rid, request), = log.prepared
    assert rid == "host-to-packed"
    assert request.tensor is t and request.destination is dst
    assert request.source_class is Host and request.destination_class is Packed
    assert request.dtype is F32 and request.layout == lay and request.physical_span == lay.cosize == 5
    assert log.submitted == ["host-to-packed"]
    assert slots(dst) == [1.0, 2.0, 3.0, 4.0, 5.0]  # the hole at slot 2 travelled too
    assert y.layout == lay and y.offset == 0 and values(y) == [1.0, 2.0, 4.0, 5.0]


def test_initiate_one_move_through_a_route():
    """An inline route (submit() returns None) commits before move_async
    returns: the handle is already done, the source released exactly once."""
    Host, Packed, log, slog = family()
    t = tensor_of(Host, [1.0, 2.0])
    d = Packed(2, dtype=F32)
    with sw.no_grad():
        h = sw.move_async(t, d)
    assert isinstance(h, sw.AwaitMove) and h.done
    y = h.wait(timeout=WAIT)
    assert y.carrier is d and values(y) == [1.0, 2.0]
    assert t.carrier.is_released() and slog.releases == [t.carrier]
    assert d.version == 0 and not d.is_owned() and d.is_mutable()


# ------------------------------------------------------------ fallback permission

@pytest.mark.parametrize("host_fb,packed_fb", [(True, True), (True, False), (False, True), (False, False)])
def test_fall_back_for_an_unregistered_pair(host_fb, packed_fb):
    """Without a route, ElementwiseMoveOperation copies logical values only
    when both exact definitions permit it; otherwise NotImplementedError
    naming both classes, before allocation."""
    Host, Packed, log, slog = family(host_fallback=host_fb, packed_fallback=packed_fb, host_to_packed=False)
    t = tensor_of(Host, [1.0, 2.0])
    d = Packed(0, dtype=F32)
    slog.allocations.clear()
    with sw.no_grad():
        if host_fb and packed_fb:
            y = sw.move(t, d)
            assert values(y) == [1.0, 2.0] and d.size() == 2
            assert t.carrier.is_released()
        else:
            with pytest.raises(NotImplementedError) as info:
                sw.move_async(t, d)
            assert "HostSlots" in str(info.value) and "PackedSlots" in str(info.value)
            assert d.size() == 0 and slog.allocations == []  # nothing allocated
            assert_intact(t.carrier, [1.0, 2.0])
    assert log.prepared == []


@pytest.mark.parametrize("fb", [True, False])
def test_mixed_pairs_follow_the_defined_side(fb):
    """A definition-free partner (CPU) keeps its legacy contract, so a pair
    with it falls back exactly when the definition-backed side permits."""
    Host = define(fresh("HostSlots"), list_storage(fallback=fb))
    with sw.no_grad():
        for src, dst in [(tensor_of(Host, [1.0, 2.0]), sw.CPU(2)),
                         (sw.Tensor(sw.CPU(2), 0, canonical(2)), Host(2, dtype=F32))]:
            src.carrier[0], src.carrier[1] = 1.0, 2.0
            if fb:
                assert values(sw.move(src, dst)) == [1.0, 2.0]
            else:
                with pytest.raises(NotImplementedError, match="HostSlots"):
                    sw.move_async(src, dst)
                assert_intact(src.carrier, [1.0, 2.0])


def test_unsupported_applies_the_permitted_fallback():
    Host, Packed, log, _ = family(host_fallback=True, packed_fallback=True, unsupported="needs 64-byte alignment")
    t = tensor_of(Host, [1.0, 2.0, 3.0])
    with sw.no_grad(), sw.profile() as p:
        y = sw.move(t, Packed(3, dtype=F32))
    assert route_ids(log) == ["host-to-packed"] and log.submitted == []
    assert values(y) == [1.0, 2.0, 3.0] and t.carrier.is_released()
    submit = [e for e in p.events() if e.name == "move.submit"]
    assert [e.implementation_type for e in submit] == [sw.ElementwiseMoveOperation]


@pytest.mark.parametrize("host_fb,packed_fb", [(False, False), (True, False), (False, True)])
def test_unsupported_without_fallback_raises_before_submission(host_fb, packed_fb):
    Host, Packed, log, slog = family(host_fallback=host_fb, packed_fallback=packed_fb,
                                     unsupported="needs 64-byte alignment")
    t = tensor_of(Host, [1.0, 2.0])
    d = Packed(0, dtype=F32)
    slog.allocations.clear()
    with sw.no_grad():
        with pytest.raises(NotImplementedError, match="needs 64-byte alignment"):
            sw.move_async(t, d)
    assert log.submitted == [] and slog.allocations == [] and d.size() == 0
    assert_intact(t.carrier, [1.0, 2.0])
    assert not d.is_owned() and d.is_mutable()


def test_an_explicit_route_operation_never_falls_back():
    Host, Packed, log, _ = family(host_fallback=True, packed_fallback=True, unsupported="declined")
    t = tensor_of(Host, [1.0])
    with sw.no_grad():
        y = sw.move(t, Packed(1, dtype=F32))  # falls back: the route declined
    assert values(y) == [1.0]
    # The route's own operation class performs only its route.
    route_cls = next(c for c in sw._core._TransferRouteMoveOperation.__subclasses__()
                     if c.route_id == "host-to-packed" and c.source_class is Host)
    t2 = tensor_of(Host, [2.0])
    with sw.no_grad():
        with pytest.raises(NotImplementedError, match="declined"):
            route_cls().forward(t2, Packed(1, dtype=F32))
    assert_intact(t2.carrier, [2.0])


def test_route_operation_pins_its_exact_pair():
    Host, Packed, log, _ = family()
    route_cls = next(c for c in sw._core._TransferRouteMoveOperation.__subclasses__()
                     if c.route_id == "host-to-packed" and c.source_class is Host)
    assert route_cls.destination_class is Packed and route_cls.route.route_id == "host-to-packed"
    t = sw.Tensor(sw.CPU(1), 0, canonical(1))
    with pytest.raises(TypeError, match="HostSlots"):
        route_cls().forward(t, Packed(1, dtype=F32))
    assert log.prepared == [] and not t.carrier.is_released()


# ------------------------------------------------------------ prepare

class Boom(Exception):
    pass


def test_prepare_exceptions_propagate_from_move_async():
    err = Boom("no device")
    Host, Packed, log, slog = family(prepare_error=err)
    t = tensor_of(Host, [1.0])
    with sw.no_grad():
        with pytest.raises(Boom) as info:
            sw.move_async(t, Packed(1, dtype=F32))
    assert info.value is err and log.submitted == []
    assert_intact(t.carrier, [1.0])


def test_prepare_must_return_a_prepared_transfer_or_unsupported():
    log = RouteLog()
    Host, Packed = fresh("HostSlots"), fresh("PackedSlots")
    define(Host, list_storage(), ext.TransferRoute(Host, Packed, "sloppy", ext.TransferProvider(lambda r: None)))
    define(Packed, packed_storage())
    t = tensor_of(Host, [1.0])
    with sw.no_grad():
        with pytest.raises(TypeError, match="PreparedTransfer or Unsupported"):
            sw.move_async(t, Packed(1, dtype=F32))
    assert_intact(t.carrier, [1.0]) and log.prepared == []


@pytest.mark.parametrize("make_dest,exc,fragment", [
    (lambda P: P(2, dtype=I32), TypeError, "dtype must match"),
    (lambda P: P(2, dtype=F32, mutable=False), RuntimeError, "mutable"),
    (lambda P: P(1, dtype=F32), ValueError, "too small"),
    (lambda P: (lambda d: (d.release(), d)[1])(P(2, dtype=F32)), RuntimeError, "released"),
])
def test_prepare_runs_after_validation(make_dest, exc, fragment):
    Host, Packed, log, _ = family()
    t = tensor_of(Host, [1.0, 2.0])
    with sw.no_grad():
        with pytest.raises(exc, match=fragment):
            sw.move_async(t, make_dest(Packed))
    assert log.prepared == []
    assert_intact(t.carrier, [1.0, 2.0])


def test_grad_mode_is_off_inside_prepare_submit_and_wait():
    held = HeldCompletion()
    held.event.set()
    Host, Packed, log, _ = family(result=lambda r: held)
    t = tensor_of(Host, [1.0, 2.0])
    assert sw.is_grad_enabled()
    y = sw.move(t, Packed(2, dtype=F32))  # differentiable: the reverse route exists
    assert log.grad_modes == [("prepare", False), ("submit", False)]
    assert held.grad_modes == [False]
    assert sw.is_grad_enabled() and y.autograd_ctx is not None


def test_submit_runs_on_the_calling_thread_with_owner_access():
    seen = []

    def result(request):
        src, dst = request.tensor.carrier, request.destination
        seen.append((threading.get_ident(), src.is_owned(), dst.is_owned(), dst.is_mutable(), src.is_released()))
        return None

    Host, Packed, log, _ = family(result=result)
    t = tensor_of(Host, [1.0])
    with sw.no_grad():
        sw.move(t, Packed(1, dtype=F32))
    assert seen == [(threading.get_ident(), True, True, True, False)]


# ------------------------------------------------------------ asynchronous completion

def test_return_while_a_device_copy_is_pending():
    """submit() returns a ProviderCompletion: move_async returns an
    incomplete handle at once; a worker waits on the completion and then
    performs the terminal commit."""
    held = HeldCompletion()
    Host, Packed, log, slog = family(result=lambda r: held)
    t = tensor_of(Host, [1.0, 2.0])
    d = Packed(2, dtype=F32)
    with sw.no_grad():
        h = sw.move_async(t, d)
    assert not h.done and log.submitted == ["host-to-packed"]
    src = t.carrier
    # Pending: nothing published, the source is not released, both carriers
    # are owned by the move (writes fail, reads continue).
    settle(lambda: held.wait_threads)
    assert held.wait_threads[0] != threading.get_ident()
    assert not src.is_released() and src.is_owned() and d.is_owned() and slog.releases == []
    with pytest.raises(RuntimeError):
        src[0] = 5.0
    with pytest.raises(RuntimeError):
        src.release()
    assert src[0] == 1.0
    held.event.set()
    y = h.wait(timeout=WAIT)
    assert h.done and y.carrier is d and values(y) == [1.0, 2.0]
    assert src.is_released() and slog.releases == [src]
    assert not d.is_owned() and d.is_mutable()


def test_wait_for_a_route_move_more_than_once():
    held = HeldCompletion()
    Host, Packed, _, _ = family(result=lambda r: held)
    with sw.no_grad():
        h = sw.move_async(tensor_of(Host, [1.0]), Packed(1, dtype=F32))
    results = []
    threads = [threading.Thread(target=lambda: results.append(h.wait(timeout=WAIT))) for _ in range(2)]
    for th in threads:
        th.start()
    held.event.set()
    for th in threads:
        th.join(WAIT)
    assert len(results) == 2 and results[0] is results[1] is h.wait(timeout=WAIT)


def test_fail_one_asynchronous_move():
    """A completion whose wait() raises: the source stays live and unchanged,
    nothing is published, every wait() raises the same recorded exception."""
    err = OSError(5, "device lost")
    held = HeldCompletion(error=err)
    Host, Packed, _, slog = family(result=lambda r: held)
    t = tensor_of(Host, [1.0, 2.0])
    d = Packed(2, dtype=F32)
    with sw.no_grad():
        h = sw.move_async(t, d)
    held.event.set()
    with pytest.raises(OSError) as first:
        h.wait(timeout=WAIT)
    with pytest.raises(OSError) as second:
        h.wait(timeout=WAIT)
    assert first.value is second.value is err
    assert len(held.wait_threads) == 1  # the completion was waited on once
    assert_intact(t.carrier, [1.0, 2.0])
    assert slog.releases == [] and not d.is_owned() and d.is_mutable()
    assert t.carrier.version == 2 and d.version == 0


def test_a_raising_submit_is_the_handle_failure():
    err = Boom("enqueue failed")

    def result(request):
        raise err

    Host, Packed, _, slog = family(result=result)
    t = tensor_of(Host, [1.0])
    with sw.no_grad():
        h = sw.move_async(t, Packed(1, dtype=F32))
    assert h.done
    for _ in range(2):
        with pytest.raises(Boom) as info:
            h.wait(timeout=WAIT)
        assert info.value is err
    assert_intact(t.carrier, [1.0]) and slog.releases == []


class NotBoolDone:
    done = 1

    def wait(self):
        return None


class NoWait:
    done = False


class WaitNotCallable:
    done = False
    wait = None


class Awaitable(ext.ProviderCompletion):
    done = True

    def wait(self):
        return None

    def __await__(self):
        yield


@pytest.mark.parametrize("bad", [42, "done", NotBoolDone(), NoWait(), WaitNotCallable(), Awaitable(),
                                 ext.ProviderCompletion()],
                         ids=["int", "str", "non-bool-done", "no-wait", "wait-not-callable", "has-await",
                              "bare-base"])
def test_wrong_submit_results_are_recorded_as_type_error(bad):
    Host, Packed, _, slog = family(result=lambda r: bad)
    t = tensor_of(Host, [1.0])
    with sw.no_grad():
        h = sw.move_async(t, Packed(1, dtype=F32))
    with pytest.raises(TypeError, match="ProviderCompletion"):
        h.wait(timeout=WAIT)
    assert_intact(t.carrier, [1.0]) and slog.releases == []


def test_a_completion_wait_must_return_none():
    class Returns(ext.ProviderCompletion):
        done = True

        def wait(self):
            return "finished"

    Host, Packed, _, _ = family(result=lambda r: Returns())
    t = tensor_of(Host, [1.0])
    with sw.no_grad():
        h = sw.move_async(t, Packed(1, dtype=F32))
    with pytest.raises(TypeError, match="must return None"):
        h.wait(timeout=WAIT)
    assert_intact(t.carrier, [1.0])


def test_drop_a_pending_handle():
    """Dropping the handle neither blocks nor cancels: the move still
    commits once the completion finishes."""
    held = HeldCompletion()
    Host, Packed, _, slog = family(result=lambda r: held)
    t = tensor_of(Host, [1.0, 2.0])
    d = Packed(2, dtype=F32)
    with sw.no_grad():
        sw.move_async(t, d)  # the handle is dropped at once
    gc.collect()
    assert not t.carrier.is_released() and t.carrier.is_owned()
    held.event.set()
    settle(lambda: t.carrier.is_released())
    settle(lambda: not d.is_owned())
    assert slog.releases == [t.carrier] and slots(d) == [1.0, 2.0]


# ------------------------------------------------------------ autograd

def test_reject_a_differentiable_one_way_route_early():
    """Grad mode on and a differentiable source: the move needs a permitted
    exact reverse route, checked before prepare or submit runs."""
    Host, Packed, log, _ = family(packed_to_host=False)
    t = tensor_of(Host, [1.0, 2.0])
    with pytest.raises(NotImplementedError) as info:
        sw.move_async(t, Packed(2, dtype=F32))
    assert "PackedSlots" in str(info.value) and "HostSlots" in str(info.value)
    assert log.prepared == [] and log.submitted == []
    assert_intact(t.carrier, [1.0, 2.0])
    # No graph, no reverse route needed: without grad mode, or for Int32.
    with sw.no_grad():
        assert values(sw.move(t, Packed(2, dtype=F32))) == [1.0, 2.0]
    assert values(sw.move(tensor_of(Host, [3, 4], dtype=I32), Packed(2, dtype=I32))) == [3, 4]


def test_move_a_gradient_back_through_the_reverse_route():
    """Backward waits for the captured reverse route (here completing
    through a ProviderCompletion) and returns a detached gradient in fresh
    storage of the source's exact class."""
    log = RouteLog()
    Host, Packed = fresh("HostSlots"), fresh("PackedSlots")
    held = HeldCompletion()
    held.event.set()
    define(Host, list_storage(), route(Host, Packed, "host-to-packed", log))
    define(Packed, packed_storage(), route(Packed, Host, "packed-to-host", log, result=lambda r: held))
    x = tensor_of(Host, [1.0, 2.0, 3.0])
    y = sw.move(x, Packed(3, dtype=F32))
    node = y.autograd_ctx
    assert type(node).route_id == "host-to-packed" and node.inputs() == (x,)
    assert isinstance(node, sw.MoveOperation)
    g = tensor_of(Packed, [10.0, 20.0, 30.0])
    y.backward(g)
    assert route_ids(log) == ["host-to-packed", "packed-to-host"]
    assert held.wait_threads  # backward waited on the reverse completion
    assert type(x.grad.carrier) is Host and values(x.grad) == [10.0, 20.0, 30.0]
    assert x.grad.autograd_ctx is None and x.grad.carrier is not x.carrier
    assert not g.carrier.is_released()  # the caller's cotangent is untouched
    assert values(g) == [10.0, 20.0, 30.0]


def test_a_failed_reverse_route_fails_backward():
    err = Boom("reverse lost")
    log = RouteLog()
    Host, Packed = fresh("HostSlots"), fresh("PackedSlots")
    define(Host, list_storage(), route(Host, Packed, "host-to-packed", log))
    define(Packed, packed_storage(), route(Packed, Host, "packed-to-host", log, prepare_error=err))
    x = tensor_of(Host, [1.0])
    y = sw.move(x, Packed(1, dtype=F32))
    with pytest.raises(Boom) as info:
        y.backward(tensor_of(Packed, [1.0]))
    assert info.value is err and x.grad is None


# ------------------------------------------------------------ legacy registry

@pytest.mark.parametrize("api", ["dispatch_move", "register_move_operation", "unregister_move_operation",
                                 "registered_move_operation"])
@pytest.mark.parametrize("position", ["source", "destination"])
def test_reject_registration_for_a_defined_carrier(api, position):
    """Every legacy registry API naming a definition-backed class raises
    RuntimeError pointing at TransferRoute; the definition's routes still
    serve the pair."""
    Host, Packed, log, _ = family()
    pair = (Host, sw.CPU) if position == "source" else (sw.CPU, Host)
    fn = getattr(move_api, api)
    args = pair + ((sw.ElementwiseMoveOperation,) if api in ("register_move_operation",
                                                            "registered_move_operation") else ())
    with pytest.raises(RuntimeError, match="TransferRoute"):
        fn(*args)
    with pytest.raises(RuntimeError, match="TransferRoute"):  # both classes defined
        fn(Host, Packed, *args[2:])
    with sw.no_grad():
        y = sw.move(tensor_of(Host, [1.0]), Packed(1, dtype=F32))
    assert values(y) == [1.0] and route_ids(log) == ["host-to-packed"]


def test_legacy_argument_checks_come_first():
    Host = define(fresh("HostSlots"), list_storage())
    with pytest.raises(TypeError, match="source_class"):
        sw.register_move_operation(1, Host, sw.ElementwiseMoveOperation)
    with pytest.raises(TypeError, match="operation_class"):
        sw.register_move_operation(Host, sw.CPU, object)


# ------------------------------------------------------------ profiling

def test_profile_an_asynchronous_route_move():
    held = HeldCompletion()
    Host, Packed, _, _ = family(result=lambda r: held)
    with sw.no_grad(), sw.profile(record_shapes=True) as p:
        h = sw.move_async(tensor_of(Host, [1.0, 2.0]), Packed(2, dtype=F32))
        settle(lambda: held.wait_threads)
        # Submission is recorded at once; completion is not yet.
        assert [e.name for e in p.events() if e.name.startswith("move.")] == ["move.submit"]
        held.event.set()
        h.wait(timeout=WAIT)
        h.wait(timeout=WAIT)  # adds nothing
    evs = [e for e in p.events() if e.name.startswith("move.")]
    (submit,) = [e for e in evs if e.name == "move.submit"]
    (complete,) = [e for e in evs if e.name == "move.complete"]
    assert complete.parent_id == submit.id
    assert submit.thread_id == threading.get_ident() and complete.thread_id == held.wait_threads[0]
    assert submit.succeeded and complete.succeeded
    assert submit.carrier_type is Host and complete.carrier_type is Host
    route_cls = submit.implementation_type
    assert complete.implementation_type is route_cls and route_cls.route_id == "host-to-packed"
    assert issubclass(route_cls, sw.MoveOperation)
    assert submit.input_shapes == ((2,),)
    assert complete.start_time_ns + complete.duration_ns >= submit.start_time_ns + submit.duration_ns


def test_profile_an_inline_and_a_failed_route_move():
    err = Boom("late failure")
    held = HeldCompletion(error=err)
    held.event.set()
    results = iter([None, held])
    Host, Packed, _, _ = family(result=lambda r: next(results))
    with sw.no_grad(), sw.profile() as p:
        sw.move(tensor_of(Host, [1.0]), Packed(1, dtype=F32))
        with pytest.raises(Boom):
            sw.move(tensor_of(Host, [1.0]), Packed(1, dtype=F32))
    evs = [e for e in p.events() if e.name.startswith("move.")]
    assert sorted(e.name for e in evs) == ["move.complete", "move.complete", "move.submit", "move.submit"]
    submits = [e for e in evs if e.name == "move.submit"]
    completes = {e.parent_id: e for e in evs if e.name == "move.complete"}
    assert all(s.succeeded for s in submits)
    assert [completes[s.id].succeeded for s in sorted(submits, key=lambda e: e.start_time_ns)] == [True, False]


# ------------------------------------------------------------ participants are claimed while prepare runs; a prepared transfer lives until commit


def _route_family(prepare_hook, result):
    host, packed = type("HardHost", (sw.Carrier,), {}), type("HardPacked", (sw.Carrier,), {})
    from support.extension import list_storage, packed_storage

    def prepare(request):
        held = prepare_hook(request)  # only this closure keeps it

        def submit():
            assert held is not False
            src = request.tensor.carrier
            for i in range(request.physical_span):
                request.destination[i] = src[request.tensor.offset + i]
            return result(request)

        return ext.PreparedTransfer(submit)

    ext.register_carrier_definition(host, ext.CarrierDefinition(
        list_storage(), (ext.TransferRoute(host, packed, "hard-h2p", ext.TransferProvider(prepare)),)))
    ext.register_carrier_definition(packed, ext.CarrierDefinition(packed_storage(), ()))
    return host, packed


def test_participants_are_claimed_while_prepare_runs():
    seen = {}

    def prepare_hook(request):
        src, dst = request.tensor.carrier, request.destination
        seen["owned"] = (src.is_owned(), dst.is_owned())
        for name, c in (("src", src), ("dst", dst)):
            try:
                c[0] = 99.0
                seen[name] = "written"
            except RuntimeError as e:
                seen[name] = str(e)

    Host, Packed = _route_family(prepare_hook, lambda request: None)
    h = Host(2, dtype=F32)
    h[0], h[1] = 1.0, 2.0
    t = sw.Tensor(h, 0, sw.Layout.canonical(sw.Shape([2])))
    with sw.no_grad():
        r = sw.move(t, Packed(2, dtype=F32))
    assert seen["owned"] == (True, True)
    assert "owned" in seen["src"] and "owned" in seen["dst"]
    assert values(r) == [1.0, 2.0]


def test_prepared_transfer_lives_until_terminal_completion():
    class Resource:
        pass

    refs = []
    done = threading.Event()

    class Completion(ext.ProviderCompletion):
        def __init__(self):
            self.done = False

        def wait(self):
            assert done.wait(WAIT)
            self.done = True

    def prepare_hook(request):
        res = Resource()
        refs.append(weakref.ref(res))
        return res

    Host, Packed = _route_family(prepare_hook, lambda request: Completion())
    h = Host(1, dtype=F32)
    h[0] = 3.0
    t = sw.Tensor(h, 0, sw.Layout.canonical(sw.Shape([1])))
    with sw.no_grad():
        handle = sw.move_async(t, Packed(1, dtype=F32))
    gc.collect()
    assert refs[0]() is not None, "the prepared transfer's resources were collected while the move is pending"
    done.set()
    r = handle.wait(timeout=WAIT)
    assert r[0] == 3.0
    del r, handle
    gc.collect()
    assert refs[0]() is None  # dropped after the terminal commit
