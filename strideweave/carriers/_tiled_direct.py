"""Tile-by-tile reading of every tile of a TiledEvictable for a native direct
operation (add, mul, relu, reduce_sum on a full tensor) or the backward of
mul and relu reading a tiled input (ops_tiled_bands.cpp).

The operation asks for spans of tiles with ``tiles(spans)`` and computes them
before it asks for more, keeping the spans of one call to about a tile in
total, so the values it holds at once are about one tile's: with a CPU
primary a primary-resident tile is read in place, secondary spans are copied
(their exact-pair route; one profiled transfer per tile however many parts
it is read in) into a staging buffer that every call reuses, and an implicit
tile reads a shared zero tile. With another primary class (a CPU subclass,
Generic) the kernels cannot read the primary's storage in place, so every
span is staged into an exact CPU buffer: primary spans through the route of
(primary class, CPU), secondary ones through (secondary class, CPU), and
implicit ones read a CPU zero tile; ``as_primary`` copies a result computed
in CPU into the primary's class. The reader is one request of the carrier: it holds every
tile as read from its creation to ``close`` (a residency request overlapping it
raises RuntimeError, as one overlapping a projection does), runs the
residency policy's promotions alongside, and commits the policy's plan at
``close`` when the operation succeeded.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Tuple, cast

from .._core import CPU, Carrier, Shape
from . import _tiled_handles as _h
from ._tiled_values import TileSet
from ._tiled_work import (_IMPLICIT, _PRIMARY, _Access, _gather_spans, _native_pair, _Request, _route_class,
                          _route_copy, _tile_coord)

if TYPE_CHECKING:
    from .tiled_evictable import TiledEvictable


class _TileReader:
    """Handed to a native direct operation by ``TiledEvictable._tile_reader``."""

    __slots__ = ("te", "req", "stage", "host", "zeros", "transfers", "closed", "ok")

    def __init__(self, te: TiledEvictable, purpose: str) -> None:
        if purpose not in ("operation", "backward"):
            raise ValueError(f"_tile_reader() purpose must be 'operation' or 'backward', not {purpose!r}")
        te._check_live()
        st = te._st
        plan = None if st.policy is None else te._consult_policy(
            TileSet(_tile_coord(k, st.grid) for k in range(st.N)), purpose)  # (built only for a policy)
        handle = _h.new_handle("projection")
        self.te = te
        self.stage: Optional[Carrier] = None
        # Primary storage the kernels read in place: an exact CPU's.
        self.host = type(st.primary_proto) is CPU
        self.zeros: Optional[Carrier] = None  # (a CPU zero tile, without host primary storage)
        self.transfers: dict[int, _h.Transfer] = {}  # secondary tiles read in parts: their open transfer
        self.closed = False
        self.ok = False
        with st.lock:
            te._check_all_readable()
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
                te._apply_plan_evictions(plan)
                if not self.ok:  # close(False): the operation failed, nothing to publish
                    raise _Failed()

            req.commit = commit
            req.submit_spans(promo_spans)
            if _IMPLICIT in st.loc and self.host:
                te._zeros()  # the shared zero tile, claimed under the lock

    def tiles(self, spans: List[Tuple[int, int, int, bool]]) -> List[Tuple[Carrier, int]]:
        """For each ``(k, first, count, last)``: ``(carrier, slot offset)``
        holding slots [first, first + count) of tile k (relative to the
        tile's first slot) in the primary's class (CPU when the primary is
        another class: every span staged), valid until the next call or
        close(). Primary-resident tiles are read in place, implicit ones from
        the shared zero tile; the secondary spans are copied into the staging
        buffer (its size their total, at most about a tile as the
        operation asks), as one engine call where the route is native. A
        secondary tile read in several parts is one profiled transfer, ending
        with the part marked ``last``."""
        te = self.te
        st = te._st
        T = st.T
        out: List[Tuple[Carrier, int]] = []
        copies = []
        finishing = []
        need = sum(count for k, _, count, _ in spans
                   if not (self.host and st.loc[k] == _PRIMARY) and st.loc[k] != _IMPLICIT)
        if need and (self.stage is None or self.stage.size() < need):
            if self.stage is not None:
                self.stage.release()
            self.stage = (st.primary_proto.allocate_like(need, empty=True) if self.host else
                          CPU(need, dtype=st.dtype, empty=True))
        pos = 0
        for k, first, count, last in spans:
            if not (0 <= k < st.N and 0 <= first and 0 <= count and first + count <= T):
                raise ValueError(f"tiles(): span {(k, first, count)} is not inside a tile of {T} slots")
            loc = st.loc[k]  # stable: this request reads every tile
            if loc == _IMPLICIT:
                if self.host:
                    out.append((te._zeros(), first))
                else:
                    if self.zeros is None:
                        self.zeros = CPU(T, dtype=st.dtype)
                    out.append((self.zeros, first))
                continue
            if loc == _PRIMARY:
                c, off = st.prim(k)
                if self.host:
                    out.append((c, off + first))
                    continue
                stage = cast(Carrier, self.stage)
                copies.append((c, off + first, stage, pos, count))
                out.append((stage, pos))
                pos += count
                continue
            stage = cast(Carrier, self.stage)
            copies.append((st.secondary, k * T + first, stage, pos, count))
            out.append((stage, pos))
            pos += count
            transfer = self.transfers.get(k)
            if transfer is None and self.req.session is not None:
                transfer = _h.Transfer(self.req.session, type(st.secondary), _route_class(type(st.secondary),
                                                                                          type(stage)),
                                       (Shape(list(st.tile)),))
                transfer.submitted()
                self.transfers[k] = transfer
            if last and transfer is not None:
                finishing.append(k)
        if copies:
            ok = False
            try:
                with _Access(st.tokens_all()):
                    native = [sp for sp in copies if _native_pair(sp[0], sp[2])]
                    if native:
                        _gather_spans(native)
                    for sp in copies:
                        if not _native_pair(sp[0], sp[2]):
                            _route_copy(*sp)
                ok = True
            finally:
                for k in finishing if ok else list(self.transfers):
                    self.transfers.pop(k).finished(ok)
        return out

    def as_primary(self, result: Carrier) -> Carrier:
        """A result the operation computed in CPU (the primary's class has no
        host storage the kernels write), copied into a fresh carrier of the
        primary's class; ``result`` is released."""
        st = self.te._st
        n = result.size()
        out = st.primary_proto.allocate_like(n, empty=True)
        try:
            _route_copy(result, 0, out, 0, n)
        except BaseException:
            out.release()
            raise
        result.release()
        return out

    def close(self, ok: bool) -> None:
        """Ends the request: the policy's plan commits when ok; waits for its
        promotions (a failed one raises)."""
        if self.closed:
            return
        self.closed = True
        self.ok = bool(ok)
        for transfer in self.transfers.values():
            transfer.finished(False)  # (a part never read: the operation stopped early)
        self.transfers.clear()
        for buf in (self.stage, self.zeros):
            if buf is not None:
                buf.release()
        self.stage = self.zeros = None
        self.req.seal()
        try:
            self.req.handle.wait()
        except _Failed:
            pass


class _Failed(Exception):
    """The operation failed: its reader commits no residency change."""


def tile_reader(te: TiledEvictable, purpose: str) -> Any:
    return _TileReader(te, purpose)
