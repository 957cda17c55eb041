"""What the tests share: tensor builders (one builder, one fill rule), the
subprocess runner, and small Python test carriers. Test modules import these
names with ``from conftest import ...`` (pytest puts tests/ on sys.path and
registers this file as the ``conftest`` module). The DLPack ctypes views stay
in _dlpack_support.py, because subprocess scripts import them too; its test
carriers are re-exported here.
"""
import os
import pathlib
import struct
import subprocess
import sys
import textwrap
import threading

import pytest

import strideweave as sw

F32 = sw.DType.Float32
I32 = sw.DType.Int32
WAIT = 10.0  # seconds: the bound on every wait in the movement tests
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
# The folder holding the strideweave package this process imported (the
# source tree with STRIDEWEAVE_BUILD, site-packages for an installed wheel).
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(sw.__file__)))

# The test-only extension strideweave._testing (the fake Metal runtime) is
# built with -Dtesting=enabled (tools/test.sh, a plain `meson setup`); the
# wheel users install leaves it out, and the tests that need it skip there.
TESTING_ABSENT = ("strideweave._testing is not installed: the wheel leaves out the test doubles "
                  "(build with -Csetup-args=-Dtesting=enabled, as tools/test.sh does)")


# STRIDEWEAVE_TESTS_HIDE_TESTING=1 runs the suite as the wheel's users would:
# every import of strideweave._testing fails as if it were not installed.
HIDE_TESTING = "STRIDEWEAVE_TESTS_HIDE_TESTING"
if os.environ.get(HIDE_TESTING) == "1":
    sys.modules["strideweave._testing"] = None  # type: ignore[assignment]


def testing_extension():
    """strideweave._testing, or a skip with the reason when it is absent.
    Every test that needs it goes through here (never a module-level import),
    so the suite runs against a wheel without it."""
    return pytest.importorskip("strideweave._testing", reason=TESTING_ABSENT)


# ------------------------------------------------------------ builders

# The one fill rule: every slot of a built carrier that no given value lands
# in holds FILL (False for Bool), so a read of an unaddressed slot shows up.
FILL = 77


def fill_for(dtype):
    return False if dtype is sw.DType.Bool else FILL


def layout(shape, stride):
    return sw.Layout(sw.Shape(shape), sw.Stride(stride))


def canonical(shape):
    return sw.Layout.canonical(sw.Shape(shape))


def tensor(values, lay=None, *, offset=0, dtype=F32, kind="cpu", placement="logical", size=None):
    """A tensor over a fresh carrier (kind "cpu": CPU, else Generic) of
    ``size`` slots (default offset + lay.cosize), every slot FILL first.

    placement "logical": values are the tensor's logical values (flat,
    first-mode-fastest): values[i] lands in slot offset + lay.index(i), and
    there must be exactly lay.size of them. placement "slots": values[i]
    lands in slot offset + i, whatever the layout addresses.
    """
    values = list(values)
    lay = lay if lay is not None else canonical([len(values)])
    if placement == "logical":
        assert lay.size == len(values), (lay, len(values))
        targets = [offset + lay.index(i) for i in range(len(values))]
    else:
        assert placement == "slots", placement
        targets = [offset + i for i in range(len(values))]
    n = size if size is not None else offset + lay.cosize
    fill = fill_for(dtype)
    if kind == "cpu":
        c = sw.CPU(n, dtype=dtype)
        for i in range(n):
            c[i] = fill
    else:
        c = sw.Generic([fill] * n, dtype=dtype)
    for k, v in zip(targets, values):
        c[k] = v
    return sw.Tensor(c, offset, lay)


def cpu_tensor(vals, lay=None, offset=0, dtype=F32, size=None):
    """The movement tests' shorthand: tensor(placement="slots") on a CPU
    carrier, so vals are the slots from offset on."""
    return tensor(vals, lay, offset=offset, dtype=dtype, placement="slots", size=size)


def values(t):
    """Logical values in flat (first-mode-fastest) order."""
    return [t[i] for i in range(t.size())]


def slots(c):
    return [c[i] for i in range(c.size())]


def f32(x):
    """x rounded to binary32."""
    return struct.unpack("f", struct.pack("f", x))[0]


# ------------------------------------------------------------ subprocesses

# -P (Python 3.11+): a child's working directory is not put on sys.path, so a
# checkout's strideweave/ cannot shadow the imported package. Python 3.10 has
# no -P; children there run from directories without a strideweave/ anyway.
SAFE_PATH = ("-P",) if sys.version_info >= (3, 11) else ()


def child_env(extra=None, pythonpath=()):
    """The environment of a child that must import the same strideweave as
    this process: PACKAGE_ROOT (and any extra folders) first on PYTHONPATH,
    STRIDEWEAVE_BUILD made absolute (the child may run elsewhere)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*pythonpath, PACKAGE_ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
    if env.get("STRIDEWEAVE_BUILD"):
        env["STRIDEWEAVE_BUILD"] = os.path.abspath(env["STRIDEWEAVE_BUILD"])
    env.update(extra or {})
    return env


def run_python(code, *, flags=(), cwd=None, env=None, pythonpath=(), timeout=120):
    """Run ``python *flags -c code`` (code dedented) in a fresh interpreter
    importing this process's strideweave; returns the CompletedProcess
    (text stdout/stderr captured). env adds to child_env()."""
    return subprocess.run([sys.executable, *flags, "-c", textwrap.dedent(code)], cwd=cwd,
                          env=child_env(env, pythonpath), capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------ test carriers


class ListCarrier(sw.Carrier):
    """A pure Python carrier over a list: neither CPU nor Generic, so values
    reach it only through its hooks; it keeps the base dlpack_info hook
    (which refuses export). ``cast`` converts each written value."""

    def __init__(self, vals, dtype=F32, *, cast=None):
        super().__init__()
        self.vals = list(vals)
        self._dtype = dtype
        self._cast = cast

    def size(self):
        return len(self.vals)

    def dtype(self):
        return self._dtype

    def get_value(self, i):
        return self.vals[i]

    def set_value(self, i, v):
        self.vals[i] = self._cast(v) if self._cast else v



class ReleasingListCarrier(ListCarrier):
    """A ListCarrier whose _release hook counts its calls and empties the list."""

    def __init__(self, vals, dtype=F32, *, cast=None):
        super().__init__(vals, dtype, cast=cast)
        self.released = 0

    def _release(self):
        self.released += 1
        self.vals = []


class ConstCarrier(sw.Carrier):
    """n read-only slots that all read ``value``, of a chosen dtype; writes
    are dropped. The base dlpack_info hook (refuses) is kept."""

    def __init__(self, n, dtype=F32, value=0.0):
        super().__init__()
        self._n, self._dtype, self._value = n, dtype, value

    def size(self):
        return self._n

    def dtype(self):
        return self._dtype

    def get_value(self, i):
        return self._value

    def set_value(self, i, v):
        pass


class SrcCPU(sw.CPU):
    """An exact CPU subclass: its pairs are unregistered unless a test
    registers them, so tests never collide with built-in entries."""


class DstCPU(sw.CPU):
    pass


# ------------------------------------------------------------ held moves


class Gate:
    """Holds a registered MoveOperation's _copy open until released."""

    def __init__(self):
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = []
        self.thread_ids = []

    def hold(self, op, tensor, destination, output, element_count):
        self.calls.append((op, tensor, destination, output, element_count))
        self.thread_ids.append(threading.get_ident())
        self.entered.set()
        assert self.release.wait(WAIT), "test never released the held transfer"


def held_operation(gate, base=sw.ElementwiseMoveOperation, fail=None):
    """A MoveOperation subclass whose _copy waits on gate, then copies
    through the base (or raises fail)."""

    class HeldMove(base):
        def _copy(self, tensor, destination, output, element_count):
            gate.hold(self, tensor, destination, output, element_count)
            if fail is not None:
                raise fail
            return super()._copy(tensor, destination, output, element_count)

    return HeldMove


from _dlpack_support import InfoCarrier, TypedCarrier  # noqa: E402,F401  (the DLPack test carriers)


# ---------------------------------------------------------------- TiledEvictable
def run_mypy_strict(source, tmp_path):
    """mypy --strict on source (a script's text) as a user would run it
    against this strideweave; returns mypy's stdout lines and stderr."""
    from mypy import api

    package_root = pathlib.Path(sw.__file__).resolve().parent.parent
    src = tmp_path / "snippet.py"
    src.write_text(source)
    args = [str(src), "--strict", "--no-incremental", "--cache-dir", os.devnull, "--python-executable",
            sys.executable, "--no-error-summary", "--hide-error-context"]
    env_before = os.environ.get("MYPYPATH")
    if "site-packages" not in package_root.parts:  # dev mode: the source tree's package
        os.environ["MYPYPATH"] = str(package_root)
    try:
        out, err, _ = api.run(args)
    finally:
        if env_before is None:
            os.environ.pop("MYPYPATH", None)
        else:
            os.environ["MYPYPATH"] = env_before
    return out.splitlines(), err


def two_plane_tensor():
    """A multi-subtensor tensor of shape (2,): a Float32 and an Int32 plane."""
    from strideweave.core import Subtensor, TensorRepresentation

    class Planar(sw.CompoundDType):
        simple_types = (F32, sw.DType.Int32)

    lay = sw.Layout.canonical(sw.Shape(2))
    return sw.Tensor._from_representation(TensorRepresentation(
        Planar(), [Subtensor(F32, sw.CPU(2), 0, lay), Subtensor(sw.DType.Int32, sw.CPU(2, dtype=sw.DType.Int32), 0, lay)],
        [lay]))


def ramp_cpu(n):
    """A CPU Float32 carrier holding 0.0, 1.0, ..., n-1."""
    c = sw.CPU(n)
    for i in range(n):
        c[i] = float(i)
    return c


def tiled_ramp(n_tiles=4, tile=3):
    """A 1-D TiledEvictable over a ramp primary and an empty FileBacked secondary,
    and the full Tensor over it."""
    from strideweave.carriers.tiled_evictable import TiledEvictable

    te = TiledEvictable(ramp_cpu(n_tiles * tile), sw.FileBacked(dtype=F32), (n_tiles,), (tile,))
    return te, sw.Tensor(te, 0, te.canonical_layout())


def tiled_on_file(n_tiles=4, tile=8):
    """A 1-D TiledEvictable whose tiles are all secondary-resident on a
    FileBacked holding 0, 1, 2, ... (an empty CPU primary), and the full
    Tensor over it."""
    import numpy as np
    from strideweave.carriers.tiled_evictable import TiledEvictable

    n = n_tiles * tile
    flat = sw.Layout(sw.Shape(n), sw.Stride(1))
    c = sw.CPU(n, empty=True)
    np.from_dlpack(sw.Tensor(c, 0, flat))[:] = np.arange(n, dtype=np.float32)
    fb = sw.move(sw.Tensor(c, 0, flat), sw.FileBacked(dtype=F32)).carrier  # releases c
    te = TiledEvictable(sw.CPU(0), fb, (n_tiles,), (tile,))
    return te, sw.Tensor(te, 0, te.canonical_layout())


def run_hwm_child(script, timeout=300, **subs):
    """Runs a HWM_CHILD_PRELUDE script with each NAME in subs replaced by
    its value; returns the JSON its last output line holds."""
    import json

    for name, value in subs.items():
        script = script.replace(name, str(value))
    proc = run_python(script, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def hwm_only(test):
    """Marks a peak-memory test: it reads VmHWM (Linux), and ASan keeps
    freed memory, which makes RSS moot."""
    test = pytest.mark.skipif(bool(os.environ.get("STRIDEWEAVE_SANITIZED")),
                              reason="ASan keeps every buffer on its heap and does not return freed memory: "
                                     "RSS is moot")(test)
    return pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads and resets /proc/self VmHWM")(test)


def dense_spy(monkeypatch):
    """Records the purpose ("operation" / "backward") of every dense copy of
    a tiled operand (the tiled module's private dense_spy knob): the direct
    operations' tests assert which path ran."""
    from strideweave.carriers import tiled_evictable as tev

    calls = []
    monkeypatch.setattr(tev._options, "dense_spy", calls)
    return calls


def dense_only(monkeypatch):
    """Makes the direct operations read tiled operands as one dense copy
    (the private dense_only knob), as the path a Layout that does not split
    at the tiles takes: the tests compare both paths."""
    from strideweave.carriers import tiled_evictable as tev

    monkeypatch.setattr(tev._options, "dense_only", True)


def tiles_layout(grid, tile):
    """The "tiles" geometry's Layout of a full tensor over grid (API.md 13):
    mode i is (tile[i], grid[i]) with strides (prod(tile[:i]),
    prod(tile) * prod(grid[:i])); also a compact projection's Layout."""
    from math import prod

    T = prod(tile)
    return sw.Layout(sw.Shape([[t, g] for t, g in zip(tile, grid)]),
                     sw.Stride([[prod(tile[:i]), T * prod(grid[:i])] for i in range(len(grid))]))


def pending(te):
    """The number of requests of a TiledEvictable not yet terminal."""
    return te._request_counts()["pending"]


# The start of a child script that measures peak memory: hwm() reads VmHWM,
# reset() sets it back to the current RSS (Linux /proc/self/clear_refs).
HWM_CHILD_PRELUDE = r"""
import json, time
import numpy as np
import strideweave as sw
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSet

def hwm():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) * 1024

def reset():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
"""


# Tile-tier carriers for injected transfer failures: a test registers
# FailingOp (or its own operation) between them and unregisters it after.
class FailPrimary(sw.Generic):
    pass


class FailSecondary(sw.Generic):
    pass


class FailingOp(sw.MoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        raise OSError("injected tile failure")
