"""Tile-by-tile reading of every tile of a TiledEvictable for a native direct
operation (add, mul, relu, reduce_sum on a full tensor; ops_tiled.cpp).

The operation asks for tile k's values with ``tile(k)`` and computes that
tile before it asks for the next one, so the values it holds at once are one
tile's: a primary-resident tile is read in place, a secondary tile is copied
(its exact-pair route, one profiled tile transfer) into a staging buffer of
one tile that every secondary tile reuses, and an implicit tile reads a
shared zero tile. The reader is one request of the carrier: it holds every
tile as read from ``open`` to ``close`` (a residency request overlapping it
raises RuntimeError, as one overlapping a projection does), runs the
residency policy's promotions alongside, and commits the policy's plan at
``close`` when the operation succeeded.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Tuple

from .._core import Carrier, Shape
from . import _tiled_handles as _h
from ._tiled_values import TileSet
from ._tiled_work import _IMPLICIT, _INVALID, _PRIMARY, _Access, _Request, _route_class, _route_copy, _tile_coord

if TYPE_CHECKING:
    from .tiled_evictable import TiledEvictable


class _TileReader:
    """Handed to a native direct operation by ``TiledEvictable._tile_reader``."""

    __slots__ = ("te", "req", "stage", "closed", "ok")

    def __init__(self, te: TiledEvictable, purpose: str) -> None:
        if purpose not in ("operation", "backward"):
            raise ValueError(f"_tile_reader() purpose must be 'operation' or 'backward', not {purpose!r}")
        te._check_live()
        st = te._st
        everything = TileSet(_tile_coord(k, st.grid) for k in range(st.N))
        plan = te._consult_policy(everything, purpose)
        handle = _h.new_handle("projection")
        self.te = te
        self.stage: Optional[Carrier] = None
        self.closed = False
        self.ok = False
        with st.lock:
            te._check_live()
            for k in range(st.N):
                if k in st.writers:
                    raise RuntimeError(te._busy_message(k) + " (a residency request)")
                if st.loc[k] == _INVALID:
                    raise RuntimeError(f"tile {_tile_coord(k, st.grid)} of this TiledEvictable is invalid: "
                                       "it holds no value")
            req = _Request(te, handle, reads=list(range(st.N)))
            for k in req.reads:
                st.readers[k] = st.readers.get(k, 0) + 1
            st.pending.add(req)
            try:
                promo_spans, promo_commit = te._apply_plan_promotions(req, plan)
            except BaseException:
                te._abort(req)
                raise
            self.req = req

            def commit() -> None:
                promo_commit()
                te._apply_plan_evictions(plan, set())
                if not self.ok:  # close(False): the operation failed, nothing to publish
                    raise _Failed()

            req.commit = commit
            req.submit_spans(promo_spans)
            if _IMPLICIT in st.loc:
                te._zeros()  # the shared zero tile, claimed under the lock

    def tile(self, k: int) -> Tuple[Carrier, int]:
        """(carrier, slot offset) holding tile k's T values in its primary's
        class, valid until the next call or close()."""
        te = self.te
        st = te._st
        loc = st.loc[k]  # stable: this request reads every tile
        if loc == _PRIMARY:
            return st.prim(k)
        if loc == _IMPLICIT:
            return te._zeros(), 0
        if self.stage is None:
            self.stage = st.primary_proto.allocate_like(st.T, empty=True)
        src = st.secondary
        transfer = None
        if self.req.session is not None:
            transfer = _h.Transfer(self.req.session, type(src), _route_class(type(src), type(self.stage)),
                                   (Shape(list(st.tile)),))
            transfer.submitted()
        ok = False
        try:
            with _Access(st.tokens_all()):
                _route_copy(src, k * st.T, self.stage, 0, st.T)
            ok = True
        finally:
            if transfer is not None:
                transfer.finished(ok)
        return self.stage, 0

    def close(self, ok: bool) -> None:
        """Ends the request: the policy's plan commits when ok; waits for its
        promotions (a failed one raises)."""
        if self.closed:
            return
        self.closed = True
        self.ok = bool(ok)
        if self.stage is not None:
            self.stage.release()
            self.stage = None
        self.req.seal()
        try:
            self.req.handle.wait()
        except _Failed:
            pass


class _Failed(Exception):
    """The operation failed: its reader commits no residency change."""


def tile_reader(te: TiledEvictable, purpose: str) -> Any:
    return _TileReader(te, purpose)
