"""strideweave.profile (API.md 9; spec: "Profiling distinguishes submission
from completion"): the context itself, ProfilerEvent records, self time,
key_averages, table, to_chrome_trace, the carriers filter, record_shapes,
operation nesting and thread-local activity."""
import dataclasses
import json
import threading

import pytest

import strideweave as sw

from support.builders import canonical, cpu_tensor
from support.carriers import SrcCPU
from support.moves import Gate, WAIT, held_operation
from support.process import assert_child_ok, run_snippet

FIELDS = ["id", "parent_id", "name", "carrier_type", "implementation_type", "input_shapes",
          "start_time_ns", "duration_ns", "self_time_ns", "thread_id", "succeeded"]


class Twice(sw.Operation):
    """An operation whose forward runs another operation (a nested event)."""
    op_name = "twice"

    def _forward(self, x):
        return sw.add(x, x)

    def backward(self, g):  # pragma: no cover - not differentiated here
        return (sw.mul(g, 2.0),)


def by_name(p):
    out = {}
    for e in p.events():
        out.setdefault(e.name, []).append(e)
    return out


# ------------------------------------------------------------ the context

def test_profile_is_a_single_use_context_manager():
    p = sw.profile()
    with p as entered:
        assert entered is p
    with pytest.raises(RuntimeError, match="single-use"):
        with p:
            pass  # pragma: no cover - never entered
    assert sw.Profiler is sw.profile


def test_profile_takes_keyword_arguments_only_and_checks_the_filter():
    with pytest.raises(TypeError):
        sw.profile(None)
    with pytest.raises(TypeError, match="Carrier"):
        sw.profile(carriers=[int])
    with pytest.raises(TypeError, match="Carrier"):
        sw.profile(carriers=[sw.CPU(1)])


def test_nothing_is_recorded_outside_the_context():
    x = cpu_tensor([1.0, 2.0])
    p = sw.profile()
    sw.add(x, x)
    with p:
        sw.add(x, x)
    sw.add(x, x)
    sw.move(cpu_tensor([1.0]), sw.CPU(1))
    assert [e.name for e in p.events()] == ["add"]


def test_only_one_context_is_active_per_thread():
    with sw.profile():
        with pytest.raises(RuntimeError, match="already active"):
            with sw.profile():
                pass  # pragma: no cover - never entered


# ------------------------------------------------------------ events

def test_events_are_frozen_records_with_every_field():
    assert [f.name for f in dataclasses.fields(sw.ProfilerEvent)] == FIELDS
    x = cpu_tensor([1.0, 2.0])
    with sw.profile() as p:
        sw.relu(x)
    (e,) = p.events()
    assert e.id > 0 and e.parent_id is None and e.name == "relu"
    assert e.carrier_type is sw.CPU and e.implementation_type is sw.ReluOperation
    assert e.input_shapes is None  # record_shapes is off
    assert e.start_time_ns > 0 and e.duration_ns >= 0 and e.self_time_ns == e.duration_ns
    assert e.thread_id == threading.get_ident() and e.succeeded is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.name = "other"


def test_record_shapes_keeps_operation_and_move_input_shapes():
    x = cpu_tensor([1.0, 2.0, 3.0])
    with sw.profile(record_shapes=True) as p:
        y = sw.add(x, x)
        sw.move(y, sw.CPU(3))
    ev = by_name(p)
    assert ev["add"][0].input_shapes == ((3,), (3,))
    assert ev["move.submit"][0].input_shapes == ((3,),)
    with sw.profile(record_shapes=False) as p:
        y = sw.add(x, x)
        sw.move(y, sw.CPU(3))
    assert all(e.input_shapes is None for e in p.events())


def test_nested_operations_link_to_their_parent_and_self_time_excludes_children():
    x = cpu_tensor([1.0, 2.0])
    with sw.profile() as p:
        Twice().forward(x)
    ev = by_name(p)
    (outer,), (inner,) = ev["twice"], ev["add"]
    assert inner.parent_id == outer.id and outer.parent_id is None
    assert outer.start_time_ns <= inner.start_time_ns
    assert inner.start_time_ns + inner.duration_ns <= outer.start_time_ns + outer.duration_ns
    assert outer.self_time_ns == outer.duration_ns - inner.duration_ns
    assert inner.self_time_ns == inner.duration_ns


def test_a_move_inside_an_operation_is_a_child_of_it():
    class MoveInside(sw.Operation):
        op_name = "move_inside"

        def _forward(self, x):
            return sw.move(x, sw.CPU(x.size()))

    x = cpu_tensor([1.0, 2.0])
    with sw.no_grad(), sw.profile() as p:
        MoveInside().forward(x)
    ev = by_name(p)
    (outer,), (submit,), (complete,) = ev["move_inside"], ev["move.submit"], ev["move.complete"]
    assert submit.parent_id == outer.id and complete.parent_id == submit.id
    assert outer.self_time_ns == outer.duration_ns - submit.duration_ns


def test_a_completion_is_not_subtracted_from_its_submission():
    """move.complete is linked to move.submit but is not nested in it, so
    the submission's self time is its own duration."""
    gate = Gate()
    with sw.registered_move_operation(SrcCPU, sw.CPU, held_operation(gate)):
        with sw.profile() as p:
            h = sw.move_async(sw.Tensor(SrcCPU(2), 0, canonical([2])), sw.CPU(2))
            assert gate.entered.wait(WAIT)
            gate.release.set()
            h.wait(timeout=WAIT)
    ev = by_name(p)
    (submit,), (complete,) = ev["move.submit"], ev["move.complete"]
    assert complete.parent_id == submit.id
    assert submit.self_time_ns == submit.duration_ns
    assert complete.self_time_ns == complete.duration_ns


def test_failed_operations_are_recorded_as_failed():
    dead = cpu_tensor([1.0])
    dead.carrier.release()
    with sw.profile() as p:
        with pytest.raises(RuntimeError, match="released"):
            sw.relu(dead)
    (e,) = p.events()
    assert e.name == "relu" and e.succeeded is False


# ------------------------------------------------------------ filtering and threads

def test_carriers_filter_keeps_matching_carrier_classes():
    c = cpu_tensor([1.0, 2.0])
    g = sw.Tensor(sw.Generic([1.0, 2.0], dtype=sw.DType.Float32), 0, canonical([2]))
    with sw.profile(carriers=[sw.Generic]) as p:
        sw.relu(c)
        sw.relu(g)
        sw.move(cpu_tensor([1.0]), sw.CPU(1))
    assert [(e.name, e.carrier_type) for e in p.events()] == [("relu", sw.Generic)]
    with sw.profile(carriers=sw.CPU) as p:
        sw.relu(c)
        sw.relu(g)
    assert [(e.name, e.carrier_type) for e in p.events()] == [("relu", sw.CPU)]


def test_activity_is_thread_local_except_move_completion():
    x = cpu_tensor([1.0, 2.0])
    other_ident = []

    def elsewhere():
        other_ident.append(threading.get_ident())
        sw.add(x, x)
        sw.move(cpu_tensor([1.0]), sw.CPU(1))

    with sw.profile() as p:
        th = threading.Thread(target=elsewhere)
        th.start()
        th.join(WAIT)
        assert not th.is_alive()
        sw.move(cpu_tensor([2.0]), sw.CPU(1))
    names = [e.name for e in p.events()]
    # The other thread's operation and move are not recorded; this thread's
    # move completion, which runs on a worker thread, is.
    assert sorted(names) == ["move.complete", "move.submit"]
    assert all(e.thread_id != other_ident[0] for e in p.events())
    ev = by_name(p)
    assert ev["move.submit"][0].thread_id == threading.get_ident()
    assert ev["move.complete"][0].thread_id != threading.get_ident()


# ------------------------------------------------------------ aggregation and rendering

def test_key_averages_group_by_name_carrier_and_implementation():
    x = cpu_tensor([1.0, 2.0])
    dead = cpu_tensor([1.0])
    dead.carrier.release()
    with sw.profile() as p:
        for _ in range(3):
            sw.add(x, x)
        sw.relu(x)
        with pytest.raises(RuntimeError):
            sw.relu(dead)
    avgs = {(a.name, a.carrier_type, a.implementation_type): a for a in p.key_averages()}
    assert set(avgs) == {("add", sw.CPU, sw.AddOperation), ("relu", sw.CPU, sw.ReluOperation)}
    add = avgs[("add", sw.CPU, sw.AddOperation)]
    relu = avgs[("relu", sw.CPU, sw.ReluOperation)]
    events = p.events()
    assert add.count == 3 and add.failures == 0
    assert add.total_duration_ns == sum(e.duration_ns for e in events if e.name == "add")
    assert add.self_time_ns == sum(e.self_time_ns for e in events if e.name == "add")
    assert add.average_duration_ns == pytest.approx(add.total_duration_ns / 3)
    assert relu.count == 2 and relu.failures == 1
    totals = [a.total_duration_ns for a in p.key_averages()]
    assert totals == sorted(totals, reverse=True)


def test_table_renders_one_row_per_group():
    x = cpu_tensor([1.0, 2.0])
    with sw.profile() as p:
        sw.add(x, x)
        sw.add(x, x)
        sw.move(cpu_tensor([1.0]), sw.CPU(1))
    text = p.table()
    assert isinstance(text, str)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["name", "carrier", "implementation"]
    assert set(lines[1]) <= {"-", " "}
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert set(rows) == {"add", "move.submit", "move.complete"}
    assert rows["add"][1:4] == ["CPU", "AddOperation", "2"]
    assert rows["move.submit"][1:4] == ["CPU", "ElementwiseMoveOperation", "1"]
    with sw.profile() as empty:
        pass
    assert len(empty.table().splitlines()) == 2  # header and rule only


def check_trace_event_format(doc):
    """The parts of the Chrome trace-event format that Perfetto's JSON
    importer relies on: known phases, numeric ts/dur, 32-bit pid/tid, "X"
    slices properly nested per thread, "b"/"e" pairs matched by cat/name/id."""
    assert isinstance(doc["traceEvents"], list)
    slices, open_async = {}, {}
    for ev in doc["traceEvents"]:
        assert ev["ph"] in {"X", "b", "e", "M"}, ev
        assert isinstance(ev["name"], str)
        for key in ("pid", "tid"):
            assert isinstance(ev[key], int) and 0 <= ev[key] < 2**32, ev
        assert isinstance(ev["ts"], (int, float)) and ev["ts"] >= 0
        if ev["ph"] == "M":
            assert isinstance(ev["args"]["name"], str)
            continue
        if ev["ph"] == "X":
            assert isinstance(ev["dur"], (int, float)) and ev["dur"] >= 0
            slices.setdefault((ev["pid"], ev["tid"]), []).append((ev["ts"], ev["ts"] + ev["dur"]))
        else:
            key = (ev["cat"], ev["name"], ev["id"])
            if ev["ph"] == "b":
                assert key not in open_async
                open_async[key] = ev["ts"]
            else:
                assert open_async.pop(key) <= ev["ts"]
    assert open_async == {}
    for spans in slices.values():
        stack = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1], "partially overlapping X slices on one thread"
            stack.append(end)


def test_chrome_trace_is_valid_trace_event_json(tmp_path):
    gate = Gate()
    x = cpu_tensor([1.0, 2.0])
    with sw.registered_move_operation(SrcCPU, sw.CPU, held_operation(gate)):
        with sw.profile(record_shapes=True) as p:
            Twice().forward(x)
            held = sw.move_async(sw.Tensor(SrcCPU(2), 0, canonical([2])), sw.CPU(2))
            assert gate.entered.wait(WAIT)
            # Completed while the held move is pending: completions overlap in time.
            quick = [sw.move_async(cpu_tensor([float(i)]), sw.CPU(1)) for i in range(3)]
            for h in quick:
                h.wait(timeout=WAIT)
            gate.release.set()
            held.wait(timeout=WAIT)
    path = tmp_path / "trace.json"
    assert p.to_chrome_trace(path) is None
    doc = json.loads(path.read_text())
    check_trace_event_format(doc)
    events = p.events()
    trace = doc["traceEvents"]
    slices = [ev for ev in trace if ev["ph"] in ("X", "b")]
    assert sorted(ev["args"]["id"] for ev in slices) == sorted(e.id for e in events)
    by_id = {ev["args"]["id"]: ev for ev in slices}
    tid_of = {}
    for e in events:
        ev = by_id[e.id]
        assert ev["name"] == e.name
        assert ev["ts"] == pytest.approx(e.start_time_ns / 1e3)
        assert ev["args"]["thread_id"] == e.thread_id and ev["args"]["succeeded"] is e.succeeded
        # One track per recorded thread.
        assert tid_of.setdefault(e.thread_id, ev["tid"]) == ev["tid"]
        if ev["ph"] == "X":
            assert ev["dur"] == pytest.approx(e.duration_ns / 1e3)
        else:
            # A completion is an async slice correlated with its submission.
            assert e.name == "move.complete" and ev["id"] == e.parent_id
            (end,) = [x for x in trace if x["ph"] == "e" and x["id"] == ev["id"]]
            assert end["ts"] - ev["ts"] == pytest.approx(e.duration_ns / 1e3)
    assert len(set(tid_of.values())) == len(tid_of)
    named = {ev["tid"] for ev in trace if ev["ph"] == "M" and ev["name"] == "thread_name"}
    assert set(tid_of.values()) <= named
    assert sum(ev["name"] == "move.complete" and ev["ph"] == "b" for ev in trace) == 4


def test_chrome_trace_of_an_inline_completion_keeps_slices_nested(tmp_path):
    """An extension route whose submit() returns None completes on the
    submitting thread, overlapping move.submit's end."""
    from support.builders import F32
    from support.extension import family, tensor_of

    Host, Packed, _, _ = family(result=lambda r: None)
    with sw.no_grad(), sw.profile() as p:
        sw.move(tensor_of(Host, [1.0]), Packed(1, dtype=F32))
    ev = by_name(p)
    (submit,), (complete,) = ev["move.submit"], ev["move.complete"]
    assert complete.thread_id == submit.thread_id == threading.get_ident()
    assert submit.self_time_ns == submit.duration_ns
    path = tmp_path / "inline.json"
    p.to_chrome_trace(path)
    check_trace_event_format(json.loads(path.read_text()))


# ------------------------------------------------------------ abandoned contexts

def run_on_thread(fn):
    th = threading.Thread(target=fn)
    th.start()
    th.join(WAIT)
    assert not th.is_alive()


def test_a_profile_dropped_on_another_thread_without_exit_ends_safely():
    """The thread's active-session slot must not dangle when the entered
    profile is dropped elsewhere: the next profile on this thread works."""
    box = [sw.profile()]
    box[0].__enter__()
    run_on_thread(box.clear)
    x = cpu_tensor([1.0, 2.0])
    sw.add(x, x)
    sw.move(cpu_tensor([1.0]), sw.CPU(1))
    with sw.profile() as p:
        sw.add(x, x)
    assert [e.name for e in p.events()] == ["add"]


def test_a_profile_exited_on_another_thread_frees_this_thread():
    p = sw.profile()
    p.__enter__()
    run_on_thread(lambda: p.__exit__(None, None, None))
    x = cpu_tensor([1.0, 2.0])
    sw.add(x, x)  # not recorded: the context has ended
    with sw.profile() as q:
        sw.add(x, x)
    assert p.events() == [] and [e.name for e in q.events()] == ["add"]


def test_a_profile_dropped_on_its_own_thread_without_exit_ends_safely():
    p = sw.profile()
    p.__enter__()
    del p
    with sw.profile() as q:
        sw.relu(cpu_tensor([1.0]))
    assert [e.name for e in q.events()] == ["relu"]


def test_input_shapes_are_plain_nested_tuples_of_ints(tmp_path):
    lay = sw.Layout(sw.Shape([2, [3, 2]]), sw.Stride([1, [2, 6]]))
    x = sw.Tensor(sw.CPU(12), 0, lay)
    with sw.profile(record_shapes=True) as p:
        sw.relu(x)
        sw.move(sw.tensor([1.0, 2.0]), sw.CPU(2))
    ev = by_name(p)
    assert ev["relu"][0].input_shapes == ((2, (3, 2)),)
    assert ev["move.submit"][0].input_shapes == ((2,),)

    def plain(v):
        return type(v) is int or (type(v) is tuple and all(plain(x) for x in v))

    assert all(plain(e.input_shapes) for e in p.events() if e.input_shapes is not None)
    path = tmp_path / "trace.json"
    p.to_chrome_trace(path)
    import json
    slices = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("name") == "relu"]
    assert slices[0]["args"]["input_shapes"] == [[2, [3, 2]]]


# ------------------------------------------------------------ the session outlives Python code run during a move or a read


def test_move_keeps_the_profiling_session_alive_while_python_code_runs():
    # move_async looked the session up once, then ran the operation's
    # __init__ before using it; dropping the abandoned profile's last
    # reference there (and letting an operation notice) freed the session.
    r = run_snippet("""
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
    """, dev=True)
    assert_child_ok(r)
    assert r.stdout.strip() == "ok"


F32 = sw.DType.Float32


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
