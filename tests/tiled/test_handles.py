"""TiledEvictable requests return the native handle kinds, created through
the private _core hooks _await_new / _await_complete / _await_fail; a failed
native transfer fails its handle with one exception and commits nothing;
workers and untimed waiters never run a transfer twice."""
import gc
import threading
import weakref

import pytest

import strideweave as sw
from strideweave import _core
from strideweave.carriers.move import register_move_operation, unregister_move_operation
from strideweave.carriers.tiled_evictable import (
    AwaitProjection, AwaitResidency, TiledEvictable, TileSelection, TileSet,
)

F32 = sw.DType.Float32
from support.carriers import FailingOp, FailPrimary, FailSecondary
from support.tiled import tiled_ramp, tiled_ramp as tiled


# ------------------------------------------------------------------ the hooks

@pytest.mark.parametrize("kind, cls", [("move", sw.AwaitMove), ("projection", sw.AwaitProjection),
                                       ("residency", sw.AwaitResidency)])
def test_await_new_gives_a_pending_native_handle(kind, cls):
    h = _core._await_new(kind)
    assert type(h) is cls and isinstance(h, sw.AwaitResult)
    assert h.done is False
    with pytest.raises(TimeoutError):
        h.wait(timeout=0.01)
    assert weakref.ref(h)() is h
    assert not hasattr(h, "__await__")
    with pytest.raises(TypeError):
        cls()
    assert "pending" in repr(h)


def test_await_new_rejects_other_kinds():
    with pytest.raises(ValueError, match="'move', 'projection' or 'residency'"):
        _core._await_new("result")
    with pytest.raises(TypeError, match="str"):
        _core._await_new(1)


def test_complete_is_terminal_once_and_wait_returns_the_same_object():
    h = _core._await_new("projection")
    value = object()
    assert _core._await_complete(h, value) is True
    assert h.done
    assert h.wait() is value and h.wait() is value
    # a second terminal transition changes nothing
    assert _core._await_complete(h, object()) is False
    assert _core._await_fail(h, RuntimeError("late")) is False
    assert h.wait() is value
    assert "done" in repr(h)


def test_fail_records_the_exception_instance_itself():
    h = _core._await_new("residency")
    exc = OSError("disk gone")
    assert _core._await_fail(h, exc) is True
    for _ in range(2):
        with pytest.raises(OSError) as e:
            h.wait()
        assert e.value is exc
    assert _core._await_complete(h, None) is False
    assert "failed" in repr(h)


def test_hooks_validate_their_arguments():
    h = _core._await_new("move")
    with pytest.raises(TypeError, match="AwaitResult"):
        _core._await_complete(object(), 1)
    with pytest.raises(TypeError, match="exception instance"):
        _core._await_fail(h, OSError)  # a class, not an instance
    with pytest.raises(TypeError, match="exception instance"):
        _core._await_fail(h, "boom")
    with pytest.raises(TypeError):
        _core._await_complete(h)
    assert not h.done  # nothing recorded by the refused calls


def test_completion_from_another_thread_wakes_a_waiter():
    h = _core._await_new("move")
    results = []
    waiter = threading.Thread(target=lambda: results.append(h.wait()))
    waiter.start()
    # the waiter blocks with the GIL released, so this thread keeps running
    completer = threading.Thread(target=lambda: results.append(_core._await_complete(h, "v")))
    completer.start()
    completer.join(5)
    waiter.join(5)
    assert not waiter.is_alive()
    assert sorted(map(str, results)) == ["True", "v"]


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


def test_a_completed_handle_holding_a_cycle_is_collected():
    h = _core._await_new("move")
    box = [h]
    _core._await_complete(h, box)  # h -> box -> h
    r = weakref.ref(h)
    del h, box
    gc.collect()
    assert r() is None


# ------------------------------------------------------------------ the requests

def test_every_tiled_request_returns_a_native_handle():
    te, w = tiled()
    sel = TileSelection([[2, 0]])
    h = te.evict_async(TileSet([(0,), (2,)]))
    assert type(h) is AwaitResidency and AwaitResidency is sw.AwaitResidency
    assert h.wait() is None
    h = te.promote_async(sel)
    assert type(h) is AwaitResidency
    assert h.wait() is None
    h = te.project(w, sel)
    assert type(h) is AwaitProjection and AwaitProjection is sw.AwaitProjection
    compact = h.wait()
    assert h.wait() is compact
    h = te.scatter(compact, w, sel)
    assert type(h) is sw.AwaitMove
    full = h.wait()
    assert h.wait() is full and type(full.carrier) is TiledEvictable


@pytest.fixture
def failing_route():
    register_move_operation(FailPrimary, FailSecondary, FailingOp)
    yield
    unregister_move_operation(FailPrimary, FailSecondary)


def test_a_failed_request_raises_through_the_native_handle(failing_route):
    te = TiledEvictable(FailPrimary([1.0, 2.0, 3.0, 4.0], dtype=F32), FailSecondary([0.0] * 4, dtype=F32), (2,),
                        (2,))
    h = te.evict_async(TileSet([(0,), (1,)]))
    assert type(h) is AwaitResidency
    with pytest.raises(OSError, match="injected tile failure") as e1:
        h.wait()
    with pytest.raises(OSError) as e2:
        h.wait()
    assert e1.value is e2.value and h.done
    assert te.tile_state((0,)).location == "primary"


def test_a_pending_handle_is_not_a_tensor_operand():
    te, w = tiled()
    h = te.project(w, TileSelection([[1]]))
    with pytest.raises(TypeError):
        sw.relu(h)
    h.wait()


# ------------------------------------------------------------------ workers and waiters

def test_a_native_tile_read_failing_fails_the_handle_and_commits_nothing():
    import os

    from support.tiled import tiled_on_file

    te, w = tiled_on_file()
    size = os.path.getsize(te.secondary.path)
    os.truncate(te.secondary.path, 0)  # the secondary's reads now come up short (EIO)
    h = te.project(w, TileSelection([[1, 2]]))
    with pytest.raises(OSError) as e1:
        h.wait()
    with pytest.raises(OSError) as e2:
        h.wait()
    assert e1.value is e2.value and h.done
    assert [te.tile_state((k,)).location for k in range(4)] == ["secondary"] * 4
    assert te._request_counts()["pending"] == 0
    os.truncate(te.secondary.path, size)  # (zeros) nothing is left held by the failed request
    r = te.project(w, TileSelection([[1]])).wait()
    assert [r[i] for i in range(8)] == [0.0] * 8
    te.release()


def test_workers_and_waiters_never_run_a_transfer_twice():
    # Untimed waits run queued transfers on the waiting thread, workers the
    # rest; every tile transfer completes exactly once (one move.complete).
    import numpy as np

    from support.tiled import tiled_on_file

    te, w = tiled_on_file(8, 64)
    rng = np.random.default_rng(0)
    handles = []
    with sw.profile() as p:
        for i in range(150):
            ks = [int(k) for k in rng.choice(8, 3, replace=False)]
            h = te.project(w, TileSelection([ks]))
            handles.append((h, ks))
            if i % 3 == 0:  # some waited at once, the rest later from other threads
                r = h.wait()
                assert [r[j] for j in range(0, 3 * 64, 64)] == [float(k * 64) for k in ks]
        waiters = [threading.Thread(target=lambda hs=handles[j::4]: [h.wait() for h, _ in hs]) for j in range(4)]
        for t in waiters:
            t.start()
        for t in waiters:
            t.join(60)
        assert not any(t.is_alive() for t in waiters)
    for h, ks in handles:
        r = h.wait()
        assert [r[j] for j in range(0, 3 * 64, 64)] == [float(k * 64) for k in ks]
    completes = [e for e in p.events() if e.name == "move.complete"]
    assert len(completes) == 3 * len(handles) and all(e.succeeded for e in completes)
    te.release()


def full(te):
    return sw.Tensor(te, 0, te.canonical_layout())


def test_await_kinds_share_the_completion_base_and_are_read_only():
    te, t = tiled_ramp(tile=2)
    for make in (lambda: te.evict_async(TileSet([(1,)])), lambda: te.project(t, TileSelection([[1]]))):
        h = make()
        assert isinstance(h, sw.AwaitResult)
        assert not hasattr(h, "__await__") and not hasattr(h, "await")
        with pytest.raises(AttributeError):
            h.done = True
        h.wait()
    assert issubclass(AwaitResidency, sw.AwaitResult) and issubclass(AwaitProjection, sw.AwaitResult)
    for cls in (AwaitResidency, AwaitProjection):
        with pytest.raises(TypeError):
            cls()
