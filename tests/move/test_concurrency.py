"""Concurrency: many waiters on one handle, many moves pending at once,
exports from several threads. Every wait and join has a timeout, so a
deadlock fails the test instead of hanging the suite; every result must be
identical to the single-threaded one."""
import sys
import threading

import pytest

import strideweave as sw

from support.builders import F32, canonical, layout, values
from support.carriers import SrcCPU
from support.moves import Gate, WAIT, held_operation
from support.process import assert_child_ok, run_snippet

np = pytest.importorskip("numpy")

THREADS = 8


def src_tensor(vals, cls=SrcCPU, lay=None):
    lay = lay if lay is not None else canonical([len(vals)])
    c = cls(lay.cosize)
    for i in range(lay.cosize):
        c[i] = -1.0
    t = sw.Tensor(c, 0, lay)
    for i, v in enumerate(vals):
        t[i] = v
    return t


def run_threads(target, count, *, args=()):
    """Starts count threads on target(index, *args) behind a barrier; returns
    (results, errors) lists indexed by thread, after joining with a timeout."""
    barrier = threading.Barrier(count)
    results, errors = [None] * count, [None] * count

    def body(k):
        try:
            barrier.wait(WAIT)
            results[k] = target(k, *args)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors[k] = e

    threads = [threading.Thread(target=body, args=(k,), daemon=True) for k in range(count)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(WAIT * 3)
        assert not th.is_alive(), "thread did not finish: deadlock?"
    return results, errors


def no_ownership(*carriers):
    for c in carriers:
        assert not c.is_owned()


# ------------------------------------------------------------ one handle, 8 waiters

def test_eight_threads_wait_on_one_successful_handle():
    gate = Gate()
    with sw.registered_move_operation(SrcCPU, sw.CPU, held_operation(gate)):
        try:
            t = src_tensor([1.0, 2.0, 3.0, 4.0])
            d = sw.CPU(4)
            h = sw.move_async(t, d)
            assert gate.entered.wait(WAIT)
            started = threading.Barrier(THREADS + 1)
            out, errs = [None] * THREADS, [None] * THREADS

            def waiter(k):
                started.wait(WAIT)
                try:
                    out[k] = h.wait(timeout=WAIT)
                except BaseException as e:  # noqa: BLE001
                    errs[k] = e

            threads = [threading.Thread(target=waiter, args=(k,), daemon=True) for k in range(THREADS)]
            for th in threads:
                th.start()
            started.wait(WAIT)
            # All eight are blocked in wait() (GIL released) while the copy is held.
            assert not h.done
            assert all(th.is_alive() for th in threads)
            assert out == [None] * THREADS
        finally:
            gate.release.set()
        for th in threads:
            th.join(WAIT)
            assert not th.is_alive(), "a waiter is stuck"
    assert errs == [None] * THREADS
    first = out[0]
    assert all(r is first for r in out)
    assert first is h.wait(timeout=WAIT)
    assert first.carrier is d and values(first) == [1.0, 2.0, 3.0, 4.0]
    assert t.carrier.is_released()
    assert len(gate.calls) == 1  # one transfer, one terminal commit
    no_ownership(d)
    d[0] = 9.0  # destination writable again


def test_eight_threads_wait_on_one_failed_handle():
    gate = Gate()
    failure = OSError(5, "simulated transfer failure")
    with sw.registered_move_operation(SrcCPU, sw.CPU, held_operation(gate, fail=failure)):
        try:
            t = src_tensor([1.0, 2.0])
            d = sw.CPU(2)
            h = sw.move_async(t, d)
            assert gate.entered.wait(WAIT)
            results, errors = None, None
            release_timer = threading.Timer(0.05, gate.release.set)
            release_timer.start()
            results, errors = run_threads(lambda k: h.wait(timeout=WAIT), THREADS)
        finally:
            gate.release.set()
    assert results == [None] * THREADS
    assert all(e is errors[0] for e in errors)
    assert errors[0] is failure
    with pytest.raises(OSError) as again:
        h.wait(timeout=WAIT)
    assert again.value is failure
    assert not t.carrier.is_released()
    assert values(t) == [1.0, 2.0]
    no_ownership(t.carrier, d)
    t.carrier[0] = 5.0  # source writable again


# ------------------------------------------------------------ 40 moves pending

def test_forty_moves_pending_at_once_then_all_complete():
    count = 40
    gate = Gate()
    entered = threading.Semaphore(0)
    release = threading.Event()

    class Held(sw.ElementwiseMoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            entered.release()
            assert release.wait(WAIT), "test never released the held transfers"
            return super()._copy(tensor, destination, output, element_count)

    sources = [src_tensor([float(k), float(k) + 0.5, -float(k)]) for k in range(count)]
    dests = [sw.CPU(3) for _ in range(count)]
    with sw.registered_move_operation(SrcCPU, sw.CPU, Held):
        try:
            handles = [sw.move_async(s, d) for s, d in zip(sources, dests)]
            # Every one of the 40 copies is running at the same time.
            for _ in range(count):
                assert entered.acquire(timeout=WAIT), "not all 40 transfers started"
            assert not any(h.done for h in handles)
            in_flight = getattr(sw._core, "_moves_in_flight", None)
            if in_flight is not None:
                assert in_flight() >= count
            for s, d in zip(sources, dests):
                assert s.carrier.is_owned() and d.is_owned()
                with pytest.raises(RuntimeError, match="owned"):
                    s.carrier.release()
                assert s[0] == s[0]  # reads continue
        finally:
            release.set()
            gate.release.set()
        results = [h.wait(timeout=WAIT) for h in handles]
    for k, (r, s, d) in enumerate(zip(results, sources, dests)):
        assert r.carrier is d
        assert values(r) == [float(k), float(k) + 0.5, -float(k)]
        assert s.carrier.is_released()
        no_ownership(d)
    assert all(h.done for h in handles)


def test_forty_native_moves_from_several_threads():
    """Real (native) moves started concurrently from 8 threads, 5 each."""
    per = 5
    n = 4096
    lay = layout([64, 64], [1, 64])

    def work(k):
        out = []
        for j in range(per):
            c = sw.CPU(n)
            flat = np.from_dlpack(sw.Tensor(c, 0, canonical([n])))
            flat[:] = np.arange(n, dtype=np.float32) + (k * per + j)
            t = sw.Tensor(c, 0, lay)
            f = sw.move(t, sw.FileBacked(dtype=F32)) if j % 2 else sw.move(t, sw.CPU(n))
            back = sw.move(f, sw.CPU(n))
            out.append(np.from_dlpack(back).copy())
        return out

    results, errors = run_threads(work, THREADS)
    assert errors == [None] * THREADS
    for k, arrs in enumerate(results):
        for j, a in enumerate(arrs):
            expect = (np.arange(n, dtype=np.float32) + (k * per + j)).reshape(64, 64).T  # leaf order
            assert np.array_equal(a, expect)


def test_racing_moves_of_one_tensor_one_wins():
    """Eight threads race to move the same tensor: exactly one move happens,
    the others fail validation with RuntimeError (owned or released)."""
    for _ in range(20):
        t = src_tensor([1.0, 2.0, 3.0], cls=sw.CPU)
        dests = [sw.CPU(3) for _ in range(THREADS)]
        results, errors = run_threads(lambda k: sw.move(t, dests[k]), THREADS)
        winners = [r for r in results if r is not None]
        assert len(winners) == 1
        assert values(winners[0]) == [1.0, 2.0, 3.0]
        for e in errors:
            if e is not None:
                assert isinstance(e, RuntimeError)
                assert "owned" in str(e) or "released" in str(e)
        assert t.carrier.is_released()
        no_ownership(*dests)


# ------------------------------------------------------------ exports

def test_exports_from_several_threads_same_tensor():
    c = sw.CPU(64 * 32)
    t = sw.Tensor(c, 0, layout([32, [4, 16]], [64, [16, 1]]))
    np.from_dlpack(sw.Tensor(c, 0, canonical([c.size()])))[:] = np.arange(c.size(), dtype=np.float32)
    ref = np.from_dlpack(t).copy()
    version = c.version
    refs = sys.getrefcount(t)

    def work(k):
        bad = 0
        for i in range(2000):
            if i % 3 == 0:
                cap = t.__dlpack__()
            elif i % 3 == 1:
                cap = t.__dlpack__(max_version=(1, 0))
            else:
                a = np.from_dlpack(t)
                if a.ctypes.data != c.pointer() or not np.array_equal(a, ref):
                    bad += 1
                del a
                continue
            del cap
        return bad

    results, errors = run_threads(work, THREADS)
    assert errors == [None] * THREADS
    assert results == [0] * THREADS
    assert c.version == version
    assert sys.getrefcount(t) == refs  # every capsule released its tensor reference


def test_exports_while_another_thread_moves_other_tensors():
    shared = src_tensor([float(i) for i in range(256)], cls=sw.CPU)
    ref = np.from_dlpack(shared).copy()

    def work(k):
        if k % 2:
            for _ in range(50):
                t = src_tensor([float(k)] * 256, cls=sw.CPU)
                r = sw.move(t, sw.FileBacked(dtype=F32))
                assert r[255] == float(k)
            return "moved"
        ok = 0
        for _ in range(2000):
            ok += np.array_equal(np.from_dlpack(shared), ref)
        return ok

    results, errors = run_threads(work, THREADS)
    assert errors == [None] * THREADS
    assert results == [2000 if k % 2 == 0 else "moved" for k in range(THREADS)]


def test_many_blocking_moves_inside_copy_do_not_deadlock_the_pool():
    r = assert_child_ok(run_snippet("""
        import threading
        import strideweave as sw
        F32 = sw.DType.Float32
        class Src(sw.CPU): pass
        count = 80
        entered = threading.Semaphore(0)
        go = threading.Event()
        class Nested(sw.ElementwiseMoveOperation):
            def _copy(self, tensor, destination, output, element_count):
                entered.release()
                assert go.wait(30)
                # A blocking move from the worker thread, while every other
                # worker is doing the same.
                inner = sw.Tensor(sw.CPU(1, dtype=F32), 0, sw.Layout.canonical(sw.Shape([1])))
                sw.move(inner, sw.CPU(1, dtype=F32))
                return super()._copy(tensor, destination, output, element_count)
        sw.register_move_operation(Src, sw.CPU, Nested)
        handles = []
        for k in range(count):
            c = Src(1, dtype=F32)
            c[0] = float(k)
            handles.append(sw.move_async(sw.Tensor(c, 0, sw.Layout.canonical(sw.Shape([1]))), sw.CPU(1, dtype=F32)))
        for _ in range(64):
            assert entered.acquire(timeout=30), "64 _copy calls did not start"
        go.set()
        out = [h.wait(timeout=60)[0] for h in handles]
        assert out == [float(k) for k in range(count)], out
        print("done")
    """, timeout=150))
    assert "done" in r.stdout
