"""Regression tests from the C-API / concurrency review of the movement,
await, operation, autograd and profiler bindings. Crashes run in a
subprocess (python -X dev) with a timeout; threads synchronise on events,
every wait bounded."""
from support.process import run_python as shared_run_python


def run_python(code, timeout=60):
    return shared_run_python(code, flags=["-X", "dev"], timeout=timeout)


def test_move_node_dealloc_survives_collector_run_by_a_field_finalizer():
    # The last reference to the destination carrier is the move node's; the
    # carrier's __del__ runs the collector while the node is being freed. A
    # node still tracked then is seen with refcount 0 and freed twice.
    r = run_python("""
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
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_move_keeps_the_profiling_session_alive_while_python_code_runs():
    # move_async looked the session up once, then ran the operation's
    # __init__ before using it; dropping the abandoned profile's last
    # reference there (and letting an operation notice) freed the session.
    r = run_python("""
        import strideweave as sw
        F32 = sw.DType.Float32

        class SrcCPU(sw.CPU):
            pass

        class DstCPU(sw.CPU):
            pass

        x = sw.Tensor(sw.CPU(2, dtype=F32), 0, sw.Layout.canonical(sw.Shape([2])))
        holder = []

        class DropProfile(sw.ElementwiseMoveOperation):
            def __init__(self):
                super().__init__()
                holder.clear()  # the last reference to the entered profile
                sw.add(x, x)    # an operation looks the session up again

        sw.register_move_operation(SrcCPU, DstCPU, DropProfile)
        p = sw.profile()
        p.__enter__()
        holder.append(p)
        del p
        t = sw.Tensor(SrcCPU(4, dtype=F32), 0, sw.Layout.canonical(sw.Shape([4])))
        with sw.no_grad():
            r = sw.move_async(t, DstCPU(4, dtype=F32))
            out = r.wait(timeout=10)
        assert out.carrier.size() == 4
        print("ok")
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


# ------------------------------------------------------------ in-process tests

import pytest  # noqa: E402

import strideweave as sw  # noqa: E402

F32 = sw.DType.Float32
WAIT = 10.0


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


def test_profile_events_survive_events_recorded_by_a_finalizer_during_the_read():
    # Session._events() built each tuple from a reference into the event
    # vector; a collection triggered by that allocation ran a finalizer that
    # recorded events, reallocating the vector under the loop (the moved-
    # from entries then read back with empty names, or worse).
    import gc

    x = sw.Tensor(sw.CPU(2, dtype=F32), 0, sw.Layout.canonical(sw.Shape([2])))
    state = {"stage": 0}

    class Cycle:
        def __init__(self):
            self.me = self

        def __del__(self):
            state["stage"] += 1
            if state["stage"] == 1:
                Cycle()  # garbage for the next collection, inside the loop
            elif state["stage"] == 2:
                for _ in range(40):
                    sw.add(x, x)

    with sw.profile() as p:
        for _ in range(16):  # a full vector (capacity 16)
            sw.add(x, x)
        old = gc.get_threshold()
        gc.collect()
        gc.disable()
        Cycle()
        gc.set_threshold(1)
        gc.enable()
        try:
            raw = p._session._events()
        finally:
            gc.set_threshold(*old)
            gc.collect()
    assert state["stage"] >= 2
    assert len(raw) >= 16
    assert [r[2] for r in raw] == ["add"] * len(raw)
    assert len({r[0] for r in raw}) == len(raw)


def test_evictable_source_refuses_writes_and_moves_while_its_tiers_release():
    # The commit gives the Evictable's ownership back, then releases it; its
    # release runs the tiers' hooks (Python code, so other threads run). The
    # move is not complete: the source must not accept a write or a move.
    import threading

    in_release = threading.Event()
    proceed = threading.Event()

    class ReleaseHookCPU(sw.CPU):
        def _release(self):
            if threading.current_thread() is not threading.main_thread():
                in_release.set()
                assert proceed.wait(WAIT)
            return super()._release()

    ev = sw.Evictable(ReleaseHookCPU(4, dtype=F32), sw.CPU(4, dtype=F32))
    t = sw.Tensor(ev, 0, sw.Layout.canonical(sw.Shape([4])))
    h = sw.move_async(t, sw.CPU(4, dtype=F32))
    try:
        assert in_release.wait(WAIT)
        assert not h.done
        with pytest.raises(RuntimeError, match="released"):
            ev[0] = 5.0
        with pytest.raises(RuntimeError, match="released"):
            sw.move_async(t, sw.CPU(4, dtype=F32))
    finally:
        proceed.set()
    out = h.wait(timeout=WAIT)
    assert ev.is_released()
    assert out.carrier.size() == 4


def test_an_operation_instance_reentered_from_a_hook_performs_one_move():
    # forward() checked `used` early but set it only once the job adopted the
    # instance; a destination's allocate hook in between re-entered forward
    # on the same instance, and the outer commit then rewrote the inner
    # result's node (its input became the outer source: wrong gradients).
    from strideweave.carriers import extension as ext

    L2 = sw.Layout.canonical(sw.Shape([2]))
    op = sw.ElementwiseMoveOperation()
    t_inner = sw.Tensor(sw.CPU(2, dtype=F32), 0, L2)
    seen = {}

    def allocate(c, n):
        c._slots = [0.0] * n
        if n and "inner" not in seen:
            seen["inner"] = None
            try:
                seen["inner"] = op.forward(t_inner, sw.CPU(2, dtype=F32))
            except RuntimeError as e:
                seen["inner"] = e

    storage = ext.StorageProvider(
        supports_dtype=lambda c, d: True,
        physical_size=lambda c: len(c.__dict__.get("_slots", ())),
        allocate=allocate,
        release=lambda c: c.__dict__.update(_slots=[]),
        read=lambda c, i: c._slots[i],
        write=lambda c, i, v: c._slots.__setitem__(i, v),
        elementwise_fallback=True,
    )
    Grows = type("ReviewGrows", (sw.Carrier,), {})
    ext.register_carrier_definition(Grows, ext.CarrierDefinition(storage))
    t_outer = sw.Tensor(sw.CPU(2, dtype=F32), 0, L2)
    out = op.forward(t_outer, Grows(0, dtype=F32))
    assert out.autograd_ctx is op
    assert op.inputs()[0] is t_outer
    assert isinstance(seen["inner"], RuntimeError)
    assert "already performed a move" in str(seen["inner"])
    assert not t_inner.carrier.is_released()


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
