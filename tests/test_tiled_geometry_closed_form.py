"""The tile-footprint check in closed form (work per leaf, not per element):
the same verdict, error message and per-tile patterns as enumerating every
mode's offsets, checked against that enumeration and against a brute force
over every element on small layouts; and large modes (millions of
elements) decided without enumerating them."""
import itertools
from math import prod

import pytest
from hypothesis import given, settings, strategies as st

import strideweave as sw
from strideweave.carriers import _tiled_geometry as g
from strideweave.carriers._tiled_geometry import TileGeometry, canonical_layout


def lay(shape, stride):
    return sw.Layout(sw.Shape(shape), sw.Stride(stride))


def reference(layout, offset, grid, tile):
    """The enumerating check (every mode's offsets listed): ("ok", patterns)
    with per-tile (offsets, identity) or ("error", message)."""
    rank = len(grid)
    if len(layout) != rank or offset != 0:
        return ("error", None)
    T = prod(tile)
    pattern = []
    scale = inner = 1
    try:
        for i in range(rank):
            n = len(g.mode_offsets(layout[i]))
            if n != tile[i] * grid[i]:
                raise ValueError(f"mode {i} of the Tensor has {n} coordinates, not tile_shape[{i}] * grid_shape[{i}] "
                                 f"= {tile[i] * grid[i]}: it is not tile-footprint compatible")
            pattern.append(g._enumerated_mode(layout[i], i, tile[i], grid[i], scale * T, inner))
            scale *= grid[i]
            inner *= tile[i]
        distinct = [sorted({p[0] for p in per_t}) for per_t in pattern]
        if not all(g._is_direct_interval(c, T) for c in itertools.product(*distinct)):
            raise ValueError("a Tensor tile aliases physical slots or omits slots of its carrier tile footprint: it "
                             "is not tile-footprint compatible")
    except ValueError as e:
        return ("error", str(e))
    return ("ok", [[(p[0], p[2]) for p in per_t] for per_t in pattern])


def closed(layout, offset, grid, tile):
    try:
        geom = TileGeometry(layout, offset, grid, tile)
    except ValueError as e:
        return ("error", str(e)), None
    pats = [[(g._pattern_offsets(p), p[2]) for p in per_t] for per_t in geom.pattern]
    return ("ok", pats), geom


def brute_compatible(layout, grid, tile):
    sizes = [layout[i].shape.size for i in range(len(grid))]
    if sizes != [t * n for t, n in zip(tile, grid)]:
        return False
    T = prod(tile)
    foot = {}
    for x in itertools.product(*[range(n) for n in sizes]):
        t = tuple(xi // ti for xi, ti in zip(x, tile))
        foot.setdefault(t, []).append(layout.index(tuple(x)))
    for t, slots in foot.items():
        e = sum(c * prod(grid[:i]) for i, c in enumerate(t))
        if sorted(slots) != list(range(e * T, e * T + T)):
            return False
    return True


def factorizations(n):
    """Ordered factorizations of n into 1-3 factors (1s allowed)."""
    out = [[n]]
    for a in range(1, n + 1):
        if n % a == 0:
            out.append([a, n // a])
            for b in range(1, n // a + 1):
                if (n // a) % b == 0:
                    out.append([a, b, n // a // b])
    return out


@st.composite
def layouts(draw):
    rank = draw(st.integers(1, 3))
    grid = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    tile = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    T = prod(tile)
    shape, stride = [], []
    for i in range(rank):
        n = tile[i] * grid[i]
        if draw(st.booleans()):
            # near-canonical: (tile, grid) with the canonical strides, or a
            # refinement of the tile extent with permuted strides
            within = draw(st.sampled_from(factorizations(tile[i])))
            strides, acc = [], prod(tile[:i])
            for e in within:
                strides.append(acc)
                acc *= e
            perm = draw(st.permutations(range(len(within))))
            shape.append(within + [grid[i]])
            stride.append([strides[k] for k in perm] + [T * prod(grid[:i])])
        else:
            split = draw(st.sampled_from(factorizations(n)))
            pool = [0, 1, 2, 3, T, prod(tile[:i]), T * prod(grid[:i])]
            shape.append(split)
            stride.append([draw(st.sampled_from(pool)) for _ in split])
    return lay(shape, stride), grid, tile


@settings(max_examples=600, deadline=None)
@given(layouts())
def test_closed_form_matches_the_enumeration_and_the_brute_force(case):
    layout, grid, tile = case
    want = reference(layout, 0, grid, tile)
    got, geom = closed(layout, 0, grid, tile)
    assert got == want
    assert (got[0] == "ok") == brute_compatible(layout, grid, tile)
    if geom is None:
        return
    # the leaves of every pattern describe its offsets
    for per_t in geom.pattern:
        for p in per_t:
            assert p[1] is not None and tuple(g._offsets(p[1])) == g._pattern_offsets(p)


def test_coalesce_and_split():
    assert g.coalesce([(2, 1), (1, 7), (3, 2), (4, 100)]) == [(6, 1), (4, 100)]
    assert g.coalesce([(1, 5)]) == []
    assert g.split_leaves([(8, 1)], 4) == ([(4, 1)], [(2, 4)])
    assert g.split_leaves([(2, 3), (3, 1)], 2) == ([(2, 3)], [(3, 1)])
    assert g.split_leaves([(3, 2), (2, 1)], 2) is None  # no leaf boundary at ordinal 2
    assert g.split_leaves([(6, 1)], 6) == ([(6, 1)], [])
    assert g.split_leaves([(4, 1)], 1) == ([], [(4, 1)])


@pytest.mark.parametrize("shape,stride,grid,tile,fragment", [
    ([[2, 3]], [[1, 2]], (3,), (2,), None),                     # canonical, one leaf per level
    ([[3, 2]], [[2, 1]], (3,), (2,), "coordinate 1 of mode 0 reaches slots"),  # no split: enumerated
    ([[4]], [[2]], (2,), (2,), "coordinate 1 of mode 0 reaches slots"),        # tile 1 starts at 4
    ([[2, 2]], [[0, 2]], (2,), (2,), "coordinate 0 of mode 0 repeats a physical slot"),
    ([[2, 2]], [[1, 4]], (2,), (2,), "coordinate 1 of mode 0 reaches slots"),  # tile 1 starts at 4, not 2
    ([[2, 2], [3]], [[1, 4], [2]], (2, 1), (2, 2), "mode 1 of the Tensor has 3 coordinates, not"),
    ([[2], [2]], [[1], [1]], (1, 1), (2, 2), "aliases physical slots or omits slots"),  # each mode alone is fine
    ([[2], [2]], [[1], [3]], (1, 1), (2, 2), "aliases physical slots or omits slots"),
    ([[2], [2]], [[2], [1]], (1, 1), (2, 2), None),                  # within-tile transpose
])
def test_each_closed_form_verdict_and_message(shape, stride, grid, tile, fragment):
    layout = lay(shape, stride)
    got, geom = closed(layout, 0, grid, tile)
    assert got == reference(layout, 0, grid, tile)
    if fragment is None:
        assert got[0] == "ok"
    else:
        assert got[0] == "error" and fragment in got[1]


def test_a_large_flat_mode_is_decided_without_enumerating_it():
    n = 8 << 20  # the old per-element check took seconds here
    geom = TileGeometry(lay([n], [1]), 0, (1,), (n,))
    assert geom.canonical and geom.pattern[0][0][1] == [(n, 1)]
    # the same flat mode cut into 8 tiles of 1M elements
    geom = TileGeometry(lay([n], [1]), 0, (8,), (n // 8,))
    assert geom.canonical and len(geom.pattern[0]) == 8
    assert geom.sublayouts((5,))[0] == lay([[n // 8]], [[1]])
    with pytest.raises(ValueError, match="coordinate 1 of mode 0 reaches slots of another carrier tile"):
        TileGeometry(lay([n], [2]), 0, (2,), (n // 2,))  # tile 1 starts at n, not n / 2
    with pytest.raises(ValueError, match="coordinate 0 of mode 0 repeats a physical slot"):
        TileGeometry(lay([[2, n // 2]], [[0, 1]]), 0, (1,), (n,))


def test_a_large_within_tile_transpose_is_compatible_but_not_canonical():
    r, c = 2048, 4096  # 8M elements per tile, two tiles along mode 0
    layout = lay([[r, 2], [c]], [[c, r * c], [1]])
    geom = TileGeometry(layout, 0, (2, 1), (r, c))
    assert not geom.canonical and not geom.tile_is_canonical((1, 0))
    src, dst = geom.sublayouts((1, 0))
    assert src.index(1) == c and dst.index(1) == 1
    with pytest.raises(ValueError, match="aliases physical slots or omits slots"):
        TileGeometry(lay([[r, 2], [c]], [[c, r * c], [2]]), 0, (2, 1), (r, c))


def test_the_expert_grid_of_the_benchmark_is_canonical():
    grid, tile = (64, 1, 1), (1, 1024, 1024)
    geom = TileGeometry(canonical_layout(grid, tile), 0, grid, tile)
    assert geom.canonical and geom.tile_is_canonical((63, 0, 0))
