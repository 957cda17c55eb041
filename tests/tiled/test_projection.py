"""TiledEvictable projection and scatter: completion handles, gather order,
destination validation, the visible gather / scatter autograd nodes."""
import pytest

import strideweave as sw
from support.tiled import pending, tiles_layout
from strideweave.carriers.tiled_evictable import (AwaitProjection, TiledEvictable, TileSelection, TileSet,
                                                   TileState)

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
