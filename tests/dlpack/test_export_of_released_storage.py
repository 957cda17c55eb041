"""Memory safety of DLPack exports of released storage (API.md section 12,
first bullet; spec "A capsule keeps its producer alive but not released
storage"; issue 15 items 1, 3 and 6 for the export path).

Releasing (release() or a move) CPU storage that NumPy, torch or JAX still
view leaves the range mapped and reading zeros; its physical memory goes
back at once (for every buffer of 1 MiB and up) and the range itself when the last view
dies. Export takes item size, size and pointer from the native storage and
refuses hooks that disagree. Everything that could crash before the fix runs
in a subprocess with a timeout."""
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import strideweave as sw
from strideweave import CPU, Layout, Shape, Stride, Tensor

from support.process import REPO as ROOT, assert_child_ok

PACKAGE_PARENT = pathlib.Path(sw.__file__).resolve().parent.parent

# Shared by every snippet: memory figures from /proc and a CPU tensor.
PRELUDE = """
import gc, sys
import numpy as np
import strideweave as sw

def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)

import os
# Under ASan (tools/test_asan.sh) every buffer lives on ASan's heap and freed
# memory sits in its quarantine, so "the range is unmapped" cannot be seen;
# the lifetimes are still exercised (a use-after-free would be reported).
SANITIZED = bool(os.environ.get("STRIDEWEAVE_SANITIZED"))

def unmapped(address):
    return SANITIZED or not mapped(address)

def mapped(address):
    # True when some mapping of this process covers address.
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= address < hi:
                return True
    return False

def tensor(n, dtype=sw.DType.Float32):
    c = sw.CPU(n, dtype=dtype)
    return c, sw.Tensor(c, 0, sw.Layout(sw.Shape(n), sw.Stride(1)))

SMALL = 256              # heap buffer
LARGE = 4 << 20          # 16 MiB of Float32: an anonymous mapping
MiB = 1 << 20
"""


def run(code, timeout=120):
    env = dict(os.environ)
    if env.get("STRIDEWEAVE_BUILD"):
        env["STRIDEWEAVE_BUILD"] = str(ROOT / env["STRIDEWEAVE_BUILD"])
    r = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], cwd=PACKAGE_PARENT, env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert_child_ok(r)
    return r.stdout


# The consumer's view of t, and how to read it back as a NumPy array.
CONSUMERS = {
    "numpy": ("view = np.from_dlpack(t)", "def read(v): return np.asarray(v)",
              "def write(v, x): v[:] = x"),
    "torch": ("import torch; view = torch.from_dlpack(t)", "def read(v): return v.numpy()",
              "def write(v, x): v.fill_(x)"),
    # JAX imports 64-byte aligned CPU memory zero-copy; its arrays are
    # immutable, so a stray write goes through a NumPy view of the same export.
    "jax": ("import jax.numpy as jnp; view = jnp.from_dlpack(t); alias = np.from_dlpack(t)",
            "def read(v): return np.asarray(v)", "def write(v, x): alias[:] = x"),
}


@pytest.mark.parametrize("consumer", sorted(CONSUMERS))
@pytest.mark.parametrize("size", ["SMALL", "LARGE"])
@pytest.mark.parametrize("how", ["release", "move"])
def test_view_reads_zeros_after_release_and_writes_corrupt_nothing(consumer, size, how):
    if consumer != "numpy":  # optional consumers: skip with the reason where absent
        pytest.importorskip(consumer)
    take, read, write = CONSUMERS[consumer]
    out = run(f"""
        n = {size}
        c, t = tensor(n)
        np.from_dlpack(t)[:] = np.arange(n, dtype=np.float32) + 1
        {take}
        {read}
        {write}
        assert read(view)[n - 1] == n
        ptr = c.pointer()
        if "{how}" == "release":
            c.release()
        else:
            moved = sw.move(t, sw.CPU(n))
            assert moved.carrier[n - 1] == n  # the move copied before releasing
        assert c.is_released() and c.pointer() == 0 and c.size() == 0
        assert mapped(ptr)
        assert not read(view).any(), "released storage must read as zeros"
        # Fresh objects allocated now must not share the retired range.
        others = [np.full(n, 7, np.float32), tensor(n)[1], sw.CPU(n)]
        np.from_dlpack(others[1])[:] = 9
        write(view, 123)
        assert (others[0] == 7).all()
        assert (np.from_dlpack(others[1]) == 9).all()
        assert not np.from_dlpack(sw.Tensor(others[2], 0, t.layout)).any()
        print("ok")
    """)
    assert out.strip() == "ok"


@pytest.mark.skipif(bool(os.environ.get("STRIDEWEAVE_SANITIZED")),
                    reason="ASan keeps every buffer on its heap (no mappings) and bloats RSS: the bound is moot")
def test_released_export_returns_physical_memory_and_frees_range_with_last_view():
    out = run("""
        n = 16 * MiB                  # 64 MiB of Float32
        c, t = tensor(n)
        view = np.from_dlpack(t)
        view[:] = 1.0                 # fault every page in
        ptr = c.pointer()
        rss0, vm0 = status("VmRSS"), status("VmSize")
        c.release()
        rss1, vm1 = status("VmRSS"), status("VmSize")
        assert rss0 - rss1 > 48 * MiB, ("physical memory not returned", rss0, rss1)
        assert abs(vm0 - vm1) < 4 * MiB, ("range must stay mapped", vm0, vm1)
        assert mapped(ptr) and view.sum() == 0
        del view
        gc.collect()
        vm2 = status("VmSize")
        assert vm1 - vm2 > 48 * MiB, ("range not unmapped with the last view", vm1, vm2)
        assert unmapped(ptr)
        print("ok")
    """)
    assert out.strip() == "ok"


@pytest.mark.skipif(bool(os.environ.get("STRIDEWEAVE_SANITIZED")),
                    reason="ASan keeps freed memory in its quarantine and bloats RSS: the bound is moot")
@pytest.mark.parametrize("mib", [1, 4, 16, 31])
def test_released_heap_buffers_of_a_mib_and_up_return_their_memory_while_exported(mib):
    # Below the 32 MiB mapping threshold buffers live on the heap; released
    # with a view outstanding, their pages still go back at once.
    out = run(f"""
        n = {mib} * MiB // 4
        c, t = tensor(n)
        view = np.from_dlpack(t)
        view[:] = 3.0                 # fault every page in
        rss0 = status("RssAnon")
        c.release()
        rss1 = status("RssAnon")
        assert rss0 - rss1 >= {mib} * MiB - 64 * 1024, ("physical memory kept", rss0, rss1)
        assert not view.any()         # and the view reads zeros
        view[:] = 1.0                 # a stray write touches only the retired range
        del view
        gc.collect()
        print("ok")
    """)
    assert out.strip() == "ok"


@pytest.mark.parametrize("versioned", [False, True])
def test_unconsumed_capsule_dropped_after_release(versioned):
    out = run(f"""
        kwargs = {{"max_version": (1, 0)}} if {versioned} else {{}}
        c, t = tensor(LARGE)
        ptr = c.pointer()
        caps = [t.__dlpack__(**kwargs) for _ in range(3)]
        c.release()
        assert mapped(ptr)
        del caps[:2]
        assert mapped(ptr)           # one capsule still pins the range
        caps.clear()
        gc.collect()
        assert unmapped(ptr)
        print("ok")
    """)
    assert out.strip() == "ok"


def test_capsule_consumed_by_a_view_then_released_then_deleted_on_another_thread():
    # The deleter runs where the consumer drops it: here a NumPy array dies
    # on a worker thread after the carrier was released.
    out = run("""
        import threading
        c, t = tensor(LARGE)
        ptr = c.pointer()
        box = [np.from_dlpack(t)]
        c.release()
        def drop():
            assert not box[0].any()
            box.clear()
        th = threading.Thread(target=drop)
        th.start(); th.join()
        gc.collect()
        assert unmapped(ptr)
        print("ok")
    """)
    assert out.strip() == "ok"


def test_concurrent_reader_while_released():
    # NumPy reductions drop the GIL: a reader racing release() sees old
    # values or zeros, never a fault.
    out = run("""
        import threading
        c, t = tensor(LARGE)
        view = np.from_dlpack(t)
        view[:] = 1.0
        stop = False
        sums = []
        def reader():
            while not stop:
                sums.append(float(view.sum()))
        th = threading.Thread(target=reader)
        th.start()
        c.release()
        for _ in range(3):
            last = len(sums)
            while len(sums) == last:
                pass
        stop = True
        th.join()
        assert sums[-1] == 0.0 and all(s in (0.0,) or 0 < s <= LARGE for s in sums)
        print("ok")
    """)
    assert out.strip() == "ok"


@pytest.mark.parametrize("size", ["1 << 16", "LARGE"])
def test_many_cycles_do_not_leak(size):
    # 256 KiB (heap, zeroed and kept while exported) and 16 MiB (mapped)
    # buffers: a range leaked per cycle would add 100+ MiB over the loop.
    out = run(f"""
        n = {size}
        cycles = 400 if n < LARGE else 60
        count = [0]
        def cycle():
            count[0] += 1
            c, t = tensor(n)
            base = sys.getrefcount(t)
            view = np.from_dlpack(t)
            cap = t.__dlpack__(max_version=(1, 0))
            assert sys.getrefcount(t) == base + 2
            if count[0] % 2:
                c.release()
            else:
                sw.move(t, sw.CPU(n))
            assert c.is_released() and not view.any()
            del view, cap
            gc.collect()
            assert sys.getrefcount(t) == base, (sys.getrefcount(t), base)
        for _ in range(30):  # warm up: move workers and their malloc arenas
            cycle()
        gc.collect()
        rss0, vm0 = status("VmRSS"), status("VmSize")
        for _ in range(cycles):
            cycle()
        gc.collect()
        rss1, vm1 = status("VmRSS"), status("VmSize")
        assert SANITIZED or rss1 - rss0 < 16 * MiB, (rss0, rss1)
        # Slack for a lazily started worker thread (stack + arena).
        assert SANITIZED or vm1 - vm0 < 80 * MiB, (vm0, vm1)
        print("ok")
    """, timeout=180)
    assert out.strip() == "ok"


def test_export_after_release_is_still_refused():
    out = run("""
        c, t = tensor(SMALL)
        c.release()
        for kwargs in ({}, {"max_version": (1, 0)}):
            try:
                t.__dlpack__(**kwargs)
            except BufferError as e:
                assert "data pointer must be non-null" in str(e), e
            else:
                raise AssertionError("exported released storage")
        print("ok")
    """)
    assert out.strip() == "ok"


# ---- hooks cannot lie their way past the native storage (issue 15 items 1, 3)


def test_dtype_hook_widening_bool_storage_is_refused():
    # Bool storage (1-byte slots) claiming Float32 would export 4-byte items
    # over a buffer a quarter that size.
    out = run("""
        class Wide(sw.CPU):
            def dtype(self):
                return sw.DType.Float32
        c = Wide(1 << 20, dtype=sw.DType.Bool)
        t = sw.Tensor(c, 0, sw.Layout(sw.Shape(1 << 20), sw.Stride(1)))
        assert t.dtype() == sw.DType.Float32
        for call in (lambda: t.__dlpack__(), lambda: t.__dlpack__(max_version=(1, 0)), lambda: np.from_dlpack(t)):
            try:
                call()
            except BufferError as e:
                assert "native storage" in str(e) and "does not match" in str(e), e
            else:
                raise AssertionError("exported with the hook's item size")
        print("ok")
    """)
    assert out.strip() == "ok"


def test_dtype_hook_narrowing_to_bool_is_refused():
    class Narrow(sw.CPU):
        def dtype(self):
            return sw.DType.Bool

    t = sw.Tensor(Narrow(8), 0, sw.Layout(sw.Shape(8), sw.Stride(1)))
    with pytest.raises(BufferError, match="supports only Float32 and Int32"):
        t.__dlpack__()


def test_dtype_hook_with_same_item_size_is_refused_too():
    # Int32 slots read as Float32 would be a silent reinterpretation.
    class Reinterpret(sw.CPU):
        def dtype(self):
            return sw.DType.Float32

    t = sw.Tensor(Reinterpret(8, dtype=sw.DType.Int32), 0, sw.Layout(sw.Shape(8), sw.Stride(1)))
    with pytest.raises(BufferError, match="does not match the storage dtype"):
        t.__dlpack__()


def test_size_hook_cannot_export_past_the_buffer():
    out = run("""
        class Huge(sw.CPU):
            def size(self):
                return 1 << 40
        c = Huge(4)
        t = sw.Tensor(c, 0, sw.Layout(sw.Shape(1 << 24), sw.Stride(1)))
        for call in (lambda: t.__dlpack__(), lambda: t.__dlpack__(max_version=(1, 0)), lambda: np.from_dlpack(t)):
            try:
                call()
            except BufferError as e:
                assert "exceeds its 4 slots" in str(e), e
            else:
                raise AssertionError("exported past the buffer")
        # Within the native storage the subclass still exports.
        ok = sw.Tensor(c, 1, sw.Layout(sw.Shape(3), sw.Stride(1)))
        np.from_dlpack(ok)[:] = 5
        assert [c[i] for i in range(4)] == [0.0, 5.0, 5.0, 5.0]
        print("ok")
    """)
    assert out.strip() == "ok"


def test_dlpack_info_pointer_must_be_the_native_storage():
    out = run("""
        class Shifted(sw.CPU):
            def dlpack_info(self):
                info = super().dlpack_info()
                info["pointer"] += 64
                return info
        t = sw.Tensor(Shifted(4), 0, sw.Layout(sw.Shape(4), sw.Stride(1)))
        try:
            np.from_dlpack(t)
        except BufferError as e:
            assert "does not match the carrier's storage" in str(e), e
        else:
            raise AssertionError("exported a hook's pointer")
        print("ok")
    """)
    assert out.strip() == "ok"


def test_dlpack_info_stale_pointer_after_release_is_refused():
    # A hook that caches the pointer would hand out released storage.
    out = run("""
        class Cached(sw.CPU):
            def dlpack_info(self):
                return {"pointer": self.saved, "device_type": 1, "device_id": 0}
        c = Cached(SMALL)
        c.saved = c.pointer()
        t = sw.Tensor(c, 0, sw.Layout(sw.Shape(SMALL), sw.Stride(1)))
        np.from_dlpack(t)  # fine while live
        c.release()
        try:
            np.from_dlpack(t)
        except BufferError as e:
            assert "data pointer must be non-null" in str(e), e
        else:
            raise AssertionError("exported released storage")
        print("ok")
    """)
    assert out.strip() == "ok"


# ------------------------------------------------------------ a carrier released during the export


@pytest.mark.parametrize("kwargs", ["copy=Releasing()", "copy=Releasing(), max_version=(1, 0)"])
def test_dlpack_refuses_carrier_released_during_export(kwargs):
    c = CPU(8)
    t = Tensor(c, 0, Layout(Shape(8), Stride(1)))

    class Releasing:
        def __bool__(self):
            c.release()
            return False

    with pytest.raises(BufferError, match="non-null"):
        eval(f"t.__dlpack__({kwargs})")
    assert c.is_released()


def test_dlpack_refuses_carrier_released_by_is_mutable_hook():
    class C(CPU):
        def _is_mutable(self):
            self.release()
            return True

    t = Tensor(C(8), 0, Layout(Shape(8), Stride(1)))
    with pytest.raises(BufferError, match="non-null"):
        t.__dlpack__(max_version=(1, 0))
