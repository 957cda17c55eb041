"""Profiling of moves: move.submit and move.complete (spec: "Profiling
distinguishes submission from completion"; API.md 9)."""
import json
import threading

import pytest

import strideweave as sw

from support.builders import canonical, cpu_tensor
from support.carriers import SrcCPU
from support.moves import Gate, WAIT, held_operation


def move_events(p):
    return [e for e in p.events() if e.name.startswith("move.")]


def pair(p):
    evs = move_events(p)
    submit = [e for e in evs if e.name == "move.submit"]
    complete = [e for e in evs if e.name == "move.complete"]
    assert len(submit) == 1 and len(complete) == 1, evs
    return submit[0], complete[0]


def test_blocking_move_records_submit_and_complete():
    t = cpu_tensor([1.0, 2.0])
    with sw.profile(record_shapes=True) as p:
        sw.move(t, sw.FileBacked(dtype=sw.DType.Float32))
    submit, complete = pair(p)
    assert complete.parent_id == submit.id
    assert submit.thread_id == threading.get_ident()
    assert submit.succeeded and complete.succeeded
    assert submit.carrier_type is sw.CPU and complete.carrier_type is sw.CPU
    assert submit.implementation_type is sw.CpuToFileBackedMoveOperation
    assert complete.implementation_type is sw.CpuToFileBackedMoveOperation
    assert submit.input_shapes == ((2,),)
    assert complete.duration_ns >= 0 and submit.duration_ns >= 0
    # Moves are not operation events: nothing else was recorded.
    assert len(p.events()) == 2


def test_profile_an_asynchronous_move():
    gate = Gate()
    with sw.registered_move_operation(SrcCPU, sw.CPU, held_operation(gate)):
        src = SrcCPU(2)
        with sw.profile() as p:
            h = sw.move_async(sw.Tensor(src, 0, canonical([2])), sw.CPU(2))
            assert gate.entered.wait(WAIT)
            # Submission is recorded at once; completion is not yet.
            assert [e.name for e in move_events(p)] == ["move.submit"]
            gate.release.set()
            h.wait(timeout=WAIT)
            h.wait(timeout=WAIT)  # waiting again adds nothing
    submit, complete = pair(p)
    assert complete.parent_id == submit.id
    assert complete.thread_id == gate.thread_ids[0] != submit.thread_id
    # Completion is measured through the terminal commit, after submission.
    assert complete.start_time_ns >= submit.start_time_ns
    assert complete.start_time_ns + complete.duration_ns >= submit.start_time_ns + submit.duration_ns


def test_failed_completion_is_recorded_once_as_failed():
    gate = Gate()
    gate.release.set()
    with sw.registered_move_operation(SrcCPU, sw.CPU, held_operation(gate, fail=RuntimeError("x"))):
        with sw.profile() as p:
            h = sw.move_async(sw.Tensor(SrcCPU(1), 0, canonical([1])), sw.CPU(1))
            for _ in range(3):
                with pytest.raises(RuntimeError):
                    h.wait(timeout=WAIT)
    submit, complete = pair(p)
    assert submit.succeeded is True and complete.succeeded is False


def test_validation_failure_records_no_move():
    with sw.profile() as p:
        with pytest.raises(ValueError):
            sw.move(cpu_tensor([1.0, 2.0]), sw.CPU(1))
    assert move_events(p) == []


def test_carrier_filter_applies_to_moves():
    with sw.profile(carriers=sw.Generic) as p:
        sw.move(cpu_tensor([1.0]), sw.CPU(1))
    assert move_events(p) == []
    with sw.profile(carriers=[sw.CPU]) as p:
        sw.move(cpu_tensor([1.0]), sw.CPU(1))
    assert len(move_events(p)) == 2


def test_each_move_is_correlated_separately(tmp_path):
    with sw.profile() as p:
        a = sw.move_async(cpu_tensor([1.0]), sw.CPU(1))
        b = sw.move_async(cpu_tensor([2.0]), sw.CPU(1))
        a.wait(timeout=WAIT)
        b.wait(timeout=WAIT)
    evs = move_events(p)
    submits = {e.id: e for e in evs if e.name == "move.submit"}
    completes = [e for e in evs if e.name == "move.complete"]
    assert len(submits) == 2 and len(completes) == 2
    assert sorted(c.parent_id for c in completes) == sorted(submits)
    path = tmp_path / "trace.json"
    p.to_chrome_trace(path)
    names = {e.get("name") for e in json.loads(path.read_text())["traceEvents"]}
    assert {"move.submit", "move.complete"} <= names
