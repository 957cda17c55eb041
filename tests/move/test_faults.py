"""Fault injection: a move whose transfer fails leaves the source live,
readable with its values, unowned and writable, publishes nothing, and
records the failure on the handle.

- FileBacked I/O failure: RLIMIT_FSIZE in a subprocess with SIGXFSZ ignored,
  so a write past the limit fails with EFBIG (no tmpfs mount needed); and a
  short read from a FileBacked source whose file was truncated behind its
  back (EIO).
- a raising MoveOperation._copy (CPU, FileBacked and Generic carriers).
- a raising ProviderCompletion.wait() through the carrier extension API
  (skipped while strideweave.carriers.extension has no CarrierDefinition).
"""
import errno
import json
import os
import time

import pytest

import strideweave as sw

from support.builders import F32, canonical, slots, values
from support.carriers import SrcCPU
from support.moves import Gate, WAIT, held_operation
from support.process import assert_child_ok, run_python

np = pytest.importorskip("numpy")


def in_flight():
    """Moves still counted in flight, after giving a worker that has just
    signalled completion a moment to finish its bookkeeping (the count
    drops after the handle is marked done)."""
    f = getattr(sw._core, "_moves_in_flight", None)
    if f is None:
        return 0
    deadline = time.monotonic() + WAIT
    while f() and time.monotonic() < deadline:
        time.sleep(0.001)
    return f()


def assert_unowned(*carriers):
    for c in carriers:
        assert not c.is_owned(), f"{type(c).__name__} still owned after the failed move"


def run_child(code, tmp_path, timeout=120):
    proc = run_python(code, cwd=tmp_path, timeout=timeout)
    assert_child_ok(proc)
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------ RLIMIT_FSIZE

CHILD_PRELUDE = """
import errno, json, resource, signal
import strideweave as sw
F32 = sw.DType.Float32
LIMIT = 256 << 10           # 256 KiB: the file size limit
N = (1 << 20) // 4         # 1 MiB of float32 values per tensor
lay = sw.Layout.canonical(sw.Shape(N))

def filled(scale):
    c = sw.CPU(N).new_like([float(i) * scale for i in range(N)])
    return sw.Tensor(c, 0, lay)

def check(t, scale):
    # every 997th value and the last one (a full Python pass is slow)
    idx = list(range(0, N, 997)) + [N - 1]
    return all(t[i] == float(i) * scale for i in idx)

def failed_move(t, d):
    try:
        h = sw.move_async(t, d)
    except OSError as e:
        return "move_async", e.errno
    try:
        h.wait(timeout=60)
    except OSError as e:
        again = None
        try:
            h.wait(timeout=60)
        except OSError as e2:
            again = e2 is e
        return ("wait", e.errno, again, h.done)
    return ("succeeded",)

def in_flight():
    import time
    deadline = time.monotonic() + 10
    while sw._core._moves_in_flight() and time.monotonic() < deadline:
        time.sleep(0.001)
    return sw._core._moves_in_flight()

def state(t):
    c = t.carrier
    return {"released": c.is_released(), "owned": c.is_owned(), "mutable": c.is_mutable()}

# Destinations grown to N slots before the limit applies, so the failure
# happens in the transfer itself, not in the allocation.
pre_cpu = sw.FileBacked(dtype=F32)
sw.move(filled(0.0), pre_cpu)
pre_fb = sw.FileBacked(dtype=F32)
sw.move(filled(0.0), pre_fb)
fb_src = sw.move(filled(3.0), sw.FileBacked(dtype=F32))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, hard))
"""


def test_rlimit_fsize_cpu_to_grown_filebacked_fails_in_transfer(tmp_path):
    out = run_child(CHILD_PRELUDE + """
t = filled(2.0)
v0 = t.carrier.version
outcome = failed_move(t, pre_cpu)
res = {"outcome": outcome, "src": state(t), "values": check(t, 2.0), "version": t.carrier.version == v0,
       "dst_owned": pre_cpu.is_owned(), "in_flight": in_flight()}
t[0] = 7.0                          # the source is writable again
res["write"] = t[0] == 7.0
t[0] = 0.0
back = sw.move(t, sw.CPU(N))        # and can still be moved (to memory)
res["moved_after"] = check(back, 2.0)
print(json.dumps(res))
""", tmp_path)
    # A destination already big enough is not resized, so the write fails
    # inside the transfer and is recorded on the handle.
    assert out["outcome"] == ["wait", errno.EFBIG, True, True]
    assert out["src"] == {"released": False, "owned": False, "mutable": True}
    assert out["values"] and out["version"]
    assert out["dst_owned"] is False
    assert out["in_flight"] == 0
    assert out["write"] and out["moved_after"]


def test_rlimit_fsize_cpu_to_empty_filebacked(tmp_path):
    out = run_child(CHILD_PRELUDE + """
t = filled(2.0)
d = sw.FileBacked(dtype=F32)
outcome = failed_move(t, d)
res = {"outcome": outcome, "src": state(t), "values": check(t, 2.0), "dst_owned": d.is_owned(),
       "in_flight": in_flight()}
print(json.dumps(res))
""", tmp_path)
    # Growing the empty destination past the limit fails (in move_async, or
    # in the transfer); either way with EFBIG and the source untouched.
    assert out["outcome"][0] in ("move_async", "wait")
    assert out["outcome"][1] == errno.EFBIG
    assert out["src"] == {"released": False, "owned": False, "mutable": True}
    assert out["values"]
    assert out["dst_owned"] is False
    assert out["in_flight"] == 0


def test_rlimit_fsize_filebacked_to_filebacked_keeps_file_source(tmp_path):
    out = run_child(CHILD_PRELUDE + """
outcome = failed_move(fb_src, pre_fb)
res = {"outcome": outcome, "src": state(fb_src), "values": check(fb_src, 3.0),
       "dst_owned": pre_fb.is_owned(), "path": fb_src.carrier.path.exists(),
       "in_flight": in_flight()}
res["moved_after"] = check(sw.move(fb_src, sw.CPU(N)), 3.0)
print(json.dumps(res))
""", tmp_path)
    assert out["outcome"][0] == "wait" and out["outcome"][1] == errno.EFBIG
    assert out["src"] == {"released": False, "owned": False, "mutable": True}
    assert out["values"] and out["path"]
    assert out["dst_owned"] is False
    assert out["in_flight"] == 0
    assert out["moved_after"]


def test_short_read_from_truncated_filebacked_source():
    n = 4096
    t = sw.Tensor(sw.CPU(n).new_like([float(i) for i in range(n)]), 0, canonical([n]))
    f = sw.move(t, sw.FileBacked(dtype=F32))
    os.truncate(f.carrier.path, n * 4 // 2)  # the second half of the slots is gone
    d = sw.CPU(n)
    h = sw.move_async(f, d)
    with pytest.raises(OSError) as info:
        h.wait(timeout=WAIT)
    assert info.value.errno == errno.EIO
    assert not f.carrier.is_released()
    assert_unowned(f.carrier, d)
    assert [f[i] for i in range(0, n // 2, 97)] == [float(i) for i in range(0, n // 2, 97)]
    assert in_flight() == 0
    d[0] = 1.0  # the destination is writable again


# ------------------------------------------------------------ raising _copy

class Boom(Exception):
    pass


def raising_op(base=sw.ElementwiseMoveOperation, partial=True):
    class Raising(base):
        def _copy(self, tensor, destination, output, element_count):
            if partial:  # dirty part of the destination first
                output[0] = 123.0
            raise Boom("copy failed")

    return Raising


@pytest.mark.parametrize("dst_kind", ["CPU", "FileBacked", "Generic"])
def test_raising_copy_leaves_cpu_source_intact(dst_kind):
    dst_cls = {"CPU": sw.CPU, "FileBacked": sw.FileBacked, "Generic": sw.Generic}[dst_kind]
    d = {"CPU": lambda: sw.CPU(5), "FileBacked": lambda: sw.FileBacked(dtype=F32),
         "Generic": lambda: sw.Generic([0.0] * 5, dtype=F32)}[dst_kind]()
    src = SrcCPU(5)
    vals = [1.5, -2.0, 3.25, 0.0, 8.0]
    for i, v in enumerate(vals):
        src[i] = v
    t = sw.Tensor(src, 0, canonical([5]))
    v0 = src.version
    with sw.registered_move_operation(SrcCPU, dst_cls, raising_op()):
        h = sw.move_async(t, d)
        with pytest.raises(Boom) as first:
            h.wait(timeout=WAIT)
        with pytest.raises(Boom) as second:
            h.wait(timeout=WAIT)
        assert first.value is second.value
    assert h.done
    assert not src.is_released()
    assert_unowned(src, d)
    assert values(t) == vals and src.version == v0
    assert src.is_mutable() and d.is_mutable()
    src[0] = 4.0
    r = sw.move(t, sw.CPU(5))  # the unregistered pair now moves normally
    assert values(r) == [4.0] + vals[1:]
    assert in_flight() == 0


def test_raising_copy_leaves_filebacked_source_intact():
    class SrcFB(sw.FileBacked):
        pass

    n = 64
    vals = [float(i) / 4 for i in range(n)]
    f = sw.move(sw.Tensor(sw.CPU(n).new_like(vals), 0, canonical([n])), SrcFB(dtype=F32))
    assert type(f.carrier) is SrcFB
    d = sw.CPU(n)
    with sw.registered_move_operation(SrcFB, sw.CPU, raising_op(partial=True)):
        with pytest.raises(Boom):
            sw.move(f, d)
    assert not f.carrier.is_released() and f.carrier.path.exists()
    assert_unowned(f.carrier, d)
    assert values(f) == vals
    assert values(sw.move(f, sw.CPU(n))) == vals


def test_raising_copy_while_held_then_source_usable():
    """The failure arrives while another thread is blocked in wait()."""
    gate = Gate()
    failure = Boom("late failure")
    t = sw.Tensor(SrcCPU(3), 0, canonical([3]))
    for i in range(3):
        t[i] = float(i + 1)
    d = sw.CPU(3)
    with sw.registered_move_operation(SrcCPU, sw.CPU, held_operation(gate, fail=failure)):
        h = sw.move_async(t, d)
        assert gate.entered.wait(WAIT)
        with pytest.raises(RuntimeError, match="owned"):
            t.carrier.release()
        with pytest.raises(RuntimeError):
            t[0] = 9.0
        assert values(t) == [1.0, 2.0, 3.0]  # reads continue while pending
        gate.release.set()
        with pytest.raises(Boom) as info:
            h.wait(timeout=WAIT)
    assert info.value is failure
    assert_unowned(t.carrier, d)
    assert values(t) == [1.0, 2.0, 3.0]
    assert slots(d) == [0.0] * 3  # the held op wrote nothing before failing


def test_copy_returning_a_value_is_a_recorded_typeerror():
    class Returns(sw.ElementwiseMoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            super()._copy(tensor, destination, output, element_count)
            return 1

    t = sw.Tensor(SrcCPU(2), 0, canonical([2]))
    t[1] = 5.0
    d = sw.CPU(2)
    with sw.registered_move_operation(SrcCPU, sw.CPU, Returns):
        with pytest.raises(TypeError, match="must return None"):
            sw.move_async(t, d).wait(timeout=WAIT)
    assert not t.carrier.is_released()
    assert_unowned(t.carrier, d)
    assert values(t) == [0.0, 5.0]


# ------------------------------------------------------------ ProviderCompletion.wait()

def _extension():
    from strideweave.carriers import extension as ext

    if not hasattr(ext, "CarrierDefinition"):
        pytest.skip("carrier extension API not implemented yet: "
                    "strideweave.carriers.extension has no CarrierDefinition")
    return ext


def _list_carrier(ext, completion_factory, name="ListCarrier"):
    """A definition-backed Python carrier holding its slots in a list, with
    one route to CPU whose submit() returns completion_factory()."""
    cls = type(name, (sw.Carrier,), {})

    def allocate(c, n):
        c.__dict__["vals"] = [0.0] * n

    def release(c):
        c.__dict__["vals"] = []

    storage = ext.StorageProvider(
        supports_dtype=lambda c, dtype: dtype is F32,
        physical_size=lambda c: len(c.__dict__.get("vals", ())),
        allocate=allocate,
        release=release,
        read=lambda c, i: c.__dict__["vals"][i],
        write=lambda c, i, v: c.__dict__["vals"].__setitem__(i, v),
    )

    def prepare(request):
        def submit():
            # Dirty the destination the way a half-finished transfer would.
            request.destination[0] = 99.0
            return completion_factory()

        return ext.PreparedTransfer(submit)

    route = ext.TransferRoute(cls, sw.CPU, "list-to-cpu", ext.TransferProvider(prepare))
    ext.register_carrier_definition(cls, ext.CarrierDefinition(storage, (route,)))
    return cls


class RaisingCompletion:
    def __init__(self, error):
        self.error = error
        self.waits = 0

    @property
    def done(self):
        return False

    def wait(self):
        self.waits += 1
        raise self.error


def test_raising_provider_completion_wait_leaves_source_intact():
    ext = _extension()
    failure = OSError(errno.EIO, "device lost")
    completions = []

    def factory():
        completions.append(RaisingCompletion(failure))
        return completions[-1]

    cls = _list_carrier(ext, factory)
    src = cls(4, dtype=F32)
    for i, v in enumerate([1.0, 2.0, 3.0, 4.0]):
        src[i] = v
    t = sw.Tensor(src, 0, canonical([4]))
    d = sw.CPU(4)
    with sw.no_grad():
        h = sw.move_async(t, d)
        with pytest.raises(OSError) as info:
            h.wait(timeout=WAIT)
        with pytest.raises(OSError) as again:
            h.wait(timeout=WAIT)
    assert info.value is again.value
    assert info.value is failure or info.value.__cause__ is failure or info.value.__context__ is failure
    assert len(completions) == 1
    assert not src.is_released()
    assert_unowned(src, d)
    assert values(t) == [1.0, 2.0, 3.0, 4.0]
    assert src.is_mutable() and d.is_mutable()
    assert in_flight() == 0


def test_raising_prepare_fails_before_submission():
    ext = _extension()
    cls = type("PrepareFails", (sw.Carrier,), {})
    storage = ext.StorageProvider(
        supports_dtype=lambda c, dtype: True,
        physical_size=lambda c: len(c.__dict__.get("vals", ())),
        allocate=lambda c, n: c.__dict__.__setitem__("vals", [0.0] * n),
        release=lambda c: c.__dict__.__setitem__("vals", []),
        read=lambda c, i: c.__dict__["vals"][i],
        write=lambda c, i, v: c.__dict__["vals"].__setitem__(i, v),
    )

    def prepare(request):
        raise Boom("prepare failed")

    route = ext.TransferRoute(cls, sw.CPU, "fails", ext.TransferProvider(prepare))
    ext.register_carrier_definition(cls, ext.CarrierDefinition(storage, (route,)))
    src = cls(2, dtype=F32)
    src[0] = 1.0
    t = sw.Tensor(src, 0, canonical([2]))
    d = sw.CPU(2)
    with sw.no_grad():
        with pytest.raises(Boom):
            sw.move_async(t, d).wait(timeout=WAIT)
    assert not src.is_released()
    assert_unowned(src, d)
    assert values(t) == [1.0, 0.0]
