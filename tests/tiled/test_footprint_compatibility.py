"""The tile-footprint compatibility rule through the public API: project()
accepts exactly the Layouts a brute force over every logical coordinate
calls compatible, and gathers the values those Layouts address; each rule's
message; large modes decided without enumerating them. (The closed-form
check itself is the engine's: tests/cpp/test_tiled_geometry.cpp.)"""
import itertools
from math import prod

from hypothesis import given, settings, strategies as st
import pytest

import strideweave as sw
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection

from support.tiled import pending, tiles_layout


def lay(shape, stride):
    return sw.Layout(sw.Shape(shape), sw.Stride(stride))


def brute_compatible(layout, offset, grid, tile):
    """Every logical tile reaches exactly its carrier tile's slots, once."""
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


def ramp_te(grid, tile):
    n = prod(grid) * prod(tile)
    c = sw.CPU(n)
    for i in range(n):
        c[i] = float(i)
    return TiledEvictable(c, sw.CPU(0), grid, tile)


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
            shape.append([tile[i], grid[i]])
            stride.append([prod(tile[:i]), T * prod(grid[:i])])
        else:
            n = tile[i] * grid[i]
            split = draw(st.sampled_from([[n], [tile[i], grid[i]], [grid[i], tile[i]]]))
            shape.append(split)
            stride.append([draw(st.integers(0, T * N)) for _ in split])
    if rank == 2 and draw(st.booleans()) and len(stride[0]) == 2 and len(stride[1]) == 2:
        # swap the within-tile strides of the two modes (a within-tile permutation when tiles match)
        stride[0][0], stride[1][0] = stride[1][0], stride[0][0]
    offset = draw(st.sampled_from([0, 0, 0, 1]))
    return lay(shape, stride), offset, grid, tile


@settings(max_examples=300, deadline=None)
@given(cases())
def test_project_accepts_exactly_the_compatible_layouts_and_gathers_their_values(case):
    layout, offset, grid, tile = case
    te = ramp_te(grid, tile)
    t = sw.Tensor(te, offset, layout) if offset + layout.cosize <= te.size() else None
    want = t is not None and brute_compatible(layout, offset, grid, tile)
    every = TileSelection([list(range(g)) for g in grid])
    if not want:
        if t is not None:
            with pytest.raises(ValueError, match="compatible"):
                te.project(t, every)
        assert pending(te) == 0
        return
    r = te.project(t, every).wait()
    # selecting every tile in order: the compact tensor is the full one
    assert r.layout == tiles_layout(grid, tile)
    for x in itertools.product(*[range(t_ * g) for t_, g in zip(tile, grid)]):
        assert r[x] == t[x]


def test_the_canonical_layout_is_compatible_for_many_grids():
    for grid, tile in [((1,), (1,)), ((3,), (2,)), ((2, 3), (2, 2)), ((4, 1, 2), (1, 3, 2))]:
        te = ramp_te(grid, tile)
        assert te.canonical_layout() == tiles_layout(grid, tile)
        r = te.project(sw.Tensor(te, 0, te.canonical_layout()), TileSelection([list(range(g)) for g in grid])).wait()
        assert [r.carrier[i] for i in range(te.size())] == [float(i) for i in range(te.size())]


@pytest.mark.parametrize("shape,stride,grid,tile,fragment", [
    ([[2, 3]], [[1, 2]], (3,), (2,), None),                     # canonical
    ([[3, 2]], [[2, 1]], (3,), (2,), "no leaf boundary at the tile extent 2"),
    ([[2, 2, 2]], [[1, 4, 2]], (4,), (2,), "coordinate 1 of mode 0 reaches slots of another carrier tile"),
    ([[2, 2]], [[0, 2]], (2,), (2,), "coordinate 0 of mode 0 repeats a physical slot"),
    ([[2, 2, 2]], [[1, 4, 2]], (2,), (4,), "coordinate 1 of mode 0 reaches slots"),  # tiles interleaved
    ([[2, 2], [3]], [[1, 4], [1]], (2, 1), (2, 2), "mode 1 of the Tensor has 3 coordinates, not"),
    ([[2], [2]], [[1], [1]], (1, 1), (2, 2), "aliases physical slots or omits slots"),  # each mode alone is fine
    ([[2], [2]], [[2], [1]], (1, 1), (2, 2), None),                  # within-tile transpose
])
def test_each_rule_and_its_message(shape, stride, grid, tile, fragment):
    te = TiledEvictable(sw.CPU(0), sw.CPU(0), grid, tile)
    t = sw.Tensor(te, 0, lay(shape, stride))
    sel = TileSelection([[0]] * len(grid))
    if fragment is None:
        te.project(t, sel).wait()
        return
    with pytest.raises(ValueError, match="tile-footprint compatible") as e:
        te.project(t, sel)
    assert fragment in str(e.value)


def test_a_large_flat_mode_is_decided_without_enumerating_it():
    n = 8 << 20  # the old per-element check took seconds here
    te = TiledEvictable(sw.CPU(0), sw.CPU(0), (8,), (n // 8,))  # implicit zero: no storage
    r = te.project(sw.Tensor(te, 0, lay([n], [1])), TileSelection([[5]])).wait()
    assert r.size() == n // 8
    te2 = TiledEvictable(sw.CPU(0), sw.CPU(0), (2,), (n // 2,))
    with pytest.raises(ValueError, match="coordinate 1 of mode 0 reaches slots of another carrier tile"):
        te2.project(sw.Tensor(te2, 0, lay([[n // 2, 2]], [[2, 1]])), TileSelection([[0]]))
    te3 = TiledEvictable(sw.CPU(0), sw.CPU(0), (1,), (n,))
    with pytest.raises(ValueError, match="coordinate 0 of mode 0 repeats a physical slot"):
        te3.project(sw.Tensor(te3, 0, lay([[2, n // 2]], [[0, 1]])), TileSelection([[0]]))


def test_a_large_within_tile_transpose_is_compatible():
    r, c = 2048, 4096  # 8M elements per tile, two tiles along mode 0
    te = TiledEvictable(sw.CPU(0), sw.CPU(0), (2, 1), (r, c))
    t = sw.Tensor(te, 0, lay([[r, 2], [c]], [[c, r * c], [1]]))
    h = te.project(t, TileSelection([[1], [0]]))
    assert h.wait().size() == r * c
    with pytest.raises(ValueError, match="repeats a physical slot"):
        te.project(sw.Tensor(te, 0, lay([[r, 2], [c]], [[c, r * c], [0]])), TileSelection([[1], [0]]))


def test_scatter_consults_the_policy_with_purpose_scatter():
    calls = []

    class P:
        def plan(self, required, purpose):
            calls.append((required, purpose))
            return sw.ResidencyPlan()

    te = TiledEvictable(sw.CPU(4), sw.CPU(0), (2,), (2,), residency_policy=P())
    t = sw.Tensor(te, 0, te.canonical_layout())
    sel = TileSelection([[1]])
    compact = sw.Tensor(sw.CPU(2), 0, tiles_layout((1,), (2,)))
    te.scatter(compact, t, sel).wait()
    assert calls == [(sel.tile_set, "scatter")]
