"""The geometry= choice of TiledEvictable: "tiles" (each tile contiguous),
"dense" (the logical tensor first-mode-fastest), "row-major" (C order, as
NumPy, .npy and safetensors store it) or an explicit compact injective
Layout. Footprints, canonical_layout(), transfers, projections, scatter,
assign, flush, slot access and the direct operations follow it; tiles that
are not one contiguous span move as their spans."""
import random

import numpy as np
import pytest

import strideweave as sw
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection, TileSet

from support.tiled import HWM_CHILD_PRELUDE, hwm_only, run_hwm_child, tiles_layout

F32 = sw.DType.Float32
GRID, TILE = (2, 3), (2, 2)
SHAPE = (4, 6)
# Tiles in row-major order, each tile row-major inside: a blocked layout.
BLOCKED = sw.Layout(sw.Shape([[2, 2], [2, 3]]), sw.Stride([[2, 12], [1, 4]]))
GEOMETRIES = ["tiles", "dense", "row-major", BLOCKED]


def offsets(layout, shape=SHAPE):
    """offsets[i, j]: the slot the layout gives logical coordinate (i, j)."""
    return np.array([[layout.index((i, j)) for j in range(shape[1])] for i in range(shape[0])])


def on_file(values_in_slot_order):
    flat = sw.Layout(sw.Shape(len(values_in_slot_order)), sw.Stride(1))
    c = sw.CPU(len(values_in_slot_order), empty=True)
    np.from_dlpack(sw.Tensor(c, 0, flat))[:] = values_in_slot_order
    return sw.move(sw.Tensor(c, 0, flat), sw.FileBacked(dtype=F32)).carrier


def carrier_over(logical, geometry, grid=GRID, tile=TILE, tiers="file"):
    """A TiledEvictable whose secondary (a FileBacked over a CPU primary, or
    Generic tiers, copied through Python) holds `logical` laid out by the
    geometry, every tile secondary-resident."""
    probe = TiledEvictable(sw.CPU(0), sw.CPU(0), grid, tile, geometry=geometry)
    m = offsets(probe.canonical_layout(), logical.shape)
    probe.release()
    slots = np.empty(logical.size, np.float32)
    slots[m] = logical
    if tiers == "file":
        te = TiledEvictable(sw.CPU(0), on_file(slots), grid, tile, geometry=geometry)
    else:
        te = TiledEvictable(sw.Generic([], dtype=F32), sw.Generic([float(x) for x in slots], dtype=F32), grid, tile,
                            geometry=geometry)
    return te, sw.Tensor(te, 0, te.canonical_layout()), m


def logical_of(te, m):
    return np.array([[te[int(k)] for k in row] for row in m], np.float32)


def block(a, sel, tile=TILE):
    rows = [r * tile[0] + k for r in sel.per_axis[0] for k in range(tile[0])]
    cols = [c * tile[1] + k for c in sel.per_axis[1] for k in range(tile[1])]
    return a[np.ix_(rows, cols)]


def read_compact(c, shape):
    m = offsets(c.layout, shape)
    return np.array([[c.carrier[int(k)] for k in row] for row in m], np.float32)


def write_compact(c, values):
    m = offsets(c.layout, values.shape)
    for idx, k in np.ndenumerate(m):
        c.carrier[int(k)] = float(values[idx])


# ------------------------------------------------------------ canonical layouts

def test_dense_geometries_have_a_flat_rank_n_canonical_layout():
    def canon(g):
        te = TiledEvictable(sw.CPU(0), sw.CPU(0), GRID, TILE, geometry=g)
        return te.canonical_layout(), te.geometry

    assert canon("dense") == (sw.Layout(sw.Shape((4, 6)), sw.Stride((1, 4))), "dense")
    assert canon("row-major") == (sw.Layout(sw.Shape((4, 6)), sw.Stride((6, 1))), "row-major")
    assert canon("tiles") == (tiles_layout(GRID, TILE), "tiles")
    layout, g = canon(BLOCKED)
    assert layout == BLOCKED and g is BLOCKED
    te = TiledEvictable(sw.CPU(0), sw.CPU(0), GRID, TILE)
    assert te.geometry == "tiles" and te.canonical_layout() == tiles_layout(GRID, TILE)


@pytest.mark.parametrize("geometry,order", [("row-major", "C"), ("dense", "F")])
def test_numpy_sees_the_logical_shape_of_the_full_tensor_and_of_a_projection(geometry, order):
    a = np.arange(24, dtype=np.float32).reshape(SHAPE)
    te, full, _ = carrier_over(a, geometry)
    # The secondary holds the logical tensor in that order, slot by slot.
    assert np.array_equal(np.fromfile(te.secondary.path, np.float32), a.ravel(order))
    assert np.array_equal(np.asarray(full), a)
    sel = TileSelection([[1], [2, 0]])
    r = te.project(full, sel).wait()
    assert r.layout == sw.Layout(sw.Shape((2, 4)), sw.Stride((4, 1)) if order == "C" else sw.Stride((1, 2)))
    assert np.array_equal(np.from_dlpack(r), block(a, sel))
    assert np.array_equal(np.asarray(r), block(a, sel))


def test_a_compact_result_of_an_explicit_geometry_is_dense():
    a = np.arange(24, dtype=np.float32).reshape(SHAPE)
    te, full, _ = carrier_over(a, BLOCKED)
    r = te.project(full, TileSelection([[0, 1], [1]])).wait()
    assert r.layout == sw.Layout(sw.Shape((4, 2)), sw.Stride((1, 4)))
    assert np.array_equal(np.asarray(r), block(a, TileSelection([[0, 1], [1]])))


# ------------------------------------------------------------ the model check

def random_selection(rng):
    return TileSelection([rng.sample(range(g), rng.randint(1, g)) for g in GRID])


def random_tiles(rng):
    every = [(i, j) for i in range(GRID[0]) for j in range(GRID[1])]
    return TileSet(rng.sample(every, rng.randint(1, len(every))))


@pytest.mark.parametrize("geometry,seed,tiers", [
    *((g, seed, "file") for g in GEOMETRIES for seed in range(3)),
    ("row-major", 0, "generic"), (BLOCKED, 1, "generic"),
], ids=lambda x: "explicit" if isinstance(x, sw.Layout) else str(x))
def test_every_request_agrees_with_a_numpy_model(geometry, seed, tiers):
    # Random sequences of every request against a NumPy array (this caught
    # a strided tile copied from a file as its whole span, holes included).
    rng = random.Random(seed)
    a = np.arange(24, dtype=np.float32).reshape(SHAPE) + 100 * seed
    te, full, m = carrier_over(a.copy(), geometry, tiers=tiers)
    for _ in range(25):
        op = rng.choice(["write", "evict", "promote", "project", "assign", "scatter", "flush"])
        if op == "write":
            i, j = rng.randrange(4), rng.randrange(6)
            a[i, j] = rng.randint(-50, 50)
            te[int(m[i, j])] = float(a[i, j])
        elif op == "evict":
            te.evict(random_tiles(rng))
        elif op == "promote":
            te.promote(random_tiles(rng))
        elif op == "project":
            sel = random_selection(rng)
            r = te.project(full, sel).wait()
            assert np.array_equal(read_compact(r, block(a, sel).shape), block(a, sel)), (op, sel)
        elif op in ("assign", "scatter"):
            sel = random_selection(rng)
            c = te.project(full, sel).wait()
            new = np.array(np.random.default_rng(rng.randrange(1000)).integers(-9, 9, block(a, sel).shape),
                           np.float32)
            write_compact(c, new)
            if op == "assign":
                version = te.version
                te.assign(full, sel, c).wait()
                assert te.version == version + 1
                rows = [r * 2 + k for r in sel.per_axis[0] for k in range(2)]
                cols = [q * 2 + k for q in sel.per_axis[1] for k in range(2)]
                a[np.ix_(rows, cols)] = new
                assert all(te.tile_state(t).location == "primary" and te.tile_state(t).dirty
                           for t in sel.coordinates)
            else:
                out = te.scatter(c, full, sel).wait()
                back = out.carrier.project(out, sel).wait()
                assert np.array_equal(read_compact(back, new.shape), new)
                out.carrier.release()
        else:
            te.flush().wait()
            assert te.dirty_tiles == TileSet()
            if tiers == "file":
                on_disk = np.fromfile(te.secondary.path, np.float32)
                assert np.array_equal(on_disk[m], a)
        assert np.array_equal(logical_of(te, m), a), op
    if isinstance(geometry, str) and geometry != "tiles":
        assert np.array_equal(np.asarray(full), a)


@pytest.mark.parametrize("geometry", ["dense", "row-major", BLOCKED], ids=["dense", "row-major", "explicit"])
def test_direct_operations_follow_the_geometry(geometry):
    a = (np.arange(24, dtype=np.float32).reshape(SHAPE) - 11.5)
    te, full, m = carrier_over(a, geometry)
    te.promote(TileSet([(0, 1), (1, 2)]))  # mixed residency
    flat = lambda t: np.array([t[i] for i in range(t.size())], np.float32)  # noqa: E731
    dense_m = offsets(sw.relu(full).layout)
    assert np.array_equal(flat(sw.relu(full))[dense_m], np.maximum(a, 0))
    assert np.array_equal(flat(sw.add(full, full))[dense_m], a + a)
    assert np.array_equal(flat(sw.mul(full, 2.0))[dense_m], a * 2)
    assert sw.reduce_sum(full).item() == a.sum()


# ------------------------------------------------------------ compatibility

def test_a_tensor_must_follow_the_carriers_geometry():
    a = np.arange(24, dtype=np.float32).reshape(SHAPE)
    te, full, _ = carrier_over(a, "row-major")
    tiles = sw.Tensor(te, 0, tiles_layout(GRID, TILE))
    with pytest.raises(ValueError, match="tile"):
        te.project(tiles, TileSelection([[0], [0]]))
    # The same function as the flat row-major layout, written hierarchically.
    same = sw.Tensor(te, 0, sw.Layout(sw.Shape([[2, 2], [2, 3]]), sw.Stride([[6, 12], [1, 2]])))
    r = te.project(same, TileSelection([[1], [2]])).wait()
    assert np.array_equal(read_compact(r, (2, 2)), a[2:4, 4:6])


# ------------------------------------------------------------ refusals

@pytest.mark.parametrize("geometry,fragment", [
    (sw.Layout(sw.Shape(24), sw.Stride(1)), "1 top-level modes; the tile grid has rank 2"),
    (sw.Layout(sw.Shape((6, 4)), sw.Stride((4, 1))), "mode 0 of the geometry Layout has 6"),
    (sw.Layout(sw.Shape((4, 6)), sw.Stride((1, 3))), "compact and injective"),
    (sw.Layout(sw.Shape((4, 6)), sw.Stride((6, 2))), "compact and injective"),
    (sw.Layout(sw.Shape((4, [3, 2])), sw.Stride((6, [1, 2]))), "compact and injective"),
    # tile 3 along mode 1 cuts its first leaf of 4 (the grid is (2, 4) here)
    (sw.Layout(sw.Shape((4, [4, 3])), sw.Stride((1, [12, 4]))), "leaf boundary"),
    ("blocked", "'tiles', 'dense', 'row-major' or a Layout"),
])
def test_a_bad_geometry_is_refused_and_nothing_is_claimed(geometry, fragment):
    p, s = sw.CPU(0), sw.FileBacked(dtype=F32)
    grid, tile = ((2, 4), (2, 3)) if fragment == "leaf boundary" else (GRID, TILE)
    with pytest.raises(ValueError, match=fragment):
        TiledEvictable(p, s, grid, tile, geometry=geometry)
    assert not p.is_owned() and not s.is_owned()


def test_a_geometry_of_another_type_is_a_type_error():
    with pytest.raises(TypeError, match="'tiles', 'dense', 'row-major' or a Layout, not int"):
        TiledEvictable(sw.CPU(0), sw.CPU(0), GRID, TILE, geometry=3)


# ------------------------------------------------------------ spans, not copies

WIDE_TILES = HWM_CHILD_PRELUDE + r"""
from strideweave.carriers.tiled_evictable import TileSelection
rows, cols, width = 4096, 4096, 256           # 64 MiB; a tile is a 4 MiB column band
flat = sw.Layout(sw.Shape(rows * cols), sw.Stride(1))
c = sw.CPU(rows * cols, empty=True)
np.from_dlpack(sw.Tensor(c, 0, flat))[:] = np.arange(rows * cols, dtype=np.float32)
fb = sw.move(sw.Tensor(c, 0, flat), sw.FileBacked(dtype=sw.DType.Float32)).carrier
te = TiledEvictable(sw.CPU(0), fb, (1, cols // width), (rows, width), geometry="row-major")
w = sw.Tensor(te, 0, te.canonical_layout())
reset()
base = hwm()
te.promote(TileSet([(0, 3)]))
r = te.project(w, TileSelection([[0], [5]])).wait()
a = np.from_dlpack(r)
ok = bool(a[7, 9] == 7 * cols + 5 * width + 9) and a.shape == (rows, width)
te[5 * cols + 3 * width] = -1.0               # dirty the promoted tile, then save it
te.evict(TileSet([(0, 3)]))
peak = hwm() - base
ok = ok and np.fromfile(te.secondary.path, np.float32, count=1, offset=4 * (5 * cols + 3 * width))[0] == -1
print(json.dumps({"peak": peak, "ok": bool(ok)}))
"""


@hwm_only
def test_a_strided_tile_moves_as_its_spans_without_a_full_copy():
    # A 4 MiB column band of a 64 MiB row-major tensor is 4096 runs of 1 KiB;
    # promoting, projecting and evicting one costs about the tile (the
    # buffer, the projection), never the 64 MiB tensor.
    r = run_hwm_child(WIDE_TILES, timeout=300)
    assert r["ok"], r
    assert r["peak"] < 24 << 20, r
