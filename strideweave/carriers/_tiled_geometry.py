"""Tile geometry of a TiledEvictable and the tile-footprint compatibility rule.

Canonical geometry (API.md section 13): tile ``t`` owns the ``T =
prod(tile_shape)`` slots starting at ``encode(t) * T``. A full Tensor of rank
``r`` has ``r`` top-level modes; mode ``i`` has ``tile_shape[i] *
grid_shape[i]`` coordinates, its flat ordinal ``x`` lying in tile coordinate
``x // tile_shape[i]`` at within-tile coordinate ``x % tile_shape[i]``.

A Layout's index is a sum over top-level modes, ``offset + sum_i f_i(x_i)``,
so the footprint of tile ``t`` is the Minkowski sum of the per-mode images
``f_i(tile range of t_i)``. Compatibility is decided in closed form, in work
proportional to the number of leaves: a mode whose (coalesced) leaves split
at ordinal ``tile_shape[i]`` is ``f_i(t * tile + y) = w_i(y) + g_i(t)``, the
same within-tile layout ``w_i`` at every tile coordinate, so the checks are
on ``w_i`` and ``g_i`` as layouts, and the tile is a direct interval exactly
when all modes' ``w_i`` leaves together, sorted by stride, are a mixed
radix. A mode whose leaves do not split there (no compatible Layout was
found to need it, but nothing rules it out) is enumerated, O(mode extent),
as before.
"""
from __future__ import annotations

import itertools
from math import prod
from typing import List, Optional, Sequence, Tuple

from .._core import Layout, Shape, Stride

Leaves = List[Tuple[int, int]]


def mode_offsets(mode_layout: Layout) -> List[int]:
    """f(x) for every flat ordinal x of one (possibly nested) mode."""
    f = [0]
    for extent, stride in mode_layout.leaves():
        f = [x + j * stride for j in range(extent) for x in f]
    return f


def _offsets(leaves: Leaves) -> List[int]:
    """w(y) for every ordinal y of the layout of ``leaves`` (first fastest)."""
    f = [0]
    for extent, stride in leaves:
        f = [x + j * stride for j in range(extent) for x in f]
    return f


def coalesce(leaves: Sequence[Tuple[int, int]]) -> Leaves:
    """The same index function with extent-1 leaves dropped and each leaf
    that continues its predecessor's progression merged into it."""
    out: Leaves = []
    for e, st in leaves:
        if e == 1:
            continue
        if out and st == out[-1][0] * out[-1][1]:
            out[-1] = (out[-1][0] * e, out[-1][1])
        else:
            out.append((e, st))
    return out


def split_leaves(leaves: Leaves, n: int) -> Optional[Tuple[Leaves, Leaves]]:
    """(within, above): coalesced leaves with f(q * n + y) = within(y) +
    above(q) for every y < n, or None when no leaf boundary (after cutting
    one leaf in two) falls at ordinal n. ``leaves`` is coalesced."""
    within: Leaves = []
    above: Leaves = []
    need = n
    for e, st in leaves:
        if need == 1:
            above.append((e, st))
        elif need % e == 0:
            within.append((e, st))
            need //= e
        elif e % need == 0:
            within.append((need, st))
            above.append((e // need, st * need))
            need = 1
        else:
            return None
    if need != 1:
        return None
    return coalesce(within), coalesce(above)


def _injective(leaves: Leaves) -> bool:
    """Whether the layout of ``leaves`` (coalesced, strides >= 0) maps no two
    ordinals to one offset: the engine's closed-form test, and an
    enumeration only where that one cannot decide."""
    if any(st == 0 for _, st in leaves):
        return False
    if not leaves:
        return True
    lay = Layout(Shape([e for e, _ in leaves]), Stride([st for _, st in leaves]))
    if lay.is_injective:
        return True
    f = _offsets(leaves)
    return len(set(f)) == len(f)


def _is_radix(leaves: Leaves, total: int) -> bool:
    """Whether the layout of ``leaves`` (extents > 1) is a bijection onto
    range(total): sorted by stride, each stride is the product of the
    extents before it, and they multiply to total."""
    expect = 1
    for e, st in sorted(leaves, key=lambda leaf: (leaf[1], leaf[0])):
        if st != expect:
            return False
        expect *= e
    return expect == total


def infer_leaves(d: Sequence[int]) -> Optional[Leaves]:
    """(extent, stride) leaves, first fastest, whose colex enumeration is d;
    None when d is not such a layout (then callers copy slot by slot)."""
    n = len(d)
    if n == 0 or d[0] != 0:
        return None
    leaves: Leaves = []
    block = 1
    while block < n:
        s = d[block]
        e = 1
        while block * (e + 1) <= n and all(d[e * block + r] == d[r] + e * s for r in range(block)):
            e += 1
        rest = n // block
        while e > 1 and rest % e:
            e -= 1
        if e < 2:
            return None
        leaves.append((e, s))
        block *= e
    return leaves or [(1, 0)]


def _is_direct_interval(parts: Sequence[Sequence[int]], total: int) -> bool:
    """Whether every sum of one element per part is distinct and the sums are
    exactly range(total)."""
    aps: Optional[List[Tuple[int, int]]] = []
    for p in parts:
        if len(p) == 1:
            if p[0] != 0:
                return False
            continue
        s = p[1] - p[0]
        if aps is not None and p[0] == 0 and s > 0 and all(p[k] == k * s for k in range(len(p))):
            aps.append((s, len(p)))
        else:
            aps = None
            break
    if aps is not None:
        # Mixed radix: sorted by stride, each stride is the product of the
        # earlier extents.
        expect = 1
        for s, n in sorted(aps):
            if s != expect:
                return False
            expect *= n
        return expect == total
    sums = [0]
    for p in parts:
        sums = [a + b for b in p for a in sums]
    return len(sums) == total and sorted(sums) == list(range(total))


class TileGeometry:
    """Validated association of a full Tensor's Layout with the carrier tiles.

    ``pattern[i][t_i]`` is ``(offsets, leaves, identity)`` for mode ``i`` at
    tile coordinate ``t_i``: the within-tile slot offsets of that mode in
    within-tile coordinate order, their leaves (or None), and whether they
    are the canonical dense ones (stride ``prod(tile_shape[:i])``).
    """

    __slots__ = ("grid_shape", "tile_shape", "tile_size", "pattern", "canonical")

    def __init__(self, layout: Layout, offset: int, grid_shape: Tuple[int, ...], tile_shape: Tuple[int, ...]):
        rank = len(grid_shape)
        if len(layout) != rank:
            raise ValueError(
                f"the Tensor has {len(layout)} top-level modes but the tile grid {grid_shape} has rank {rank}: "
                "it is not tile-footprint compatible")
        if offset != 0:
            raise ValueError(f"a Tensor at offset {offset} is not tile-footprint compatible (the tiles start at 0)")
        T = prod(tile_shape)
        self.grid_shape = grid_shape
        self.tile_shape = tile_shape
        self.tile_size = T
        pattern = []
        within_all: Optional[Leaves] = []  # every mode's within-tile leaves (None: a mode was enumerated)
        grid_scale = 1
        inner = 1
        for i in range(rank):
            ti, gi = tile_shape[i], grid_shape[i]
            mode = layout[i].leaves()
            n = prod(e for e, _ in mode)
            if n != ti * gi:
                raise ValueError(
                    f"mode {i} of the Tensor has {n} coordinates, not tile_shape[{i}] * grid_shape[{i}] = "
                    f"{ti * gi}: it is not tile-footprint compatible")
            parts = split_leaves(coalesce(mode), ti)
            if parts is None:
                within_all = None
                per_t = _enumerated_mode(layout[i], i, ti, gi, grid_scale * T, inner)
            else:
                per_t = _closed_mode(parts[0], parts[1], i, ti, gi, grid_scale * T, inner)
                if within_all is not None:
                    within_all.extend(parts[0])
            pattern.append(per_t)
            grid_scale *= gi
            inner *= ti
        if within_all is not None:
            # Every mode has one within-tile layout: the tile is a direct
            # interval exactly when their leaves together are a mixed radix.
            direct = _is_radix(within_all, T)
        else:
            # One direct-sum test per distinct combination of patterns.
            distinct = [sorted({_pattern_offsets(p) for p in per_t}) for per_t in pattern]
            direct = all(_is_direct_interval(combo, T) for combo in itertools.product(*distinct))
        if not direct:
            raise ValueError(
                "a Tensor tile aliases physical slots or omits slots of its carrier tile footprint: it is not "
                "tile-footprint compatible")
        self.pattern = pattern
        self.canonical = all(p[2] for per_t in pattern for p in per_t)

    def tile_is_canonical(self, t: Tuple[int, ...]) -> bool:
        return all(self.pattern[i][x][2] for i, x in enumerate(t))

    def sublayouts(self, t: Tuple[int, ...]) -> Optional[Tuple[Layout, Layout]]:
        """(source, dense) Layouts of the logical tile t with one shape: the
        source over the carrier's tile span (offset 0 = tile start), the dense
        one in canonical within-tile order. None when a mode's within-tile
        pattern is not a layout."""
        shape, src, dst = [], [], []
        inner = 1
        for i, x in enumerate(t):
            leaves = self.pattern[i][x][1]
            if leaves is None:
                return None
            shape.append([e for e, _ in leaves])
            src.append([s for _, s in leaves])
            acc, d = inner, []
            for e, _ in leaves:
                d.append(acc if e > 1 else 0)
                acc *= e
            dst.append(d)
            inner *= self.tile_shape[i]
        return (Layout(Shape(shape), Stride(src)), Layout(Shape(shape), Stride(dst)))

    def slot_pairs(self, t: Tuple[int, ...]) -> List[Tuple[int, int]]:
        """(source offset within the tile, dense offset) for every within-tile
        coordinate: the slot-by-slot fallback of sublayouts()."""
        pats = [_pattern_offsets(self.pattern[i][x]) for i, x in enumerate(t)]
        pairs = [(0, 0)]
        inner = 1
        for i, d in enumerate(pats):
            pairs = [(a + d[y], b + y * inner) for y in range(len(d)) for (a, b) in pairs]
            inner *= self.tile_shape[i]
        return pairs


Pattern = Tuple[Optional[Tuple[int, ...]], Optional[Leaves], bool]


def _pattern_offsets(p: Pattern) -> Tuple[int, ...]:
    """A pattern's within-tile offsets (a closed-form pattern keeps only its
    leaves: enumerated on demand, by the slot-by-slot paths)."""
    if p[0] is not None:
        return p[0]
    assert p[1] is not None
    return tuple(_offsets(p[1]))


def _closed_mode(within: Leaves, above: Leaves, i: int, ti: int, gi: int, step: int, inner: int) -> List[Pattern]:
    """The per-tile patterns of mode i from its split (``within`` the first
    ti ordinals, ``above`` the tile coordinate): one pattern for every tile
    coordinate; the errors (and the coordinate they name) are those of
    _enumerated_mode. step: the slots between carrier tiles of consecutive
    coordinates of this mode."""
    # Tile coordinate t starts at g(t) + min(w); it must be t * step.
    low = sum(min(0, (e - 1) * st) for e, st in within)
    if low != 0:
        bad: Optional[int] = 0
    elif not above:
        bad = None
    elif above[0][1] != step:
        bad = 1
    elif len(above) > 1:
        bad = above[0][0]  # (coalesced: the next leaf breaks the progression there)
    else:
        bad = None
    # (the enumeration checks coordinate 0's repeats before coordinate 1's start)
    if bad != 0 and not _injective(within):
        raise ValueError(
            f"the Tensor tile at coordinate 0 of mode {i} repeats a physical slot: it is not "
            "tile-footprint compatible")
    if bad is not None:
        raise ValueError(
            f"the Tensor tile at coordinate {bad} of mode {i} reaches slots of another carrier tile "
            "(tile coordinates remapped or spanning tiles): it is not tile-footprint compatible")
    identity = ti == 1 or within == [(ti, inner)]
    pattern: Pattern = (None, within or [(1, 0)], identity)
    return [pattern] * gi


def _enumerated_mode(mode_layout: Layout, i: int, ti: int, gi: int, step: int, inner: int) -> List[Pattern]:
    """The per-tile patterns of mode i by enumerating its offsets (O(mode
    extent)): for a mode whose leaves do not split at ti."""
    f = mode_offsets(mode_layout)
    per_t: List[Pattern] = []
    for t in range(gi):
        seg = f[t * ti:(t + 1) * ti]
        low = min(seg)
        if low != t * step:
            raise ValueError(
                f"the Tensor tile at coordinate {t} of mode {i} reaches slots of another carrier tile "
                "(tile coordinates remapped or spanning tiles): it is not tile-footprint compatible")
        d = tuple(x - low for x in seg)
        if len(set(d)) != len(d):
            raise ValueError(
                f"the Tensor tile at coordinate {t} of mode {i} repeats a physical slot: it is not "
                "tile-footprint compatible")
        identity = all(d[k] == k * inner for k in range(ti))
        per_t.append((d, infer_leaves(d), identity))
    return per_t


def canonical_layout(grid_shape: Tuple[int, ...], tile_shape: Tuple[int, ...]) -> Layout:
    """Mode i is (tile_shape[i], grid_shape[i]) with strides
    (prod(tile_shape[:i]), prod(tile_shape) * prod(grid_shape[:i]))."""
    T = prod(tile_shape)
    shape, stride = [], []
    for i, (ti, gi) in enumerate(zip(tile_shape, grid_shape)):
        shape.append([ti, gi])
        stride.append([prod(tile_shape[:i]), T * prod(grid_shape[:i])])
    return Layout(Shape(shape), Stride(stride))
