"""Metal: the class, its three registered exact-pair bulk operations and its
DLPack refusal on every platform (API.md 3.2), and the spec's Metal
requirements checked against the fake runtime of the test-only extension
strideweave._testing (install_fake_metal_runtime), which defers every device
copy until synchronize(), logs each call and can fail or hold any step."""
import pytest

import strideweave as sw
from strideweave.carriers import move as move_mod

from support.builders import F32, I32, canonical, cpu_tensor, layout, slots, values
from support.carriers import SrcCPU
from support.moves import WAIT

_core = sw._core
OPS = {
    (sw.CPU, sw.Metal): "CpuToMetalMoveOperation",
    (sw.Metal, sw.CPU): "MetalToCpuMoveOperation",
    (sw.Metal, sw.Metal): "MetalToMetalMoveOperation",
}


class SubMetal(sw.Metal):
    """An exact Metal subclass: it has no registered move edges."""


def metal(vals, dtype=F32):
    m = sw.Metal(len(vals), dtype=dtype)
    for i, v in enumerate(vals):
        m[i] = v
    return m


def steps(log):
    return [e[0] for e in log]


def index(log, step, start=0, **match):
    for i in range(start, len(log)):
        e = log[i]
        if e[0] == step and all(e[{"dst": 1, "src": 2, "bytes": 3}[k]] == v for k, v in match.items()):
            return i
    raise AssertionError(f"{step} {match} not in {log[start:]}")


# ------------------------------------------------------------ without a runtime


@pytest.mark.parametrize("kwargs", [{}, {"dtype": I32}, {"dtype": sw.DType.Bool}, {"empty": True},
                                    {"mutable": False}])
def test_construction_without_a_runtime_requires_macos(kwargs):
    with pytest.raises(RuntimeError, match="Metal requires macOS"):
        sw.Metal(4, **kwargs)
    with pytest.raises(RuntimeError, match="Metal requires macOS"):
        sw.Metal(0)


def test_the_class_and_its_operations_exist_everywhere():
    assert issubclass(sw.Metal, sw.Carrier)
    for (src, dst), name in OPS.items():
        op = getattr(sw, name)
        assert getattr(move_mod, name) is op and getattr(_core, name) is op
        assert name in move_mod.__all__
        assert issubclass(op, sw.MoveOperation)
        assert op.source_class is src and op.destination_class is dst
        assert sw.dispatch_move(src, dst) is op


def test_metal_registrations_are_built_in_and_refuse_duplicates():
    for (src, dst), name in OPS.items():
        with pytest.raises(ValueError, match=src.__name__):
            sw.register_move_operation(src, dst, sw.ElementwiseMoveOperation)
        assert sw.dispatch_move(src, dst) is getattr(sw, name)


def test_registrations_do_not_apply_to_subclasses():
    for src, dst in [(SubMetal, sw.CPU), (sw.CPU, SubMetal), (SrcCPU, sw.Metal), (SubMetal, SubMetal),
                     (sw.Metal, SubMetal), (sw.Metal, sw.FileBacked), (sw.Generic, sw.Metal)]:
        assert sw.dispatch_move(src, dst) is sw.ElementwiseMoveOperation


def test_metal_dlpack_refusal_needs_no_runtime():
    # The refusal is the base hook's: reachable on a never-initialised object.
    m = sw.Metal.__new__(sw.Metal)
    with pytest.raises(BufferError, match="DLPack is not supported"):
        m.dlpack_info()


# ------------------------------------------------------------ the carrier (fake runtime)


def test_metal_carrier_basics(fake):
    m = sw.Metal(3)
    assert m.size() == 3 and m.dtype() == F32 and m.is_mutable()
    assert slots(m) == [0.0, 0.0, 0.0]
    m[1] = 2.5
    assert m.version == 1 and m[1] == 2.5
    i = sw.Metal(2, dtype=I32)
    i[0] = 7
    with pytest.raises(OverflowError):
        i[1] = 2**40
    with pytest.raises(TypeError):
        i[1] = 1.5
    b = sw.Metal(1, dtype=sw.DType.Bool)
    b[0] = True
    assert b[0] is True
    with pytest.raises(RuntimeError, match="not mutable"):
        sw.Metal(1, mutable=False)[0] = 1.0
    with pytest.raises(ValueError, match="non-negative"):
        sw.Metal(-1)
    with pytest.raises(TypeError, match="DType"):
        sw.Metal(1, dtype="float32")
    with pytest.raises(ValueError, match="does not support"):
        sw.Metal(1, dtype=sw.DType.Floating)
    n = m.new_like([1.0, 2.0])
    assert type(n) is sw.Metal and slots(n) == [1.0, 2.0]
    assert type(SubMetal(1).allocate_like(2)) is SubMetal
    m.release()
    assert m.is_released() and m.size() == 0
    assert slots(m.allocate_like(2, dtype=I32)) == [0, 0]  # works on a released receiver


def test_release_synchronizes_then_frees(fake):
    m = sw.Metal(2)
    buf = fake.buffer_id(m)
    m[0] = 1.0  # an enqueued write, still pending
    assert fake.pending() == 1
    fake.clear_log()
    m.release()
    log = fake.log()
    assert index(log, "synchronize") < index(log, "free", dst=buf)
    assert fake.unsafe_frees() == 0 and fake.live_buffers() == 0


def test_an_allocation_failure_raises_runtime_error(fake):
    fake.fail("allocate")
    with pytest.raises(RuntimeError, match="Metal allocation failed"):
        sw.Metal(4)
    assert fake.live_buffers() == 0


# ------------------------------------------------------------ spec scenarios


def test_select_each_metal_bulk_pair(fake):
    """Scenario: Select each Metal bulk pair."""
    src = cpu_tensor([1.0, 2.0, 3.0])
    with sw.profile() as p:
        on_metal = sw.move(src, sw.Metal(0))
        on_metal2 = sw.move(on_metal, sw.Metal(0))
        back = sw.move(on_metal2, sw.CPU(3))
    impls = [e.implementation_type for e in p.events() if e.name == "move.complete"]
    assert impls == [sw.CpuToMetalMoveOperation, sw.MetalToMetalMoveOperation, sw.MetalToCpuMoveOperation]
    assert values(back) == [1.0, 2.0, 3.0]
    # Each ran as one bulk device step over the whole span.
    log = fake.log()
    assert [e[3] for e in log if e[0] in ("copy_to_device", "copy_device", "copy_to_host")] == [12, 12, 12]


def test_an_unregistered_metal_pair_falls_back_elementwise(fake):
    src = cpu_tensor([1.0, 2.0])
    with sw.profile() as p:
        out = sw.move(src, SubMetal(2))
    assert [e.implementation_type for e in p.events() if e.name == "move.complete"] == [
        sw.ElementwiseMoveOperation]
    assert values(out) == [1.0, 2.0]
    # Value by value: one 4-byte device write per element.
    assert [e[3] for e in fake.log() if e[0] == "copy_to_device"] == [4, 4]


def test_move_a_hierarchical_physical_span_to_metal(fake):
    """Scenario: Move a hierarchical physical span to Metal."""
    lay = sw.Layout(sw.Shape([2, [2, 2]]), sw.Stride([1, [3, 7]]))  # nested modes with holes
    n = lay.cosize
    c = sw.CPU(2 + n)
    for i in range(2 + n):
        c[i] = float(100 + i)
    src = sw.Tensor(c, 2, lay)
    expected = values(src)
    span = [c[2 + i] for i in range(n)]  # holes included
    src_version = c.version
    dest = sw.Metal(0)
    out = sw.move(src, dest)
    assert out.carrier is dest and out.offset == 0 and out.layout == lay
    assert dest.size() == n and dest.dtype() == F32  # fresh storage of exactly cosize
    assert values(out) == expected
    assert slots(dest) == span  # the complete physical span, holes too
    assert c.is_released()
    assert dest.version == 0 and c.version == src_version  # not a value write
    log = fake.log()
    assert index(log, "allocate", bytes=4 * n) < index(log, "copy_to_device", bytes=4 * n) < index(
        log, "synchronize")


def test_a_broadcast_layout_stays_a_layout_on_metal(fake):
    lay = layout([2, 3], [1, 0])  # two slots, six coordinates
    src = cpu_tensor([1.0, 2.0], lay)
    out = sw.move(src, sw.Metal(0))
    assert out.layout == lay and out.carrier.size() == 2
    assert values(out) == [1.0, 2.0] * 3
    back = sw.move(out, sw.CPU(2))
    assert back.layout == lay and back.carrier.size() == 2


def test_synchronize_before_host_decode_and_release(fake):
    """Scenario: Synchronize before host decode and release."""
    m = metal([1.0, 2.0, 3.0])  # values arrive through the device queue
    m[1] = 20.0  # pending Metal work
    assert fake.pending() > 0
    buf = fake.buffer_id(m)
    fake.clear_log()
    out = sw.move(sw.Tensor(m, 0, canonical([3])), sw.CPU(3))
    log = fake.log()
    copy = index(log, "copy_to_host", src=buf, bytes=12)
    sync = index(log, "synchronize", copy)
    assert sync < index(log, "free", sync, dst=buf)
    assert all(e[1] != buf for e in log[:sync] if e[0] == "free")
    # The fake runs copies only at synchronize(): the host values show that it
    # completed (pending write included) before they were decoded.
    assert values(out) == [1.0, 20.0, 3.0]
    assert m.is_released() and fake.unsafe_frees() == 0 and fake.pending() == 0


def test_metal_to_metal_releases_the_source_after_synchronizing(fake):
    m = metal([4.0, 5.0])
    buf = fake.buffer_id(m)
    fake.clear_log()
    out = sw.move(sw.Tensor(m, 0, canonical([2])), sw.Metal(0))
    log = fake.log()
    assert index(log, "copy_device", src=buf) < index(log, "synchronize") < index(log, "free", dst=buf)
    assert values(out) == [4.0, 5.0] and fake.unsafe_frees() == 0


def test_the_source_is_released_only_after_completion(fake):
    src = cpu_tensor([1.0, 2.0])
    fake.hold_synchronize(True)
    h = sw.move_async(src, sw.Metal(0))
    try:
        assert fake.wait_synchronizing(WAIT)
        assert not h.done
        assert not src.carrier.is_released() and src.carrier.is_owned()
        assert src[0] == 1.0  # reads continue while pending
    finally:
        fake.hold_synchronize(False)
    out = h.wait(timeout=WAIT)
    assert src.carrier.is_released() and values(out) == [1.0, 2.0]


STEP_NAMES = {"allocate": "allocation", "copy_to_device": "copy to device", "copy_to_host": "copy to host",
              "copy_device": "device copy", "synchronize": "synchronization"}

FAILURES = [
    # (name, build source, destination factory, failing step)
    ("cpu-to-metal allocation", "cpu", lambda: sw.Metal(0), "allocate"),
    ("cpu-to-metal copy", "cpu", lambda: sw.Metal(0), "copy_to_device"),
    ("cpu-to-metal synchronize", "cpu", lambda: sw.Metal(0), "synchronize"),
    ("metal-to-cpu copy", "metal", lambda: sw.CPU(3), "copy_to_host"),
    ("metal-to-cpu synchronize", "metal", lambda: sw.CPU(3), "synchronize"),
    ("metal-to-metal allocation", "metal", lambda: sw.Metal(0), "allocate"),
    ("metal-to-metal copy", "metal", lambda: sw.Metal(0), "copy_device"),
    ("metal-to-metal synchronize", "metal", lambda: sw.Metal(0), "synchronize"),
]


@pytest.mark.parametrize("name,kind,make_dest,step", FAILURES, ids=[f[0] for f in FAILURES])
def test_preserve_the_source_after_failure(fake, name, kind, make_dest, step):
    """Scenario: Preserve the source after failure."""
    if kind == "cpu":
        src = cpu_tensor([1.0, 2.0, 3.0])
    else:
        m = sw.Metal(3)
        sw.move(cpu_tensor([1.0, 2.0, 3.0]), m)  # synchronized: no pending work
        src = sw.Tensor(m, 0, canonical([3]))
    dest = make_dest()
    versions = (src.carrier.version, dest.version)
    fake.fail(step)
    message = f"Metal {STEP_NAMES[step]} failed"
    with pytest.raises(RuntimeError, match=message):
        sw.move_async(src, dest).wait(timeout=WAIT)
    # The source is live, unowned, unchanged and movable; nothing is published.
    assert not src.carrier.is_released() and not src.carrier.is_owned()
    assert values(src) == [1.0, 2.0, 3.0]
    assert (src.carrier.version, dest.version) == versions
    assert not dest.is_owned() and dest.is_mutable()
    assert fake.unsafe_frees() == 0
    again = sw.move(src, make_dest())
    assert values(again) == [1.0, 2.0, 3.0] and src.carrier.is_released()


def test_move_a_gradient_back_from_metal(fake):
    """Scenario: Move a gradient back from Metal."""
    lay = layout([2, 2], [1, 3])  # injective with a hole
    x = cpu_tensor([1.0, 2.0, 0.0, 3.0, 4.0], lay)
    x_carrier = x.carrier
    y = sw.move(x, sw.Metal(0))
    assert type(y.autograd_ctx) is sw.CpuToMetalMoveOperation
    with sw.no_grad():
        g = sw.move(cpu_tensor([10.0, 20.0, 0.0, 30.0, 40.0], lay), sw.Metal(0))
    fake.clear_log()
    with sw.profile() as p:
        y.backward(g)
    grad = x.grad
    assert type(grad.carrier) is sw.CPU and grad.carrier is not x_carrier
    assert not grad.carrier.is_released() and grad.autograd_ctx is None
    assert grad.layout == lay and values(grad) == [10.0, 20.0, 30.0, 40.0]
    assert [e.implementation_type for e in p.events() if e.name == "move.complete"] == [
        sw.MetalToCpuMoveOperation]
    log = fake.log()
    assert index(log, "copy_to_host", bytes=4 * lay.cosize) < index(log, "synchronize", index(
        log, "copy_to_host", bytes=4 * lay.cosize))
    assert not g.carrier.is_released() and values(g) == [10.0, 20.0, 30.0, 40.0]


def test_a_metal_subclass_has_no_reverse_route_for_autograd(fake):
    class Pinned(sw.MoveOperation):
        source_class = SubMetal
        destination_class = sw.Metal

    # (SubMetal -> CPU) falls back elementwise, so a differentiable move works;
    # a pinned operation that cannot reverse is refused before submission.
    with sw.registered_move_operation(sw.CPU, SubMetal, sw.ElementwiseMoveOperation), \
            sw.registered_move_operation(SubMetal, sw.CPU, Pinned):
        x = cpu_tensor([1.0])
        with pytest.raises(NotImplementedError, match="reverse route"):
            sw.move_async(x, SubMetal(1))
        assert not x.carrier.is_released()


def test_reject_metal_dlpack_export(fake):
    """Scenario: Reject Metal DLPack export."""
    m = metal([1.0, 2.0])
    t = sw.Tensor(m, 0, canonical([2]))
    for call in (t.__dlpack__, lambda: t.__dlpack__(max_version=(1, 0)), t.__dlpack_device__, m.dlpack_info):
        with pytest.raises(BufferError, match="DLPack is not supported"):
            call()
    assert not m.is_released()


def test_profile_without_forcing_completion(fake):
    """Scenario: Profile without forcing completion."""
    m = sw.Metal(2)
    fake.clear_log()

    class Launch(sw.Operation):
        def _forward(self, t):
            t.carrier[0] = 5.0  # an asynchronous device write
            return sw.Tensor(t.carrier, t.offset, t.layout)

    with sw.profile() as p:
        Launch().forward(sw.Tensor(m, 0, canonical([2])))
    names = [e.name for e in p.events()]
    assert len(names) == 1 and p.events()[0].succeeded
    # Closing the event did not synchronize: the write is still pending.
    assert "synchronize" not in steps(fake.log())
    assert fake.pending() == 1
    assert m[0] == 5.0  # a host read synchronizes at its own boundary
    assert fake.pending() == 0


def test_profile_an_asynchronous_metal_move(fake):
    """Scenario: Profile an asynchronous Metal move."""
    src = cpu_tensor([1.0, 2.0])
    fake.hold_synchronize(True)
    try:
        with sw.profile() as p:
            h = sw.move_async(src, sw.Metal(0))
            assert fake.wait_synchronizing(WAIT)  # the device event is pending
            assert not h.done
            # Submission is recorded at once; completion is not yet.
            assert [e.name for e in p.events() if e.name.startswith("move.")] == ["move.submit"]
            fake.hold_synchronize(False)
            h.wait(timeout=WAIT)
            h.wait(timeout=WAIT)
    finally:
        fake.hold_synchronize(False)
    evs = [e for e in p.events() if e.name.startswith("move.")]
    assert [e.name for e in evs] == ["move.submit", "move.complete"]
    submit, complete = evs
    assert complete.parent_id == submit.id
    assert submit.implementation_type is complete.implementation_type is sw.CpuToMetalMoveOperation
    # Completion covers the device work through the terminal commit.
    assert complete.start_time_ns + complete.duration_ns >= submit.start_time_ns + submit.duration_ns


# ------------------------------------------------------------ Metal in an Evictable


def test_a_metal_tier_uses_the_metal_bulk_pairs(fake):
    m = metal([1.0, 2.0, 3.0])
    ev = sw.Evictable(m, sw.CPU(3))
    buf = fake.buffer_id(m)
    fake.clear_log()
    ev.evict()
    log = fake.log()
    assert index(log, "copy_to_host", src=buf, bytes=12) < index(log, "synchronize") < index(
        log, "free", dst=buf)
    assert ev.secondary[1] == 2.0 and m.is_released()
    ev.promote()
    assert type(ev.primary) is sw.Metal and slots(ev) == [1.0, 2.0, 3.0]
    assert index(fake.log(), "copy_to_device", bytes=12)
    assert fake.unsafe_frees() == 0


def test_a_failed_metal_promotion_stays_evicted(fake):
    ev = sw.Evictable(metal([1.0, 2.0]), sw.CPU(2))
    ev.evict()
    live = fake.live_buffers()
    for step in ("allocate", "copy_to_device", "synchronize"):
        fake.fail(step)
        with pytest.raises(RuntimeError, match="Metal"):
            ev.promote()
        assert ev.is_evicted() and slots(ev.secondary) == [1.0, 2.0]
        assert fake.live_buffers() == live  # the fresh primary was given back
    ev.promote()
    assert slots(ev) == [1.0, 2.0]


@pytest.mark.parametrize("tiers", [
    lambda: (SubMetal(2), sw.CPU(2)),
    lambda: (sw.CPU(2), SubMetal(2)),
    lambda: (sw.Metal(2), sw.FileBacked(dtype=F32)),
    lambda: (sw.Metal(2), SubMetal(2)),
], ids=["SubMetal-CPU", "CPU-SubMetal", "Metal-FileBacked", "Metal-SubMetal"])
def test_refuse_an_unusable_metal_hierarchy(fake, tiers):
    """Scenario: Refuse an unusable Metal hierarchy."""
    p, s = tiers()
    with pytest.raises(NotImplementedError, match="registered"):
        sw.Evictable(p, s)
    assert not p.is_owned() and not s.is_owned()
    assert not p.is_released() and not s.is_released()


def test_a_registered_edge_makes_a_metal_subclass_hierarchy_usable(fake):
    class Down(sw.ElementwiseMoveOperation):
        pass

    with sw.registered_move_operation(SubMetal, sw.CPU, Down):
        with pytest.raises(NotImplementedError, match=r"\(CPU, SubMetal\)"):
            sw.Evictable(SubMetal(1), sw.CPU(1))

        class Up(sw.ElementwiseMoveOperation):
            pass

        with sw.registered_move_operation(sw.CPU, SubMetal, Up):
            ev = sw.Evictable(SubMetal(1), sw.CPU(1))
            ev.evict()
            ev.promote()
            assert type(ev.primary) is SubMetal


@pytest.mark.parametrize("args,kwargs,exc,fragment", [
    ((-1,), {}, ValueError, "Metal size must be non-negative"),
    ((True,), {}, TypeError, "size must be an int, not bool"),
    (("4",), {}, TypeError, "must be an int"),
    ((4,), {"dtype": "Float32"}, TypeError, "Metal dtype must be a DType.*not str"),
    ((4,), {"dtype": sw.DType.Float64}, ValueError, "Metal does not support dtype DType.Float64"),
    ((4,), {"dtype": sw.DType.Floating}, ValueError, "Metal does not support dtype"),
])
def test_construction_checks_its_arguments_before_requiring_macos(args, kwargs, exc, fragment):
    with pytest.raises(exc, match=fragment):
        sw.Metal(*args, **kwargs)


class ReviewMetal(sw.Metal):
    pass


def test_metal_source_refuses_a_second_move_while_its_release_synchronizes(fake):
    # The terminal commit gives ownership back, then releases the source;
    # Metal's release synchronizes with the GIL released. The move is not
    # complete yet, so another move of the source must fail at initiation.
    class HoldRelease(sw.MetalToCpuMoveOperation):
        source_class = ReviewMetal

        def _copy(self, tensor, destination, output, element_count):
            super()._copy(tensor, destination, output, element_count)
            fake.hold_synchronize(True)  # the next synchronize is the release's

    src = ReviewMetal(4, dtype=F32)
    t = sw.Tensor(src, 0, sw.Layout.canonical(sw.Shape([4])))
    with sw.registered_move_operation(ReviewMetal, sw.CPU, HoldRelease):
        h = sw.move_async(t, sw.CPU(4, dtype=F32))
        try:
            assert fake.wait_synchronizing(WAIT)
            assert not h.done
            with pytest.raises(RuntimeError, match="released|owned"):
                h2 = sw.move_async(t, sw.CPU(4, dtype=F32))
                try:
                    h2.wait(timeout=WAIT)
                except Exception:
                    pass
        finally:
            fake.hold_synchronize(False)
        out = h.wait(timeout=WAIT)
    assert src.is_released()
    assert out.carrier.size() == 4
