"""Random sequences of slot writes, promotions, evictions, projections (with
and without a destination), scatters and a direct operation against a NumPy
model: per-tile primary storage (tile buffers, the pool, the slab) never
changes a value, and the primary bytes held follow the resident tiles."""
import random

import numpy as np
import pytest

import strideweave as sw
_POOL_TILES = 2  # freed tile buffers a TiledEvictable keeps for promotions (docs/tiled_evictable.md)
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection, TileSet

F32 = sw.DType.Float32
N, T = 6, 8


def values_of(te):
    return np.array([te[i] for i in range(N * T)], dtype=np.float32)


def resident(te):
    return [k for k in range(N) if te.tile_state((k,)).location == "primary"]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("start", ["file", "slab", "implicit"])
def test_random_residency_and_data_operations_match_a_model(seed, start):
    rng = random.Random(seed)
    if start == "slab":
        p = sw.CPU(N * T)
        for i in range(N * T):
            p[i] = float(i)
        te = TiledEvictable(p, sw.FileBacked(dtype=F32), (N,), (T,))
        model = np.arange(N * T, dtype=np.float32)
    elif start == "file":
        c = sw.CPU(N * T)
        for i in range(N * T):
            c[i] = float(-i)
        fb = sw.move(sw.Tensor(c, 0, sw.Layout(sw.Shape(N * T), sw.Stride(1))), sw.FileBacked(dtype=F32)).carrier
        te = TiledEvictable(sw.CPU(0), fb, (N,), (T,))
        model = -np.arange(N * T, dtype=np.float32)
    else:
        te = TiledEvictable(sw.CPU(0), sw.FileBacked(dtype=F32), (N,), (T,))
        model = np.zeros(N * T, dtype=np.float32)
    w = sw.Tensor(te, 0, te.canonical_layout())
    dest = sw.CPU(3 * T)
    for step in range(40):
        action = rng.choice(["write", "promote", "evict", "project", "project_dest", "scatter", "reduce"])
        tiles = sorted(rng.sample(range(N), rng.randint(1, 3)))
        if action == "write":
            i = rng.randrange(N * T)
            v = float(rng.randint(-50, 50))
            te[i] = v
            model[i] = v
        elif action == "promote":
            te.promote(TileSet([(k,) for k in tiles]))
        elif action == "evict":
            te.evict(TileSet([(k,) for k in tiles]))
        elif action in ("project", "project_dest"):
            r = te.project(w, TileSelection([tiles]), dest if action == "project_dest" else None).wait()
            got = [r.carrier[r.offset + j] for j in range(len(tiles) * T)]
            assert got == [float(model[k * T + x]) for k in tiles for x in range(T)], (step, action, tiles)
        elif action == "scatter":
            compact = sw.CPU(len(tiles) * T)
            vals = [float(rng.randint(-9, 9)) for _ in range(len(tiles) * T)]
            for j, v in enumerate(vals):
                compact[j] = v
            cl = te.canonical_layout()  # the compact tensor in the canonical layout of len(tiles) tiles
            ct = sw.Tensor(compact, 0, sw.Layout(sw.Shape([[T, len(tiles)]]), sw.Stride([[1, T]])))
            out = te.scatter(ct, w, TileSelection([tiles]), reduction="add").wait()
            oc = out.carrier
            for j, k in enumerate(tiles):
                for x in range(T):
                    assert oc[k * T + x] == model[k * T + x] + vals[j * T + x]
            assert cl == w.layout
            oc.release()
        else:
            s = sw.reduce_sum(w)
            assert abs(float(s.carrier[s.offset]) - float(model.sum())) < 1e-3
        assert np.array_equal(values_of(te), model), (step, action)
        held = te._primary_bytes()
        slab = te.primary.size() * 4
        assert held - slab <= (len(resident(te)) + _POOL_TILES) * T * 4, (step, action, held)
    te.release()
    assert te._primary_bytes() == 0
