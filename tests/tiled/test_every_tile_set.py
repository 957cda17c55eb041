"""The tile-set properties (valid_tiles, primary_tiles, secondary_tiles,
dirty_tiles) of a carrier where every tile is in the set return a TileSet
whose coordinates are built only when read: len, iteration, membership,
equality with another such set, and passing it back to a request cost no
list of every tile (2**22 tiles were 400+ MiB of tuples). It behaves exactly
as the TileSet of the same coordinates."""
import itertools
import sys

import pytest

import strideweave as sw
from strideweave.carriers.tiled_evictable import TileSet, TiledEvictable

from support.builders import F32, ramp_cpu
from support.process import run_python


def every(grid):
    """The explicit TileSet of every tile of grid."""
    return TileSet(c[::-1] for c in itertools.product(*(range(g) for g in grid[::-1])))


@pytest.mark.parametrize("grid", [(4,), (2, 3), (3, 1, 2)])
def test_it_equals_the_explicit_set_in_every_respect(grid):
    te = TiledEvictable(ramp_cpu(6 * len(every(grid))), sw.FileBacked(dtype=F32), grid, (6,) + (1,) * (len(grid) - 1))
    lazy, explicit = te.valid_tiles, every(grid)
    assert len(lazy) == len(explicit) and lazy.rank == explicit.rank == len(grid)
    assert list(lazy) == list(explicit)
    assert lazy == explicit and explicit == lazy and lazy == te.primary_tiles == te.dirty_tiles
    for c in list(explicit) + [tuple(g for g in grid), (0,) * (len(grid) + 1), [0] * len(grid),
                               tuple(float(x) for x in explicit.coordinates[-1]), (-1,) + (0,) * (len(grid) - 1)]:
        assert (c in lazy) == (c in explicit), c
    assert lazy.coordinates == explicit.coordinates
    assert hash(lazy) == hash(explicit) and repr(lazy) == repr(explicit)
    assert te.secondary_tiles == TileSet() and lazy != TileSet()


def test_a_partial_set_is_explicit_and_requests_take_the_lazy_one_back():
    te = TiledEvictable(ramp_cpu(12), sw.FileBacked(dtype=F32), (4,), (3,))
    te.evict(te.valid_tiles)  # every tile, passed back without its coordinates
    assert te.secondary_tiles == every((4,)) and te.primary_tiles == TileSet()
    te.promote(TileSet([(1,), (3,)]))
    assert te.primary_tiles == TileSet([(1,), (3,)]) and te.primary_tiles._grid is None
    assert [te[i] for i in range(12)] == [float(i) for i in range(12)]


def test_a_lazy_set_of_another_grid_is_checked_as_coordinates():
    a = TiledEvictable(ramp_cpu(6), sw.FileBacked(dtype=F32), (2,), (3,))
    b = TiledEvictable(ramp_cpu(12), sw.FileBacked(dtype=F32), (4,), (3,))
    c = TiledEvictable(ramp_cpu(6), sw.FileBacked(dtype=F32), (2, 1), (3, 1))
    a.evict(TileSet([(0,), (1,)]))
    with pytest.raises(ValueError, match=r"coordinate \(2,\) is out of range"):
        a.promote(b.valid_tiles)
    with pytest.raises(ValueError, match="rank 2 but the tile grid"):
        a.promote(c.valid_tiles)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads ru_maxrss in kilobytes")
def test_a_huge_grid_answers_without_building_its_tiles():
    r = run_python("""
        import resource
        import strideweave as sw
        from strideweave.carriers.tiled_evictable import TiledEvictable
        te = TiledEvictable(sw.CPU(0), sw.FileBacked(dtype=sw.float32), (1 << 11, 1 << 11), (1, 1))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        v = te.valid_tiles
        assert len(v) == 1 << 22 and (2047, 2047) in v and (2048, 0) not in v and v == te.valid_tiles
        assert next(iter(v)) == (0, 0)
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(grown)
    """, timeout=120)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[-1]) < 64 * 1024, r.stdout  # KiB: far below the 400+ MiB of tuples
