"""Cheap moves (issue 11): a small native CPU->CPU move completes on the
calling thread (its handle is done when move_async returns), a blocking move
copies on the calling thread, and a large host copy is split across the
worker pool; every movement rule still holds."""
import threading

import numpy as np
import pytest

import strideweave as sw

from support.builders import cpu_tensor, layout
from support.moves import WAIT

F32 = sw.DType.Float32


def filled(n, lay=None, offset=0, size=None):
    """A Float32 CPU tensor whose slot i holds float(i)."""
    c = sw.CPU(size or n, empty=True)
    flat = np.from_dlpack(sw.Tensor(c, 0, sw.Layout(sw.Shape(size or n), sw.Stride(1))))
    flat[:] = np.arange(size or n, dtype=np.float32)
    return sw.Tensor(c, offset, lay or sw.Layout(sw.Shape(n), sw.Stride(1)))


def flat(c, n):
    return np.from_dlpack(sw.Tensor(c, 0, sw.Layout(sw.Shape(n), sw.Stride(1))))


# ------------------------------------------------------------ inline completion

def test_small_cpu_move_is_done_when_move_async_returns():
    t = cpu_tensor([1.0, 2.0, 3.0])
    src, d = t.carrier, sw.CPU(3)
    h = sw.move_async(t, d)
    assert h.done and repr(h) == "<AwaitMove done>"
    # The terminal commit already happened: published, released, given back.
    assert src.is_released() and not src.is_owned()
    assert not d.is_owned() and d.is_mutable()
    out = h.wait(timeout=WAIT)
    assert out is h.wait(timeout=WAIT) and out.carrier is d
    assert [out[i] for i in range(3)] == [1.0, 2.0, 3.0]
    assert sw._core._moves_in_flight() == 0


def test_inline_move_keeps_versions_and_records_the_node():
    t = cpu_tensor([1.0, 2.0])
    d = sw.CPU(2)
    v_src, v_dst = t.carrier.version, d.version
    out = sw.move(t, d)
    assert d.version == v_dst and t.carrier.version == v_src  # a move is not a write
    assert isinstance(out.autograd_ctx, sw.ElementwiseMoveOperation)
    assert out.autograd_ctx.inputs() == (t,)
    with sw.no_grad():
        out2 = sw.move(cpu_tensor([1.0]), sw.CPU(1))
    assert out2.autograd_ctx is None


def test_inline_move_strided_source_with_offset():
    t = filled(3, layout([3], [4]), offset=2, size=12)
    out = sw.move_async(t, sw.CPU(12)).wait(timeout=WAIT)
    assert [out[i] for i in range(3)] == [2.0, 6.0, 10.0]
    # The result is at offset 0 with the same layout; slots no coordinate
    # reaches keep the destination's values.
    assert flat(out.carrier, 12).tolist() == [2.0, 0.0, 0.0, 0.0, 6.0, 0.0, 0.0, 0.0, 10.0, 0.0, 0.0, 0.0]


def test_validation_still_raises_before_anything_inline():
    t = cpu_tensor([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="too small"):
        sw.move_async(t, sw.CPU(2))
    with pytest.raises(TypeError, match="dtype must match"):
        sw.move_async(t, sw.CPU(3, dtype=sw.DType.Int32))
    assert not t.carrier.is_owned() and not t.carrier.is_released()


def test_profiled_small_move_still_pairs_its_events():
    with sw.profile() as p:
        h = sw.move_async(cpu_tensor([1.0, 2.0]), sw.CPU(2))
        h.wait(timeout=WAIT)
        sw.move(cpu_tensor([3.0]), sw.CPU(1))
    evs = [e for e in p.events() if e.name.startswith("move.")]
    submits = [e for e in evs if e.name == "move.submit"]
    completes = [e for e in evs if e.name == "move.complete"]
    assert len(submits) == len(completes) == 2
    assert {c.parent_id for c in completes} == {s.id for s in submits}
    assert all(s.thread_id == threading.get_ident() and s.succeeded for s in submits)
    assert all(c.succeeded for c in completes)


def test_larger_async_move_is_submitted_not_waited_for():
    # Above the inline bound the handle may still be pending on return; the
    # result is the same either way.
    n = 1 << 16  # 256 KiB
    t = filled(n)
    h = sw.move_async(t, sw.CPU(n, empty=True))
    out = h.wait(timeout=WAIT)
    assert h.done and np.array_equal(flat(out.carrier, n), np.arange(n, dtype=np.float32))


def test_subclassed_cpu_carriers_complete_on_a_worker():
    # A carrier class that may run Python code at release is never committed
    # inline (its hook may block on another thread).
    released_on = []

    class HookCPU(sw.CPU):
        def _release(self):
            released_on.append(threading.get_ident())
            return super()._release()

    t = sw.Tensor(HookCPU(2, dtype=F32), 0, sw.Layout.canonical(sw.Shape([2])))
    sw.move_async(t, sw.CPU(2)).wait(timeout=WAIT)
    assert released_on and released_on[0] != threading.get_ident()


# ------------------------------------------------------------ split large copies

BIG = 10 * 1024 * 1024  # elements: 40 MiB of Float32, above the split bound


@pytest.mark.parametrize("asynchronous", [False, True])
def test_split_contiguous_copy_with_offset(asynchronous):
    t = filled(BIG, offset=5, size=BIG + 9)
    d = sw.CPU(BIG, empty=True)
    out = sw.move_async(t, d).wait(timeout=WAIT) if asynchronous else sw.move(t, d)
    assert np.array_equal(flat(out.carrier, BIG), np.arange(5, BIG + 5, dtype=np.float32))


@pytest.mark.parametrize("asynchronous", [False, True])
def test_split_strided_copy_with_holes(asynchronous):
    rows, cols, pitch = 2000, 5000, 5003  # holes at the end of every row
    lay = layout([rows, cols], [pitch, 1])
    size = 3 + pitch * rows
    t = filled(rows * cols, lay, offset=3, size=size)
    d = sw.CPU(lay.cosize)  # zeroed: holes must stay 0
    out = sw.move_async(t, d).wait(timeout=WAIT) if asynchronous else sw.move(t, d)
    got = flat(out.carrier, lay.cosize)
    want = np.zeros(lay.cosize, dtype=np.float32)
    idx = (np.arange(rows)[:, None] * pitch + np.arange(cols)[None, :]).ravel()
    want[idx] = idx.astype(np.float32) + 3
    assert np.array_equal(got, want)


def test_split_transposed_copy():
    rows, cols = 3000, 4000
    lay = layout([rows, cols], [1, rows])  # first mode fastest in memory
    t = filled(rows * cols, lay)
    out = sw.move(t, sw.CPU(rows * cols, empty=True))
    assert np.array_equal(flat(out.carrier, rows * cols), np.arange(rows * cols, dtype=np.float32))
    assert out.layout == lay


def test_split_copy_to_file_and_back():
    t = filled(BIG)
    f = sw.move(t, sw.FileBacked(dtype=F32))
    back = sw.move(f, sw.CPU(BIG, empty=True))
    assert np.array_equal(flat(back.carrier, BIG), np.arange(BIG, dtype=np.float32))


# ------------------------------------------------------------ the commit lane

def test_burst_of_native_async_moves_all_commit():
    # Above the inline bound: copied on workers, committed through the lane.
    n = 1 << 14  # 64 KiB
    ts = [filled(n) for _ in range(48)]
    ds = [sw.CPU(n, empty=True) for _ in range(48)]
    with sw.profile() as p:
        hs = [sw.move_async(t, d) for t, d in zip(ts, ds)]
        outs = [h.wait(timeout=WAIT) for h in hs]
    want = np.arange(n, dtype=np.float32)
    for t, d, h, out in zip(ts, ds, hs, outs):
        assert h.done and out.carrier is d and np.array_equal(flat(d, n), want)
        assert t.carrier.is_released() and not d.is_owned()
    assert sw._core._moves_in_flight() == 0
    evs = [e for e in p.events() if e.name.startswith("move.")]
    submits = {e.id for e in evs if e.name == "move.submit"}
    completes = [e for e in evs if e.name == "move.complete"]
    assert len(submits) == len(completes) == 48
    assert {c.parent_id for c in completes} == submits
    assert all(c.succeeded and c.thread_id != threading.get_ident() for c in completes)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_native_async_moves_work_in_a_forked_child():
    import os

    n = 1 << 16
    sw.move_async(filled(n), sw.CPU(n, empty=True)).wait(timeout=WAIT)  # the lane is in use
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            out = sw.move_async(filled(n), sw.CPU(n, empty=True)).wait(timeout=WAIT)
            code = 0 if np.array_equal(flat(out.carrier, n), np.arange(n, dtype=np.float32)) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
