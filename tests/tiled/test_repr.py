"""repr of a tensor over a TiledEvictable shows its values, read natively
where each tile is (primary buffer, slab, secondary, implicit zeros) without
promoting, evicting or bumping a version; a tile that holds no value makes
the repr say the values are not readable; a tier read through Python hooks
keeps the values unshown (a repr runs no hook)."""
import numpy as np

import strideweave as sw
from strideweave.carriers.tiled_evictable import TileSelection, TiledEvictable

from support.builders import F32, ramp_cpu
from support.carriers import ListCarrier
from support.tiled import tiled_on_file, tiled_ramp


def states(te):
    return [te.tile_state([k]) for k in range(te.grid_shape[0])]


def test_values_of_every_residency_are_shown_and_nothing_moves():
    te, t = tiled_ramp()  # 4 tiles of 3 on the primary slab
    te.evict(sw.TileSet([(1,)]))  # secondary
    te.promote(sw.TileSet([(1,)]))  # back, in its own buffer
    te.evict(sw.TileSet([(2,)]))
    before, version = states(te), te.version
    r = repr(t)
    expected = np.arange(12, dtype=np.float32).reshape(4, 3).T.tolist()  # leaf (3, 4), first mode fastest
    assert r.startswith("Tensor([[ 0.0,  3.0,  6.0,  9.0],\n")
    assert t.tolist() == expected
    assert "values not shown" not in r and "carrier=TiledEvictable" in r
    assert states(te) == before and te.version == version
    assert {s.location for s in before} == {"primary", "secondary"}


def test_secondary_resident_tiles_are_read_where_they_are():
    te, t = tiled_on_file()
    before = states(te)
    assert {s.location for s in before} == {"secondary"}
    r = repr(t)
    assert "31.0" in r and "values not shown" not in r
    assert states(te) == before and te.version == 0 and te.primary_tiles == sw.TileSet([])


def test_implicit_tiles_show_zeros():
    te = TiledEvictable(sw.CPU(0), sw.FileBacked(dtype=F32), (2,), (3,))
    r = repr(sw.Tensor(te, 0, te.canonical_layout()))
    assert r.startswith("Tensor([[0.0, 0.0],")
    assert states(te)[0].location == "implicit"


def test_an_invalid_tile_makes_the_values_unreadable():
    te = TiledEvictable(ramp_cpu(6), sw.CPU(0), (3,), (2,))
    t = sw.Tensor(te, 0, te.canonical_layout())
    sel = TileSelection([[1]])
    out_t = te.scatter(te.project(t, sel).wait(), t, sel).wait()  # tiles 0 and 2 invalid
    out = out_t.carrier
    before = states(out)
    r = repr(out_t)
    assert "<values not readable: RuntimeError: tile (0,) of this TiledEvictable is invalid" in r
    assert states(out) == before and before[0].location == "invalid"


def test_a_view_and_an_offset_are_read_too():
    te, t = tiled_ramp()
    v = sw.Tensor(te, 4, sw.Layout(sw.Shape(3), sw.Stride(2)))
    assert repr(v).startswith("Tensor([4.0, 6.0, 8.0], dtype=DType.Float32, carrier=TiledEvictable, offset=4")


def test_a_tier_with_python_hooks_is_not_read():
    class Counting(ListCarrier):
        reads = 0

        def get_value(self, i):
            Counting.reads += 1
            return super().get_value(i)

        def allocate_like(self, size, *, mutable=True, dtype=None, empty=False):
            return Counting([0.0] * size)

    te = TiledEvictable(Counting([float(i) for i in range(6)]), sw.CPU(0), (2,), (3,))
    r = repr(sw.Tensor(te, 0, te.canonical_layout()))
    assert "<values not shown: a TiledEvictable carrier's tiers are read through Python hooks" in r
    assert Counting.reads == 0
