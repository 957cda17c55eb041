"""In-place updates of a TiledEvictable: assign() writes compact tiles into
the selected tiles of the same carrier (primary-resident, valid and dirty,
one version bump, the validation and claim rules of project), flush()
writes dirty tiles to the secondary and leaves them clean, and the
read-only tile-set properties primary_tiles / secondary_tiles / valid_tiles
/ dirty_tiles."""

import numpy as np
import pytest

import strideweave as sw
from strideweave.carriers.move import register_move_operation, unregister_move_operation
from strideweave.carriers.tiled_evictable import AwaitResidency, TiledEvictable, TileSelection, TileSet, TileState

from support.moves import Gate, WAIT, held_operation
from support.tiled import pending, tiles_layout

F32 = sw.DType.Float32
GRID, TILE = (2, 3), (2, 2)
N = 24


def ramp(n=N, start=0.0):
    c = sw.CPU(n)
    for i in range(n):
        c[i] = start + i
    return c


def on_secondary():
    """Every tile secondary-resident on a FileBacked holding 0..23."""
    te = TiledEvictable(ramp(), sw.FileBacked(dtype=F32), GRID, TILE)
    te.evict(TileSet([(i, j) for i in range(2) for j in range(3)]))
    return te, sw.Tensor(te, 0, te.canonical_layout())


def compact_for(sel, start=100.0):
    """A CPU tensor of the selected region's shape holding start, start+1, ..."""
    cgrid = sel.compact_grid_shape
    n = int(np.prod(cgrid)) * 4
    return sw.Tensor(ramp(n, start), 0, tiles_layout(cgrid, TILE))


def project_values(te, full, sel):
    r = te.project(full, sel).wait()
    return [r[i] for i in range(r.size())]


def states(te):
    return {(i, j): te.tile_state((i, j)) for i in range(2) for j in range(3)}


# ------------------------------------------------------------ assign

def test_assign_writes_the_compact_tiles_in_place():
    te, full = on_secondary()
    sel = TileSelection([[1], [2, 0]])
    compact = compact_for(sel)
    before, version = states(te), te.version
    h = te.assign(full, sel, compact)
    assert isinstance(h, AwaitResidency)
    assert h.wait() is None and h.done
    assert te.version == version + 1
    after = states(te)
    for t in sel.coordinates:
        assert after[t] == TileState("primary", True, True)
    assert {t: s for t, s in after.items() if t not in sel.coordinates} == \
        {t: s for t, s in before.items() if t not in sel.coordinates}
    assert project_values(te, full, sel) == [100.0 + i for i in range(8)]
    # The compact input is given back unchanged.
    assert not compact.carrier.is_owned() and [compact[i] for i in range(8)] == [100.0 + i for i in range(8)]


def test_assign_then_flush_persists_and_evict_keeps_the_values():
    te, full = on_secondary()
    sel = TileSelection([[0], [1]])
    te.assign(full, sel, compact_for(sel)).wait()
    te.flush().wait()
    assert te.tile_state((0, 1)) == TileState("primary", True, False)
    on_disk = np.fromfile(te.secondary.path, np.float32)
    base = 1 * 2 * 4  # tile (0, 1) is the third tile first-mode-fastest
    assert on_disk[base:base + 4].tolist() == [100.0, 101.0, 102.0, 103.0]
    te.evict(TileSet([(0, 1)]))  # clean: nothing to write
    assert project_values(te, full, sel) == [100.0, 101.0, 102.0, 103.0]


def test_assign_initializes_invalid_and_implicit_tiles():
    te, full = on_secondary()
    sel = TileSelection([[0], [0]])
    out = te.scatter(compact_for(sel), full, sel).wait()  # a fresh carrier: other tiles invalid
    fresh = out.carrier
    assert fresh.tile_state((1, 2)).location == "invalid"
    target = TileSelection([[1], [2]])
    fresh.assign(out, target, compact_for(target, 50.0)).wait()
    assert fresh.tile_state((1, 2)) == TileState("primary", True, True)
    assert project_values(fresh, out, target) == [50.0, 51.0, 52.0, 53.0]
    zero = TiledEvictable(sw.CPU(0), sw.CPU(0), GRID, TILE)
    zfull = sw.Tensor(zero, 0, zero.canonical_layout())
    zero.assign(zfull, target, compact_for(target)).wait()
    assert zero.tile_state((1, 2)) == TileState("primary", True, True)
    assert zero.tile_state((0, 0)) == TileState("implicit", True, False)


def test_assign_follows_the_carriers_geometry():
    te = TiledEvictable(sw.CPU(0), sw.CPU(0), GRID, TILE, geometry="row-major")
    full = sw.Tensor(te, 0, te.canonical_layout())
    sel = TileSelection([[1], [0, 2]])
    c = te.project(full, sel).wait()  # a compact tensor of the right Layout: (2, 4) row-major
    np.from_dlpack(c)[:] = np.arange(8, dtype=np.float32).reshape(2, 4)
    te.assign(full, sel, c).wait()
    a = np.asarray(full)
    assert a[2:4, 0:2].tolist() == [[0, 1], [4, 5]] and a[2:4, 4:6].tolist() == [[2, 3], [6, 7]]
    assert a[0:2].sum() == 0 and a[2:4, 2:4].sum() == 0


def _refusals():
    other = TiledEvictable(sw.CPU(0), sw.CPU(0), GRID, TILE)
    sel = TileSelection([[0], [0]])
    good = compact_for(sel)
    int_c = sw.Tensor(sw.CPU(4, dtype=sw.DType.Int32), 0, tiles_layout((1, 1), TILE))
    file_c = sw.move(compact_for(sel), sw.FileBacked(dtype=F32))
    released = compact_for(sel)
    released.carrier.release()
    return [
        # (tensor, selection, compact) -> error, fragment; None means "the full tensor"
        ((0, sel, good), TypeError, "tensor must be a Tensor"),
        ((None, sel, [1.0]), TypeError, "compact must be a Tensor"),
        ((None, [[0], [0]], good), TypeError, "TileSelection"),
        ((None, sel, file_c), TypeError, "primary tier's class"),
        ((None, sel, int_c), TypeError, "dtype"),
        ((None, TileSelection([[0, 1], [0]]), good), ValueError, "shape"),
        ((None, TileSelection([[2], [0]]), good), ValueError, "out of range"),
        ((None, TileSelection([[0]]), good), ValueError, "rank"),
        ((sw.Tensor(other, 0, other.canonical_layout()), sel, good), TypeError, "this"),
        (("flat", sel, good), ValueError, "tile"),
        ((None, sel, released), RuntimeError, "released"),
    ]


@pytest.mark.parametrize("case", range(11))
def test_assign_refusals_change_nothing(case):
    (tensor, sel, compact), err, fragment = _refusals()[case]
    te, full = on_secondary()
    if tensor is None:
        tensor = full
    elif tensor == "flat":
        tensor = sw.Tensor(te, 0, sw.Layout(sw.Shape((4, 6)), sw.Stride((1, 4))))
    before, version = states(te), te.version
    with pytest.raises(err, match=fragment):
        te.assign(tensor, sel, compact)
    assert states(te) == before and te.version == version and pending(te) == 0
    if isinstance(compact, sw.Tensor) and not compact.carrier.is_released():
        assert not compact.carrier.is_owned()


def test_assign_on_a_released_carrier_is_refused():
    te, full = on_secondary()
    sel = TileSelection([[0], [0]])
    te.release()
    with pytest.raises(RuntimeError, match="released"):
        te.assign(full, sel, compact_for(sel))


class GPrimary(sw.Generic):
    pass


class GSecondary(sw.Generic):
    pass


@pytest.fixture
def held_reads():
    """A TiledEvictable over GSecondary whose tile reads wait on a Gate."""
    gate = Gate()
    register_move_operation(GSecondary, sw.CPU, held_operation(gate))
    try:
        te = TiledEvictable(sw.CPU(0), GSecondary([float(i) for i in range(N)], dtype=F32), GRID, TILE)
        yield te, sw.Tensor(te, 0, te.canonical_layout()), gate
    finally:
        gate.release.set()
        unregister_move_operation(GSecondary, sw.CPU)


def test_assign_refuses_tiles_a_pending_request_uses_and_takes_others(held_reads):
    te, full, gate = held_reads
    h = te.project(full, TileSelection([[0], [0]]))
    assert gate.entered.wait(WAIT)
    sel = TileSelection([[0], [0]])
    compact = compact_for(sel)
    with pytest.raises(RuntimeError, match="wait"):
        te.assign(full, sel, compact)
    assert not compact.carrier.is_owned()
    other = TileSelection([[1], [2]])
    te.assign(full, other, compact_for(other)).wait()  # CPU to the primary: not held
    gate.release.set()
    h.wait()
    assert te.tile_state((1, 2)) == TileState("primary", True, True)


def test_a_pending_assign_claims_its_compact_input_and_its_tiles():
    gate = Gate()
    register_move_operation(GPrimary, GPrimary, held_operation(gate))
    try:
        te = TiledEvictable(GPrimary([], dtype=F32), sw.FileBacked(dtype=F32), GRID, TILE)
        full = sw.Tensor(te, 0, te.canonical_layout())
        sel = TileSelection([[0], [1]])
        compact = sw.Tensor(GPrimary([7.0] * 4, dtype=F32), 0, tiles_layout((1, 1), TILE))
        h = te.assign(full, sel, compact)
        assert gate.entered.wait(WAIT)
        assert compact.carrier.is_owned()
        with pytest.raises(RuntimeError):
            compact.carrier[0] = 1.0
        with pytest.raises(RuntimeError, match="wait"):
            te.project(full, sel)
        with pytest.raises(RuntimeError, match="wait"):
            te.evict(sel.tile_set)
        gate.release.set()
        h.wait()
        assert not compact.carrier.is_owned()
        assert te.tile_state((0, 1)) == TileState("primary", True, True)
        assert project_values(te, full, sel) == [7.0] * 4
    finally:
        gate.release.set()
        unregister_move_operation(GPrimary, GPrimary)


def test_a_compact_input_a_pending_move_owns_is_refused():
    te, full = on_secondary()
    sel = TileSelection([[0], [0]])
    gate = Gate()
    register_move_operation(sw.CPU, GPrimary, held_operation(gate))
    try:
        compact = compact_for(sel)
        h = sw.move_async(compact, GPrimary([], dtype=F32))
        assert gate.entered.wait(WAIT)
        with pytest.raises(RuntimeError, match="pending move"):
            te.assign(full, sel, compact)
        gate.release.set()
        h.wait()
    finally:
        gate.release.set()
        unregister_move_operation(sw.CPU, GPrimary)


# ------------------------------------------------------------ flush

def test_flush_writes_dirty_tiles_and_leaves_them_clean_and_primary():
    p = ramp()
    te = TiledEvictable(p, sw.FileBacked(dtype=F32), GRID, TILE)  # every tile primary, dirty
    assert te.secondary.size() == 0
    version = te.version
    h = te.flush(TileSet([(1, 0), (0, 2)]))
    assert isinstance(h, AwaitResidency) and h.wait() is None
    assert te.dirty_tiles == TileSet([(0, 0), (0, 1), (1, 1), (1, 2)])
    assert te.tile_state((1, 0)) == TileState("primary", True, False)
    assert te.secondary.size() == N  # an empty secondary gets its slots
    on_disk = np.fromfile(te.secondary.path, np.float32)
    assert on_disk[4:8].tolist() == [4.0, 5.0, 6.0, 7.0]       # tile (1, 0)
    assert on_disk[16:20].tolist() == [16.0, 17.0, 18.0, 19.0]  # tile (0, 2)
    te.flush(TileSelection([[0, 1], [1]])).wait()  # a selection means its tile set
    te.flush().wait()
    assert te.dirty_tiles == TileSet() and te.primary_tiles == TileSet(states(te))
    assert np.fromfile(te.secondary.path, np.float32).tolist() == [float(i) for i in range(N)]
    assert te.version == version  # the values did not change


def test_flush_of_clean_tiles_is_a_finished_no_op():
    te, _ = on_secondary()
    h = te.flush()
    assert h.done and h.wait() is None and pending(te) == 0


@pytest.mark.parametrize("arg,err,fragment", [
    ([(0, 0)], TypeError, "TileSet"),
    (TileSet([(2, 0)]), ValueError, "out of range"),
    (TileSet([(0,)]), ValueError, "rank"),
])
def test_flush_refusals(arg, err, fragment):
    te = TiledEvictable(ramp(), sw.FileBacked(dtype=F32), GRID, TILE)
    with pytest.raises(err, match=fragment):
        te.flush(arg)
    assert len(te.dirty_tiles) == 6 and pending(te) == 0
    te.release()
    with pytest.raises(RuntimeError, match="released"):
        te.flush()


def test_a_failed_flush_keeps_the_tiles_dirty():
    from support.carriers import FailingOp, FailSecondary

    register_move_operation(sw.CPU, FailSecondary, FailingOp)
    try:
        te = TiledEvictable(ramp(), FailSecondary([0.0] * N, dtype=F32), GRID, TILE)
        te[0] = 42.0
        h = te.flush()
        with pytest.raises(OSError, match="injected tile failure"):
            h.wait()
        assert te.tile_state((0, 0)) == TileState("primary", True, True)
        assert te[0] == 42.0
    finally:
        unregister_move_operation(sw.CPU, FailSecondary)


def test_flush_refuses_tiles_a_pending_request_writes():
    gate = Gate()
    register_move_operation(GPrimary, GPrimary, held_operation(gate))
    try:
        te = TiledEvictable(GPrimary([float(i) for i in range(N)], dtype=F32), sw.FileBacked(dtype=F32), GRID, TILE)
        full = sw.Tensor(te, 0, te.canonical_layout())
        sel = TileSelection([[0], [1]])
        compact = sw.Tensor(GPrimary([7.0] * 4, dtype=F32), 0, tiles_layout((1, 1), TILE))
        h = te.assign(full, sel, compact)
        assert gate.entered.wait(WAIT)
        with pytest.raises(RuntimeError, match="wait"):
            te.flush(sel.tile_set)
        gate.release.set()
        h.wait()
        te.flush().wait()
        assert te.dirty_tiles == TileSet()
    finally:
        gate.release.set()
        unregister_move_operation(GPrimary, GPrimary)


# ------------------------------------------------------------ tile-set properties

def test_tile_set_properties_follow_tile_state():
    te, full = on_secondary()
    te.promote(TileSet([(0, 0), (1, 2)]))
    te[0] = 5.0  # tile (0, 0) dirty
    out = te.scatter(compact_for(TileSelection([[1], [1]])), full, TileSelection([[1], [1]])).wait()
    for t in (te, out.carrier):
        st = states(t)
        assert t.primary_tiles == TileSet(k for k, s in st.items() if s.location == "primary")
        assert t.secondary_tiles == TileSet(k for k, s in st.items() if s.location == "secondary")
        assert t.valid_tiles == TileSet(k for k, s in st.items() if s.valid)
        assert t.dirty_tiles == TileSet(k for k, s in st.items() if s.dirty)
    assert te.primary_tiles == TileSet([(0, 0), (1, 2)]) and te.dirty_tiles == TileSet([(0, 0)])
    assert out.carrier.valid_tiles == TileSet([(1, 1)])
    zero = TiledEvictable(sw.CPU(0), sw.CPU(0), GRID, TILE)
    assert zero.valid_tiles == TileSet(states(zero)) and zero.primary_tiles == TileSet() \
        and zero.secondary_tiles == TileSet()


@pytest.mark.parametrize("name", ["primary_tiles", "secondary_tiles", "valid_tiles", "dirty_tiles"])
def test_tile_set_properties_are_read_only(name):
    te, _ = on_secondary()
    assert isinstance(getattr(te, name), TileSet)
    with pytest.raises(AttributeError):
        setattr(te, name, TileSet())
    te.release()
    with pytest.raises(RuntimeError, match="released"):
        getattr(te, name)
