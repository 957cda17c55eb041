"""Hardening of moves (issue 15 items 4, 5, 7, 10, 11, 12, 16, 19; API.md
section 12): built-in _copy called directly claims its carriers, ownership
tokens are unguessable, blocking moves inside _copy never deadlock the pool,
broadcast moves cost O(cosize), writes re-check after value conversion,
failed handles keep their traceback, prepared transfers live until commit,
participants are claimed before prepare(). Anything that could crash or hang
runs in a subprocess with a timeout."""
import gc
import os
import pathlib
import subprocess
import sys
import textwrap
import threading
import time
import weakref

import pytest

import strideweave as sw
from strideweave.carriers import extension as ext

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE_PARENT = pathlib.Path(sw.__file__).resolve().parent.parent
F32 = sw.DType.Float32
WAIT = 10.0


def run_snippet(code, timeout=120, env_extra=None):
    env = dict(os.environ)
    if env.get("STRIDEWEAVE_BUILD"):
        env["STRIDEWEAVE_BUILD"] = str(ROOT / env["STRIDEWEAVE_BUILD"])
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=PACKAGE_PARENT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def assert_runs(code, timeout=120, env_extra=None):
    r = run_snippet(code, timeout, env_extra)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def lay(shape, stride):
    return sw.Layout(sw.Shape(shape), sw.Stride(stride))


def cpu_tensor(vals):
    c = sw.CPU(len(vals), dtype=F32)
    for i, v in enumerate(vals):
        c[i] = v
    return sw.Tensor(c, 0, sw.Layout.canonical(sw.Shape([len(vals)])))


def values(t):
    return [t[i] for i in range(t.size())]


# ------------------------------------------------------------ item 4

def test_direct_builtin_copy_claims_carriers_and_gives_them_back():
    src = cpu_tensor([1.0, 2.0, 3.0])
    dst = sw.CPU(3, dtype=F32)
    out = sw.Tensor(dst, 0, src.layout)
    sw.ElementwiseMoveOperation()._copy(src, dst, out, 3)
    assert values(out) == [1.0, 2.0, 3.0]
    assert not src.carrier.is_owned() and not dst.is_owned()
    src.carrier.release()  # given back: releasable again
    dst[0] = 9.0


def test_direct_builtin_copy_refuses_a_destination_owned_by_someone_else():
    src = cpu_tensor([1.0, 2.0])
    dst = sw.CPU(2, dtype=F32)
    token = dst._claim_ownership()
    out = sw.Tensor(dst, 0, src.layout)
    with pytest.raises(RuntimeError, match="owned by another carrier or a pending move"):
        sw.ElementwiseMoveOperation()._copy(src, dst, out, 2)
    assert not src.carrier.is_owned()  # the source's claim was given back
    assert dst.is_owned()  # the other owner's claim is untouched
    dst._relinquish_ownership(token)
    assert not dst.is_owned()


def test_direct_builtin_copy_with_owner_access_on_this_thread_works():
    # What TiledEvictable does with its tiers: owned carriers, owner access
    # held by the calling thread.
    src = cpu_tensor([4.0, 5.0])
    dst = sw.CPU(2, dtype=F32)
    ts, td = src.carrier._claim_ownership(), dst._claim_ownership()
    src.carrier._begin_owner_access(ts)
    dst._begin_owner_access(td)
    try:
        out = sw.Tensor(dst, 0, src.layout)
        sw.ElementwiseMoveOperation()._copy(src, dst, out, 2)
    finally:
        src.carrier._end_owner_access(ts)
        dst._end_owner_access(td)
    assert values(out) == [4.0, 5.0]
    assert src.carrier.is_owned() and dst.is_owned()  # our claims stay ours
    src.carrier._relinquish_ownership(ts)
    dst._relinquish_ownership(td)


def test_direct_bulk_copy_claims_carriers():
    src = cpu_tensor([1.0, 2.0, 3.0])
    out = sw.move(cpu_tensor([0.0, 0.0, 0.0]), sw.FileBacked(dtype=F32))
    dst = out.carrier
    sw.CpuToFileBackedMoveOperation()._copy(src, dst, out, 3)
    assert values(out) == [1.0, 2.0, 3.0]
    assert not src.carrier.is_owned() and not dst.is_owned()
    back = sw.CPU(3, dtype=F32)
    out2 = sw.Tensor(back, 0, src.layout)
    sw.FileBackedToCpuMoveOperation()._copy(out, back, out2, 3)
    assert values(out2) == [1.0, 2.0, 3.0]
    dst.release()


def test_release_racing_a_direct_builtin_copy_never_crashes():
    assert_runs("""
        import threading
        import strideweave as sw
        F32 = sw.DType.Float32
        n = 1 << 22
        refused = 0
        for round in range(6):
            src = sw.CPU(n, dtype=F32)
            dst = sw.CPU(n, dtype=F32)
            t = sw.Tensor(src, 0, sw.Layout.canonical(sw.Shape([n])))
            out = sw.Tensor(dst, 0, t.layout)
            started = threading.Event()
            def releaser():
                global refused
                started.wait()
                for c in (src, dst):
                    while True:
                        try:
                            c.release()
                            break
                        except RuntimeError as e:
                            assert "owned" in str(e), e
                            refused += 1
            th = threading.Thread(target=releaser)
            th.start()
            started.set()
            try:
                sw.ElementwiseMoveOperation()._copy(t, dst, out, n)
            except RuntimeError as e:
                assert "released" in str(e) or "owned" in str(e), e
            th.join()
            assert src.is_released() and dst.is_released()
        print("ok", refused)
    """)


# ------------------------------------------------------------ item 5

def test_ownership_tokens_are_not_a_counter():
    cs = [sw.CPU(1) for _ in range(64)]
    tokens = [c._claim_ownership() for c in cs]
    assert all(isinstance(t, int) and t > 0 for t in tokens)
    assert len(set(tokens)) == len(tokens)
    diffs = {b - a for a, b in zip(tokens, tokens[1:])}
    assert len(diffs) > 1  # not consecutive, nor any fixed step
    assert max(tokens) > 2 ** 40  # drawn from 63 random bits
    for c, t in zip(cs, tokens):
        c._relinquish_ownership(t)


def test_guessed_token_cannot_relinquish_a_pending_move():
    from support.carriers import SrcCPU
    from support.moves import Gate, held_operation
    gate = Gate()
    Held = held_operation(gate)
    src = SrcCPU(2, dtype=F32)
    src[0], src[1] = 1.0, 2.0
    t = sw.Tensor(src, 0, sw.Layout.canonical(sw.Shape([2])))
    dst = sw.CPU(2, dtype=F32)
    probe = sw.CPU(1)
    with sw.registered_move_operation(SrcCPU, sw.CPU, Held):
        h = sw.move_async(t, dst)
        try:
            assert gate.entered.wait(WAIT)
            near = probe._claim_ownership()
            probe._relinquish_ownership(near)
            for guess in list(range(1, 300)) + list(range(near - 300, near + 300)):
                for c in (src, dst):
                    try:
                        c._relinquish_ownership(guess)
                    except RuntimeError:
                        pass
            assert src.is_owned() and dst.is_owned()
            with pytest.raises(RuntimeError, match="owned"):
                src.release()
        finally:
            gate.release.set()
        r = h.wait(timeout=WAIT)
    assert values(r) == [1.0, 2.0]


# ------------------------------------------------------------ item 7

def test_many_blocking_moves_inside_copy_do_not_deadlock_the_pool():
    r = assert_runs("""
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
    """, timeout=150)
    assert "done" in r.stdout


# ------------------------------------------------------------ item 10

def test_broadcast_move_costs_cosize_not_logical_size():
    # 2^36 logical elements over one slot: every mode has stride 0.
    src = sw.CPU(1, dtype=F32)
    src[0] = 7.0
    t = sw.Tensor(src, 0, lay([1 << 18, 1 << 18], [0, 0]))
    start = time.perf_counter()
    r = sw.move(t, sw.CPU(1, dtype=F32))
    assert time.perf_counter() - start < 2.0
    assert r.carrier[0] == 7.0 and r.size() == 1 << 36


def test_broadcast_move_through_value_by_value_fallback_costs_cosize():
    class Boxed(sw.Carrier):
        """A Python carrier copied through its slot hooks (no native plan)."""
        calls = 0

        def __init__(self, vals):
            super().__init__()
            self.vals = list(vals)

        def size(self):
            return len(self.vals)

        def dtype(self):
            return sw.DType.Floating

        def get_value(self, i):
            Boxed.calls += 1
            return self.vals[i]

        def set_value(self, i, v):
            self.vals[i] = v

        def _release(self):
            self.vals = []

    src = Boxed([3.0, 4.0])
    t = sw.Tensor(src, 0, lay([2, 1 << 16, 1 << 16], [1, 0, 0]))
    start = time.perf_counter()
    r = sw.move(t, sw.Generic([0.0, 0.0]))
    assert time.perf_counter() - start < 2.0
    assert Boxed.calls <= 4
    assert [r.carrier[0], r.carrier[1]] == [3.0, 4.0]


def test_broadcast_direct_elementwise_copy_costs_cosize():
    src = sw.CPU(3, dtype=F32)
    for i in range(3):
        src[i] = float(i + 1)
    t = sw.Tensor(src, 0, lay([3, 1 << 17, 1 << 17], [1, 0, 0]))
    dst = sw.CPU(3, dtype=F32)
    out = sw.Tensor(dst, 0, t.layout)
    start = time.perf_counter()
    sw.ElementwiseMoveOperation()._copy(t, dst, out, 3)
    assert time.perf_counter() - start < 2.0
    assert [dst[i] for i in range(3)] == [1.0, 2.0, 3.0]


# ------------------------------------------------------------ item 11

def test_write_whose_conversion_starts_a_move_is_refused_not_lost():
    src = sw.CPU(2, dtype=F32)
    src[0], src[1] = 1.0, 2.0
    t = sw.Tensor(src, 0, sw.Layout.canonical(sw.Shape([2])))
    dst = sw.CPU(2, dtype=F32)
    handles = []

    class Sneaky:
        def __float__(self):
            handles.append(sw.move_async(t, dst))
            return 5.0

    with pytest.raises(RuntimeError, match="changed during the write"):
        src[0] = Sneaky()
    r = handles[0].wait(timeout=WAIT)
    assert values(r) == [1.0, 2.0]  # the refused write is not half-applied


def test_write_whose_conversion_claims_the_carrier_is_refused():
    c = sw.CPU(1, dtype=sw.DType.Int32)
    tokens = []

    class Claiming:
        def __index__(self):
            tokens.append(c._claim_ownership())
            return 3

    with pytest.raises(RuntimeError, match="changed during the write"):
        c[0] = Claiming()
    assert c[0] == 0
    c._relinquish_ownership(tokens[0])
    c[0] = 4
    assert c[0] == 4


# ------------------------------------------------------------ item 12

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


# ------------------------------------------------------------ items 16, 19

def _route_family(prepare_hook, result):
    host, packed = type("HardHost", (sw.Carrier,), {}), type("HardPacked", (sw.Carrier,), {})
    from support.extension import list_storage, packed_storage

    def prepare(request):
        held = prepare_hook(request)  # only this closure keeps it

        def submit():
            assert held is not False
            src = request.tensor.carrier
            for i in range(request.physical_span):
                request.destination[i] = src[request.tensor.offset + i]
            return result(request)

        return ext.PreparedTransfer(submit)

    ext.register_carrier_definition(host, ext.CarrierDefinition(
        list_storage(), (ext.TransferRoute(host, packed, "hard-h2p", ext.TransferProvider(prepare)),)))
    ext.register_carrier_definition(packed, ext.CarrierDefinition(packed_storage(), ()))
    return host, packed


def test_participants_are_claimed_while_prepare_runs():
    seen = {}

    def prepare_hook(request):
        src, dst = request.tensor.carrier, request.destination
        seen["owned"] = (src.is_owned(), dst.is_owned())
        for name, c in (("src", src), ("dst", dst)):
            try:
                c[0] = 99.0
                seen[name] = "written"
            except RuntimeError as e:
                seen[name] = str(e)

    Host, Packed = _route_family(prepare_hook, lambda request: None)
    h = Host(2, dtype=F32)
    h[0], h[1] = 1.0, 2.0
    t = sw.Tensor(h, 0, sw.Layout.canonical(sw.Shape([2])))
    with sw.no_grad():
        r = sw.move(t, Packed(2, dtype=F32))
    assert seen["owned"] == (True, True)
    assert "owned" in seen["src"] and "owned" in seen["dst"]
    assert values(r) == [1.0, 2.0]


def test_prepared_transfer_lives_until_terminal_completion():
    class Resource:
        pass

    refs = []
    done = threading.Event()

    class Completion(ext.ProviderCompletion):
        def __init__(self):
            self.done = False

        def wait(self):
            assert done.wait(WAIT)
            self.done = True

    def prepare_hook(request):
        res = Resource()
        refs.append(weakref.ref(res))
        return res

    Host, Packed = _route_family(prepare_hook, lambda request: Completion())
    h = Host(1, dtype=F32)
    h[0] = 3.0
    t = sw.Tensor(h, 0, sw.Layout.canonical(sw.Shape([1])))
    with sw.no_grad():
        handle = sw.move_async(t, Packed(1, dtype=F32))
    gc.collect()
    assert refs[0]() is not None, "the prepared transfer's resources were collected while the move is pending"
    done.set()
    r = handle.wait(timeout=WAIT)
    assert r[0] == 3.0
    del r, handle
    gc.collect()
    assert refs[0]() is None  # dropped after the terminal commit
