"""Concurrent projections and residency requests from several threads: every
completed projection holds exactly its tiles' values, conflicts surface as
RuntimeError (never a hang), and the carrier ends idle and releasable."""
import random
import threading

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
