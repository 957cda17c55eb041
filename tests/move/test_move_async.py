"""move_async and the completion handles, tested deterministically with a
held transfer: a registered MoveOperation whose _copy waits on an Event.
Every wait has a timeout (spec: move_async, AwaitResult, eager submission,
one terminal boundary, lifetime through completion)."""
import gc
import threading
import time
import weakref

import pytest

import strideweave as sw

from support.builders import F32, canonical, cpu_tensor, values
from support.carriers import ListCarrier, SrcCPU
from support.moves import Gate, WAIT, held_operation
from support.process import assert_child_ok, run_python


def src_tensor(vals=(1.0, 2.0, 3.0)):
    c = SrcCPU(len(vals))
    for i, v in enumerate(vals):
        c[i] = v
    return sw.Tensor(c, 0, canonical([len(vals)]))


@pytest.fixture
def held():
    """(gate, op class) registered for (SrcCPU, CPU); the gate is always
    released at teardown so no transfer outlives the test."""
    gate = Gate()
    op = held_operation(gate)
    with sw.registered_move_operation(SrcCPU, sw.CPU, op):
        try:
            yield gate, op
        finally:
            gate.release.set()


def wait_until(pred, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.001)


# ------------------------------------------------------------ AwaitResult surface

def test_handles_are_not_constructible_and_not_awaitable():
    for cls in (sw.AwaitResult, sw.AwaitMove):
        with pytest.raises(TypeError):
            cls()
        assert not hasattr(cls, "__await__")
    h = sw.move_async(cpu_tensor([1.0]), sw.CPU(1))
    assert not hasattr(h, "__await__")
    with pytest.raises(TypeError):
        _ = [x for x in h]
    with pytest.raises(AttributeError):
        h.done = True
    h.wait(timeout=WAIT)


def test_handles_are_weak_referenceable():
    h = sw.move_async(cpu_tensor([1.0]), sw.CPU(1))
    r = weakref.ref(h)
    assert r() is h
    h.wait(timeout=WAIT)
    del h
    gc.collect()
    assert r() is None


def test_wait_timeout_raises_timeout_error_and_keeps_the_move(held):
    gate, _ = held
    t = src_tensor()
    h = sw.move_async(t, sw.CPU(3))
    with pytest.raises(TimeoutError):
        h.wait(timeout=0.01)
    assert not h.done
    gate.release.set()
    assert values(h.wait(timeout=WAIT)) == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError):
        h.wait(timeout=-1)


# ------------------------------------------------------------ eager submission

def test_return_while_a_device_copy_is_pending(held):
    gate, op = held
    t = src_tensor()
    d = sw.CPU(3)
    h = sw.move_async(t, d)
    # move_async returned while the transfer is held open.
    assert gate.entered.wait(WAIT)
    assert not h.done
    assert repr(h) == "<AwaitMove pending>"
    assert gate.thread_ids[0] != threading.get_ident()  # it runs on a worker
    gate.release.set()
    out = h.wait(timeout=WAIT)
    assert h.done and repr(h) == "<AwaitMove done>"
    assert values(out) == [1.0, 2.0, 3.0] and out.carrier is d
    [(op_inst, tensor, dest, output, count)] = gate.calls
    assert type(op_inst) is op and tensor is t and dest is d and output is out and count == 3


def test_ownership_protects_both_carriers_while_pending(held):
    gate, _ = held
    t = src_tensor()
    src, d = t.carrier, sw.CPU(3)
    h = sw.move_async(t, d)
    assert gate.entered.wait(WAIT)
    for c in (src, d):
        assert c.is_owned() and not c.is_mutable()
        with pytest.raises(RuntimeError, match="mutable"):
            c[0] = 5.0
        with pytest.raises(RuntimeError, match="owned"):
            c.release()
        with pytest.raises(RuntimeError, match="owned"):
            c._claim_ownership()
    # A second move of the source, or into the destination, is refused.
    with pytest.raises(RuntimeError, match="owned"):
        sw.move_async(t, sw.CPU(3))
    with pytest.raises(RuntimeError, match="mutable"):
        sw.move_async(cpu_tensor([1.0, 2.0, 3.0]), d)
    with pytest.raises(RuntimeError, match="owned"):
        sw.move_async(sw.Tensor(d, 0, canonical([3])), sw.CPU(3))
    # Reads continue.
    assert values(t) == [1.0, 2.0, 3.0]
    assert src[2] == 3.0 and d[0] == 0.0
    assert not t.is_mutable()
    gate.release.set()
    h.wait(timeout=WAIT)
    # The move holds no ownership any more: destination writable, source released.
    assert not d.is_owned() and d.is_mutable()
    d[0] = 4.0
    assert src.is_released() and not src.is_owned()


def test_failure_restores_source_usability(held):
    gate, _ = held
    t = src_tensor()
    d = sw.CPU(2)  # too small: fails before submission, nothing held
    with pytest.raises(ValueError, match="too small"):
        sw.move_async(t, d)
    assert not gate.entered.is_set()
    assert not t.carrier.is_owned() and t.carrier.is_mutable()


def test_many_held_moves_do_not_starve_the_pool(held):
    gate, _ = held
    handles = [sw.move_async(src_tensor([float(i)]), sw.CPU(1)) for i in range(8)]
    wait_until(lambda: len(gate.calls) == 8)  # every held hook entered at once
    plain = sw.move_async(cpu_tensor([5.0]), sw.CPU(1))  # an unheld native move still completes
    assert values(plain.wait(timeout=WAIT)) == [5.0]
    assert not any(h.done for h in handles)
    gate.release.set()
    assert sorted(values(h.wait(timeout=WAIT))[0] for h in handles) == [float(i) for i in range(8)]


# ------------------------------------------------------------ one terminal boundary

def test_wait_for_a_move_more_than_once(held):
    gate, _ = held
    h = sw.move_async(src_tensor(), sw.CPU(3))
    results = []
    threads = [threading.Thread(target=lambda: results.append(h.wait(timeout=WAIT))) for _ in range(2)]
    for th in threads:
        th.start()
    gate.release.set()
    for th in threads:
        th.join(WAIT)
    assert len(results) == 2 and results[0] is results[1]
    assert h.wait(timeout=WAIT) is results[0]


def test_eight_threads_get_the_identical_result(held):
    gate, _ = held
    h = sw.move_async(src_tensor(), sw.CPU(3))
    results = []
    lock = threading.Lock()
    barrier = threading.Barrier(9, timeout=WAIT)

    def waiter():
        barrier.wait()
        r = h.wait(timeout=WAIT)
        with lock:
            results.append(r)

    threads = [threading.Thread(target=waiter) for _ in range(8)]
    for th in threads:
        th.start()
    barrier.wait()
    gate.release.set()
    for th in threads:
        th.join(WAIT)
    assert len(results) == 8
    assert all(r is results[0] for r in results)
    assert len(gate.calls) == 1  # one transfer, one terminal commit


def test_fail_one_asynchronous_move():
    gate = Gate()
    failure = OSError("transfer failed")
    op = held_operation(gate, fail=failure)
    with sw.registered_move_operation(SrcCPU, sw.CPU, op):
        t = src_tensor()
        d = sw.CPU(3)
        v_src, v_dst = t.carrier.version, d.version
        h = sw.move_async(t, d)
        assert gate.entered.wait(WAIT)
        gate.release.set()
        with pytest.raises(OSError) as e1:
            h.wait(timeout=WAIT)
    assert e1.value is failure
    assert h.done and repr(h) == "<AwaitMove failed>"
    # The source is live, unchanged and usable; nothing is owned any more.
    assert not t.carrier.is_released() and not t.carrier.is_owned()
    assert values(t) == [1.0, 2.0, 3.0]
    assert t.carrier.version == v_src and d.version == v_dst
    t.carrier[0] = 9.0
    assert d.is_mutable()


def test_failure_is_recorded_once_for_every_waiter():
    gate = Gate()
    op = held_operation(gate, fail=ValueError("bad transfer"))
    with sw.registered_move_operation(SrcCPU, sw.CPU, op):
        h = sw.move_async(src_tensor(), sw.CPU(3))
        caught = []
        lock = threading.Lock()

        def waiter():
            try:
                h.wait(timeout=WAIT)
            except ValueError as e:
                with lock:
                    caught.append(e)

        threads = [threading.Thread(target=waiter) for _ in range(8)]
        for th in threads:
            th.start()
        gate.release.set()
        for th in threads:
            th.join(WAIT)
    assert len(caught) == 8 and all(e is caught[0] for e in caught)
    with pytest.raises(ValueError) as again:
        h.wait(timeout=WAIT)
    assert again.value is caught[0]
    assert len(gate.calls) == 1


def test_wait_releases_the_gil(held):
    """The held hook needs the GIL to finish; a Python thread releases it
    while the main thread is blocked in wait()."""
    gate, _ = held
    h = sw.move_async(src_tensor(), sw.CPU(3))
    progress = []

    def other():
        assert gate.entered.wait(WAIT)
        for i in range(1000):
            progress.append(i)
        gate.release.set()

    th = threading.Thread(target=other)
    th.start()
    out = h.wait(timeout=WAIT)
    th.join(WAIT)
    assert len(progress) == 1000 and values(out) == [1.0, 2.0, 3.0]


# ------------------------------------------------------------ lifetime through completion

def test_drop_a_pending_handle(held):
    gate, _ = held
    t = src_tensor()
    src, d = t.carrier, sw.CPU(3)
    h = sw.move_async(t, d)
    assert gate.entered.wait(WAIT)
    ref = weakref.ref(h)
    start = time.monotonic()
    del h
    gc.collect()
    assert time.monotonic() - start < WAIT / 2  # dropping did not block on the transfer
    # The move keeps its handle and participants alive and protected.
    assert ref() is not None
    assert src.is_owned() and d.is_owned() and not src.is_released()
    del t
    gc.collect()
    gate.release.set()
    wait_until(lambda: ref() is None)  # the job let go after its terminal commit
    assert src.is_released() and not d.is_owned()
    assert [d[i] for i in range(3)] == [1.0, 2.0, 3.0]


def test_dropped_native_handle_still_completes():
    big = cpu_tensor([float(i) for i in range(1 << 16)])
    src = big.carrier
    d = sw.CPU(1 << 16, empty=True)
    ref = weakref.ref(sw.move_async(big, d))
    del big
    wait_until(lambda: ref() is None)
    assert src.is_released() and not d.is_owned()
    assert d[12345] == 12345.0


def test_grad_mode_is_thread_local_in_hooks(held):
    gate, _ = held
    seen = []

    class Probe(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            seen.append(sw.is_grad_enabled())
            output[0] = tensor[0]

    with sw.registered_move_operation(sw.CPU, SrcCPU, Probe):
        assert sw.is_grad_enabled()
        sw.move(cpu_tensor([1.0]), SrcCPU(1))
    assert seen == [False] and sw.is_grad_enabled()


def test_pending_move_completes_at_interpreter_exit(tmp_path):
    """A handle dropped just before exit is neither cancelled nor left
    half-done: exit waits for the terminal commit."""
    import textwrap

    marker = tmp_path / "done.txt"
    script = textwrap.dedent(f"""
        import threading
        import strideweave as sw

        gate = threading.Event()

        class Slow(sw.ElementwiseMoveOperation):
            def _copy(self, tensor, destination, output, element_count):
                assert gate.wait(10)
                super()._copy(tensor, destination, output, element_count)
                open({str(marker)!r}, "w").write(str(output[0]))

        class Src(sw.CPU):
            pass

        sw.register_move_operation(Src, sw.CPU, Slow)
        c = Src(1)
        c[0] = 7.0
        sw.move_async(sw.Tensor(c, 0, sw.Layout.canonical(sw.Shape([1]))), sw.CPU(1))
        threading.Timer(0.2, gate.set).start()
    """)
    r = run_python(script, timeout=60)
    assert_child_ok(r)
    assert marker.read_text() == "7.0"


def test_moves_do_not_leak_objects():
    def once():
        h = sw.move_async(cpu_tensor([1.0, 2.0]), sw.FileBacked(dtype=sw.DType.Float32))
        sw.move(h.wait(timeout=WAIT), sw.CPU(2))
        with pytest.raises(ValueError):
            sw.move(cpu_tensor([1.0, 2.0]), sw.CPU(1))

    for _ in range(50):
        once()
    gc.collect()
    before = len(gc.get_objects())
    for _ in range(300):
        once()
    gc.collect()
    assert len(gc.get_objects()) - before < 50


# ------------------------------------------------------------ one terminal boundary: publication before the source's release


class ObservedRelease(ListCarrier):
    """A Python source carrier whose release hook records what the move has
    published at the moment the source is released."""

    def __init__(self, vals, fail=None):
        super().__init__(vals, F32, cast=float)
        self.fail = fail
        self.seen = None
        self.watch = None  # (handle box, destination) set by the test

    def _release(self):
        box, dest = self.watch
        self.seen = {"done": box[0].done, "dest_owned": dest.is_owned(),
                     "dest_values": [dest[i] for i in range(dest.size())]}
        if self.fail is not None:
            raise self.fail
        self.vals = []


def test_result_publishes_before_the_source_is_released_and_success_is_recorded_last():
    src = ObservedRelease([1.0, 2.0])
    dest = sw.CPU(2)
    box = [None]
    src.watch = (box, dest)
    gate = threading.Event()

    class Held(sw.ElementwiseMoveOperation):
        def _copy(self, *args):
            assert gate.wait(WAIT)
            super()._copy(*args)

    with sw.registered_move_operation(ObservedRelease, sw.CPU, Held):
        box[0] = sw.move_async(sw.Tensor(src, 0, canonical([2])), dest)
        gate.set()
        out = box[0].wait(timeout=WAIT)
    # At release time the destination held the values and was no longer
    # owned by the move, while the handle had not recorded success yet.
    assert src.seen == {"done": False, "dest_owned": False, "dest_values": [1.0, 2.0]}
    assert src.is_released() and box[0].done
    assert out.carrier is dest and values(out) == [1.0, 2.0]


def test_a_failing_source_release_fails_the_move_and_publishes_nothing():
    src = ObservedRelease([1.0, 2.0], fail=OSError("cannot let go"))
    dest = sw.CPU(2)
    box = [None]
    src.watch = (box, dest)
    t = sw.Tensor(src, 0, canonical([2]))
    box[0] = sw.move_async(t, dest)
    with pytest.raises(OSError, match="cannot let go") as first:
        box[0].wait(timeout=WAIT)
    with pytest.raises(OSError) as second:
        box[0].wait(timeout=WAIT)
    assert first.value is second.value
    assert not src.is_released() and not src.is_owned() and values(t) == [1.0, 2.0]
    assert not dest.is_owned() and dest.is_mutable() and dest.version == 0


def test_wait_on_failed_handle_keeps_the_original_traceback():
    from support.carriers import SrcCPU

    class Failing(sw.ElementwiseMoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            raise ValueError("boom")

    src = SrcCPU(1, dtype=F32)
    with sw.registered_move_operation(SrcCPU, sw.CPU, Failing):
        h = sw.move_async(sw.Tensor(src, 0, sw.Layout.canonical(sw.Shape([1]))), sw.CPU(1, dtype=F32))
        seen = []
        for _ in range(200):
            try:
                h.wait(timeout=WAIT)
            except ValueError as e:
                seen.append(e)
    first = seen[0]
    assert all(e is first for e in seen)

    def depth(tb):
        n = 0
        while tb is not None:
            n, tb = n + 1, tb.tb_next
        return n

    d = depth(first.__traceback__)
    for _ in range(50):
        try:
            h.wait()
        except ValueError as e:
            assert e is first
            assert depth(e.__traceback__) == d  # no growth per call
    assert "boom" in str(first)
