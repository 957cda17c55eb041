"""Profiling of TiledEvictable requests (API.md 9, issue 13 item 7): every
tile transfer is a move.submit (calling thread) / move.complete (completing
thread, parent_id = the submit's id) pair; the private recording hooks."""
import threading

import pytest

import strideweave as sw
from strideweave import _core
from strideweave.carriers.move import register_move_operation, unregister_move_operation
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection, TileSet

F32 = sw.DType.Float32
from support.carriers import FailingOp, FailPrimary, FailSecondary
from support.tiled import tiled_ramp as tiled


def pairs(p):
    evs = [e for e in p.events() if e.name.startswith("move.")]
    submits = {e.id: e for e in evs if e.name == "move.submit"}
    completes = [e for e in evs if e.name == "move.complete"]
    assert len(submits) == len(completes), evs
    out = []
    for c in completes:
        s = submits[c.parent_id]  # every complete names its submit
        out.append((s, c))
    return out


# ------------------------------------------------------------------ the hooks

def test_profiler_session_is_the_calling_threads_active_one():
    assert _core._profiler_session() is None
    with sw.profile() as p:
        s = _core._profiler_session()
        assert s is p._session
        seen = []
        t = threading.Thread(target=lambda: seen.append(_core._profiler_session()))
        t.start()
        t.join()
        assert seen == [None]  # sessions are per thread
    assert _core._profiler_session() is None


def test_profiler_record_adds_an_event_with_its_id_and_thread():
    with sw.profile() as p:
        s = _core._profiler_session()
        t0 = _core._profiler_now_ns()
        sid = _core._profiler_record(s, "move.submit", sw.CPU, sw.CpuToFileBackedMoveOperation, t0, 5, True)
        out = []
        th = threading.Thread(target=lambda: out.append(
            _core._profiler_record(s, "move.complete", sw.CPU, None, t0, 7, False, parent_id=sid)))
        th.start()
        th.join()
    assert _core._profiler_now_ns() >= t0
    evs = {e.id: e for e in p.events()}
    sub, comp = evs[sid], evs[out[0]]
    assert sub.name == "move.submit" and sub.parent_id is None or sub.parent_id == 0
    assert sub.thread_id == threading.get_ident() and sub.duration_ns == 5 and sub.succeeded
    assert sub.implementation_type is sw.CpuToFileBackedMoveOperation and sub.carrier_type is sw.CPU
    assert comp.parent_id == sid and comp.thread_id == th.ident and comp.duration_ns == 7
    assert comp.succeeded is False and comp.implementation_type is None


def test_profiler_record_validates_its_arguments():
    with sw.profile():
        s = _core._profiler_session()
        with pytest.raises(TypeError, match="_ProfileSession"):
            _core._profiler_record(object(), "x", None, None, 0, 0, True)
        with pytest.raises(TypeError, match="classes or None"):
            _core._profiler_record(s, "x", 3, None, 0, 0, True)
        with pytest.raises(ValueError, match="non-negative"):
            _core._profiler_record(s, "x", None, None, 0, -1, True)


def test_profiler_record_respects_the_carrier_filter():
    with sw.profile(carriers=[sw.FileBacked]) as p:
        s = _core._profiler_session()
        a = _core._profiler_record(s, "move.submit", sw.CPU, None, 0, 1, True)
        b = _core._profiler_record(s, "move.submit", sw.FileBacked, None, 0, 1, True)
    assert a != b
    assert [e.id for e in p.events()] == [b]


# ------------------------------------------------------------------ tiled requests

def test_cold_projection_records_one_pair_per_tile():
    te, w = tiled()
    te.evict(TileSet([(k,) for k in range(4)]))
    with sw.profile() as p:
        h = te.project(w, TileSelection([[3, 1]]))
        h.wait()
        h.wait()  # a repeated wait adds nothing
    ps = pairs(p)
    assert len(ps) == 2
    me = threading.get_ident()
    for s, c in ps:
        assert s.thread_id == me and s.succeeded and c.succeeded
        assert s.carrier_type is sw.FileBacked and c.carrier_type is sw.FileBacked
        assert s.implementation_type is sw.FileBackedToCpuMoveOperation
        assert c.implementation_type is sw.FileBackedToCpuMoveOperation
        assert c.start_time_ns >= s.start_time_ns and c.duration_ns >= 0
    # no operation events: a projection without grad records only the transfers
    assert all(e.name.startswith("move.") for e in p.events())


def test_promote_and_evict_record_pairs_in_both_directions():
    te, w = tiled()
    with sw.profile() as p:
        te.evict(TileSet([(0,), (2,)]))
        te.promote_async(TileSet([(2,)])).wait()
    ps = pairs(p)
    kinds = sorted(s.implementation_type.__name__ for s, _ in ps)
    assert kinds == ["CpuToFileBackedMoveOperation"] * 2 + ["FileBackedToCpuMoveOperation"]


def test_completion_events_come_from_the_worker_threads():
    te, w = tiled(n_tiles=8, tile=64)
    te.evict(TileSet([(k,) for k in range(8)]))
    with sw.profile() as p:
        te.promote(TileSet([(k,) for k in range(8)]))
    ps = pairs(p)
    assert len(ps) == 8
    assert all(c.thread_id != threading.get_ident() for _, c in ps)


def test_no_session_records_nothing_and_an_idle_request_records_no_pair():
    te, w = tiled()
    te.evict(TileSet([(0,)]))  # outside any profile
    with sw.profile() as p:
        te.evict(TileSet([(0,)]))  # already satisfied: no transfer
    assert pairs(p) == []


def test_carrier_filter_applies_to_tile_transfers():
    te, w = tiled()
    with sw.profile(carriers=[sw.FileBacked]) as p:
        te.evict(TileSet([(1,)]))  # CPU -> FileBacked: filtered out
        te.promote(TileSet([(1,)]))  # FileBacked -> CPU: kept
    ps = pairs(p)
    assert [s.implementation_type for s, _ in ps] == [sw.FileBackedToCpuMoveOperation]


def test_a_failed_tile_transfer_records_a_failed_completion():
    register_move_operation(FailPrimary, FailSecondary, FailingOp)
    try:
        te = TiledEvictable(FailPrimary([1.0, 2.0], dtype=F32), FailSecondary([0.0] * 2, dtype=F32), (1,), (2,))
        with sw.profile() as p:
            h = te.evict_async(TileSet([(0,)]))
            with pytest.raises(OSError):
                h.wait()
        (s, c), = pairs(p)
        assert s.succeeded and not c.succeeded
        assert s.implementation_type is FailingOp and s.carrier_type is FailPrimary
    finally:
        unregister_move_operation(FailPrimary, FailSecondary)


def test_record_shapes_keeps_the_tile_shape_of_each_transfer():
    c = sw.CPU(4 * 6)
    te = TiledEvictable(c, sw.FileBacked(dtype=F32), (4, 1, 1), (1, 2, 3))
    w = sw.Tensor(te, 0, te.canonical_layout())
    te.evict(TileSet([(k, 0, 0) for k in range(4)]))
    with sw.profile(record_shapes=True) as p:
        te.project(w, TileSelection([[2], [0], [0]])).wait()
    with sw.profile() as q:
        te.project(w, TileSelection([[2], [0], [0]])).wait()
    (s, c2), = pairs(p)
    assert s.input_shapes == ((1, 2, 3),) and c2.input_shapes == s.input_shapes
    (s, _), = pairs(q)
    assert s.input_shapes is None


def test_profiler_record_input_shapes_must_be_a_tuple():
    with sw.profile(record_shapes=True) as p:
        s = _core._profiler_session()
        with pytest.raises(TypeError, match="tuple or None"):
            _core._profiler_record(s, "x", None, None, 0, 0, True, None, [sw.Shape([2])])
        eid = _core._profiler_record(s, "x", None, None, 0, 0, True, input_shapes=(sw.Shape([2]),))
    assert {e.id: e for e in p.events()}[eid].input_shapes == ((2,),)
