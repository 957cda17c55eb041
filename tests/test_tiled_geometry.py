"""The tile-footprint compatibility rule and the per-tile sub-layouts, checked
against a brute-force enumeration of every logical coordinate."""
import itertools
from math import prod

import pytest
from hypothesis import given, settings, strategies as st

import strideweave as sw
from strideweave.carriers import _tiled_work as te_mod
from strideweave.carriers._tiled_geometry import TileGeometry, canonical_layout, infer_leaves
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection, TileSet


def brute_compatible(layout, offset, grid, tile):
    rank = len(grid)
    if len(layout) != rank:
        return False
    sizes = [layout[i].shape.size for i in range(rank)]
    if sizes != [t * g for t, g in zip(tile, grid)]:
        return False
    T = prod(tile)
    foot = {}
    for x in itertools.product(*[range(n) for n in sizes]):
        t = tuple(xi // ti for xi, ti in zip(x, tile))
        foot.setdefault(t, []).append(offset + layout.index(tuple(x)))
    for t, slots in foot.items():
        e = sum(c * prod(grid[:i]) for i, c in enumerate(t))
        if len(set(slots)) != len(slots) or set(slots) != set(range(e * T, e * T + T)):
            return False
    return True


@st.composite
def cases(draw):
    rank = draw(st.integers(1, 2))
    grid = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    tile = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    T, N = prod(tile), prod(grid)
    shape, stride = [], []
    canonical = draw(st.booleans())
    for i in range(rank):
        if canonical or draw(st.booleans()):
            # (tile, grid) leaves with canonical strides, maybe within-tile permuted later
            shape.append([tile[i], grid[i]])
            stride.append([prod(tile[:i]), T * prod(grid[:i])])
        else:
            n = tile[i] * grid[i]
            split = draw(st.sampled_from([[n], [tile[i], grid[i]], [grid[i], tile[i]]]))
            shape.append(split)
            stride.append([draw(st.integers(0, T * N)) for _ in split])
    if rank == 2 and draw(st.booleans()):
        # swap the within-tile strides of the two modes (a within-tile permutation when tiles match)
        if len(stride[0]) == 2 and len(stride[1]) == 2:
            stride[0][0], stride[1][0] = stride[1][0], stride[0][0]
    offset = draw(st.sampled_from([0, 0, 0, 1]))
    return sw.Layout(sw.Shape(shape), sw.Stride(stride)), offset, grid, tile


@settings(max_examples=300, deadline=None)
@given(cases())
def test_compatibility_matches_brute_force_and_sublayouts_match_the_layout(case):
    layout, offset, grid, tile = case
    want = brute_compatible(layout, offset, grid, tile)
    try:
        geom = TileGeometry(layout, offset, grid, tile)
        got = True
    except ValueError:
        got = False
    assert got == want
    if not got:
        return
    T = prod(tile)
    for t in itertools.product(*[range(g) for g in grid]):
        base = sum(c * prod(grid[:i]) for i, c in enumerate(t)) * T
        pairs = dict((b, a) for a, b in geom.slot_pairs(t))
        subs = geom.sublayouts(t)
        for y in itertools.product(*[range(n) for n in tile]):
            x = tuple(ti * ci + yi for ti, ci, yi in zip(tile, t, y))
            slot = layout.index(x)
            dense = sum(yi * prod(tile[:i]) for i, yi in enumerate(y))
            assert base + pairs[dense] == slot
        if subs is not None:
            src, dst = subs
            assert src.size == T and sorted(dst.index(k) for k in range(T)) == list(range(T))
            # the k-th coordinate of both sub-layouts is the same within-tile coordinate
            for k in range(T):
                assert base + src.index(k) == base + pairs[dst.index(k)]


def test_infer_leaves():
    assert infer_leaves([0, 1, 2, 3]) == [(4, 1)]
    assert infer_leaves([0, 2, 1, 3]) == [(2, 2), (2, 1)]
    assert infer_leaves([0, 3, 1, 4, 2, 5]) == [(2, 3), (3, 1)]
    assert infer_leaves([0]) == [(1, 0)]
    assert infer_leaves([1, 0]) is None
    assert infer_leaves([0, 2, 1]) is None


def test_canonical_layout_is_compatible_for_many_geometries():
    for grid, tile in [((1,), (1,)), ((3,), (2,)), ((2, 3), (2, 2)), ((4, 1, 2), (1, 3, 2))]:
        geom = TileGeometry(canonical_layout(grid, tile), 0, grid, tile)
        assert geom.canonical


def test_tile_transfers_use_the_exact_pair_route(monkeypatch):
    seen = []
    real = te_mod.dispatch_move

    def spy(src, dst):
        seen.append((src, dst))
        return real(src, dst)

    monkeypatch.setattr(te_mod, "dispatch_move", spy)
    cpu = sw.CPU(8)
    te = TiledEvictable(cpu, sw.FileBacked(dtype=sw.DType.Float32), (4,), (2,))
    te.evict(TileSet([(0,), (1,)]))
    te.promote(TileSet([(1,)]))
    assert seen == [(sw.CPU, sw.FileBacked)] * 2 + [(sw.FileBacked, sw.CPU)]
    assert real(sw.CPU, sw.FileBacked) is sw.CpuToFileBackedMoveOperation
    seen.clear()
    t = sw.Tensor(te, 0, te.canonical_layout())
    te.project(t, TileSelection([[0]])).wait()
    assert seen == [(sw.FileBacked, sw.CPU)]  # the cold tile goes straight into the destination
    assert te.tile_state((0,)).location == "secondary"


def test_scatter_consults_the_policy_with_purpose_scatter():
    calls = []

    class P:
        def plan(self, required, purpose):
            calls.append((required, purpose))
            return sw.ResidencyPlan()

    te = TiledEvictable(sw.CPU(4), sw.CPU(0), (2,), (2,), residency_policy=P())
    t = sw.Tensor(te, 0, te.canonical_layout())
    sel = TileSelection([[1]])
    compact = sw.Tensor(sw.CPU(2), 0, canonical_layout((1,), (2,)))
    te.scatter(compact, t, sel).wait()
    assert calls == [(sel.tile_set, "scatter")]


def test_operand_hook_gives_a_dense_copy_with_the_tensor_layout():
    # what a native direct operation would consume (the native call site is later work)
    c = sw.CPU(8)
    for i in range(8):
        c[i] = float(i)
    te = TiledEvictable(c, sw.FileBacked(dtype=sw.DType.Float32), (4,), (2,))
    te.evict(TileSet([(1,), (2,)]))
    lay = sw.Layout(sw.Shape([8]), sw.Stride([1]))
    t = sw.Tensor(te, 0, lay)
    d = te._operand(t)
    assert type(d.carrier) is sw.CPU and d.layout == lay
    assert [d[i] for i in range(8)] == [float(i) for i in range(8)]
    assert te.tile_state((1,)).location == "secondary" and not te._st.pending
    s = sw.reduce_sum(sw.mul(d, 2.0))
    assert s[0] == 56.0
    g = te._gradient(t, sw.Tensor(d.carrier.new_like([1.0] * 8), 0, lay))
    assert type(g.carrier) is TiledEvictable and g.layout == lay
    assert [g[i] for i in range(8)] == [1.0] * 8
    with pytest.raises(ValueError, match="compatible"):
        te._operand(sw.Tensor(te, 0, sw.Layout(sw.Shape([4, 2]), sw.Stride([1, 4]))))
