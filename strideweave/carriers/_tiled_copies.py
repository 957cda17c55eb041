"""TiledEvictable tile copies between tiers and compact Tensors, the
visible autograd nodes of projection (gather) and scatter, and the tile by
tile accumulation of TiledEvictable gradients."""
from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING, Any, Iterable, List, Optional, Sequence, Tuple, cast

from .._core import Carrier, Layout, Operation, Shape, Stride, Tensor
from ._tiled_geometry import TileGeometry, canonical_layout
from ._tiled_values import _encode
if TYPE_CHECKING:
    from ._tiled_values import TileSelection
    from .tiled_evictable import TiledEvictable
from ._tiled_work import _IMPLICIT, _PRIMARY, _SECONDARY, _Access, _logical_copy, _route_copy, _tile_coord


def _compact_tile_view(t_geom: TileGeometry, coord: Tuple[int, ...], compact: Tensor,
                       j_coord: Tuple[int, ...]) -> Tuple[int, Optional[Layout]]:
    """(slot offset, within-tile Layout) of compact tile j_coord of a compact
    Tensor shaped like canonical_layout(compact grid, tile), refined to the
    leaves of full tile ``coord``'s pattern (None when that is no layout)."""
    lay = compact.layout
    off = compact.offset
    shape, stride = [], []
    for i, (x, cj) in enumerate(zip(coord, j_coord)):
        (ti, a), (_, b) = lay[i].leaves()
        off += cj * b
        leaves = t_geom.pattern[i][x][1]
        if leaves is None:
            return off, None
        acc, s = a, []
        for e, _ in leaves:
            s.append(acc if e > 1 else 0)
            acc *= e
        shape.append([e for e, _ in leaves])
        stride.append(s)
    return off, Layout(Shape(shape), Stride(stride))


def _compact_slot_strides(compact: Tensor) -> List[int]:
    return [compact.layout[i].leaves()[0][1] for i in range(len(compact.layout))]


def _compact_coord(j: int, cgrid: Tuple[int, ...]) -> Tuple[int, ...]:
    return _tile_coord(j, cgrid)


def _gather_tile(geom: TileGeometry, coord: Tuple[int, ...], tier: Carrier, dest: Carrier, dest_off: int,
                 base: int) -> None:
    """Copies full tile ``coord`` (its value on ``tier`` at slot ``base``)
    into the dense compact tile at dest_off, logical order."""
    T = geom.tile_size
    if geom.tile_is_canonical(coord):
        _route_copy(tier, base, dest, dest_off, T)
        return
    subs = geom.sublayouts(coord)
    if subs is not None:
        _logical_copy(tier, base, subs[0], dest, dest_off, subs[1])
        return
    for a, b in geom.slot_pairs(coord):
        dest[dest_off + b] = tier[base + a]


def _scatter_tile(geom: TileGeometry, coord: Tuple[int, ...], compact: Tensor, j: int, oprim: Carrier, obase: int,
                  tier: Optional[Carrier], add: bool, tbase: int = -1) -> None:
    """Writes compact tile j into full tile ``coord`` of a primary carrier
    (at obase) under the template's within-tile association; with add, the
    template's value (on ``tier`` at slot tbase, default obase, or implicit
    zero) is added."""
    T = geom.tile_size
    cgrid = tuple(compact.layout[i].leaves()[1][0] for i in range(len(compact.layout)))
    jc = _compact_coord(j, cgrid)
    if add and tier is not None:
        _route_copy(tier, obase if tbase < 0 else tbase, oprim, obase, T)
    # (without a tier the region of the fresh zero-filled primary is zero)
    off, clay = _compact_tile_view(geom, coord, compact, jc)
    subs = geom.sublayouts(coord)
    if clay is not None and subs is not None:
        if add:
            from .._core import add as _add  # the central elementwise addition
            summed = _add(Tensor(oprim, obase, subs[0]), Tensor(compact.carrier, off, clay))
            _logical_copy(summed.carrier, summed.offset, summed.layout, oprim, obase, subs[0])
        else:
            _logical_copy(compact.carrier, off, clay, oprim, obase, subs[0])
        return
    strides = _compact_slot_strides(compact)
    inner = [prod(geom.tile_shape[:i]) for i in range(len(geom.tile_shape))]
    for a, b in geom.slot_pairs(coord):
        # b is the dense within-tile ordinal: decode to per-mode coordinates.
        coff = off
        for i in range(len(inner) - 1, -1, -1):
            y, b = divmod(b, inner[i])
            coff += y * strides[i]
        v = compact.carrier[coff]
        oprim[obase + a] = oprim[obase + a] + v if add else v


def _write_gradient_tiles(grad_te: TiledEvictable, geom: TileGeometry, coords: Iterable[Tuple[int, ...]],
                          g: Tensor) -> None:
    """Scatter-adds compact cotangent g (selection order ``coords``) into the
    implicit-zero gradient TiledEvictable (each tile occurs once)."""
    gst = grad_te._st
    with gst.lock:
        prim = grad_te._ensure_tier(_PRIMARY)
        with _Access(gst.tokens_all()):
            for j, c in enumerate(coords):
                k = _encode(c, gst.grid)
                _scatter_tile(geom, c, g, j, prim, k * gst.T, None, True)
                gst.loc[k], gst.dirty[k] = _PRIMARY, True


# ---------------------------------------------------------------- autograd nodes

class _ProjectOperation(Operation):
    """Visible gather node of a projection: backward scatter-adds the compact
    cotangent into a fresh implicit-zero TiledEvictable gradient."""

    def __init__(self, te: TiledEvictable, source: Tensor, selection: TileSelection, geom: TileGeometry,
                 result: Tensor) -> None:
        super().__init__()
        self._te = te
        self._selection = selection
        self._geom = geom
        self._result: Optional[Tensor] = result
        self._layout = source.layout

    def _forward(self, source: Tensor) -> Tensor:
        r, self._result = self._result, None
        return cast(Tensor, r)  # forward() runs once, right after __init__

    def backward(self, gradient: Tensor) -> Tuple[Tensor]:
        grad_te = self._te._fresh_result(implicit=True)
        _write_gradient_tiles(grad_te, self._geom, self._selection.coordinates, gradient)
        return (Tensor(grad_te, 0, self._layout),)


class _ScatterOperation(Operation):
    """Visible scatter node: compact gets the cotangent projected at the
    selection; with add the template gets it at the selected tiles, with
    replace nothing (no template value survives in the result)."""

    _template_layout: Layout

    def __init__(self, te: TiledEvictable, selection: TileSelection, geom: TileGeometry, reduction: str,
                 result: Tensor) -> None:
        super().__init__()
        self._te = te
        self._selection = selection
        self._geom = geom
        self._reduction = reduction
        self._result: Optional[Tensor] = result

    def _forward(self, compact: Tensor, template: Tensor) -> Tensor:
        self._template_layout = template.layout
        r, self._result = self._result, None
        return cast(Tensor, r)  # forward() runs once, right after __init__

    def backward(self, gradient: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
        te_st = self._te._st
        coords = self._selection.coordinates
        cgrid = self._selection.compact_grid_shape
        dense = canonical_layout(cgrid, te_st.tile)
        need = len(coords) * te_st.T
        out = te_st.primary_proto.allocate_like(need)
        # The cotangent has the result's layout: read its tiles like a full tensor.
        gc = gradient.carrier
        for j, c in enumerate(coords):
            base = gradient.offset + _encode(c, te_st.grid) * te_st.T
            subs = self._geom.sublayouts(c)
            if subs is not None:
                _logical_copy(gc, base, subs[0], out, j * te_st.T, subs[1])
            else:
                for a, b in self._geom.slot_pairs(c):
                    out[j * te_st.T + b] = gc[base + a]
        g_compact = Tensor(out, 0, dense)
        g_template: Optional[Tensor] = None
        if self._reduction == "add":
            grad_te = self._te._fresh_result(implicit=True)
            _write_gradient_tiles(grad_te, self._geom, coords, g_compact)
            g_template = Tensor(grad_te, 0, self._template_layout)
        return (g_compact, g_template)


# ---------------------------------------------------------------- gradient accumulation

def _flat_tile(c: Carrier, off: int, n: int) -> Tensor:
    return Tensor(c, off, Layout(Shape([n]), Stride([1])))


def _sum_gradients(te: TiledEvictable, tensor: Tensor, grads: Sequence[object]) -> Optional[Tensor]:
    """Tile by tile sum of gradients of the full tensor ``tensor`` of ``te``
    (each a Tensor in tensor's Layout: a TiledEvictable-backed one of this
    geometry, or a dense one whose tile k owns slots [k*T, (k+1)*T) from its
    offset) into a fresh TiledEvictable; a tile no contribution holds stays
    implicit zero. Spans are added by the central add, never slot by slot.
    None when a contribution does not fit (the caller then sums values)."""
    from .._core import add as _add
    from .tiled_evictable import TiledEvictable
    st = te._st
    if st.released or tensor.offset != 0:
        return None
    try:
        te._geometry(tensor)
    except ValueError:
        return None
    layout = tensor.layout
    # (TiledEvictable state, None) or (dense carrier, offset)
    sources: List[Tuple[Any, Optional[int]]] = []
    for g in grads:
        if not isinstance(g, Tensor) or g.layout != layout:
            return None
        c = g.carrier
        if isinstance(c, TiledEvictable):
            gst = c._st
            if g.offset != 0 or gst.released or gst.grid != st.grid or gst.tile != st.tile:
                return None
            sources.append((gst, None))
        elif type(c) is type(st.primary_proto) and not c.is_released() and c.dtype() is st.dtype:
            sources.append((c, g.offset))
        else:
            return None
    T = st.T
    out = te._fresh_result(implicit=True)
    ost = out._st
    pairs = {}
    for src, off in sources:
        if off is None:
            for c, tok in src.tokens_all():
                pairs[id(c)] = (c, tok)
    scratch: Optional[Carrier] = None
    try:
        with ost.lock:
            prim = None
            for k in range(st.N):
                parts = []
                for src, off in sources:
                    if off is not None:
                        parts.append((src, off + k * T))
                        continue
                    loc = src.loc[k]
                    if loc == _IMPLICIT:
                        continue
                    if loc not in (_PRIMARY, _SECONDARY):
                        raise RuntimeError(f"gradient tile {_tile_coord(k, st.grid)} is invalid: it holds no value")
                    parts.append(src.prim(k) if loc == _PRIMARY else (src.secondary, k * T))
                if not parts:
                    continue
                if prim is None:
                    prim = out._ensure_tier(_PRIMARY)
                    for c, tok in ost.tokens_all():
                        pairs[id(c)] = (c, tok)
                with _Access(list(pairs.values())):
                    c0, o0 = parts[0]
                    _route_copy(c0, o0, prim, k * T, T)
                    for c, o in parts[1:]:
                        if type(c) is not type(prim):
                            if scratch is None:
                                scratch = st.primary_proto.allocate_like(T)
                            _route_copy(c, o, scratch, 0, T)
                            c, o = scratch, 0
                        summed = _add(_flat_tile(prim, k * T, T), _flat_tile(c, o, T))
                        _route_copy(summed.carrier, summed.offset, prim, k * T, T)
                ost.loc[k], ost.dirty[k] = _PRIMARY, True
    finally:
        if scratch is not None:
            scratch.release()
    return Tensor(out, 0, layout)
