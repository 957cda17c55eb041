"""TiledEvictable primary memory is per tile: evicting a tile gives its
primary bytes back (to a pool of at most _POOL_TILES buffers, else
released), promoting allocates them.

Two observables: ``TiledEvictable._primary_bytes()`` (the bytes of primary
storage the instance holds: resident tiles' buffers, the pool, a live slab)
and the process RSS (/proc/self/status VmRSS), measured in a child process
so other tests' allocations do not blur it. Before per-tile residency the
primary was one carrier of the full slot count, allocated on first
promotion and never shrunk: both checks below fail on that."""
import os
import sys

import pytest

import strideweave as sw
_POOL_TILES = 2  # freed tile buffers a TiledEvictable keeps for promotions (docs/tiled_evictable.md)
from strideweave.carriers.move import register_move_operation, unregister_move_operation
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection, TileSet

from support.carriers import FailingOp, FailPrimary, FailSecondary
from support.process import assert_child_ok, run_python
from support.tiled import tiled_on_file

F32 = sw.DType.Float32


def on_file(n_tiles, tile):
    return tiled_on_file(n_tiles, tile)[0]


def tiles(ks):
    return TileSet([(k,) for k in ks])


def test_primary_bytes_follow_the_resident_tiles():
    te = on_file(16, 256)
    tile_bytes = 256 * 4
    assert te._primary_bytes() == 0
    te.promote(tiles(range(16)))
    assert te._primary_bytes() == 16 * tile_bytes
    te.evict(tiles(range(4, 16)))  # 4 stay resident
    assert 4 * tile_bytes <= te._primary_bytes() <= (4 + _POOL_TILES) * tile_bytes
    # the pooled buffers are reused: promoting again allocates only the rest
    te.promote(tiles(range(4, 8)))
    assert 8 * tile_bytes <= te._primary_bytes() <= (8 + _POOL_TILES) * tile_bytes
    # values survive the round trips
    w = sw.Tensor(te, 0, te.canonical_layout())
    r = te.project(w, TileSelection([[5, 12]])).wait()
    want = list(range(5 * 256, 6 * 256)) + list(range(12 * 256, 13 * 256))
    assert [r.carrier[i] for i in range(512)] == want
    te.release()
    assert te._primary_bytes() == 0


def test_a_dirty_tile_round_trip_reuses_a_pooled_buffer_and_keeps_values():
    te = on_file(4, 8)
    te.promote(tiles([0, 1]))
    te[3] = 100.0  # tile 0, dirty
    te.evict(tiles([0, 1]))
    assert te.tile_state((0,)).location == "secondary" and te[3] == 100.0
    assert te._primary_bytes() <= _POOL_TILES * 8 * 4
    te.promote(tiles([2]))  # from the pool: the pooled buffer's old bytes are overwritten
    assert [te[16 + i] for i in range(8)] == [float(16 + i) for i in range(8)]
    te.promote(tiles([0]))
    assert te[3] == 100.0 and te[0] == 0.0


def test_an_implicit_tile_promoted_into_a_pooled_buffer_reads_zero():
    te = TiledEvictable(sw.CPU(0), sw.FileBacked(dtype=F32), (3,), (4,))
    for i in range(4):
        te[i] = 7.0  # tile 0 primary (dirty)
    te.evict(tiles([0]))  # its buffer goes to the pool
    te.promote(tiles([1]))  # implicit zero into the pooled (non-zero) buffer
    assert [te[4 + i] for i in range(4)] == [0.0] * 4
    assert te.tile_state((1,)).location == "primary"


def test_a_full_primary_slab_is_released_when_its_last_tile_leaves():
    n, T = 8, 16
    p = sw.CPU(n * T)
    te = TiledEvictable(p, sw.FileBacked(dtype=F32), (n,), (T,))
    assert te.primary is p and te._primary_bytes() == n * T * 4
    te.evict(tiles(range(n - 1)))
    assert te.primary is p and not p.is_released()  # one tile still lives in the slab
    te.evict(tiles([n - 1]))
    assert p.is_released() and te.primary is not p and te.primary.size() == 0
    assert type(te.primary) is sw.CPU and te.primary.is_owned()
    assert te._primary_bytes() == 0
    te.promote(tiles([2]))  # later promotions use tile buffers
    assert te._primary_bytes() == T * 4 and te[2 * T] == 0.0
    te.release()
    assert te.primary.is_released()


def test_a_failed_promotion_commits_nothing_and_gives_its_buffer_back():
    register_move_operation(FailSecondary, FailPrimary, FailingOp)
    try:
        te = TiledEvictable(FailPrimary([], dtype=F32), FailSecondary([1.0, 2.0, 3.0, 4.0], dtype=F32), (2,), (2,))
        with pytest.raises(OSError, match="injected"):
            te.promote(tiles([0, 1]))
        assert [te.tile_state((k,)).location for k in range(2)] == ["secondary"] * 2
        assert te._primary_bytes() <= _POOL_TILES * 2 * 4  # only pooled buffers remain
        assert [te[i] for i in range(4)] == [1.0, 2.0, 3.0, 4.0]
    finally:
        unregister_move_operation(FailSecondary, FailPrimary)


RSS_CHILD = r"""
import json, sys
import numpy as np
import strideweave as sw
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSet

def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) * 1024

n_tiles, tile = 64, 256 * 1024  # 64 tiles of 1 MiB: 64 MiB
n = n_tiles * tile
flat = sw.Layout(sw.Shape(n), sw.Stride(1))
c = sw.CPU(n, empty=True)
np.from_dlpack(sw.Tensor(c, 0, flat))[:] = 1.0
fb = sw.move(sw.Tensor(c, 0, flat), sw.FileBacked(dtype=sw.DType.Float32)).carrier
te = TiledEvictable(sw.CPU(0), fb, (n_tiles,), (tile,))
base = rss()
te.promote(TileSet([(k,) for k in range(n_tiles)]))
full = rss()
te.evict(TileSet([(k,) for k in range(4, n_tiles)]))
four = rss()
print(json.dumps({"base": base, "full": full, "four": four, "held": te._primary_bytes()}))
"""


@pytest.mark.skipif(bool(os.environ.get("STRIDEWEAVE_SANITIZED")),
                    reason="ASan keeps every buffer on its heap and does not return freed memory: RSS is moot")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_rss_drops_when_tiles_are_evicted():
    import json
    proc = run_python(RSS_CHILD, timeout=300)
    assert_child_ok(proc)
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    MiB = 1 << 20
    # all 64 tiles resident: about 64 MiB more than before
    assert r["full"] - r["base"] > 48 * MiB, r
    # 4 resident (+ at most _POOL_TILES pooled): the other tiles' memory is gone
    assert r["held"] <= (4 + _POOL_TILES) * MiB, r
    # + the storage layer's reuse cache of freed buffers (at most 8 MiB, see
    # csrc/engine/storage/reuse_cache.cpp) + 8 MiB of allocator slack; the whole primary
    # (the old behaviour) would be 64 MiB.
    assert r["four"] - r["base"] < (4 + _POOL_TILES) * MiB + 8 * MiB + 8 * MiB, r
