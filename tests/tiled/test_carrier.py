"""TiledEvictable construction, geometry, tile-footprint compatibility, slot
reads and writes, release, DLPack refusal and public-move refusal."""
import pytest

import strideweave as sw
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection, TileSet, TileState

from support.builders import ramp_cpu
from support.tiled import pending, tiled_ramp, tiles_layout

F32 = sw.DType.Float32


def values(t):
    return [t[i] for i in range(t.size())]


def filled(n, start=0.0):
    c = sw.CPU(n)
    for i in range(n):
        c[i] = start + i
    return c


def make(grid=(2, 3), tile=(2, 1), primary=True, secondary="file"):
    n = 1
    for x in grid + tile:
        n *= x
    p = filled(n) if primary else sw.CPU(0)
    s = sw.FileBacked(dtype=F32) if secondary == "file" else sw.CPU(0)
    return TiledEvictable(p, s, grid, tile)


# ------------------------------------------------------------------ construction

def test_initial_state_non_empty_primary_is_primary_dirty():
    te = make()
    assert te.size() == 12 and te.dtype() is F32
    assert te.tile_state((1, 2)) == TileState("primary", True, True)
    assert te.primary.is_owned() and te.secondary.is_owned()


def test_initial_state_non_empty_secondary_is_secondary():
    p = sw.CPU(0)
    s = filled(6)
    te = TiledEvictable(p, s, (3,), (2,))
    assert te.tile_state((2,)) == TileState("secondary", True, False)
    assert values(sw.Tensor(te, 0, te.canonical_layout())) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_initial_state_both_empty_is_implicit_zero():
    te = make(primary=False)
    assert te.tile_state((0, 0)) == TileState("implicit", True, False)
    assert values(sw.Tensor(te, 0, te.canonical_layout())) == [0.0] * 12


def test_construction_claims_tiers_and_release_releases_both():
    p, s = filled(6), sw.FileBacked(dtype=F32)
    te = TiledEvictable(p, s, (3,), (2,))
    with pytest.raises(RuntimeError, match="not mutable"):
        p[0] = 1.0
    with pytest.raises(RuntimeError, match="owned"):
        p.release()
    te.evict(TileSet([(0,)]))
    path = s.path
    assert path.exists()
    assert te.release() is None
    assert te.is_released() and te.size() == 0
    assert p.is_released() and s.is_released()
    assert not path.exists()
    te.release()  # idempotent


@pytest.mark.parametrize("args, exc, fragment", [
    ((5, sw.CPU(0), (1,), (1,)), TypeError, "Carrier instance"),
    ((sw.CPU(0), "x", (1,), (1,)), TypeError, "Carrier instance"),
    ((sw.CPU(0), sw.CPU(0, dtype=sw.DType.Int32), (1,), (1,)), TypeError, "one dtype"),
    ((sw.CPU(0), sw.CPU(0), (2,), (1, 1)), ValueError, "rank"),
    ((sw.CPU(0), sw.CPU(0), (), ()), ValueError, "rank"),
    ((sw.CPU(0), sw.CPU(0), (0,), (1,)), ValueError, "positive"),
    ((sw.CPU(0), sw.CPU(0), (2,), (-1,)), ValueError, "positive"),
    ((sw.CPU(5), sw.CPU(0), (2,), (2,)), ValueError, "exactly"),
    ((sw.CPU(0), sw.CPU(3), (2,), (2,)), ValueError, "exactly"),
    ((sw.CPU(0), sw.CPU(0), (2.0,), (2,)), TypeError, "ints"),
    ((sw.CPU(0), sw.CPU(0), 2, (2,)), TypeError, "sequence"),
])
def test_construction_errors(args, exc, fragment):
    with pytest.raises(exc, match=fragment):
        TiledEvictable(*args)


def test_dependent_tiers_are_type_errors():
    ev = sw.Evictable(sw.CPU(4), sw.FileBacked(dtype=F32))
    with pytest.raises(TypeError, match="dependent"):
        TiledEvictable(ev, sw.CPU(0), (2,), (2,))
    inner = make()
    with pytest.raises(TypeError, match="dependent"):
        TiledEvictable(sw.CPU(0), inner, (2, 3), (2, 1))


def test_released_owned_and_immutable_tiers_are_runtime_errors():
    r = sw.CPU(4)
    r.release()
    with pytest.raises(RuntimeError, match="released"):
        TiledEvictable(r, sw.CPU(0), (2,), (2,))
    owned = sw.CPU(4)
    owned._claim_ownership()
    with pytest.raises(RuntimeError, match="owned"):
        TiledEvictable(sw.CPU(0), owned, (2,), (2,))
    with pytest.raises(RuntimeError, match="not mutable"):
        TiledEvictable(sw.CPU(4, mutable=False), sw.CPU(0), (2,), (2,))


def test_failed_construction_leaves_tiers_unclaimed():
    p = sw.CPU(4)
    with pytest.raises(ValueError):
        TiledEvictable(p, sw.CPU(3), (2,), (2,))
    assert not p.is_owned()
    p[0] = 1.0


def test_the_same_carrier_twice_is_refused():
    c = sw.CPU(4)
    with pytest.raises(ValueError, match="distinct"):
        TiledEvictable(c, c, (2,), (2,))


def test_policy_must_satisfy_the_protocol():
    with pytest.raises(TypeError, match="ResidencyPolicy"):
        TiledEvictable(sw.CPU(0), sw.CPU(0), (2,), (2,), residency_policy=object())


# ------------------------------------------------------------------ geometry

def test_canonical_layout_matches_api_example():
    te = TiledEvictable(sw.CPU(0), sw.CPU(0), (2, 3), (2, 2))
    assert te.canonical_layout() == sw.Layout(sw.Shape([[2, 2], [2, 3]]), sw.Stride([[1, 4], [2, 8]]))
    assert te.grid_shape == (2, 3) and te.tile_shape == (2, 2)


def test_tile_t_owns_contiguous_slots_at_encode_times_tile_size():
    te = TiledEvictable(sw.CPU(0), sw.CPU(0), (2, 3), (2, 2))
    te[(1 + 2 * 2) * 4 + 3] = 7.0   # last slot of tile (1, 2)
    assert te.tile_state((1, 2)).location == "primary"
    assert te.tile_state((0, 2)).location == "implicit"
    t = sw.Tensor(te, 0, te.canonical_layout())
    # logical coordinate: mode 0 ordinal 1 + 2*1 = 3, mode 1 ordinal 1 + 2*2 = 5
    assert t[(3, 5)] == 7.0


def test_tile_state_argument_errors():
    te = make()
    with pytest.raises(ValueError, match="not in the tile grid"):
        te.tile_state((2, 0))
    with pytest.raises(ValueError, match="not in the tile grid"):
        te.tile_state((0,))
    with pytest.raises(TypeError, match="tuple of ints"):
        te.tile_state(3)
    te.release()
    with pytest.raises(RuntimeError, match="released"):
        te.tile_state((0, 0))


def test_properties_are_read_only():
    te = make()
    for name in ("grid_shape", "tile_shape", "primary", "secondary"):
        with pytest.raises(AttributeError):
            setattr(te, name, None)


# ------------------------------------------------------------------ compatibility

def _project(te, layout, offset=0):
    t = sw.Tensor(te, offset, layout)
    return te.project(t, TileSelection([[0]] + [[0]] * (len(te.grid_shape) - 1)))


def test_flat_layout_with_contiguous_tiles_is_compatible():
    te = TiledEvictable(filled(6), sw.CPU(0), (2,), (3,))
    r = _project(te, sw.Layout(sw.Shape([6]), sw.Stride([1]))).wait()
    assert values(r) == [0.0, 1.0, 2.0]


def test_within_tile_permutation_is_compatible_and_governs_values():
    # tile (2, 2) grid (1, 1): transpose the association inside the tile
    te = TiledEvictable(filled(4), sw.CPU(0), (1, 1), (2, 2))
    lay = sw.Layout(sw.Shape([2, 2]), sw.Stride([2, 1]))
    t = sw.Tensor(te, 0, lay)
    r = te.project(t, TileSelection([[0], [0]])).wait()
    assert [r[(i, j)] for i in range(2) for j in range(2)] == [t[(i, j)] for i in range(2) for j in range(2)]
    assert values(r) == [0.0, 2.0, 1.0, 3.0]


@pytest.mark.parametrize("layout, offset, fragment", [
    # one logical tile spanning two carrier tiles (strides of a row-major 4-slot tile over a 2x2 grid)
    (sw.Layout(sw.Shape([4, 2]), sw.Stride([1, 4])), 0, "another carrier tile"),
    # tile coordinates remapped: mode 0's tiles swapped
    (sw.Layout(sw.Shape([[2, 2], [2]]), sw.Stride([[1, 2], [4]])), 0, "not tile-footprint compatible"),
    # aliasing: a stride-0 mode repeats slots
    (sw.Layout(sw.Shape([[2, 2], [2, 1]]), sw.Stride([[0, 4], [2, 8]])), 0, "repeats a physical slot"),
    # wrong mode extents
    (sw.Layout(sw.Shape([8]), sw.Stride([1])), 0, "top-level modes"),
    (sw.Layout(sw.Shape([3, 2]), sw.Stride([1, 3])), 0, "coordinates"),
    # a non-zero offset
    (sw.Layout(sw.Shape([[2, 2], [2, 1]]), sw.Stride([[1, 4], [2, 8]])), 1, "offset"),
])
def test_incompatible_layouts_are_value_errors_before_any_state_change(layout, offset, fragment):
    te = TiledEvictable(sw.CPU(0), filled(8), (2, 1), (2, 2))
    v0 = te.version
    with pytest.raises(ValueError, match=fragment):
        te.project(sw.Tensor(te, offset, layout), TileSelection([[0], [0]]))
    assert te.tile_state((0, 0)) == TileState("secondary", True, False)
    assert te.version == v0 and pending(te) == 0


def test_omitting_a_slot_is_incompatible():
    # tile 0 reaches slots 0, 1, 4, 5: it omits 2 and 3 of its footprint
    te = TiledEvictable(sw.CPU(0), filled(8), (2,), (4,))
    lay = sw.Layout(sw.Shape([[2, 2, 2]]), sw.Stride([[1, 4, 2]]))
    with pytest.raises(ValueError, match="compatible"):
        te.project(sw.Tensor(te, 0, lay), TileSelection([[0]]))


def test_a_tensor_of_another_carrier_is_a_type_error():
    te = make()
    other = sw.Tensor(sw.CPU(12), 0, te.canonical_layout())
    with pytest.raises(TypeError, match="backed by this TiledEvictable"):
        te.project(other, TileSelection([[0], [0]]))
    with pytest.raises(TypeError, match="must be a Tensor"):
        te.project("x", TileSelection([[0], [0]]))


# ------------------------------------------------------------------ slots

def test_slot_reads_come_from_where_the_tile_is_without_residency_change():
    te = make()
    te.evict(TileSet([(1, 0)]))
    assert te[2] == 2.0 and te[3] == 3.0
    assert te.tile_state((1, 0)).location == "secondary"


def test_slot_write_promotes_the_tile_and_marks_it_dirty():
    te = make()
    te.evict(TileSet([(1, 0)]))
    v = te.version
    te[3] = 42.0
    assert te.version == v + 1
    assert te.tile_state((1, 0)) == TileState("primary", True, True)
    assert te[2] == 2.0 and te[3] == 42.0
    te.evict(TileSet([(1, 0)]))
    assert te[3] == 42.0


def test_slot_write_into_implicit_tile_materialises_zeros():
    te = make(primary=False)
    te[5] = 1.5  # slot 5 lies in tile ordinal 2, coordinate (0, 1) of grid (2, 3)
    assert te.tile_state((0, 1)) == TileState("primary", True, True)
    assert [te[4], te[5]] == [0.0, 1.5]


def test_slot_errors():
    te = make()
    with pytest.raises(IndexError):
        te[12]
    with pytest.raises(IndexError):
        te[12] = 1.0
    te.release()
    with pytest.raises(RuntimeError, match="released"):
        te[0]
    with pytest.raises(RuntimeError, match="released"):
        te[0] = 1.0


# ------------------------------------------------------------------ refusals

def test_no_dlpack():
    te = make()
    t = sw.Tensor(te, 0, te.canonical_layout())
    with pytest.raises(BufferError, match="not supported") as e:
        t.__dlpack__()
    assert "TiledEvictable" in str(e.value) and "project()" in str(e.value)
    # A move of it is refused, so no "move it to a CPU carrier" hint.
    assert "strideweave.move" not in str(e.value)
    with pytest.raises(BufferError, match="TiledEvictable"):
        te.dlpack_info()


def test_public_moves_into_or_out_of_a_tiled_evictable_are_refused():
    te = make()
    t = sw.Tensor(te, 0, te.canonical_layout())
    with pytest.raises(NotImplementedError) as e:
        sw.move(t, sw.CPU(12))
    assert "TiledEvictable" in str(e.value) and "CPU" in str(e.value)
    src = sw.Tensor(filled(12), 0, te.canonical_layout())
    with pytest.raises((NotImplementedError, RuntimeError)) as e:
        sw.move(src, make(primary=False))
    assert "TiledEvictable" in str(e.value)


def test_legacy_registry_refuses_the_class():
    with pytest.raises(RuntimeError, match="TransferRoute"):
        sw.dispatch_move(TiledEvictable, sw.CPU)


def test_new_like_builds_a_fresh_tiled_evictable():
    te = make()
    vals = [0.0] * 12
    vals[5] = 3.0
    n = te.new_like(vals)
    assert type(n) is TiledEvictable and n is not te
    assert n.grid_shape == te.grid_shape and n.tile_shape == te.tile_shape
    assert type(n.primary) is sw.CPU and type(n.secondary) is sw.FileBacked
    assert n.tile_state((0, 1)).location == "primary"  # slot 5: tile ordinal 2
    assert n.tile_state((0, 2)).location == "implicit"
    assert n[5] == 3.0


def test_init_twice_is_refused_without_touching_the_tiers():
    te = make()
    p = sw.CPU(12)
    with pytest.raises(RuntimeError, match="twice"):
        te.__init__(p, sw.CPU(0), (2, 3), (2, 1))
    assert not p.is_owned()
    assert te.tile_state((0, 0)).location == "primary"


# ------------------------------------------------------------ refusals: operations, public moves and DLPack; tier classes' own routes


def full(te):
    return sw.Tensor(te, 0, te.canonical_layout())


def test_broadcast_to_refuses_a_raw_tiled_tensor():
    te, t = tiled_ramp(tile=2)
    with pytest.raises(TypeError, match="TiledEvictable"):
        sw.broadcast_to(t, sw.Shape([[2, 4]]))
    # a projected tensor is ordinary: it broadcasts
    r = te.project(t, TileSelection([[1]])).wait()
    assert sw.broadcast_to(r, r.layout.shape).carrier is r.carrier


@pytest.mark.parametrize("make", [lambda te, t: te.project(t, TileSelection([[0]])),
                                  lambda te, t: te.promote_async(TileSet([(0,)])),
                                  lambda te, t: te.scatter(te.project(t, TileSelection([[0]])).wait(), t,
                                                           TileSelection([[0]]))])
def test_handles_are_not_operands_of_any_operation(make):
    te, t = tiled_ramp(tile=2)
    h = make(te, t)
    for op in (lambda: sw.add(h, t), lambda: sw.mul(h, 2.0), lambda: sw.mul(2.0, h), lambda: sw.relu(h),
               lambda: sw.reduce_sum(h), lambda: sw.broadcast_to(h, sw.Shape([2]))):
        with pytest.raises(TypeError):
            op()
    h.wait()


@pytest.mark.parametrize("call", [sw.move, sw.move_async])
def test_public_moves_out_of_and_into_a_tiled_evictable_name_both_classes(call):
    te, t = tiled_ramp(tile=2)
    with pytest.raises(NotImplementedError) as e:
        call(t, sw.CPU(8))
    assert "TiledEvictable" in str(e.value) and "CPU" in str(e.value)
    dest = TiledEvictable(sw.CPU(0), sw.CPU(0), (4,), (2,))
    src = sw.Tensor(ramp_cpu(8), 0, te.canonical_layout())
    with pytest.raises(NotImplementedError) as e:
        call(src, dest)
    assert "TiledEvictable" in str(e.value) and "CPU" in str(e.value)
    assert not dest.is_owned() and pending(te) == 0 and pending(dest) == 0
    assert dest.tile_state((0,)) == TileState("implicit", True, False)


def test_dlpack_refusal_on_every_residency():
    te, t = tiled_ramp(tile=2)
    te.evict(TileSet([(0,)]))
    for tensor in (t, sw.Tensor(TiledEvictable(sw.CPU(0), sw.CPU(0), (1,), (2,)), 0,
                                tiles_layout((1,), (2,)))):
        with pytest.raises(BufferError, match="not supported") as e:
            tensor.__dlpack__()
        assert "TiledEvictable" in str(e.value)
        # The way out it suggests is one that works: project() into CPU,
        # not a public move (refused for TiledEvictable).
        assert "project()" in str(e.value) and "CPU" in str(e.value) and "refused" in str(e.value)
        with pytest.raises(BufferError, match="TiledEvictable"):
            tensor.__dlpack_device__()


def test_composition_leaves_the_tier_classes_legacy_routes_alone():
    te = TiledEvictable(ramp_cpu(4), sw.FileBacked(dtype=F32), (2,), (2,))
    te.evict(TileSet([(0,), (1,)]))
    te.promote(TileSet([(1,)]))
    assert sw.dispatch_move(sw.CPU, sw.FileBacked) is sw.CpuToFileBackedMoveOperation
    assert sw.dispatch_move(sw.FileBacked, sw.CPU) is sw.FileBackedToCpuMoveOperation
    moved = sw.move(sw.Tensor(ramp_cpu(3), 0, sw.Layout(sw.Shape([3]), sw.Stride([1]))), sw.FileBacked(dtype=F32))
    assert type(moved.carrier) is sw.FileBacked and values(moved) == [0.0, 1.0, 2.0]
    for src, dst in ((TiledEvictable, sw.CPU), (sw.CPU, TiledEvictable)):
        with pytest.raises(RuntimeError, match="TransferRoute"):
            sw.register_move_operation(src, dst, sw.ElementwiseMoveOperation)


def test_both_tiers_non_empty_start_primary_resident_and_dirty():
    sec = sw.CPU(4)
    for i in range(4):
        sec[i] = -1.0
    te = TiledEvictable(ramp_cpu(4), sec, (2,), (2,))
    assert [te.tile_state((k,)) for k in range(2)] == [TileState("primary", True, True)] * 2
    assert values(full(te)) == [0.0, 1.0, 2.0, 3.0]
    te.evict(TileSet([(0,), (1,)]))   # dirty: the primary's values overwrite the secondary's
    assert [sec[i] for i in range(4)] == [0.0, 1.0, 2.0, 3.0]
