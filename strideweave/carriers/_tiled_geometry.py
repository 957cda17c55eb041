"""Tile geometry of a TiledEvictable and the tile-footprint compatibility rule.

Canonical geometry (API.md section 13): tile ``t`` owns the ``T =
prod(tile_shape)`` slots starting at ``encode(t) * T``. A full Tensor of rank
``r`` has ``r`` top-level modes; mode ``i`` has ``tile_shape[i] *
grid_shape[i]`` coordinates, its flat ordinal ``x`` lying in tile coordinate
``x // tile_shape[i]`` at within-tile coordinate ``x % tile_shape[i]``.

A Layout's index is a sum over top-level modes, ``offset + sum_i f_i(x_i)``,
so the footprint of tile ``t`` is the Minkowski sum of the per-mode images
``f_i(tile range of t_i)``. Compatibility is checked per mode (O(mode
extent)) plus one direct-sum test per distinct combination of within-tile
offset patterns (usually one), never per element of the tensor.
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
        grid_scale = 1
        inner = 1
        for i in range(rank):
            f = mode_offsets(layout[i])
            ti, gi = tile_shape[i], grid_shape[i]
            if len(f) != ti * gi:
                raise ValueError(
                    f"mode {i} of the Tensor has {len(f)} coordinates, not tile_shape[{i}] * grid_shape[{i}] = "
                    f"{ti * gi}: it is not tile-footprint compatible")
            per_t = []
            for t in range(gi):
                seg = f[t * ti:(t + 1) * ti]
                low = min(seg)
                want = t * grid_scale * T
                if low != want:
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
            pattern.append(per_t)
            grid_scale *= gi
            inner *= ti
        # One direct-sum test per distinct combination of patterns.
        distinct = [sorted({p[0] for p in per_t}) for per_t in pattern]
        for combo in itertools.product(*distinct):
            if not _is_direct_interval(combo, T):
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
        pats = [self.pattern[i][x][0] for i, x in enumerate(t)]
        pairs = [(0, 0)]
        inner = 1
        for i, d in enumerate(pats):
            pairs = [(a + d[y], b + y * inner) for y in range(len(d)) for (a, b) in pairs]
            inner *= self.tile_shape[i]
        return pairs


def canonical_layout(grid_shape: Tuple[int, ...], tile_shape: Tuple[int, ...]) -> Layout:
    """Mode i is (tile_shape[i], grid_shape[i]) with strides
    (prod(tile_shape[:i]), prod(tile_shape) * prod(grid_shape[:i]))."""
    T = prod(tile_shape)
    shape, stride = [], []
    for i, (ti, gi) in enumerate(zip(tile_shape, grid_shape)):
        shape.append([ti, gi])
        stride.append([prod(tile_shape[:i]), T * prod(grid_shape[:i])])
    return Layout(Shape(shape), Stride(stride))
