"""The errors of the movement paths whose logic lives in the engine
(csrc/engine/movement, csrc/engine/profiling): the binding translates the
engine's exceptions, so each keeps its Python type and full message."""
import math
import re
import threading

import pytest

import strideweave as sw
from strideweave.carriers.move import register_move_operation, registered_move_operation, unregister_move_operation

from support.builders import F32, cpu_tensor, values
from support.carriers import DstCPU, SrcCPU
from support.moves import Gate, OpA, OpB, held_operation
from support.process import assert_child_ok, run_python


# ------------------------------------------------------------ capacity (submit_policy)

def test_a_too_small_destination_names_both_sizes():
    with pytest.raises(ValueError, match=re.escape(
            "destination CPU carrier is too small: 2 slots for a layout cosize of 3, and only an empty "
            "destination can be allocated")):
        sw.move_async(cpu_tensor([1.0, 2.0, 3.0]), sw.CPU(2, dtype=F32))


def test_an_empty_fixed_size_destination_cannot_allocate():
    with pytest.raises(ValueError, match=re.escape(
            "destination CPU carrier is too small: it is empty and cannot allocate the layout cosize of 3")):
        sw.move(cpu_tensor([1.0, 2.0, 3.0]), sw.CPU(0, dtype=F32))


def test_an_empty_growable_destination_grows():
    fb = sw.FileBacked(dtype=F32)
    out = sw.move(cpu_tensor([1.0, 2.0, 3.0]), fb)
    assert values(out) == [1.0, 2.0, 3.0]
    assert fb.size() == 3


# ------------------------------------------------------------ wait timeouts (wait_in_slices)

@pytest.mark.parametrize("timeout", [-1.0, -1e-9, math.nan])
def test_a_negative_or_nan_timeout_is_refused(timeout):
    h = sw.move_async(cpu_tensor([1.0]), sw.CPU(1, dtype=F32))
    with pytest.raises(ValueError, match=re.escape("timeout must be a non-negative number or None")):
        h.wait(timeout=timeout)
    assert values(h.wait()) == [1.0]


def test_a_pending_wait_times_out_and_later_completes():
    gate = Gate()
    op = held_operation(gate)
    with registered_move_operation(SrcCPU, DstCPU, op):
        src = SrcCPU(2, dtype=F32)
        h = sw.move_async(sw.Tensor(src, 0, sw.Layout(sw.Shape((2,)), sw.Stride((1,)))), DstCPU(2, dtype=F32))
        with pytest.raises(TimeoutError, match="did not complete within the timeout"):
            h.wait(timeout=0.02)
        gate.release.set()
        h.wait(timeout=30)
    assert h.done


# ------------------------------------------------------------ registry (RouteTable)

def test_registry_conflicts_and_misses_keep_their_messages(clean_pair):
    register_move_operation(SrcCPU, DstCPU, OpA)
    with pytest.raises(ValueError, match=re.escape(
            "a move operation is already registered for (SrcCPU, DstCPU): OpA; unregister it first")):
        register_move_operation(SrcCPU, DstCPU, OpB)
    with pytest.raises(ValueError, match="already registered"):
        registered_move_operation(SrcCPU, DstCPU, OpB)
    assert unregister_move_operation(SrcCPU, DstCPU) is OpA
    with pytest.raises(KeyError, match=re.escape("no move operation is registered for (SrcCPU, DstCPU)")):
        unregister_move_operation(SrcCPU, DstCPU)


def test_unregister_returns_the_only_reference_alive(clean_pair):
    class Temporary(OpA):
        pass

    register_move_operation(SrcCPU, DstCPU, Temporary)
    del Temporary
    op = unregister_move_operation(SrcCPU, DstCPU)
    assert op.__name__ == "Temporary" and issubclass(op, OpA)


def test_scoped_registration_enters_once_and_leaves_a_replacement(clean_pair):
    scope = registered_move_operation(SrcCPU, DstCPU, OpA)
    with scope as entered:
        assert entered is OpA
        with pytest.raises(RuntimeError, match=re.escape("registered_move_operation context is already entered")):
            scope.__enter__()
        assert unregister_move_operation(SrcCPU, DstCPU) is OpA
        register_move_operation(SrcCPU, DstCPU, OpB)
    assert sw.carriers.move.dispatch_move(SrcCPU, DstCPU) is OpB
    # Exited: the same scope may enter again once the pair is free.
    unregister_move_operation(SrcCPU, DstCPU)
    with scope:
        assert sw.carriers.move.dispatch_move(SrcCPU, DstCPU) is OpA
    assert sw.carriers.move.dispatch_move(SrcCPU, DstCPU) is sw.ElementwiseMoveOperation


def test_a_scope_whose_pair_was_taken_meanwhile_stays_out(clean_pair):
    scope = registered_move_operation(SrcCPU, DstCPU, OpA)
    register_move_operation(SrcCPU, DstCPU, OpB)
    with pytest.raises(ValueError, match=re.escape(
            "a move operation is already registered for (SrcCPU, DstCPU): OpB; unregister it first")):
        scope.__enter__()
    scope.__exit__(None, None, None)
    assert sw.carriers.move.dispatch_move(SrcCPU, DstCPU) is OpB


# ------------------------------------------------------------ profiling (EventStore)

def test_profile_lifecycle_messages():
    p = sw.profile()
    with p:
        with pytest.raises(RuntimeError, match=re.escape("another profile context is already active on this thread")):
            with sw.profile():
                pass  # pragma: no cover - never entered
    with pytest.raises(RuntimeError, match=re.escape("a profile context is single-use and was already entered")):
        with p:
            pass  # pragma: no cover - never entered
    with pytest.raises(TypeError, match=re.escape("carriers must be Carrier classes (or None for all)")):
        sw.profile(carriers=(sw.CPU, int))


def test_the_carrier_filter_keeps_subclasses_and_nested_parents():
    with sw.profile(carriers=sw.CPU, record_shapes=True) as p:
        sw.move(cpu_tensor([1.0, 2.0]), DstCPU(2, dtype=F32))
        sw.move(sw.move(cpu_tensor([3.0]), sw.FileBacked(dtype=F32)), sw.CPU(1, dtype=F32))
    names = [(e.name, e.carrier_type) for e in p.events()]
    # Events on a FileBacked source are filtered out; CPU and its subclass pass.
    assert all(issubclass(c, sw.CPU) for _, c in names), names
    assert ("move.submit", sw.CPU) in names
    assert ("move.complete", sw.CPU) in names
    assert all(e.input_shapes is not None for e in p.events() if e.name == "move.submit")


def test_sessions_are_per_thread_and_ids_name_parents():
    seen = []

    def other():
        seen.append(sw._core._profiler_session())

    with sw.profile() as p:
        t = threading.Thread(target=other)
        t.start()
        t.join()
        session = sw._core._profiler_session()
        outer = sw._core._profiler_record(session, "outer", None, None, 0, 1, True)
        inner = sw._core._profiler_record(session, "inner", None, None, 0, 1, True, parent_id=outer)
    assert seen == [None]
    events = {e.name: e for e in p.events()}
    # No open operation on this thread: a top-level event has no parent.
    assert events["inner"].parent_id == outer and events["outer"].parent_id is None and inner != outer


# ------------------------------------------------------------ shutdown (JobTracker)

def test_no_move_starts_once_the_exit_drain_ran():
    r = run_python("""
        import strideweave as sw
        F32 = sw.DType.Float32
        src = sw.CPU(2, dtype=F32)
        t = sw.Tensor(src, 0, sw.Layout(sw.Shape((2,)), sw.Stride((1,))))
        sw._core._drain_moves()
        try:
            sw.move_async(t, sw.CPU(2, dtype=F32))
        except RuntimeError as e:
            print("refused:", e)
        print("in flight:", sw._core._moves_in_flight())
    """)
    assert_child_ok(r)
    assert "refused: cannot start a move: interpreter shutdown has begun" in r.stdout
    assert "in flight: 0" in r.stdout
