"""DLPack export lifetime, threading and autograd interplay (spec: "A capsule
keeps its producer alive but not released storage", "Export changes neither
version tracking nor gradient tracking")."""
import ctypes
import ctypes.util
import gc
import sys
import textwrap
import threading
import weakref

import numpy as np
import pytest

import strideweave as sw

from support.builders import values
from support.dlpack import DELETER_GIL, DELETER_NOGIL, consume, cpu_carrier, cpu_tensor, inspect, layout
from support.process import TESTS_DIR, assert_child_ok, run_python


def ones_like(t):
    n = t.size()
    return sw.Tensor(cpu_carrier([1.0] * n), 0, sw.Layout.canonical(t.layout.shape))


# ------------------------------------------------------ keeping alive


def test_capsule_keeps_the_tensor_alive():
    t = cpu_tensor([1.0, 2.0])
    ref = weakref.ref(t)
    caps = [t.__dlpack__(), t.__dlpack__(max_version=(1, 0))]
    del t
    gc.collect()
    assert ref() is not None
    caps.pop()
    gc.collect()
    assert ref() is not None
    caps.pop()
    assert ref() is None  # the last capsule held the last reference


def test_outlive_the_producing_expression():
    arr = np.from_dlpack(cpu_tensor([1.0, 2.0, 3.0]))
    arr_i = np.from_dlpack(sw.Tensor(cpu_carrier([7, 8, 9], dtype=sw.DType.Int32), 1,
                                     sw.Layout.canonical(sw.Shape(2))))
    gc.collect()
    junk = [cpu_tensor([0.0] * 64) for _ in range(50)]  # reuse freed memory if any was freed
    del junk
    assert arr.tolist() == [1.0, 2.0, 3.0]
    assert arr_i.tolist() == [8, 9]


def test_outlive_the_producing_expression_torch():
    torch = pytest.importorskip("torch")
    tt = torch.from_dlpack(cpu_tensor([4.0, 5.0]))
    gc.collect()
    assert tt.tolist() == [4.0, 5.0]


def test_outlive_the_producing_expression_jax():
    jnp = pytest.importorskip("jax.numpy")
    a = jnp.from_dlpack(sw.Tensor(cpu_carrier([float(i) for i in range(8)]), 0, layout([2, 4], [4, 1])))
    gc.collect()
    assert np.asarray(a).tolist() == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]


# ------------------------------------------------------ freeing once


def test_free_once_for_an_unconsumed_capsule():
    t = cpu_tensor([1.0, 2.0, 3.0])
    base = sys.getrefcount(t)
    cap = t.__dlpack__()
    assert sys.getrefcount(t) == base + 1
    del cap
    assert sys.getrefcount(t) == base  # dropped once, not twice
    for _ in range(10000):
        t.__dlpack__()
        t.__dlpack__(max_version=(1, 0))
    assert sys.getrefcount(t) == base


def test_refcount_back_to_baseline_through_consumers():
    t = cpu_tensor([1.0, 2.0, 3.0])
    base = sys.getrefcount(t)
    arrs = [np.from_dlpack(t) for _ in range(100)]
    assert sys.getrefcount(t) == base + 100
    del arrs
    assert sys.getrefcount(t) == base
    for _ in range(2000):
        np.from_dlpack(t)
    assert sys.getrefcount(t) == base


def test_consumed_capsule_is_left_to_the_consumer():
    for kwargs in [{}, {"max_version": (1, 0)}]:
        t = cpu_tensor([1.0, 2.0])
        base = sys.getrefcount(t)
        cap = t.__dlpack__(**kwargs)
        ptr, deleter = consume(cap)  # renamed to used_dltensor[_versioned]
        del cap  # the capsule must not call the deleter now
        assert sys.getrefcount(t) == base + 1
        DELETER_GIL(deleter)(ptr)  # the consumer's single call
        assert sys.getrefcount(t) == base


def test_release_while_a_capsule_is_outstanding():
    t = cpu_tensor([1.0, 2.0, 3.0])
    c = t.carrier
    old_ptr = c.pointer()
    cap = t.__dlpack__(max_version=(1, 0))
    info = inspect(cap)
    assert info["data"] == old_ptr
    c.release()  # succeeds although a capsule is outstanding
    assert c.is_released() and c.pointer() == 0 and c.size() == 0
    # The buffer still names the old address, which the carrier no longer holds.
    assert inspect(cap)["data"] == old_ptr != c.pointer()
    with pytest.raises(BufferError, match="data pointer must be non-null"):
        t.__dlpack__()
    ref = weakref.ref(t)
    del t
    assert ref() is not None
    del cap  # deleter runs against a released carrier without touching storage
    assert ref() is None


def test_do_not_outlive_released_storage():
    # Release path (always available) ...
    t = cpu_tensor([1.0, 2.0])
    old_ptr = t.carrier.pointer()
    arr = np.from_dlpack(t)
    t.carrier.release()
    assert t.carrier.is_released()
    assert t.carrier.pointer() != arr.ctypes.data == old_ptr
    del arr  # drop the consumer view without reading freed memory


def test_do_not_outlive_released_storage_on_move():
    # MOVE: enable once strideweave.move is merged (movement issue).
    if not hasattr(sw, "move"):
        pytest.skip("strideweave.move not merged yet: the move half of 'Do not outlive released storage'")
    t = cpu_tensor([1.0, 2.0, 3.0])
    src = t.carrier
    old_ptr = src.pointer()
    cap = t.__dlpack__(max_version=(1, 0))
    dest = sw.CPU(3)
    moved = sw.move(t, dest)  # succeeds while the capsule is outstanding
    assert src.is_released() and src.pointer() == 0
    assert moved.carrier is dest and values(moved) == [1.0, 2.0, 3.0]
    # The capsule still names the source storage, which nobody holds now.
    assert inspect(cap)["data"] == old_ptr != dest.pointer()
    ref = weakref.ref(t)
    del t, moved  # the move's autograd node also references the source
    gc.collect()
    assert ref() is not None  # the capsule keeps the (released) tensor alive
    del cap
    gc.collect()
    assert ref() is None


# --------------------------------------------- deleter off the GIL


def test_deleter_called_from_a_thread_without_the_gil():
    for kwargs in [{}, {"max_version": (1, 0)}]:
        t = cpu_tensor([1.0, 2.0])
        ref = weakref.ref(t)
        cap = t.__dlpack__(**kwargs)
        ptr, deleter = consume(cap)
        del cap, t
        assert ref() is not None
        call = DELETER_NOGIL(deleter)  # ctypes drops the GIL around the call
        errors = []

        def run():
            try:
                call(ptr)
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        th = threading.Thread(target=run)
        th.start()
        th.join(timeout=30)
        assert not th.is_alive() and errors == []
        gc.collect()
        assert ref() is None  # the deleter took the GIL and dropped the ref


def test_deleter_called_from_a_native_thread():
    # A pthread with no Python thread state at all: the deleter must create
    # one through PyGILState_Ensure. The deleter's signature is ABI-compatible
    # with a pthread start routine on LP64 (its return value is ignored).
    libc = ctypes.CDLL(ctypes.util.find_library("pthread") or ctypes.util.find_library("c"))
    if not hasattr(libc, "pthread_create"):
        pytest.skip("no pthread_create")
    libc.pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.c_void_p]
    libc.pthread_join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
    t = cpu_tensor([1.0, 2.0])
    ref = weakref.ref(t)
    base = sys.getrefcount(t)
    caps = [t.__dlpack__(), t.__dlpack__(max_version=(3, 0))]
    pairs = [consume(c) for c in caps]
    del caps
    assert sys.getrefcount(t) == base + 2
    for ptr, deleter in pairs:
        tid = ctypes.c_ulong()
        assert libc.pthread_create(ctypes.byref(tid), None, deleter, ptr) == 0
        assert libc.pthread_join(tid, None) == 0  # CDLL call: GIL released while joining
    assert sys.getrefcount(t) == base
    del t
    assert ref() is None


# The deleter runs on a native thread while the main thread holds the GIL
# (inside a PyDLL call, which keeps it). Before Python 3.12 the interpreter's
# "current thread state" is process-wide and names the GIL's holder, so a
# deleter that read it as "this thread holds the GIL" dropped the Tensor with
# no GIL at all, concurrently with the main thread (a crash on CPython 3.10).
# It must wait for the GIL instead: the Tensor dies only after the hold ends.
DELETER_WHILE_ANOTHER_THREAD_HOLDS_THE_GIL = """
import ctypes, ctypes.util, time, weakref
from support.dlpack import consume, cpu_tensor
libc_name = ctypes.util.find_library("pthread") or ctypes.util.find_library("c")
libc = ctypes.CDLL(libc_name)
holding = ctypes.PyDLL(libc_name)  # calls through it keep the GIL
libc.pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
libc.pthread_join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
holding.usleep.argtypes = [ctypes.c_uint]
for kwargs in [{}, {"max_version": (1, 0)}]:
    t = cpu_tensor([1.0, 2.0])
    died = []
    ref = weakref.ref(t, lambda _: died.append(time.monotonic()))
    ptr, deleter = consume(t.__dlpack__(**kwargs))
    del t  # the managed tensor holds the last reference
    tid = ctypes.c_ulong()
    start = time.monotonic()
    assert libc.pthread_create(ctypes.byref(tid), None, deleter, ptr) == 0
    holding.usleep(300000)  # 0.3 s with the GIL held
    assert libc.pthread_join(tid, None) == 0
    assert ref() is None and len(died) == 1
    assert died[0] - start >= 0.25, died[0] - start  # not before the hold ended
print("ok")
"""


def test_deleter_on_another_thread_waits_while_the_gil_is_held_elsewhere():
    if not hasattr(ctypes.CDLL(ctypes.util.find_library("pthread") or ctypes.util.find_library("c")),
                   "pthread_create"):
        pytest.skip("no pthread_create")
    r = run_python(DELETER_WHILE_ANOTHER_THREAD_HOLDS_THE_GIL, pythonpath=[TESTS_DIR], timeout=60)
    assert_child_ok(r)
    assert r.stdout.strip() == "ok"


def test_deleter_preserves_a_pending_exception():
    # The capsule (and, through it, the last Tensor reference) dies while the
    # ValueError unwinds the frame; the deleter must not clobber it.
    def raise_with_capsule(kwargs):
        cap = cpu_tensor([1.0]).__dlpack__(**kwargs)  # noqa: F841
        raise ValueError("sentinel")

    for kwargs in [{}, {"max_version": (1, 0)}]:
        with pytest.raises(ValueError, match="sentinel"):
            raise_with_capsule(kwargs)


def test_deleter_with_gil_held_twice_nested():
    # The capsule destructor already holds the GIL; PyGILState_Ensure nests.
    t = cpu_tensor([1.0])
    base = sys.getrefcount(t)
    ptr, deleter = consume(t.__dlpack__())
    DELETER_GIL(deleter)(ptr)
    assert sys.getrefcount(t) == base


# ------------------------------------------------- interpreter exit


EXIT_SCRIPT = textwrap.dedent("""
    import gc, sys, threading
    import numpy as np
    import strideweave as sw
    from support.dlpack import cpu_tensor, consume

    t = cpu_tensor([1.0, 2.0, 3.0])
    CAPS = [t.__dlpack__(), t.__dlpack__(max_version=(1, 0)), t.__dlpack__(max_version=(9, 9))]
    ARR = np.from_dlpack(cpu_tensor([4.0, 5.0]))
    CONSUMED = consume(cpu_tensor([6.0]).__dlpack__())  # consumer never calls the deleter

    class Cycle:
        pass

    c = Cycle()
    c.me = c
    c.cap = cpu_tensor([7.0]).__dlpack__(max_version=(1, 0))
    c.t = cpu_tensor([8.0])
    c.cap2 = c.t.__dlpack__()
    del c

    hold = threading.Event()
    def worker(cap):
        hold.wait()
    threading.Thread(target=worker, args=(cpu_tensor([9.0]).__dlpack__(),), daemon=True).start()
    try:
        import torch
        TT = torch.from_dlpack(cpu_tensor([10.0]))
    except ImportError:
        pass
    print("exiting", flush=True)
""")


@pytest.mark.parametrize("flags", [[], ["-X", "dev"]], ids=["plain", "dev-mode"])
def test_process_exits_cleanly_with_capsules_alive(flags):
    r = run_python(EXIT_SCRIPT, flags=flags, pythonpath=[TESTS_DIR], timeout=300)
    assert_child_ok(r)
    assert r.stdout.strip() == "exiting"
    assert "Error" not in r.stderr and "Fatal" not in r.stderr, r.stderr


# ------------------------------------------------------- autograd


def test_leave_the_version_unchanged_across_export():
    t = cpu_tensor([1.0, 2.0, 3.0])
    v = t.version
    caps = [t.__dlpack__(), t.__dlpack__(max_version=(1, 0))]
    arr = np.from_dlpack(t)
    assert arr.sum() == 6.0  # the consumer only reads
    del caps, arr
    assert t.version == v
    assert t.carrier.version == v


@pytest.fixture
def needs_autograd():
    if not hasattr(sw, "mul"):
        pytest.skip("autograd operations not merged yet (strideweave.mul is absent)")


def test_miss_a_foreign_write_during_backward(needs_autograd):
    a = cpu_tensor([1.0, 2.0, 3.0])
    b = cpu_tensor([4.0, 5.0, 6.0])
    y = sw.mul(a, b)  # saves a and b with their version tokens
    va = a.version
    arr = np.from_dlpack(a)  # mutable: versioned, writable
    assert arr.flags.writeable
    arr[:] = [10.0, 20.0, 30.0]  # bypasses every carrier entry point
    assert a.version == va
    y.backward(ones_like(y))  # no "modified in-place" error
    assert values(b.grad) == [10.0, 20.0, 30.0]  # g * a read from the modified storage
    assert values(a.grad) == [4.0, 5.0, 6.0]


def test_export_without_disturbing_the_graph(needs_autograd):
    a = cpu_tensor([1.0, 2.0])
    b = cpu_tensor([3.0, 4.0])
    y = sw.mul(a, b)
    z = sw.mul(y, 2.0)
    ctx = y.autograd_ctx
    assert ctx is not None
    assert y.grad is None and a.grad is None
    inputs = ctx.inputs()
    cap_l, cap_v = y.__dlpack__(), y.__dlpack__(max_version=(1, 0))
    assert np.from_dlpack(y).tolist() == [3.0, 8.0]
    assert y.autograd_ctx is ctx and ctx.inputs() == inputs
    assert y.grad is None and a.grad is None and b.grad is None
    assert z.autograd_ctx is not None
    z.backward(ones_like(z))  # traverses the same graph through y
    assert values(a.grad) == [6.0, 8.0]
    assert values(b.grad) == [2.0, 4.0]
    # Gradients are exportable under the same rules.
    ga = a.grad
    gv = ga.version
    assert np.from_dlpack(ga).tolist() == [6.0, 8.0]
    assert inspect(ga.__dlpack__(max_version=(1, 0)))["dtype"] == (2, 32, 1)
    assert ga.version == gv
    del cap_l, cap_v


def test_export_records_no_node(needs_autograd):
    a = cpu_tensor([1.0, 2.0])
    y = sw.mul(a, 3.0)
    ctx = y.autograd_ctx
    np.from_dlpack(a)
    np.from_dlpack(y)
    assert a.autograd_ctx is None  # still a leaf
    assert y.autograd_ctx is ctx
    y.backward(ones_like(y))
    assert values(a.grad) == [3.0, 3.0]


# ------------------------------------------------------------ version tokens and the graph across export


def test_a_foreign_write_leaves_every_snapshotted_version_token_equal():
    a = cpu_tensor([1.0, 2.0, 3.0])
    b = cpu_tensor([4.0, 5.0, 6.0])
    y = sw.mul(a, b)
    node = y.autograd_ctx
    tokens = node.input_versions()
    arr = np.from_dlpack(a)
    assert arr.flags.writeable
    arr[:] = [7.0, 8.0, 9.0]
    assert node.input_versions() == tokens
    assert tuple(t.version for t in node.inputs()) == tokens
    y.backward(cpu_tensor([1.0, 1.0, 1.0]))
    assert [b.grad[i] for i in range(3)] == [7.0, 8.0, 9.0]


def test_export_leaves_a_non_leaf_grad_and_ctx_as_they_were():
    a = cpu_tensor([1.0, 2.0])
    y = sw.mul(a, 3.0)
    y.retain_grad()
    z = sw.mul(y, 2.0)
    z.backward(cpu_tensor([1.0, 1.0]), retain_graph=True)
    grad, ctx, version = y.grad, y.autograd_ctx, y.version
    assert grad is not None and [grad[i] for i in range(2)] == [2.0, 2.0]
    caps = [y.__dlpack__(), y.__dlpack__(max_version=(1, 0)), grad.__dlpack__(max_version=(1, 0))]
    assert np.from_dlpack(y).tolist() == [3.0, 6.0]
    assert y.grad is grad and y.autograd_ctx is ctx and y.version == version
    assert [grad[i] for i in range(2)] == [2.0, 2.0]
    # The same graph is traversed again: gradients accumulate.
    z.backward(cpu_tensor([1.0, 1.0]))
    assert [a.grad[i] for i in range(2)] == [12.0, 12.0]
    del caps
