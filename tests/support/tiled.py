"""TiledEvictable helpers: small tiled builders, the direct operations'
private path knobs, and the peak-memory child."""
import json
import os
import sys

import pytest

import strideweave as sw

from support.builders import F32, ramp_cpu
from support.process import assert_child_ok, run_python


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


def tiles_layout(grid, tile):
    """The "tiles" geometry's Layout of a full tensor over grid: mode i is
    (tile[i], grid[i]) with strides (prod(tile[:i]), prod(tile) *
    prod(grid[:i])); also a compact projection's Layout."""
    from math import prod

    T = prod(tile)
    return sw.Layout(sw.Shape([[t, g] for t, g in zip(tile, grid)]),
                     sw.Stride([[prod(tile[:i]), T * prod(grid[:i])] for i in range(len(grid))]))


def pending(te):
    """The number of requests of a TiledEvictable not yet terminal."""
    return te._request_counts()["pending"]


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


def run_hwm_child(script, timeout=300, **subs):
    """Runs a HWM_CHILD_PRELUDE script with each NAME in subs replaced by
    its value; returns the JSON its last output line holds."""
    for name, value in subs.items():
        script = script.replace(name, str(value))
    proc = assert_child_ok(run_python(script, timeout=timeout))
    return json.loads(proc.stdout.strip().splitlines()[-1])


def hwm_only(test):
    """Marks a peak-memory test: it reads VmHWM (Linux), and ASan keeps
    freed memory, which makes RSS moot."""
    test = pytest.mark.skipif(bool(os.environ.get("STRIDEWEAVE_SANITIZED")),
                              reason="ASan keeps every buffer on its heap and does not return freed memory: "
                                     "RSS is moot")(test)
    return pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads and resets /proc/self VmHWM")(test)
