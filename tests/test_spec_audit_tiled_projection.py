"""Spec audit (tiled-carrier-composition and the TiledEvictable parts of
interop-movement): projection and scatter argument rules not yet pinned,
scatter results and failures, the gather / scatter nodes, handle kinds,
operations other than the direct ones, public moves and DLPack."""
import pytest

import strideweave as sw
from strideweave.carriers.move import register_move_operation, unregister_move_operation
from strideweave.carriers.tiled_evictable import (AwaitProjection, AwaitResidency, TiledEvictable, TileSelection,
                                                   TileSet, TileState)
from support.builders import ramp_cpu
from support.carriers import FailingOp, FailPrimary, FailSecondary
from support.tiled import pending, tiles_layout

F32 = sw.DType.Float32


def full(te):
    return sw.Tensor(te, 0, te.canonical_layout())


def values(t):
    return [t[i] for i in range(t.size())]


def compact_for(sel, tile, start=0.0, cls=sw.CPU):
    lay = tiles_layout(sel.compact_grid_shape, tile)
    vals = [start + i for i in range(lay.cosize)]
    if cls is sw.CPU:
        c = sw.CPU(len(vals))
        for i, v in enumerate(vals):
            c[i] = v
    else:
        c = cls(vals, dtype=F32)
    return sw.Tensor(c, 0, lay)


def ramp_tiled(n_tiles=4, tile=2):
    te = TiledEvictable(ramp_cpu(n_tiles * tile), sw.FileBacked(dtype=F32), (n_tiles,), (tile,))
    return te, full(te)


# ------------------------------------------------------------------ project arguments

def test_project_refuses_a_tensor_of_another_tiled_evictable():
    te, t = ramp_tiled()
    other, ot = ramp_tiled()
    with pytest.raises(TypeError, match="backed by this TiledEvictable"):
        te.project(ot, TileSelection([[0]]))
    with pytest.raises(TypeError, match="Tensor"):
        te.project(None, TileSelection([[0]]))
    assert pending(te) == 0 and pending(other) == 0


def test_project_refuses_an_evictable_destination_and_a_subclass_of_the_compute_class():
    class SubCPU(sw.CPU):
        pass

    te, t = ramp_tiled()
    ev = sw.Evictable(sw.CPU(2), sw.FileBacked(dtype=F32))
    with pytest.raises(TypeError, match="dependent"):
        te.project(t, TileSelection([[1]]), ev)
    with pytest.raises(TypeError, match="CPU"):
        te.project(t, TileSelection([[1]]), SubCPU(2))
    assert pending(te) == 0


def test_project_checks_the_released_carrier_before_the_selection():
    te, t = ramp_tiled()
    te.release()
    with pytest.raises(RuntimeError, match="released"):
        te.project(t, TileSelection([[0]]))


def test_a_projection_is_eager_returns_an_ordinary_dense_tensor_and_keeps_the_source():
    te, t = ramp_tiled()
    te.evict(TileSet([(2,)]))
    v = te.version
    h = te.project(t, TileSelection([[2, 0]]))
    assert isinstance(h, AwaitProjection) and isinstance(h, sw.AwaitResult)
    assert not isinstance(h, sw.Operation) and not isinstance(h, sw.Tensor)
    r = h.wait()
    assert type(r.carrier) is sw.CPU and r.layout == tiles_layout((2,), (2,))
    assert values(r) == [4.0, 5.0, 0.0, 1.0]
    assert te.version == v and t.carrier is te and t.layout == te.canonical_layout()
    # the compact result keeps the compute carrier's whole operation surface
    assert values(sw.relu(sw.add(r, r))) == [8.0, 10.0, 0.0, 2.0]


def test_the_projected_tensor_gets_its_normal_node_after_the_gather_node():
    te, t = ramp_tiled()
    r = te.project(t, TileSelection([[3, 1]])).wait()
    y = sw.mul(r, r)
    assert y.autograd_ctx is not None and y.autograd_ctx.inputs() == (r, r)
    assert r.autograd_ctx.inputs() == (t,)
    sw.reduce_sum(y).backward()
    # d/dx sum(x*x) = 2x at the selected tiles, implicit zero elsewhere
    assert values(t.grad) == [0.0, 0.0, 4.0, 6.0, 0.0, 0.0, 12.0, 14.0]
    g = t.grad.carrier
    assert [g.tile_state((k,)).location for k in (0, 2)] == ["implicit", "implicit"]
    assert g.dtype() is F32 and type(g.secondary) is sw.FileBacked


# ------------------------------------------------------------------ scatter

def test_scatter_result_has_the_template_geometry_and_tier_kinds_and_leaves_inputs_alone():
    te, t = ramp_tiled()
    sel = TileSelection([[3, 0]])
    compact = compact_for(sel, (2,), start=50.0)
    cv, tv = compact.carrier.version, te.version
    h = te.scatter(compact, t, sel)
    assert isinstance(h, sw.AwaitMove) and not isinstance(h, sw.Operation)
    res = h.wait()
    out = res.carrier
    assert type(out) is TiledEvictable and out is not te
    assert (out.grid_shape, out.tile_shape, out.dtype(), out.size()) == ((4,), (2,), F32, 8)
    assert type(out.primary) is sw.CPU and type(out.secondary) is sw.FileBacked
    assert res.layout == t.layout and out.version == 1
    assert [res[i] for i in (6, 7, 0, 1)] == [50.0, 51.0, 52.0, 53.0]
    assert compact.carrier.version == cv and te.version == tv and values(compact) == [50.0, 51.0, 52.0, 53.0]
    assert values(t) == [float(i) for i in range(8)] and not te.is_released() and not compact.carrier.is_owned()


def test_scatter_add_onto_implicit_zero_tiles():
    te = TiledEvictable(sw.CPU(0), sw.CPU(0), (3,), (2,))
    t = full(te)
    sel = TileSelection([[2]])
    res = te.scatter(compact_for(sel, (2,), start=3.0), t, sel, reduction="add").wait()
    assert [res[4], res[5]] == [3.0, 4.0]
    assert res.carrier.tile_state((2,)) == TileState("primary", True, True)
    assert res.carrier.tile_state((0,)) == TileState("invalid", False, False)


def test_scatter_refuses_another_tiled_evictable_template_and_an_incompatible_one():
    te, t = ramp_tiled()
    other, ot = ramp_tiled()
    sel = TileSelection([[1]])
    compact = compact_for(sel, (2,))
    with pytest.raises(TypeError, match="backed by this TiledEvictable"):
        te.scatter(compact, ot, sel)
    # logical tiles 1 and 2 reach carrier tiles 2 and 1: tile coordinates remapped
    swapped = sw.Tensor(te, 0, sw.Layout(sw.Shape([[2, 2, 2]]), sw.Stride([[1, 4, 2]])))
    with pytest.raises(ValueError, match="compatible"):
        te.scatter(compact, swapped, sel)
    aliased = sw.Tensor(te, 0, sw.Layout(sw.Shape([[2, 4]]), sw.Stride([[0, 2]])))
    with pytest.raises(ValueError, match="compatible"):
        te.scatter(compact, aliased, sel)
    assert pending(te) == 0 and not compact.carrier.is_owned()


def test_scatter_refuses_an_evictable_or_subclass_backed_compact():
    class SubCPU(sw.CPU):
        pass

    te, t = ramp_tiled()
    sel = TileSelection([[1]])
    lay = tiles_layout((1,), (2,))
    ev = sw.Evictable(sw.CPU(2), sw.FileBacked(dtype=F32))
    for c in (ev, SubCPU(2)):
        with pytest.raises(TypeError, match="CPU"):
            te.scatter(sw.Tensor(c, 0, lay), t, sel)
    with pytest.raises(ValueError, match="reduction"):
        te.scatter(compact_for(sel, (2,)), t, sel, reduction=None)


def test_a_failed_scatter_publishes_nothing_and_leaves_both_inputs_usable():
    te = TiledEvictable(FailPrimary([float(i) for i in range(4)], dtype=F32), FailSecondary([0.0] * 4, dtype=F32),
                        (2,), (2,))
    te.evict(TileSet([(0,)]))
    t = full(te)
    sel = TileSelection([[0, 1]])
    compact = compact_for(sel, (2,), start=10.0, cls=FailPrimary)
    register_move_operation(FailSecondary, FailPrimary, FailingOp)
    try:
        h = te.scatter(compact, t, sel, reduction="add")
        with pytest.raises(OSError, match="injected") as e1:
            h.wait()
        with pytest.raises(OSError) as e2:
            h.wait()
        assert e1.value is e2.value and h.done
    finally:
        unregister_move_operation(FailSecondary, FailPrimary)
    assert pending(te) == 0 and not compact.carrier.is_owned()
    assert te.tile_state((0,)) == TileState("secondary", True, False)
    assert values(t) == [0.0, 1.0, 2.0, 3.0]
    compact.carrier[0] = 1.0
    te[0] = 9.0
    assert te.release() is None


def test_scatter_records_no_node_without_grad_mode():
    te, t = ramp_tiled()
    sel = TileSelection([[1]])
    compact = compact_for(sel, (2,))
    with sw.no_grad():
        res = te.scatter(compact, t, sel).wait()
    assert res.autograd_ctx is None


def test_replace_scatter_of_a_differentiable_compact_into_an_int_template_is_refused_by_dtype():
    c = sw.CPU(4, dtype=sw.DType.Int32)
    te = TiledEvictable(c, sw.CPU(0, dtype=sw.DType.Int32), (2,), (2,))
    sel = TileSelection([[0]])
    with pytest.raises(TypeError, match="dtype"):
        te.scatter(compact_for(sel, (2,)), full(te), sel)


# ------------------------------------------------------------------ operations other than the direct ones

def test_broadcast_to_refuses_a_raw_tiled_tensor():
    te, t = ramp_tiled()
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
    te, t = ramp_tiled()
    h = make(te, t)
    for op in (lambda: sw.add(h, t), lambda: sw.mul(h, 2.0), lambda: sw.mul(2.0, h), lambda: sw.relu(h),
               lambda: sw.reduce_sum(h), lambda: sw.broadcast_to(h, sw.Shape([2]))):
        with pytest.raises(TypeError):
            op()
    h.wait()


# ------------------------------------------------------------------ interop-movement: moves, handles, DLPack

@pytest.mark.parametrize("call", [sw.move, sw.move_async])
def test_public_moves_out_of_and_into_a_tiled_evictable_name_both_classes(call):
    te, t = ramp_tiled()
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


def test_await_kinds_share_the_completion_base_and_are_read_only():
    te, t = ramp_tiled()
    for make in (lambda: te.evict_async(TileSet([(1,)])), lambda: te.project(t, TileSelection([[1]]))):
        h = make()
        assert isinstance(h, sw.AwaitResult)
        assert not hasattr(h, "__await__") and not hasattr(h, "await")
        with pytest.raises(AttributeError):
            h.done = True
        h.wait()
    assert issubclass(AwaitResidency, sw.AwaitResult) and issubclass(AwaitProjection, sw.AwaitResult)
    for cls in (AwaitResidency, AwaitProjection):
        with pytest.raises(TypeError):
            cls()


def test_dlpack_refusal_on_every_residency():
    te, t = ramp_tiled()
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


# ------------------------------------------------------------------ round trips through the tile geometry

def test_replace_scatter_then_project_reproduces_compact_for_a_permuted_multi_axis_selection():
    grid, tile = (3, 4), (2, 1)
    te = TiledEvictable(ramp_cpu(24), sw.CPU(0), grid, tile)
    # the canonical association written with a stride-0 extent-1 leaf: compatible
    lay = sw.Layout(sw.Shape([[2, 3], [1, 4]]), sw.Stride([[1, 2], [0, 6]]))
    t = sw.Tensor(te, 0, lay)
    sel = TileSelection([[2, 0], [3, 1, 2]])
    compact = compact_for(sel, tile, start=100.0)
    res = te.scatter(compact, t, sel).wait()
    assert res.layout == lay
    back = res.carrier.project(res, sel).wait()
    assert values(back) == values(compact)
    for c in sel.coordinates:
        assert res.carrier.tile_state(c) == TileState("primary", True, True)
    assert res.carrier.tile_state((1, 0)) == TileState("invalid", False, False)


def test_scatter_then_project_with_a_within_tile_transposed_template():
    te = TiledEvictable(ramp_cpu(8), sw.CPU(0), (2, 1), (2, 2))
    lay = sw.Layout(sw.Shape([[2, 2], [2, 1]]), sw.Stride([[2, 4], [1, 8]]))  # transposed inside each tile
    t = sw.Tensor(te, 0, lay)
    sel = TileSelection([[1], [0]])
    compact = compact_for(sel, (2, 2), start=10.0)
    res = te.scatter(compact, t, sel).wait()
    back = res.carrier.project(res, sel).wait()
    assert values(back) == values(compact)
    # logical coordinate (2 + y, x) of the full result holds compact (y, x)
    for y in range(2):
        for x in range(2):
            assert res[(2 + y, x)] == compact[(y, x)]
    # add with the template's own values, read through the same association
    added = te.scatter(compact, t, sel, reduction="add").wait()
    for y in range(2):
        for x in range(2):
            assert added[(2 + y, x)] == compact[(y, x)] + t[(2 + y, x)]


def test_scatter_of_every_tile_feeds_a_direct_operation_and_backward_reaches_compact():
    te = TiledEvictable(ramp_cpu(6), sw.FileBacked(dtype=F32), (3,), (2,))
    t = full(te)
    sel = TileSelection([[2, 0, 1]])
    compact = compact_for(sel, (2,), start=-2.0)   # -2 .. 3
    res = te.scatter(compact, t, sel).wait()
    loss = sw.reduce_sum(sw.relu(res))
    assert loss.item() == 0.0 + 0.0 + 0.0 + 1.0 + 2.0 + 3.0
    loss.backward()
    # the cotangent projected through the saved selection: relu'(compact)
    assert values(compact.grad) == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    assert t.grad is None


def test_a_failed_projection_raises_one_exception_object_and_frees_the_source():
    te = TiledEvictable(FailPrimary([float(i) for i in range(4)], dtype=F32), FailSecondary([0.0] * 4, dtype=F32),
                        (2,), (2,))
    te.evict(TileSet([(1,)]))
    t = full(te)
    register_move_operation(FailSecondary, FailPrimary, FailingOp)
    try:
        h = te.project(t, TileSelection([[1, 0]]))
        with pytest.raises(OSError, match="injected") as e1:
            h.wait()
        with pytest.raises(OSError) as e2:
            h.wait()
        assert e1.value is e2.value and h.done
    finally:
        unregister_move_operation(FailSecondary, FailPrimary)
    assert pending(te) == 0
    assert te.tile_state((1,)) == TileState("secondary", True, False)
    te.promote(TileSet([(1,)]))
    assert [te[i] for i in range(4)] == [0.0, 1.0, 2.0, 3.0]


def test_an_unreachable_branch_asks_the_policy_nothing_in_backward():
    class Recording:
        def __init__(self):
            self.calls = []

        def plan(self, required, purpose):
            self.calls.append(purpose)
            from strideweave.carriers.tiled_evictable import ResidencyPlan
            return ResidencyPlan()

    pol = Recording()
    te = TiledEvictable(ramp_cpu(8), sw.FileBacked(dtype=F32), (4,), (2,), residency_policy=pol)
    t = full(te)
    sw.mul(t, t)                      # a branch that never receives a gradient (mul backward would read t)
    loss = sw.reduce_sum(sw.mul(t, 2.0))
    pol.calls.clear()
    loss.backward()
    assert "backward" not in pol.calls
    assert values(t.grad) == [2.0] * 8


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


def test_an_empty_allocatable_destination_of_the_compute_class_grows_to_the_compact_extent():
    te = TiledEvictable(sw.FileBacked(dtype=F32), ramp_cpu(8), (4,), (2,))
    t = full(te)
    dest = sw.FileBacked(dtype=F32)
    r = te.project(t, TileSelection([[3, 1]]), dest).wait()
    assert r.carrier is dest and dest.size() == 4
    assert values(r) == [6.0, 7.0, 2.0, 3.0]
    r2 = te.project(t, TileSelection([[2]])).wait()   # default: fresh carrier of the compute class
    assert type(r2.carrier) is sw.FileBacked and values(r2) == [4.0, 5.0]


def test_a_projection_into_a_given_destination_also_gets_the_gather_node():
    te, t = ramp_tiled()
    dest = sw.CPU(4)
    r = te.project(t, TileSelection([[2, 0]]), dest).wait()
    assert r.carrier is dest and r.autograd_ctx.inputs() == (t,)
    sw.reduce_sum(r).backward()
    assert values(t.grad) == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0]
