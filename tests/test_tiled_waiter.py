"""An untimed wait() on an AwaitProjection runs the request's jobs that no
worker has started yet on the waiting thread (sparing the hand-off to a
worker and back); a worker that dequeues such a job later skips it. The
handle's outcome, the profiling pairs and the atomic commit are those of a
worker's run; a timed wait(), a residency handle and a job over the
waiter's byte budget leave the work to the workers."""
import threading
from contextlib import contextmanager

import numpy as np
import pytest

import strideweave as sw
from strideweave import _core
from strideweave.carriers import _tiled_work as tw
from strideweave.carriers import tiled_evictable as tev
from strideweave.carriers.tiled_evictable import TileSelection, TileSet
from conftest import tiled_on_file  # noqa: E402

F32 = sw.DType.Float32


on_file = tiled_on_file


def values(t, n):
    return [t.carrier[t.offset + i] for i in range(n)]


def n_workers():
    tw._executor()
    return sum(1 for t in threading.enumerate() if t.name.startswith("strideweave-tiled-"))


def drain():
    """Returns once every job queued so far has finished: one sentinel per
    worker, all meeting at a barrier (the queue is FIFO)."""
    n = n_workers()
    barrier = threading.Barrier(n + 1, timeout=30)
    for _ in range(n):
        tw._executor().submit(lambda _: barrier.wait(), None)
    barrier.wait()


@contextmanager
def workers_blocked():
    """Every tiled worker busy until the block ends (then drained)."""
    n = n_workers()
    gate = threading.Event()
    started = threading.Semaphore(0)

    def hold(_):
        started.release()
        gate.wait(30)
    for _ in range(n):
        tw._executor().submit(hold, None)
    for _ in range(n):
        assert started.acquire(timeout=30)
    try:
        yield gate
    finally:
        gate.set()
        drain()


@pytest.fixture
def gathers(monkeypatch):
    """The threads that ran each projection gather job, in order."""
    ran = []
    real = tev._gather_spans

    def spy(copies):
        ran.append(threading.get_ident())
        real(copies)
    monkeypatch.setattr(tev, "_gather_spans", spy)
    return ran


def test_the_waiting_thread_runs_a_queued_gather_and_the_worker_skips_it(gathers):
    te, w = on_file()
    with workers_blocked():
        h = te.project(w, TileSelection([[3, 1]]))
        assert not h.done and gathers == []  # queued: every worker is busy
        r = h.wait()
        assert h.done and gathers == [threading.get_ident()]
        assert values(r, 16) == [float(v) for v in list(range(24, 32)) + list(range(8, 16))]
        assert h.wait() is r
    # the workers dequeued the job after the block: they skipped it
    assert gathers == [threading.get_ident()]
    assert [te.tile_state((k,)).location for k in range(4)] == ["secondary"] * 4
    te.promote(TileSet([(3,)]))  # the request's reads were dropped at its commit
    te.release()


def test_a_job_a_worker_took_is_not_run_by_the_waiter(gathers):
    te, w = on_file()
    h = te.project(w, TileSelection([[0, 2]]))
    drain()  # a free worker took and finished it before anyone waited
    assert h.done and len(gathers) == 1 and gathers[0] != threading.get_ident()
    r = h.wait()
    assert len(gathers) == 1 and values(r, 8) == [float(v) for v in range(8)]
    te.release()


def test_workers_and_waiters_never_run_a_job_twice(gathers):
    te, w = on_file(8, 64)
    rng = np.random.default_rng(0)
    handles = []
    for i in range(150):
        ks = [int(k) for k in rng.choice(8, 3, replace=False)]
        h = te.project(w, TileSelection([ks]))
        handles.append((h, ks))
        if i % 3 == 0:  # some waited at once, some later, from other threads too
            r = h.wait()
            assert values(r, 3 * 64)[::64] == [float(k * 64) for k in ks]
    waiters = [threading.Thread(target=lambda hs=handles[j::4]: [h.wait() for h, _ in hs]) for j in range(4)]
    for t in waiters:
        t.start()
    for t in waiters:
        t.join(60)
    drain()
    assert len(gathers) == len(handles)
    for h, ks in handles:
        assert values(h.wait(), 3 * 64)[::64] == [float(k * 64) for k in ks]
    te.release()


def test_a_gather_failing_on_the_waiter_fails_the_handle_and_commits_nothing(monkeypatch):
    te, w = on_file()
    boom = OSError("injected gather failure")
    ran = []

    def failing(copies):
        ran.append(threading.get_ident())
        raise boom
    monkeypatch.setattr(tev, "_gather_spans", failing)
    with workers_blocked():
        h = te.project(w, TileSelection([[1, 2]]))
        with pytest.raises(OSError, match="injected gather failure") as e1:
            h.wait()
        with pytest.raises(OSError) as e2:
            h.wait()
        assert e1.value is boom and e2.value is boom and ran == [threading.get_ident()]
    assert [te.tile_state((k,)).location for k in range(4)] == ["secondary"] * 4
    monkeypatch.undo()
    r = te.project(w, TileSelection([[1]])).wait()  # nothing left held by the failed request
    assert values(r, 8) == [float(v) for v in range(8, 16)]
    te.release()


def test_profiling_pairs_and_the_waiters_own_session_when_the_waiter_runs_the_job(gathers):
    te, w = on_file()
    me = threading.get_ident()
    x = sw.Tensor(sw.CPU(4), 0, sw.Layout(sw.Shape(4), sw.Stride(1)))
    with workers_blocked():
        with sw.profile() as p:
            h = te.project(w, TileSelection([[3, 1]]))
            h.wait()
            h.wait()  # a repeated wait adds nothing
            assert _core._profiler_session() is not None  # this thread's session is back
            sw.add(x, x)
    assert gathers == [me]
    evs = p.events()
    moves = [e for e in evs if e.name.startswith("move.")]
    submits = {e.id: e for e in moves if e.name == "move.submit"}
    completes = [e for e in moves if e.name == "move.complete"]
    assert len(submits) == 2 and len(completes) == 2
    for c in completes:
        s = submits[c.parent_id]
        assert s.thread_id == me and c.thread_id == me and s.succeeded and c.succeeded
        assert c.implementation_type is sw.FileBackedToCpuMoveOperation
    # the commit's work (a differentiable projection's gather node) did not
    # record into this thread's session, as on a worker; the add after did
    others = [e.name for e in evs if not e.name.startswith("move.")]
    assert len(others) == 1 and "_ProjectOperation" not in others
    te.release()


def test_a_timed_wait_leaves_the_job_to_the_workers(gathers):
    te, w = on_file()
    with workers_blocked():
        h = te.project(w, TileSelection([[2]]))
        with pytest.raises(TimeoutError):
            h.wait(timeout=0.05)
        assert gathers == [] and not h.done
    r = h.wait()  # the workers ran it once unblocked
    assert len(gathers) == 1 and gathers[0] != threading.get_ident()
    assert values(r, 8) == [float(v) for v in range(16, 24)]
    te.release()


def test_a_job_over_the_waiters_byte_budget_stays_with_the_workers(gathers, monkeypatch):
    monkeypatch.setattr(tw, "_WAITER_BYTES", 8 * 4 - 1)  # less than one tile of 8 Float32
    te, w = on_file()
    with workers_blocked() as gate:
        h = te.project(w, TileSelection([[0]]))
        threading.Timer(0.2, gate.set).start()
        r = h.wait()
    assert len(gathers) == 1 and gathers[0] != threading.get_ident()
    assert values(r, 8) == [float(v) for v in range(8)]
    te.release()


def test_residency_requests_complete_on_the_workers(monkeypatch):
    te, w = on_file()
    done_on = []
    real = tw._gather_spans

    def spy(copies):
        done_on.append(threading.get_ident())
        real(copies)
    monkeypatch.setattr(tw, "_gather_spans", spy)
    with workers_blocked() as gate:
        h = te.promote_async(TileSet([(1,)]))
        threading.Timer(0.2, gate.set).start()
        assert h.wait() is None
    assert done_on and threading.get_ident() not in done_on
    assert te.tile_state((1,)).location == "primary"
    te.release()


def test_set_runner_hook_rules():
    h = _core._await_new("projection")
    with pytest.raises(TypeError, match="callable or None"):
        _core._await_set_runner(h, 3)
    with pytest.raises(TypeError, match="must be an AwaitResult"):
        _core._await_set_runner(object(), None)
    calls = []
    assert _core._await_set_runner(h, lambda: calls.append(1) or _core._await_complete(h, 7)) is True
    assert h.wait() == 7 and calls == [1]
    assert h.wait() == 7 and calls == [1]  # run once
    assert _core._await_set_runner(h, lambda: None) is False  # terminal: nothing kept
    # a runner that raises: wait() raises it; the next wait blocks as usual
    h2 = _core._await_new("projection")
    _core._await_set_runner(h2, lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        h2.wait()
    with pytest.raises(TimeoutError):
        h2.wait(timeout=0.01)
    _core._await_complete(h2, None)
    assert h2.wait() is None


def test_a_job_the_waiter_ran_does_not_keep_the_result_alive_in_the_pool_queue():
    # The worker's queue entry outlives the request until a worker wakes:
    # taking the job clears it, so dropping the result frees its storage at
    # once (a loop's next projection then reuses that buffer).
    import gc
    import weakref
    te, w = on_file()
    with workers_blocked():
        h = te.project(w, TileSelection([[1]]))
        r = h.wait()
        ref = weakref.ref(r.carrier)
        del h, r
        gc.collect()
        assert ref() is None  # while the stale entry is still queued
    te.release()
