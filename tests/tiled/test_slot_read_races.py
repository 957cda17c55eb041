"""Slot reads of a TiledEvictable racing residency changes on other
threads always read the slot's own value (never another tile's, never a
bogus IndexError), whether the tiers' slot reads are native or run Python
code that lets other threads in; a buffer freed while such a read runs is
not handed to another tile before the read ends."""
import random
import threading
import time

import pytest

import strideweave as sw
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSet

F32 = sw.DType.Float32
N, T = 8, 16


_READING = threading.local()


class YieldingCPU(sw.CPU):
    """A CPU subclass whose slot reads run Python code (its size() hook
    checks the range) that lets other threads run in the middle of a read
    (on the reading threads only)."""

    def size(self):
        if getattr(_READING, "on", False):
            time.sleep(0.0005)  # releases the GIL: residency changes commit meanwhile
        return super().size()


def build(cls):
    c = cls(N * T)
    for i in range(N * T):
        c[i] = float(i)
    return TiledEvictable(c, sw.FileBacked(dtype=F32), (N,), (T,))


@pytest.mark.parametrize("cls", [sw.CPU, YieldingCPU])
def test_slot_reads_racing_promote_and_evict_read_their_own_values(cls):
    te = build(cls)
    stop = threading.Event()
    errors = []
    conflicts = [0]

    def mover():
        rng = random.Random(1)
        while not stop.is_set():
            tiles = TileSet({(rng.randrange(N),) for _ in range(3)})
            call = te.evict_async if rng.random() < 0.5 else te.promote_async
            try:
                call(tiles).wait(timeout=10)
            except RuntimeError as e:
                assert "wait" in str(e)
                conflicts[0] += 1

    def reader(seed):
        rng = random.Random(seed)
        _READING.on = True
        try:
            for _ in range(1500):
                i = rng.randrange(N * T)
                v = te[i]
                if v != float(i):
                    errors.append((i, v))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    m = threading.Thread(target=mover)
    readers = [threading.Thread(target=reader, args=(s,)) for s in range(2)]
    m.start()
    for r in readers:
        r.start()
    for r in readers:
        r.join(120)
    stop.set()
    m.join(60)
    assert not errors, errors[:5]
    assert not any(t.is_alive() for t in readers + [m])
    assert [te[i] for i in range(N * T)] == [float(i) for i in range(N * T)]
    te.release()
