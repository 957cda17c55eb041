"""The tiled worker threads run under SCHED_BATCH where the platform has it
(a woken worker does not preempt the thread that woke it: the projection's
waiter), and still run the jobs nobody waits for."""
import os
import sys
import threading

import pytest

import strideweave as sw
from strideweave.carriers import _tiled_work as tw
from strideweave.carriers.tiled_evictable import TileSelection
from conftest import tiled_on_file  # noqa: E402

F32 = sw.DType.Float32

linux_only = pytest.mark.skipif(not (sys.platform.startswith("linux") and hasattr(os, "SCHED_BATCH")),
                                reason="SCHED_BATCH is Linux's; elsewhere the workers keep the default policy")


def workers():
    tw._executor()
    return [t for t in threading.enumerate() if t.name.startswith("strideweave-tiled-")]


on_file = tiled_on_file


@linux_only
def test_every_worker_thread_runs_under_sched_batch():
    ts = workers()
    assert ts
    # a worker sets its policy as it starts: give each one a job first
    done = threading.Barrier(len(ts) + 1, timeout=30)
    for _ in ts:
        tw._executor().submit(lambda _: done.wait(), None)
    done.wait()
    assert [os.sched_getscheduler(t.native_id) for t in ts] == [os.SCHED_BATCH] * len(ts)
    assert os.sched_getscheduler(0) != os.SCHED_BATCH  # the caller's own thread is left alone


def test_a_projection_nobody_waits_for_still_completes_on_a_worker():
    te, w = on_file()
    h = te.project(w, TileSelection([[2, 0]]))
    ts = workers()
    done = threading.Barrier(len(ts) + 1, timeout=30)
    for _ in ts:  # FIFO: the projection's job was queued before these
        tw._executor().submit(lambda _: done.wait(), None)
    done.wait()
    assert h.done
    r = h.wait()
    assert [r.carrier[r.offset + i] for i in range(16)] == [float(v) for v in list(range(16, 24)) + list(range(8))]
    te.release()


def test_a_refused_policy_change_leaves_the_worker_running(monkeypatch):
    def refuse(*args):
        raise PermissionError("not allowed here")
    monkeypatch.setattr(os, "sched_setscheduler", refuse, raising=False)
    tw._disfavour_wakeups()  # swallowed: the thread keeps its policy
    monkeypatch.delattr(os, "sched_setscheduler", raising=False)
    tw._disfavour_wakeups()  # a platform without it: nothing to do
