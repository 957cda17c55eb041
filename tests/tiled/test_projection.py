"""TiledEvictable projection and scatter: completion handles, gather order,
destination validation, argument rules, scatter results and failures, the
visible gather / scatter autograd nodes, and a destination written only at
terminal success (a failed projection leaves its values and version
untouched and it is usable again)."""
import pytest

import strideweave as sw
from strideweave.carriers.move import register_move_operation, unregister_move_operation
from strideweave.carriers.tiled_evictable import AwaitProjection, TiledEvictable, TileSelection, TileSet, TileState

from support.builders import ramp_cpu
from support.carriers import FailingOp, FailPrimary, FailSecondary
from support.tiled import pending, tiled_ramp, tiles_layout

F32 = sw.DType.Float32


def values(t):
    return [t[i] for i in range(t.size())]


def filled(n, scale=1.0):
    c = sw.CPU(n)
    for i in range(n):
        c[i] = scale * i
    return c


def experts(n=8, rows=2, cols=3, cold=True):
    """Weights shaped (expert, output, input), one whole expert per tile; with
    cold=True every tile starts secondary-resident on a FileBacked file."""
    total = n * rows * cols
    if cold:
        sec = sw.FileBacked(dtype=F32)
        te = TiledEvictable(filled(total), sec, (n, 1, 1), (1, rows, cols))
        te.evict(TileSet([(e, 0, 0) for e in range(n)]))
    else:
        te = TiledEvictable(filled(total), sw.FileBacked(dtype=F32), (n, 1, 1), (1, rows, cols))
    return te, sw.Tensor(te, 0, te.canonical_layout())


def expert_values(e, rows=2, cols=3):
    base = e * rows * cols
    return [float(base + i) for i in range(rows * cols)]


# ------------------------------------------------------------------ project

def test_project_three_experts_in_router_order():
    te, w = experts()
    sel = TileSelection([[2, 7, 5], [0], [0]])
    h = te.project(w, sel)
    assert isinstance(h.done, bool) and not hasattr(h, "__await__")
    r = h.wait()
    assert h.wait() is r and h.done
    assert r.layout == tiles_layout((3, 1, 1), (1, 2, 3))
    assert type(r.carrier) is sw.CPU and r.carrier is not te.primary
    assert r.dtype() is F32
    # compact expert axis: tiles 2, 7, 5 in that order
    for j, e in enumerate([2, 7, 5]):
        got = [r[(j, y, x)] for x in range(3) for y in range(2)]
        assert got == expert_values(e)
    # the source still denotes the full tensor; cold tiles stayed cold
    assert w.carrier is te and w.layout == te.canonical_layout()
    assert te.tile_state((2, 0, 0)).location == "secondary"


def test_project_multi_axis_packs_first_mode_fastest():
    # grid (8, 10) of 1x1 tiles holding their ordinal
    te = TiledEvictable(filled(80), sw.CPU(0), (8, 10), (1, 1))
    t = sw.Tensor(te, 0, te.canonical_layout())
    sel = TileSelection([[7, 2], [4, 9]])
    r = te.project(t, sel).wait()
    assert values(r) == [float(a + 8 * b) for a, b in sel.coordinates]
    assert sel.coordinates == ((7, 4), (2, 4), (7, 9), (2, 9))


def test_project_mixed_residency_and_implicit_tiles():
    te = TiledEvictable(sw.CPU(0), sw.FileBacked(dtype=F32), (4,), (3,))
    te[4] = 7.0        # tile 1 primary
    te.evict(TileSet([(1,)]))
    te[9] = 5.0        # tile 3 primary dirty; tiles 0, 2 implicit
    t = sw.Tensor(te, 0, te.canonical_layout())
    r = te.project(t, TileSelection([[3, 0, 1]])).wait()
    assert values(r) == [5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 7.0, 0.0]


def test_project_leaves_the_source_unchanged():
    te, w = experts(cold=False)
    before = values(w)
    v = te.version
    te.project(w, TileSelection([[1, 3], [0], [0]])).wait()
    assert values(w) == before and te.version == v


def test_project_into_a_given_destination():
    te, w = experts()
    dest = sw.CPU(12)
    dest[0] = 99.0
    r = te.project(w, TileSelection([[4, 1], [0], [0]]), dest).wait()
    assert r.carrier is dest
    assert [r[(0, y, x)] for x in range(3) for y in range(2)] == expert_values(4)
    assert not dest.is_owned()
    dest[0] = 1.0  # writable again after completion


def test_projected_implicit_tile_into_a_used_destination_is_zeroed():
    te = TiledEvictable(sw.CPU(0), sw.CPU(0), (2,), (2,))
    dest = filled(2, 5.0)
    r = te.project(sw.Tensor(te, 0, te.canonical_layout()), TileSelection([[1]]), dest).wait()
    assert values(r) == [0.0, 0.0]


@pytest.mark.parametrize("make_dest, exc, fragment", [
    (lambda: 3, TypeError, "Carrier instance"),
    (lambda: TiledEvictable(sw.CPU(0), sw.CPU(0), (1,), (6,)), TypeError, "dependent"),
    (lambda: sw.Generic([0.0] * 6, dtype=F32), TypeError, "CPU"),
    (lambda: sw.FileBacked(dtype=F32), TypeError, "CPU"),
    (lambda: sw.CPU(6, dtype=sw.DType.Int32), TypeError, "dtype"),
    (lambda: sw.CPU(6, mutable=False), RuntimeError, "not mutable"),
    (lambda: sw.CPU(5), ValueError, "too small"),
])
def test_destination_validation_happens_before_work(make_dest, exc, fragment):
    te, w = experts()
    with pytest.raises(exc, match=fragment):
        te.project(w, TileSelection([[0], [0], [0]]), make_dest())
    assert pending(te) == 0


def test_released_and_owned_destinations():
    te, w = experts()
    d = sw.CPU(6)
    d.release()
    with pytest.raises(RuntimeError, match="released"):
        te.project(w, TileSelection([[0], [0], [0]]), d)
    d2 = sw.CPU(6)
    d2._claim_ownership()
    with pytest.raises(RuntimeError, match="not mutable"):
        te.project(w, TileSelection([[0], [0], [0]]), d2)


def test_project_argument_errors():
    te, w = experts()
    with pytest.raises(TypeError, match="TileSelection"):
        te.project(w, [[0], [0], [0]])
    with pytest.raises(TypeError, match="TileSelection"):
        te.project(w, TileSet([(0, 0, 0)]))
    with pytest.raises(ValueError, match="rank"):
        te.project(w, TileSelection([[0]]))
    te.release()
    with pytest.raises(RuntimeError, match="released"):
        te.project(w, TileSelection([[0], [0], [0]]))


def test_a_pending_projection_is_not_a_tensor_operand():
    te, w = experts()
    h = te.project(w, TileSelection([[0], [0], [0]]))
    with pytest.raises(TypeError):
        sw.add(h, h)
    with pytest.raises(TypeError):
        sw.relu(h)
    h.wait()


def test_project_returns_the_native_await_projection():
    te, w = experts()
    assert isinstance(te.project(w, TileSelection([[0], [0], [0]])), AwaitProjection)


def test_project_of_a_within_tile_permutation_and_its_backward():
    # (2, 2) tile, grid (2, 1), transposed inside each tile
    te = TiledEvictable(filled(8), sw.CPU(0), (2, 1), (2, 2))
    lay = sw.Layout(sw.Shape([[2, 2], [2, 1]]), sw.Stride([[2, 4], [1, 8]]))
    t = sw.Tensor(te, 0, lay)
    r = te.project(t, TileSelection([[1], [0]])).wait()
    assert [r[(y, x)] for x in range(2) for y in range(2)] == [t[(2 + y, x)] for x in range(2) for y in range(2)]
    weights = filled(4, 1.0)
    w = sw.Tensor(weights, 0, r.layout)
    sw.reduce_sum(sw.mul(r, w)).backward()
    g = t.grad
    assert type(g.carrier) is TiledEvictable and g.layout == lay
    for x in range(2):
        for y in range(2):
            assert g[(2 + y, x)] == w[(y, x)]
            assert g[(y, x)] == 0.0


# ------------------------------------------------------------------ gather autograd

def test_projection_attaches_one_visible_gather_node():
    te, w = experts()
    r = te.project(w, TileSelection([[1], [0], [0]])).wait()
    node = r.autograd_ctx
    assert isinstance(node, sw.Operation)
    assert node.inputs() == (w,)
    with sw.no_grad():
        r2 = te.project(w, TileSelection([[1], [0], [0]])).wait()
    assert r2.autograd_ctx is None


def test_backward_scatter_adds_into_a_fresh_tiled_gradient():
    te, w = experts()
    r = te.project(w, TileSelection([[2, 5], [0], [0]])).wait()
    sw.reduce_sum(sw.mul(r, 2.0)).backward()
    g = w.grad
    gte = g.carrier
    assert type(gte) is TiledEvictable and gte is not te
    assert g.layout == w.layout
    assert gte.grid_shape == te.grid_shape and gte.tile_shape == te.tile_shape
    assert type(gte.primary) is sw.CPU and type(gte.secondary) is sw.FileBacked
    for e in range(8):
        want = [2.0] * 6 if e in (2, 5) else [0.0] * 6
        assert [g[(e, y, x)] for x in range(3) for y in range(2)] == want
    assert gte.tile_state((0, 0, 0)) == TileState("implicit", True, False)


def test_overlapping_projections_sum_on_overlap():
    te = TiledEvictable(filled(8), sw.CPU(0), (4,), (2,))
    t = sw.Tensor(te, 0, te.canonical_layout())
    a = te.project(t, TileSelection([[0, 1]])).wait()
    b = te.project(t, TileSelection([[1, 2]])).wait()
    sw.add(sw.reduce_sum(a), sw.reduce_sum(b)).backward()
    assert values(t.grad) == [1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 0.0, 0.0]
    assert t.grad.carrier.tile_state((3,)).location == "implicit"


def test_backward_after_an_in_place_write_is_refused():
    te = TiledEvictable(filled(8), sw.CPU(0), (4,), (2,))
    t = sw.Tensor(te, 0, te.canonical_layout())
    r = te.project(t, TileSelection([[0]])).wait()
    te[7] = 1.0
    with pytest.raises(RuntimeError, match="modified in-place"):
        sw.reduce_sum(r).backward()


def test_backward_with_evicted_source_tiles_needs_no_promotion():
    te, w = experts(cold=False)
    r = te.project(w, TileSelection([[3], [0], [0]])).wait()
    te.evict(TileSet([(3, 0, 0)]))
    sw.reduce_sum(r).backward()
    assert [w.grad[(3, y, x)] for x in range(3) for y in range(2)] == [1.0] * 6
    assert te.tile_state((3, 0, 0)).location == "secondary"


# ------------------------------------------------------------------ scatter

def compact_for(sel, tile, scale=1.0, start=0.0):
    lay = tiles_layout(sel.compact_grid_shape, tile)
    n = lay.cosize
    c = sw.CPU(n)
    for i in range(n):
        c[i] = start + scale * i
    return sw.Tensor(c, 0, lay)


def test_replace_scatter_then_project_reproduces_compact():
    te, w = experts()
    sel = TileSelection([[6, 1, 3], [0], [0]])
    compact = compact_for(sel, (1, 2, 3), start=100.0)
    h = te.scatter(compact, w, sel)
    assert isinstance(h.done, bool) and not hasattr(h, "__await__")
    full = h.wait()
    assert h.wait() is full
    out = full.carrier
    assert type(out) is TiledEvictable and out is not te
    assert full.layout == w.layout and full.dtype() is F32
    assert out.version == 1
    for e in range(8):
        st = out.tile_state((e, 0, 0))
        assert st == (TileState("primary", True, True) if e in (6, 1, 3) else TileState("invalid", False, False))
    back = out.project(full, sel).wait()
    assert values(back) == values(compact)
    # inputs untouched
    assert not compact.carrier.is_owned() and not compact.carrier.is_released()
    assert [w[(0, 0, 0)], w[(7, 1, 2)]] == [0.0, 47.0]
    with pytest.raises(RuntimeError, match="invalid"):
        full[(0, 0, 0)]


def test_add_scatter_combines_with_existing_values():
    te = TiledEvictable(filled(8), sw.FileBacked(dtype=F32), (4,), (2,))
    te.evict(TileSet([(2,)]))
    t = sw.Tensor(te, 0, te.canonical_layout())
    sel = TileSelection([[2, 0]])
    compact = compact_for(sel, (2,), start=10.0)
    full = te.scatter(compact, t, sel, reduction="add").wait()
    assert [full[i] for i in (4, 5, 0, 1)] == [4.0 + 10.0, 5.0 + 11.0, 0.0 + 12.0, 1.0 + 13.0]


@pytest.mark.parametrize("case, exc, fragment", [
    ("compact_not_tensor", TypeError, "compact must be a Tensor"),
    ("template_not_tensor", TypeError, "template must be a Tensor"),
    ("compact_generic", TypeError, "CPU"),
    ("compact_tiled", TypeError, "CPU"),
    ("template_other", TypeError, "backed by this TiledEvictable"),
    ("selection", TypeError, "TileSelection"),
    ("reduction", ValueError, "reduction"),
    ("dtype", TypeError, "dtype"),
    ("shape", ValueError, "shape"),
    ("rank", ValueError, "rank"),
    ("range", ValueError, "out of range"),
    ("released_compact", RuntimeError, "released"),
])
def test_scatter_validation(case, exc, fragment):
    te = TiledEvictable(filled(8), sw.CPU(0), (4,), (2,))
    t = sw.Tensor(te, 0, te.canonical_layout())
    sel = TileSelection([[1, 2]])
    compact = compact_for(sel, (2,))
    args = dict(compact=compact, template=t, selection=sel, reduction="replace")
    if case == "compact_not_tensor":
        args["compact"] = [1.0]
    elif case == "template_not_tensor":
        args["template"] = None
    elif case == "compact_generic":
        args["compact"] = sw.Tensor(sw.Generic([0.0] * 4, dtype=F32), 0, compact.layout)
    elif case == "compact_tiled":
        args["compact"] = sw.Tensor(TiledEvictable(sw.CPU(0), sw.CPU(0), (2,), (2,)), 0, compact.layout)
    elif case == "template_other":
        args["template"] = sw.Tensor(filled(8), 0, te.canonical_layout())
    elif case == "selection":
        args["selection"] = sel.tile_set
    elif case == "reduction":
        args["reduction"] = "mul"
    elif case == "dtype":
        args["compact"] = sw.Tensor(sw.CPU(4, dtype=sw.DType.Int32), 0, compact.layout)
    elif case == "shape":
        args["compact"] = compact_for(TileSelection([[1, 2, 3]]), (2,))
    elif case == "rank":
        args["selection"] = TileSelection([[1], [0]])
    elif case == "range":
        args["selection"] = TileSelection([[1, 4]])
    elif case == "released_compact":
        compact.carrier.release()
    v = te.version
    with pytest.raises(exc, match=fragment):
        te.scatter(**args)
    assert pending(te) == 0 and te.version == v
    assert te.tile_state((1,)) == TileState("primary", True, True)


def test_scatter_on_a_released_carrier():
    te = TiledEvictable(filled(8), sw.CPU(0), (4,), (2,))
    t = sw.Tensor(te, 0, te.canonical_layout())
    sel = TileSelection([[1]])
    compact = compact_for(sel, (2,))
    te.release()
    with pytest.raises(RuntimeError, match="released"):
        te.scatter(compact, t, sel)


def test_scatter_autograd_projects_the_cotangent_into_compact_grad():
    te = TiledEvictable(filled(8), sw.CPU(0), (4,), (2,))
    t = sw.Tensor(te, 0, te.canonical_layout())
    sel = TileSelection([[3, 1]])
    compact = compact_for(sel, (2,))
    full = te.scatter(compact, t, sel).wait()
    node = full.autograd_ctx
    assert isinstance(node, sw.Operation) and node.inputs() == (compact, t)
    r = full.carrier.project(full, sel).wait()
    weights = compact_for(sel, (2,), start=1.0)
    sw.reduce_sum(sw.mul(r, weights)).backward()
    assert values(compact.grad) == values(weights)
    assert t.grad is None  # replace retains no template value


def test_add_scatter_autograd_reaches_the_template_at_selected_tiles():
    te = TiledEvictable(filled(8), sw.CPU(0), (4,), (2,))
    t = sw.Tensor(te, 0, te.canonical_layout())
    sel = TileSelection([[1]])
    compact = compact_for(sel, (2,))
    full = te.scatter(compact, t, sel, reduction="add").wait()
    r = full.carrier.project(full, sel).wait()
    sw.reduce_sum(sw.mul(r, 3.0)).backward()
    assert values(compact.grad) == [3.0, 3.0]
    assert values(t.grad) == [0.0, 0.0, 3.0, 3.0, 0.0, 0.0, 0.0, 0.0]


def test_generic_floating_tiers_project_scatter_and_backward():
    fl = sw.DType.Floating
    te = TiledEvictable(sw.Generic([float(i) for i in range(6)], dtype=fl), sw.Generic([0.0] * 6, dtype=fl),
                        (3,), (2,))
    te.evict(TileSet([(0,), (2,)]))
    t = sw.Tensor(te, 0, te.canonical_layout())
    sel = TileSelection([[2, 1]])
    r = te.project(t, sel).wait()
    assert type(r.carrier) is sw.Generic and values(r) == [4.0, 5.0, 2.0, 3.0]
    sw.reduce_sum(r).backward()
    assert values(t.grad) == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    full = te.scatter(r, t, sel, reduction="add").wait()
    assert [full[i] for i in (2, 3, 4, 5)] == [4.0, 6.0, 8.0, 10.0]


def test_int32_projection_records_no_node():
    c = sw.CPU(4, dtype=sw.DType.Int32)
    for i in range(4):
        c[i] = i
    te = TiledEvictable(c, sw.FileBacked(dtype=sw.DType.Int32), (2,), (2,))
    te.evict(TileSet([(1,)]))
    t = sw.Tensor(te, 0, te.canonical_layout())
    r = te.project(t, TileSelection([[1, 0]])).wait()
    assert values(r) == [2, 3, 0, 1] and r.autograd_ctx is None and r.dtype() is sw.DType.Int32


# ------------------------------------------------------------ argument rules, scatter results and failures, the gather and scatter nodes


def full(te):
    return sw.Tensor(te, 0, te.canonical_layout())


def compact_of_class(sel, tile, start=0.0, cls=sw.CPU):
    lay = tiles_layout(sel.compact_grid_shape, tile)
    vals = [start + i for i in range(lay.cosize)]
    if cls is sw.CPU:
        c = sw.CPU(len(vals))
        for i, v in enumerate(vals):
            c[i] = v
    else:
        c = cls(vals, dtype=F32)
    return sw.Tensor(c, 0, lay)


def test_project_refuses_a_tensor_of_another_tiled_evictable():
    te, t = tiled_ramp(tile=2)
    other, ot = tiled_ramp(tile=2)
    with pytest.raises(TypeError, match="backed by this TiledEvictable"):
        te.project(ot, TileSelection([[0]]))
    with pytest.raises(TypeError, match="Tensor"):
        te.project(None, TileSelection([[0]]))
    assert pending(te) == 0 and pending(other) == 0


def test_project_refuses_an_evictable_destination_and_a_subclass_of_the_compute_class():
    class SubCPU(sw.CPU):
        pass

    te, t = tiled_ramp(tile=2)
    ev = sw.Evictable(sw.CPU(2), sw.FileBacked(dtype=F32))
    with pytest.raises(TypeError, match="dependent"):
        te.project(t, TileSelection([[1]]), ev)
    with pytest.raises(TypeError, match="CPU"):
        te.project(t, TileSelection([[1]]), SubCPU(2))
    assert pending(te) == 0


def test_project_checks_the_released_carrier_before_the_selection():
    te, t = tiled_ramp(tile=2)
    te.release()
    with pytest.raises(RuntimeError, match="released"):
        te.project(t, TileSelection([[0]]))


def test_a_projection_is_eager_returns_an_ordinary_dense_tensor_and_keeps_the_source():
    te, t = tiled_ramp(tile=2)
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
    te, t = tiled_ramp(tile=2)
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


def test_scatter_result_has_the_template_geometry_and_tier_kinds_and_leaves_inputs_alone():
    te, t = tiled_ramp(tile=2)
    sel = TileSelection([[3, 0]])
    compact = compact_of_class(sel, (2,), start=50.0)
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
    res = te.scatter(compact_of_class(sel, (2,), start=3.0), t, sel, reduction="add").wait()
    assert [res[4], res[5]] == [3.0, 4.0]
    assert res.carrier.tile_state((2,)) == TileState("primary", True, True)
    assert res.carrier.tile_state((0,)) == TileState("invalid", False, False)


def test_scatter_refuses_another_tiled_evictable_template_and_an_incompatible_one():
    te, t = tiled_ramp(tile=2)
    other, ot = tiled_ramp(tile=2)
    sel = TileSelection([[1]])
    compact = compact_of_class(sel, (2,))
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

    te, t = tiled_ramp(tile=2)
    sel = TileSelection([[1]])
    lay = tiles_layout((1,), (2,))
    ev = sw.Evictable(sw.CPU(2), sw.FileBacked(dtype=F32))
    for c in (ev, SubCPU(2)):
        with pytest.raises(TypeError, match="CPU"):
            te.scatter(sw.Tensor(c, 0, lay), t, sel)
    with pytest.raises(ValueError, match="reduction"):
        te.scatter(compact_of_class(sel, (2,)), t, sel, reduction=None)


def test_a_failed_scatter_publishes_nothing_and_leaves_both_inputs_usable():
    te = TiledEvictable(FailPrimary([float(i) for i in range(4)], dtype=F32), FailSecondary([0.0] * 4, dtype=F32),
                        (2,), (2,))
    te.evict(TileSet([(0,)]))
    t = full(te)
    sel = TileSelection([[0, 1]])
    compact = compact_of_class(sel, (2,), start=10.0, cls=FailPrimary)
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
    te, t = tiled_ramp(tile=2)
    sel = TileSelection([[1]])
    compact = compact_of_class(sel, (2,))
    with sw.no_grad():
        res = te.scatter(compact, t, sel).wait()
    assert res.autograd_ctx is None


def test_replace_scatter_of_a_differentiable_compact_into_an_int_template_is_refused_by_dtype():
    c = sw.CPU(4, dtype=sw.DType.Int32)
    te = TiledEvictable(c, sw.CPU(0, dtype=sw.DType.Int32), (2,), (2,))
    sel = TileSelection([[0]])
    with pytest.raises(TypeError, match="dtype"):
        te.scatter(compact_of_class(sel, (2,)), full(te), sel)


def test_replace_scatter_then_project_reproduces_compact_for_a_permuted_multi_axis_selection():
    grid, tile = (3, 4), (2, 1)
    te = TiledEvictable(ramp_cpu(24), sw.CPU(0), grid, tile)
    # the canonical association written with a stride-0 extent-1 leaf: compatible
    lay = sw.Layout(sw.Shape([[2, 3], [1, 4]]), sw.Stride([[1, 2], [0, 6]]))
    t = sw.Tensor(te, 0, lay)
    sel = TileSelection([[2, 0], [3, 1, 2]])
    compact = compact_of_class(sel, tile, start=100.0)
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
    compact = compact_of_class(sel, (2, 2), start=10.0)
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
    compact = compact_of_class(sel, (2,), start=-2.0)   # -2 .. 3
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
    te, t = tiled_ramp(tile=2)
    dest = sw.CPU(4)
    r = te.project(t, TileSelection([[2, 0]]), dest).wait()
    assert r.carrier is dest and r.autograd_ctx.inputs() == (t,)
    sw.reduce_sum(r).backward()
    assert values(t.grad) == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0]


# ------------------------------------------------------------ a failed projection publishes no partial destination


class DPrimary(sw.Generic):
    pass


class DSecondary(sw.Generic):
    pass


class CopyOp(sw.MoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        for i in range(output.size()):
            output[i] = tensor[i]


class FailFromOffset4(sw.MoveOperation):
    """Copies tiles below slot 4, fails the rest (after others were written)."""

    def _copy(self, tensor, destination, output, element_count):
        if tensor.offset >= 4:
            raise OSError("injected gather failure")
        for i in range(output.size()):
            output[i] = tensor[i]


@pytest.fixture
def routes():
    register_move_operation(DPrimary, DSecondary, CopyOp)
    register_move_operation(DSecondary, DPrimary, FailFromOffset4)
    yield
    unregister_move_operation(DPrimary, DSecondary)
    unregister_move_operation(DSecondary, DPrimary)


def cold_tiled():
    te = TiledEvictable(DPrimary([float(i) for i in range(8)], dtype=F32), DSecondary([0.0] * 8, dtype=F32), (4,),
                        (2,))
    te.evict(TileSet([(k,) for k in range(4)]))
    return te, sw.Tensor(te, 0, te.canonical_layout())


def test_a_failed_projection_leaves_the_destination_untouched(routes):
    te, w = cold_tiled()
    dest = DPrimary([-1.0] * 5, dtype=F32)
    version = dest.version
    h = te.project(w, TileSelection([[0, 3]]), destination=dest)  # tile 0 copies, tile 3 fails
    with pytest.raises(OSError, match="injected gather failure"):
        h.wait()
    assert [dest[i] for i in range(5)] == [-1.0] * 5
    assert dest.version == version
    assert not dest.is_owned()
    dest[0] = 7.0  # writable again
    # the source is usable again too, and a good selection succeeds into it
    r = te.project(w, TileSelection([[1, 0]]), destination=dest).wait()
    assert r.carrier is dest
    assert [dest[i] for i in range(5)] == [2.0, 3.0, 0.0, 1.0, -1.0]  # slot 4 is beyond the selection


def test_implicit_tiles_project_as_zero_into_a_dirty_destination():
    te = TiledEvictable(sw.CPU(0), sw.CPU(0), (3,), (2,))  # every tile implicit zero
    te[2] = 5.0  # tile 1 becomes primary and dirty
    w = sw.Tensor(te, 0, te.canonical_layout())
    dest = sw.CPU(6)
    for i in range(6):
        dest[i] = -1.0
    r = te.project(w, TileSelection([[2, 1, 0]]), destination=dest).wait()
    assert r.carrier is dest
    assert [dest[i] for i in range(6)] == [0.0, 0.0, 5.0, 0.0, 0.0, 0.0]


def test_a_destination_projection_keeps_the_selected_values_and_order():
    c = sw.CPU(8)
    for i in range(8):
        c[i] = float(i)
    te = TiledEvictable(c, sw.FileBacked(dtype=F32), (4,), (2,))
    te.evict(TileSet([(1,), (3,)]))
    w = sw.Tensor(te, 0, te.canonical_layout())
    dest = sw.CPU(6)
    r = te.project(w, TileSelection([[3, 0, 1]]), destination=dest).wait()
    assert [r[i] for i in range(6)] == [6.0, 7.0, 0.0, 1.0, 2.0, 3.0]


def test_a_reused_staging_carrier_still_gives_zero_implicit_tiles():
    # projections into a caller's destination stage through a kept carrier;
    # its old values must not leak into an implicit (zero) tile
    te = TiledEvictable(sw.CPU(0), sw.FileBacked(dtype=sw.DType.Float32), (2,), (2,))
    te[0], te[1] = 1.0, 2.0
    w = sw.Tensor(te, 0, te.canonical_layout())
    dest = sw.CPU(2)
    r = te.project(w, TileSelection([[0]]), dest).wait()
    assert [r.carrier[0], r.carrier[1]] == [1.0, 2.0]
    r = te.project(w, TileSelection([[1]]), dest).wait()
    assert r.carrier is dest and [dest[0], dest[1]] == [0.0, 0.0]
    te.release()
    assert te.is_released()
