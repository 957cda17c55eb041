"""TiledEvictable under several threads: concurrent projections and
residency requests (every completed projection holds exactly its tiles'
values, conflicts surface as RuntimeError, never a hang, and the carrier
ends idle and releasable), and slot reads racing residency changes (always
the slot's own value, whether the tiers' slot reads are native or run
Python code that lets other threads in; a buffer freed during a read is
not handed to another tile before the read ends)."""
import random
import threading
import time

import pytest

import strideweave as sw
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection, TileSet

from support.tiled import pending

F32 = sw.DType.Float32
N, TILE = 16, 64


def build():
    c = sw.CPU(N * TILE)
    for i in range(N * TILE):
        c[i] = float(i // TILE)  # every slot holds its tile's ordinal
    return TiledEvictable(c, sw.FileBacked(dtype=F32), (N,), (TILE,))


def test_threads_projecting_while_residency_changes():
    te = build()
    t = sw.Tensor(te, 0, te.canonical_layout())
    errors, conflicts = [], []
    stop = threading.Event()

    def projector(seed):
        rng = random.Random(seed)
        try:
            for _ in range(25):
                sel = rng.sample(range(N), 3)
                try:
                    r = te.project(t, TileSelection([sel])).wait()
                except RuntimeError as e:
                    assert "wait" in str(e)
                    conflicts.append(e)
                    continue
                assert [r[j * TILE + 5] for j in range(3)] == [float(e) for e in sel]
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    def mover():
        rng = random.Random(99)
        while not stop.is_set():
            tiles = TileSet({(rng.randrange(N),) for _ in range(4)})
            call = te.evict_async if rng.random() < 0.5 else te.promote_async
            try:
                call(tiles).wait()
            except RuntimeError as e:
                assert "wait" in str(e)
                conflicts.append(e)

    threads = [threading.Thread(target=projector, args=(s,)) for s in range(3)]
    m = threading.Thread(target=mover)
    m.start()
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    stop.set()
    m.join(60)
    assert not errors, errors
    assert not any(th.is_alive() for th in threads + [m])
    assert pending(te) == 0
    assert [te[k * TILE] for k in range(N)] == [float(k) for k in range(N)]
    te.release()
    assert te.is_released()


# ------------------------------------------------------------ slot reads racing residency changes


RACE_TILES, RACE_TILE = 8, 16


_READING = threading.local()


class YieldingCPU(sw.CPU):
    """A CPU subclass whose slot reads run Python code (its size() hook
    checks the range) that lets other threads run in the middle of a read
    (on the reading threads only)."""

    def size(self):
        if getattr(_READING, "on", False):
            time.sleep(0.0005)  # releases the GIL: residency changes commit meanwhile
        return super().size()


def tiled_over(cls):
    c = cls(RACE_TILES * RACE_TILE)
    for i in range(RACE_TILES * RACE_TILE):
        c[i] = float(i)
    return TiledEvictable(c, sw.FileBacked(dtype=F32), (RACE_TILES,), (RACE_TILE,))


@pytest.mark.parametrize("cls", [sw.CPU, YieldingCPU])
def test_slot_reads_racing_promote_and_evict_read_their_own_values(cls):
    te = tiled_over(cls)
    stop = threading.Event()
    errors = []
    conflicts = [0]

    def mover():
        rng = random.Random(1)
        while not stop.is_set():
            tiles = TileSet({(rng.randrange(RACE_TILES),) for _ in range(3)})
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
                i = rng.randrange(RACE_TILES * RACE_TILE)
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
    assert [te[i] for i in range(RACE_TILES * RACE_TILE)] == [float(i) for i in range(RACE_TILES * RACE_TILE)]
    te.release()
