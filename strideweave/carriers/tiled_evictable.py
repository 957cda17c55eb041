"""TiledEvictable: a carrier whose tiles live independently on a primary
(compute) tier or a secondary (backing) tier, with asynchronous residency,
projection (gather of selected tiles into a compact Tensor) and scatter.

Normative: ``shared/spec/tiled-carrier-composition.md`` and API.md section 13.

Design notes (decisions this first cut makes):

* TiledEvictable is a *definition-backed* carrier: its slot storage is a
  ``StorageProvider`` registered with ``register_carrier_definition`` (no
  routes, no elementwise fallback), so public moves into or out of it raise
  ``NotImplementedError`` naming both classes and the legacy registry refuses
  it. Its own ``__init__`` takes the tiers and geometry and then builds the
  base as ``Carrier.__init__(slots, dtype=..., mutable=True)``, which is the
  definition construction contract; ``new_like``/``allocate_like`` are hooks
  that build a fresh TiledEvictable with fresh tiers of the same classes.
* The tiers are claimed (ownership tokens) for the carrier's lifetime. An
  empty secondary gets its storage on first use: ``_reserve`` where the tier
  can grow in place (FileBacked), else a fresh ``allocate_like`` carrier of
  the same class, claimed too.
* Primary residency is per tile: a promoted tile gets its own private buffer
  of ``prod(tile_shape)`` slots of the primary's class (``_State.ptile``),
  and eviction gives it back (to a pool of at most ``_POOL_TILES`` buffers
  the next promotion reuses, else released), so an instance holds about
  as much primary memory as it has primary-resident tiles
  (``_primary_bytes()``). A full primary given to the constructor, and the
  full primary of a fresh result (scatter, gradients), is a *slab*: its
  tiles live there at ``k * T`` until they leave, and the slab is released
  when its last tile has left (later promotions use tile buffers).
* Every tile transfer goes the exact-pair route of its carriers
  (``dispatch_move(type(src), type(dst))``), on a worker thread holding owner
  access to the carriers it touches. Where that route is a built-in bulk span
  copy (CPU<->FileBacked, CPU->CPU) the span is copied by
  ``_core._tiled_gather`` (the same engine span plan, GIL released: a
  route ``_copy`` over an owned tier keeps the GIL); any other route runs its
  ``_copy`` on per-tile sub-Tensors. Residency state commits atomically when
  every transfer of a request has succeeded; a failed request changes nothing.
* Projection reads each selected tile from wherever it is (primary,
  secondary, or implicit zero) straight into the destination, so a cold
  projection never stages tiles in the primary. When every selected tile is
  such a native span the whole gather is one ``_tiled_gather`` call, one
  worker job for the request (tiles are still profiled pair by pair); else
  each tile is its own job, all in flight before ``project`` returns.
* Conflicts never block: a residency request overlapping tiles that pending
  work holds, a projection/scatter/slot write overlapping a pending residency
  request, and ``release()`` with pending work all raise ``RuntimeError``
  telling the caller to ``wait()`` first.
* Workers are daemon threads; at exit pending requests get at most 10 s,
  after a fork they fail in the child with RuntimeError ("pending at fork").
* Completion handles are the native ``AwaitProjection`` / ``AwaitResidency``
  / ``AwaitMove`` kinds, created and finished through private ``_core`` hooks
  (see ``_tiled_handles``). Each tile transfer is profiled as a
  ``move.submit`` / ``move.complete`` pair of its request.

Expert routing (64 experts of 1024 x 1024 weights on disk, a router picks a
few per step, the next step's experts prefetched while this step computes)::

    te = TiledEvictable(CPU(0), FileBacked(dtype=DType.Float32), (64, 1, 1), (1, 1024, 1024))
    weights = Tensor(te, 0, te.canonical_layout())       # the full logical (64, 1024, 1024) tensor
    ...                                                   # fill it (slot writes, scatter)
    te.evict(TileSet([(e, 0, 0) for e in range(64)]))     # all cold
    prefetch = te.promote_async(TileSelection([next_experts, [0], [0]]))
    chosen = te.project(weights, TileSelection([experts, [0], [0]])).wait()   # compact (k, 1024, 1024)
    y = relu(mul(chosen, x))                              # ordinary CPU ops, gather node in the graph
    prefetch.wait()
"""
from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING, Any, Iterable, List, NoReturn, Optional, Sequence, Tuple, Union

from .._core import AwaitProjection, AwaitResidency, Carrier, ElementwiseMoveOperation, Evictable, Layout  # noqa: F401
from .._core import AwaitMove, DType, Tensor
from .._core import is_grad_enabled, set_grad_enabled
from . import _tiled_handles as _h
from ._tiled_copies import _gather_tile, _ProjectOperation, _scatter_tile, _ScatterOperation
from ._tiled_copies import _sum_gradients as _sum_tile_gradients
from ._tiled_direct import tile_reader as _tile_reader
from ._tiled_geometry import TileGeometry, canonical_layout
from ._tiled_values import ResidencyPlan, ResidencyPolicy, TileSelection, TileSet, TileState, _encode
from ._tiled_work import (_IMPLICIT, _INVALID, _POOL_TILES, _PRIMARY, _SECONDARY, _Access, _gather_spans,
                          _native_pair, _Request, _route_copy, _State, _tile_coord, _zero_of)
from .extension import CarrierDefinition, StorageProvider, register_carrier_definition

if TYPE_CHECKING:
    from types import NotImplementedType

__all__ = ["TiledEvictable", "TileSelection", "TileSet", "ResidencyPlan", "ResidencyPolicy", "TileState",
           "AwaitProjection", "AwaitResidency"]

def _check_extent_tuple(value: Iterable[Any], name: str) -> Tuple[int, ...]:
    try:
        items = tuple(value)
    except TypeError:
        raise TypeError(f"TiledEvictable {name} must be a sequence of ints, not {type(value).__name__}") from None
    out = []
    for x in items:
        if isinstance(x, bool) or not hasattr(type(x), "__index__"):
            raise TypeError(f"TiledEvictable {name} entries must be ints, not {type(x).__name__}")
        out.append(int(x.__index__()))
    return tuple(out)


# ---------------------------------------------------------------- storage provider

def _st_of(c: object) -> Optional[_State]:
    try:
        st: _State = object.__getattribute__(c, "_st")
        return st
    except AttributeError:
        return None


def _p_supports(c: TiledEvictable, dtype: DType) -> bool:
    st = _st_of(c)
    return st is not None and dtype is st.dtype


def _p_size(c: TiledEvictable) -> int:
    st = _st_of(c)
    return 0 if st is None or st.released else st.total


def _p_allocate(c: TiledEvictable, slots: int) -> None:
    st = _st_of(c)
    if st is None or slots != st.total:
        raise TypeError("TiledEvictable is built from its tiers: TiledEvictable(primary, secondary, grid_shape, "
                        "tile_shape)")


def _p_release(c: TiledEvictable) -> None:
    st = _st_of(c)
    if st is not None:
        c._release_tiers()


def _p_read(c: TiledEvictable, i: int) -> Any:
    return c._read_slot(i)


def _p_write(c: TiledEvictable, i: int, value: Any) -> None:
    c._write_slot(i, value)


def _nothing() -> None:
    pass


class TiledEvictable(Carrier):
    """A carrier of ``prod(grid_shape) * prod(tile_shape)`` slots split into
    tiles that are independently resident on ``primary`` or ``secondary``.

    ``TiledEvictable(primary, secondary, grid_shape, tile_shape, *,
    residency_policy=None)``: both tiers are live, unowned, publicly mutable
    carriers of one dtype, each empty or exactly the full slot count; the
    TiledEvictable claims both until released.
    """

    # Set once by __init__ (object.__setattr__); the StorageProvider callbacks
    # find it through _st_of().
    _st: _State

    def __init__(self, primary: Carrier, secondary: Carrier, grid_shape: Iterable[int], tile_shape: Iterable[int], *,
                 residency_policy: Optional[ResidencyPolicy] = None) -> None:
        if _st_of(self) is not None:
            raise RuntimeError("TiledEvictable.__init__() cannot be called twice")
        for name, tier in (("primary", primary), ("secondary", secondary)):
            if not isinstance(tier, Carrier):
                raise TypeError(f"TiledEvictable {name} must be a Carrier instance, not {type(tier).__name__}")
            if isinstance(tier, (Evictable, TiledEvictable)):
                raise TypeError(f"TiledEvictable {name} cannot be a dependent carrier ({type(tier).__name__})")
        if primary is secondary:
            raise ValueError("TiledEvictable primary and secondary must be distinct carriers")
        grid = _check_extent_tuple(grid_shape, "grid_shape")
        tile = _check_extent_tuple(tile_shape, "tile_shape")
        if residency_policy is not None and (isinstance(residency_policy, type) or not isinstance(
                residency_policy, ResidencyPolicy) or not callable(getattr(residency_policy, "plan", None))):
            what = (f"the class {residency_policy.__name__} (pass an instance)" if isinstance(residency_policy, type)
                    else type(residency_policy).__name__)
            raise TypeError("TiledEvictable residency_policy must implement ResidencyPolicy "
                            f"(plan(required, purpose)), not {what}")
        for name, tier in (("primary", primary), ("secondary", secondary)):
            if tier.is_released():
                raise RuntimeError(f"TiledEvictable {name} {type(tier).__name__} carrier is released")
            if tier.is_owned():
                raise RuntimeError(f"TiledEvictable {name} {type(tier).__name__} carrier is owned by another "
                                   "carrier or a pending move")
        dtype = primary.dtype()
        if secondary.dtype() is not dtype:
            raise TypeError(f"TiledEvictable tiers must have one dtype: primary {primary.dtype()!r}, "
                            f"secondary {secondary.dtype()!r}")
        if not grid or len(grid) != len(tile):
            raise ValueError(f"TiledEvictable grid_shape {grid} and tile_shape {tile} must have one non-zero rank")
        if any(x <= 0 for x in grid + tile):
            raise ValueError(f"TiledEvictable extents must be positive: grid_shape {grid}, tile_shape {tile}")
        total = prod(grid) * prod(tile)
        for name, tier in (("primary", primary), ("secondary", secondary)):
            n = tier.size()
            if n not in (0, total):
                raise ValueError(f"TiledEvictable {name} has {n} slots; it must be empty or have exactly "
                                 f"prod(grid_shape) * prod(tile_shape) = {total}")
            if not tier.is_mutable():
                raise RuntimeError(f"TiledEvictable {name} {type(tier).__name__} carrier is not mutable")
        st = _State(dtype, grid, tile, primary, secondary, residency_policy)
        if primary.size():
            st.loc, st.dirty = [_PRIMARY] * st.N, [True] * st.N
        elif secondary.size():
            st.loc, st.dirty = [_SECONDARY] * st.N, [False] * st.N
        else:
            st.loc, st.dirty = [_IMPLICIT] * st.N, [False] * st.N
        object.__setattr__(self, "_st", st)
        st.claim(primary)
        try:
            st.claim(secondary)
        except BaseException:
            primary._relinquish_ownership(st.token(primary))
            raise
        try:
            super().__init__(total, dtype=dtype, mutable=True)
        except BaseException:
            for c, tok in st.tokens_all():
                c._relinquish_ownership(tok)
            st.tokens.clear()
            raise

    # ------------------------------------------------------------ geometry

    @property
    def grid_shape(self) -> Tuple[int, ...]:
        return self._st.grid

    @property
    def tile_shape(self) -> Tuple[int, ...]:
        return self._st.tile

    @property
    def primary(self) -> Carrier:
        """The primary tier's carrier: the full slab while one holds tiles,
        else an empty carrier of the primary's class (promoted tiles live in
        private per-tile buffers of that class)."""
        return self._st.primary

    def _primary_bytes(self) -> int:
        """Bytes of primary storage this instance holds: the per-tile
        buffers of resident tiles, the pool of freed ones, and a live slab."""
        st = self._st
        with st.lock:
            slots = sum(c.size() for c in st.ptile.values()) + sum(c.size() for c in st.pool)
            if not st.primary.is_released():
                slots += st.primary.size()
        bits = st.dtype.bits
        return slots * (bits or 8) // 8  # (a dtype without bits has none native: count slots)

    @property
    def secondary(self) -> Carrier:
        return self._st.secondary

    @property
    def residency_policy(self) -> Optional[ResidencyPolicy]:
        return self._st.policy

    def canonical_layout(self) -> Layout:
        """The compatible Layout of the full logical Tensor: mode i is
        (tile_shape[i], grid_shape[i])."""
        return canonical_layout(self._st.grid, self._st.tile)

    def _coord_arg(self, t: Iterable[Any]) -> Tuple[int, ...]:
        try:
            items = tuple(t)
        except TypeError:
            raise TypeError(f"a tile coordinate must be a tuple of ints, not {type(t).__name__}") from None
        for x in items:
            if isinstance(x, bool) or not hasattr(type(x), "__index__"):
                raise TypeError(f"a tile coordinate must be a tuple of ints, not {t!r}")
        coord = tuple(int(x.__index__()) for x in items)
        grid = self._st.grid
        if len(coord) != len(grid) or any(not 0 <= x < e for x, e in zip(coord, grid)):
            raise ValueError(f"tile coordinate {coord} is not in the tile grid {grid}")
        return coord

    def tile_state(self, t: Iterable[int]) -> TileState:
        """Residency metadata of tile t (a grid coordinate)."""
        coord = self._coord_arg(t)
        self._check_live()
        st = self._st
        with st.lock:
            k = _encode(coord, st.grid)
            loc = st.loc[k]
            return TileState(location=loc, valid=loc != _INVALID, dirty=st.dirty[k])

    def _check_live(self) -> None:
        if self._st.released:
            raise RuntimeError("TiledEvictable carrier is released")

    def _geometry(self, tensor: Tensor) -> TileGeometry:
        st = self._st
        lay, off = tensor.layout, tensor.offset
        last = st.last_geometry
        if last is not None and last[0] is lay and last[1] == off:
            return last[2]  # the same Layout object again (a Tensor keeps its own): no key to build
        key = (off, repr(lay))
        g = st.geometry_cache.get(key)
        if g is None:
            g = TileGeometry(lay, off, st.grid, st.tile)
            if len(st.geometry_cache) > 64:
                st.geometry_cache.clear()
            st.geometry_cache[key] = g
        st.last_geometry = (lay, off, g)  # (a Layout refers to nothing: no cycle)
        return g

    def _dense_layout(self, cgrid: Tuple[int, ...]) -> Layout:
        """canonical_layout(cgrid, tile_shape), kept per compact grid (a
        Layout is an immutable value: results may share one)."""
        st = self._st
        lay = st.dense_layouts.get(cgrid)
        if lay is None:
            lay = canonical_layout(cgrid, st.tile)
            if len(st.dense_layouts) > 64:
                st.dense_layouts.clear()
            st.dense_layouts[cgrid] = lay
        return lay

    def _full_tensor_arg(self, tensor: object, what: str) -> TileGeometry:
        if not isinstance(tensor, Tensor):
            raise TypeError(f"{what} must be a Tensor, not {type(tensor).__name__}")
        if tensor.carrier is not self:
            raise TypeError(f"{what} must be backed by this TiledEvictable, not by "
                            f"{type(tensor.carrier).__name__}")
        self._check_live()
        return self._geometry(tensor)

    # ------------------------------------------------------------ tiers

    def _ensure_tier(self, which: str) -> Carrier:
        """The tier with full storage, giving an empty tier its slots."""
        st = self._st
        tier = st.primary if which == _PRIMARY else st.secondary
        if tier.size() == st.total:
            return tier
        grown = False
        try:
            with _Access([(tier, st.token(tier))]):
                grown = bool(tier._reserve(st.total))
        except Exception:
            grown = False
        if grown and tier.size() == st.total:
            return tier
        # A fresh primary is zero-filled: fresh results rely on zero regions.
        fresh = tier.allocate_like(st.total, empty=which != _PRIMARY)
        st.claim(fresh)
        if which == _PRIMARY:
            st.primary = fresh
        else:
            st.secondary = fresh
        return fresh

    def _tile_buffer(self, zero: bool) -> Tuple[Carrier, bool]:
        """(buffer, is_zero): private primary storage for one tile (lock
        held), from the pool or fresh (zero-filled when zero)."""
        st = self._st
        if st.pool:
            return st.pool.pop(), False
        buf = st.primary_proto.allocate_like(st.T, empty=not zero)
        # Claimed like the tiers: only this instance's requests (with owner
        # access) touch it, so its copies may run without the GIL.
        st.claim(buf)
        return buf, zero

    def _recycle(self, buf: Carrier) -> None:
        """A tile buffer no tile uses any more goes to the pool or is released."""
        st = self._st
        if len(st.pool) < _POOL_TILES and not st.released:
            st.pool.append(buf)
        else:
            st.doomed.append(buf)  # released by _after_request(), outside owner access

    def _after_request(self) -> None:
        """Gives back what finished requests freed (lock held, outside owner
        access, and only once no request is pending: relinquishing needs no
        access scope open on the carrier): tile buffers beyond the pool, and
        the slab once no tile lives there."""
        st = self._st
        if st.deferred:
            self._run_deferred_evictions()
        if st.pending:
            return  # their workers hold owner access to every claimed carrier: the last one reaps
        while st.doomed:
            buf = st.doomed.pop()
            entry = st.tokens.pop(id(buf), None)
            if entry is not None:
                buf._relinquish_ownership(entry[1])
            buf.release()
        self._maybe_free_slab()

    def _run_deferred_evictions(self) -> None:
        """Evicts the tiles a policy plan's eviction deferred (lock held,
        outside owner access) once no pending request reads them; a failed
        copy leaves its tile primary and dirty."""
        st = self._st
        for k in [k for k in st.deferred if not st.readers.get(k) and k not in st.writers and k not in st.retained]:
            st.deferred.discard(k)
            if st.released or st.loc[k] != _PRIMARY:
                continue
            try:
                if st.dirty[k]:
                    self._ensure_tier(_SECONDARY)
                    with _Access(st.tokens_all()):
                        self._evict_copy(k)
            except Exception:
                continue
            st.loc[k], st.dirty[k] = _SECONDARY, False
            self._leave_primary(k)

    def _leave_primary(self, k: int) -> None:
        """Tile k stopped being primary-resident (lock held): its tile buffer
        is recycled; a slab tile is freed with the slab (_maybe_free_slab)."""
        buf = self._st.ptile.pop(k, None)
        if buf is not None:
            self._recycle(buf)

    def _maybe_free_slab(self) -> None:
        """Releases the slab once no tile lives in it (lock held, outside
        owner access), leaving an empty carrier of its class in its place."""
        st = self._st
        slab = st.primary
        if st.released or slab.is_released() or slab.size() != st.total:
            return
        ptile, loc = st.ptile, st.loc
        if any(loc[k] == _PRIMARY and k not in ptile for k in range(st.N)):
            return
        empty = slab.allocate_like(0)
        st.claim(empty)
        _, tok = st.tokens.pop(id(slab))
        if st.primary_proto is slab:
            st.primary_proto = empty
        st.primary = empty
        slab._relinquish_ownership(tok)
        slab.release()

    def _promotions(self, req: _Request, ks: Sequence[int]) -> Tuple[List[Any], Any]:
        """Stages the promotion of tiles ks (secondary or implicit) into fresh
        tile buffers (lock held): (spans for req.submit_spans, commit function).
        Buffers not committed by the request's end are recycled."""
        st = self._st
        T = st.T
        staged = {}
        for k in ks:
            staged[k] = (st.loc[k],) + self._tile_buffer(st.loc[k] == _IMPLICIT)

        def recycle() -> None:
            for _, buf, _z in staged.values():
                self._recycle(buf)
            staged.clear()
        req.finalizers.append(recycle)
        spans = []
        for k, (loc, buf, is_zero) in staged.items():
            if loc == _IMPLICIT and is_zero:
                continue  # a fresh buffer is already zero: nothing to transfer
            src, off = (st.secondary, k * T) if loc == _SECONDARY else (self._zeros(), 0)
            spans.append((src, off, buf, 0, T))

        def commit() -> None:
            for k, (loc, buf, _z) in staged.items():
                st.ptile[k] = buf
                st.loc[k], st.dirty[k] = _PRIMARY, loc == _IMPLICIT
            staged.clear()
        return spans, commit

    def _take_stage(self, need: int) -> Tuple[Carrier, bool]:
        """(staging carrier of at least need slots, is_zero) for a projection
        into a caller's destination (lock held): a kept one, else fresh."""
        st = self._st
        for i, c in enumerate(st.stages):
            if c.size() >= need:
                return st.stages.pop(i), False
        return st.primary_proto.allocate_like(need), True

    def _give_stage(self, c: Carrier) -> None:
        """Keeps one staging carrier for the next projection into a caller's
        destination; releases any other (lock held, after the request)."""
        st = self._st
        if st.released or st.stages or c.is_released():
            c.release()
        else:
            st.stages.append(c)

    def _zeros(self) -> Carrier:
        st = self._st
        if st.zeros is None:
            st.zeros = st.primary_proto.allocate_like(st.T)
            st.claim(st.zeros)  # read by concurrent promotion jobs under owner access
        return st.zeros

    def _release_tiers(self) -> None:
        st = self._st
        st.released = True
        for c, tok in st.tokens_all():
            try:
                c._relinquish_ownership(tok)
            except Exception:
                pass
            try:
                c.release()
            except Exception:
                pass
        st.tokens.clear()
        for c in list(st.ptile.values()) + st.pool + st.doomed + st.stages:
            c.release()
        st.ptile.clear()
        st.pool.clear()
        st.doomed.clear()
        st.stages.clear()
        if st.zeros is not None:
            st.zeros.release()
            st.zeros = None
        st.loc = [_INVALID] * st.N

    # ------------------------------------------------------------ carrier hooks

    def _release(self) -> None:
        st = self._st
        with st.lock:
            if st.pending:
                raise RuntimeError(f"cannot release TiledEvictable: {len(st.pending)} tiled request(s) are still "
                                   "pending; wait() for them first")
        # The StorageProvider's release() then releases both tiers.

    def dlpack_info(self) -> NoReturn:
        raise BufferError("DLPack is not supported for TiledEvictable carriers (tiles live on separate tiers); "
                          "project() the tiles you need into a CPU tensor and export that "
                          "(a public move of a TiledEvictable tensor is refused)")

    def new_like(self, values: Iterable[Any], *, mutable: bool = True, dtype: Optional[DType] = None) -> TiledEvictable:
        """A fresh TiledEvictable of the same geometry and tier classes holding
        values (all-zero tiles stay implicit zero)."""
        st = self._st
        vals = list(values)
        if len(vals) != st.total:
            raise ValueError(f"TiledEvictable.new_like() needs exactly {st.total} values, got {len(vals)}")
        if dtype is not None and dtype is not st.dtype:
            raise ValueError("TiledEvictable.new_like() keeps the tiers' dtype")
        te = TiledEvictable(st.primary_proto.allocate_like(0), st.secondary_proto.allocate_like(0), st.grid,
                            st.tile, residency_policy=st.policy)
        T = st.T
        nst = te._st
        prim: Optional[Carrier] = None
        for k in range(st.N):
            chunk = vals[k * T:(k + 1) * T]
            if all(v == 0 for v in chunk):
                continue
            if prim is None:
                prim = te._ensure_tier(_PRIMARY)
            with _Access([(prim, nst.token(prim))]):
                for j, v in enumerate(chunk):
                    prim[k * T + j] = v
            nst.loc[k], nst.dirty[k] = _PRIMARY, True
        return te

    def allocate_like(self, size: int, *, mutable: bool = True, dtype: Optional[DType] = None,
                      empty: bool = False) -> TiledEvictable:
        st = self._st
        if size != st.total:
            raise ValueError(f"TiledEvictable.allocate_like() allocates exactly {st.total} slots, not {size}")
        return TiledEvictable(st.primary_proto.allocate_like(0), st.secondary_proto.allocate_like(0), st.grid,
                              st.tile, residency_policy=st.policy)

    # ------------------------------------------------------------ slots

    def _check_all_readable(self) -> None:
        """Every tile can be read now (caller holds the state lock): the
        carrier is live, no tile is under a pending residency request and none
        is invalid; RuntimeError otherwise (never waits)."""
        st = self._st
        self._check_live()
        for k in range(st.N):
            if self._in_residency_request(k):
                raise RuntimeError(self._busy_message(k) + " (a residency request)")
            if st.loc[k] == _INVALID:
                raise RuntimeError(f"tile {_tile_coord(k, st.grid)} of this TiledEvictable is invalid: "
                                   "it holds no value")

    def _in_residency_request(self, k: int) -> bool:
        """Whether tile k is changed by a pending promote_async/evict_async
        (lock held). A policy promotion of another projection, scatter or
        operation is no conflict for readers: the tile stays readable where
        it is until that request commits (a policy cannot define correctness)."""
        w = self._st.writers.get(k)
        return w is not None and isinstance(w.handle, AwaitResidency)

    def _busy_message(self, k: int) -> str:
        return (f"tile {_tile_coord(k, self._st.grid)} of this TiledEvictable is used by a pending tiled request; "
                "call wait() on that request first")

    def _read_slot(self, i: int) -> Any:
        st = self._st
        k = i // st.T
        loc = st.loc[k]
        if loc == _PRIMARY:
            c, off = st.prim(k)
            return c[off + i - k * st.T]
        if loc == _SECONDARY:
            return st.secondary[i]
        if loc == _IMPLICIT:
            return _zero_of(st.dtype)
        raise RuntimeError(f"tile {_tile_coord(k, st.grid)} of this TiledEvictable is invalid: it holds no value")

    def _write_slot(self, i: int, value: Any) -> None:
        st = self._st
        k = i // st.T
        with st.lock:
            if k in st.writers or st.readers.get(k):
                raise RuntimeError(self._busy_message(k))
            loc = st.loc[k]
            if loc == _INVALID:
                raise RuntimeError(f"tile {_tile_coord(k, st.grid)} of this TiledEvictable is invalid: scatter a "
                                   "value into it first")
            if loc != _PRIMARY:
                buf, is_zero = self._tile_buffer(loc == _IMPLICIT)
                try:
                    zeros = self._zeros() if loc == _IMPLICIT and not is_zero else None  # claimed before access
                    with _Access(st.tokens_all()):
                        if loc == _SECONDARY:
                            _route_copy(st.secondary, k * st.T, buf, 0, st.T)
                        elif zeros is not None:
                            _route_copy(zeros, 0, buf, 0, st.T)
                except BaseException:
                    self._recycle(buf)
                    self._after_request()
                    raise
                st.ptile[k] = buf
                st.loc[k] = _PRIMARY
                st.dirty[k] = loc == _IMPLICIT
            c, off = st.prim(k)
            with _Access([(c, st.token(c))]):
                c[off + i - k * st.T] = value
            st.dirty[k] = True
            self._after_request()

    def _evict_copy(self, k: int) -> None:
        st = self._st
        c, off = st.prim(k)
        _route_copy(c, off, st.secondary, k * st.T, st.T)

    # ------------------------------------------------------------ residency

    def _tileset_arg(self, tiles: object) -> TileSet:
        if isinstance(tiles, TileSelection):
            return tiles.tile_set
        if not isinstance(tiles, TileSet):
            raise TypeError(f"tiles must be a TileSet or a TileSelection, not {type(tiles).__name__}")
        return tiles

    def _residency(self, tiles: Union[TileSet, TileSelection], promote: bool) -> AwaitResidency:
        ts = self._tileset_arg(tiles)
        self._check_live()
        st = self._st
        if len(ts):
            ts._bind(st.grid)
        ords = [_encode(c, st.grid) for c in ts.coordinates]
        handle = _h.new_handle("residency")
        with st.lock:
            self._check_live()
            for k in ords:
                if k in st.writers or st.readers.get(k):
                    raise RuntimeError(self._busy_message(k))
            if promote:
                bad = [k for k in ords if st.loc[k] == _INVALID]
                if bad:
                    raise RuntimeError(f"tile {_tile_coord(bad[0], st.grid)} of this TiledEvictable is invalid: "
                                       "it has no value to promote")
                moving = [k for k in ords if st.loc[k] in (_SECONDARY, _IMPLICIT)]
            else:
                moving = [k for k in ords if st.loc[k] == _PRIMARY]
            if moving and not promote and any(st.dirty[k] for k in moving):
                self._ensure_tier(_SECONDARY)
            req = _Request(self, handle, writes=moving)
            for k in moving:
                st.writers[k] = req
            st.pending.add(req)
            if promote:
                try:
                    spans, req.commit = self._promotions(req, moving)
                except BaseException:
                    self._abort(req)
                    raise
            else:
                def commit() -> None:
                    for k in moving:
                        st.loc[k], st.dirty[k] = _SECONDARY, False
                        self._leave_primary(k)

                req.commit = commit
                spans = [st.prim(k) + (st.secondary, k * st.T, st.T) for k in moving if st.dirty[k]]
            # All transfers are in flight before this call returns (spec): the
            # native spans as one engine call (one sequential pass, one
            # hand-off), every other tile as its own worker job.
            req.submit_spans(spans)
        req.seal()
        return handle

    def promote_async(self, tiles: Union[TileSet, TileSelection]) -> AwaitResidency:
        """Start making every tile of ``tiles`` (a TileSet, or a
        TileSelection's tile_set) valid on the primary tier."""
        return self._residency(tiles, True)

    def evict_async(self, tiles: Union[TileSet, TileSelection]) -> AwaitResidency:
        """Start moving every tile of ``tiles`` to the secondary tier
        (dirty values are written back first)."""
        return self._residency(tiles, False)

    def promote(self, tiles: Union[TileSet, TileSelection]) -> None:
        self.promote_async(tiles).wait()

    def evict(self, tiles: Union[TileSet, TileSelection]) -> None:
        self.evict_async(tiles).wait()

    # ------------------------------------------------------------ policy

    def _consult_policy(self, required: TileSet, purpose: str) -> Optional[ResidencyPlan]:
        policy = self._st.policy
        if policy is None or not len(required):
            return None
        plan = policy.plan(required, purpose)
        if not isinstance(plan, ResidencyPlan):
            raise TypeError(f"ResidencyPolicy.plan() must return a ResidencyPlan, not {type(plan).__name__}")
        plan._bind(self._st.grid)
        return plan

    def _apply_plan_promotions(self, req: _Request, plan: Optional[ResidencyPlan]) -> Tuple[List[Any], Any]:
        """Adds the plan's promotions of idle tiles to req (lock held):
        (transfer spans, commit function) as _promotions gives them."""
        if plan is None or (not len(plan.promote) and not len(plan.retain)):
            return [], _nothing  # (no staging, no finalizer: the common request without a policy)
        st = self._st
        out = []
        if len(plan.promote):
            for c in plan.promote.coordinates:
                k = _encode(c, st.grid)
                # A tile other pending work reads may be promoted: its value
                # stays where they read it until this request commits.
                if k in st.writers:
                    continue
                if st.loc[k] in (_SECONDARY, _IMPLICIT):
                    out.append(k)
        for k in out:
            st.writers[k] = req
            req.writes.append(k)
        staged = self._promotions(req, out)
        if plan is not None and len(plan.retain):
            # Retained tiles: no other plan evicts them before req is terminal
            # (such an eviction is deferred, see _apply_plan_evictions).
            kept = [_encode(c, st.grid) for c in plan.retain.coordinates]
            for k in kept:
                st.retained[k] = st.retained.get(k, 0) + 1

            def unretain() -> None:
                for k in kept:
                    n = st.retained.get(k, 0) - 1
                    if n > 0:
                        st.retained[k] = n
                    else:
                        st.retained.pop(k, None)
            req.finalizers.append(unretain)
        return staged

    def _apply_plan_evictions(self, plan: Optional[ResidencyPlan], keep: Iterable[int] = ()) -> None:
        """Evicts the plan's idle primary tiles now (lock held, owner access);
        one that other pending work reads or a pending plan retains is
        deferred until that ends."""
        st = self._st
        if plan is None:
            return
        # At its commit the request still counts as a reader of its own
        # tiles; it no longer needs them, so they are evicted (spec).
        own = set(st.committing.reads) if st.committing is not None else set()
        for c in plan.evict.coordinates:
            k = _encode(c, st.grid)
            if k in keep or k in st.writers or st.loc[k] != _PRIMARY:
                continue
            if st.readers.get(k, 0) > (k in own) or k in st.retained:
                # Live work still reads it, or a pending request's plan
                # retains it: evicted once that ends (_after_request).
                st.deferred.add(k)
                continue
            if st.dirty[k]:
                self._ensure_tier(_SECONDARY)
                self._evict_copy(k)
            st.loc[k], st.dirty[k] = _SECONDARY, False
            self._leave_primary(k)

    # ------------------------------------------------------------ projection

    def _destination_arg(self, destination: object, need: int) -> None:
        st = self._st
        if not isinstance(destination, Carrier):
            raise TypeError(f"destination must be a Carrier instance, not {type(destination).__name__}")
        if isinstance(destination, (TiledEvictable, Evictable)):
            raise TypeError(f"destination cannot be a dependent carrier ({type(destination).__name__})")
        want = type(st.primary_proto)
        if type(destination) is not want:
            raise TypeError(f"destination must be a {want.__name__} carrier (the primary tier's class), not "
                            f"{type(destination).__name__}")
        if destination.is_released():
            raise RuntimeError(f"destination {type(destination).__name__} carrier is released")
        if not destination.is_mutable():
            raise RuntimeError(f"destination {type(destination).__name__} carrier is not mutable")
        if destination.dtype() is not st.dtype:
            raise TypeError(f"destination dtype {destination.dtype()!r} must match the TiledEvictable dtype "
                            f"{st.dtype!r}")
        n = destination.size()
        if n < need and not (n == 0 and destination._reserve(need)):
            raise ValueError(f"destination {type(destination).__name__} carrier is too small: {n} slots for "
                             f"{need} selected slots")

    def project(self, tensor: Tensor, selection: TileSelection,
                destination: Optional[Carrier] = None) -> AwaitProjection:
        """Start gathering the tiles of ``selection`` of the full ``tensor``
        into one compact dense Tensor; returns an AwaitProjection."""
        geom = self._full_tensor_arg(tensor, "project() tensor")
        if not isinstance(selection, TileSelection):
            raise TypeError(f"project() selection must be a TileSelection, not {type(selection).__name__}")
        st = self._st
        selection._bind(st.grid)
        cgrid = selection.compact_grid_shape
        coords = selection.coordinates
        need = len(coords) * st.T
        if destination is not None:
            self._destination_arg(destination, need)
        # (the TileSet is built only for a policy to read)
        plan = None if st.policy is None else self._consult_policy(selection.tile_set, "projection")
        ords = [_encode(c, st.grid) for c in coords]
        handle = _h.new_handle("projection")
        with st.lock:
            self._check_live()
            for k in ords:
                if self._in_residency_request(k):
                    raise RuntimeError(self._busy_message(k) + " (a residency request)")
            bad = [k for k in ords if st.loc[k] == _INVALID]
            if bad:
                raise RuntimeError(f"tile {_tile_coord(bad[0], st.grid)} of this TiledEvictable is invalid: "
                                   "it holds no value to project")
            fresh = destination is None
            # A fresh result every selected tile overwrites needs no zeroing
            # (a reused heap buffer would be memset, 16 MiB in a millisecond
            # or two); one with implicit (zero) tiles is allocated zeroed.
            every_tile_copied = all(st.loc[k] != _IMPLICIT for k in ords)
            dest = (st.primary_proto.allocate_like(need, empty=every_tile_copied) if destination is None
                    else destination)
            # A caller's destination is written only at commit, from a staging
            # carrier: a request that fails leaves it untouched, values and
            # version (spec: no partial destination). The staging carrier is
            # kept for the next such request (its pages stay touched: a
            # caller reusing one destination per step pays no page faults).
            target, target_zero = (dest, True) if fresh else self._take_stage(need)
            claims = [(dest, dest._claim_ownership())]
            if not fresh:  # the staging target too: concurrent tile jobs write it under owner access
                claims.append((target, target._claim_ownership()))
            req = _Request(self, handle, reads=ords, claims=claims)
            if not fresh:
                req.finalizers.append(lambda: self._give_stage(target))
            for k in ords:
                st.readers[k] = st.readers.get(k, 0) + 1
            st.pending.add(req)
            # Where each selected tile's value is now (no eviction can take a
            # tile this request reads before it is terminal).
            sources = [None if st.loc[k] == _IMPLICIT else
                       (st.prim(k) if st.loc[k] == _PRIMARY else (st.secondary, k * st.T)) for k in ords]
            if not target_zero:  # a reused staging carrier: implicit tiles are copied from zeros
                zeros = self._zeros()
                sources = [(zeros, 0) if src is None else src for src in sources]
            try:
                promo_spans, promo_commit = self._apply_plan_promotions(req, plan)
            except BaseException:
                self._abort(req)
                raise
            dense = self._dense_layout(cgrid)
            want_grad = req.grad_mode and tensor.is_differentiable()

            def commit() -> Tensor:
                if plan is not None:
                    promo_commit()
                    self._apply_plan_evictions(plan)
                if not fresh:
                    _route_copy(target, 0, dest, 0, need)
                result = Tensor(dest, 0, dense)
                if want_grad:
                    node = _ProjectOperation(self, tensor, selection, geom, result)
                    prev = is_grad_enabled()
                    set_grad_enabled(True)
                    try:
                        result = node.forward(tensor)
                    finally:
                        set_grad_enabled(prev)
                return result

            req.commit = commit
            live = [(j, c, src) for j, (c, src) in enumerate(zip(coords, sources)) if src is not None]
            if live and (geom.canonical or all(geom.tile_is_canonical(c) for _, c, _s in live)) and all(
                    _native_pair(tier, target) for tier in {id(src[0]): src[0] for _, _c, src in live}.values()):
                # Every tile is a native span (the cold case: FileBacked ->
                # CPU): one engine call reads them all into the compact
                # target without the GIL, dealt to the cores.
                copies = [(src[0], src[1], target, j * st.T, st.T) for j, _, src in live]
                req.submit_group(lambda: _gather_spans(copies), [(src[0], target, None) for _, _, src in live])
                live = []
            jobs = []
            for j, c, src in live:
                tier, base = src

                def gather_job(c: Tuple[int, ...] = c, j: int = j, tier: Carrier = tier, base: int = base) -> None:
                    _gather_tile(geom, c, tier, target, j * st.T, base)
                jobs.append((gather_job, tier, target,
                             None if geom.tile_is_canonical(c) else ElementwiseMoveOperation))
            for fn, job_src, job_dst, impl in jobs:
                req.submit(fn, job_src, job_dst, impl)
            if promo_spans:
                req.submit_spans(promo_spans)
        req.seal()
        return handle

    def _abort(self, req: _Request) -> None:
        """Undoes a request's registration before any job was submitted (lock held)."""
        req.unregister()

    # ------------------------------------------------------------ direct operations (hooks)

    def _check_operand(self, tensor: object) -> None:
        """The validation half of ``_operand`` (TypeError, RuntimeError when
        released, ValueError unless tile-footprint compatible): a native
        direct operation validates every operand before reading any tile."""
        self._full_tensor_arg(tensor, "operand")

    def _operand(self, tensor: Tensor, purpose: str = "operation") -> Tensor:
        """Blocking: an ordinary Tensor with ``tensor``'s Layout over a fresh
        primary-class carrier holding every tile's value (a compatible Layout
        reaches exactly the carrier's slots, so copying the physical tiles
        preserves every logical value). The hook a native direct operation
        (add, mul, relu, reduce_sum on a full TiledEvictable Tensor) calls to
        obtain its dense operand, with purpose ``"operation"`` in forward and
        ``"backward"`` when a backward reads the saved input's values; it
        records no autograd node. A tile under a pending residency request
        raises RuntimeError (wait() for that request first)."""
        if purpose not in ("operation", "backward"):
            raise ValueError(f"_operand() purpose must be 'operation' or 'backward', not {purpose!r}")
        self._full_tensor_arg(tensor, "operand")
        st = self._st
        plan = None if st.policy is None else self._consult_policy(
            TileSet(_tile_coord(k, st.grid) for k in range(st.N)), purpose)  # (built only for a policy)
        handle = _h.new_handle("projection")
        with st.lock:
            self._check_all_readable()
            dest = st.primary_proto.allocate_like(st.total)
            req = _Request(self, handle, reads=list(range(st.N)), claims=[(dest, dest._claim_ownership())])
            for k in req.reads:
                st.readers[k] = st.readers.get(k, 0) + 1
            st.pending.add(req)
            T = st.T
            sources = [None if st.loc[k] == _IMPLICIT else
                       (st.prim(k) if st.loc[k] == _PRIMARY else (st.secondary, k * T)) for k in range(st.N)]
            try:
                promo_spans, promo_commit = self._apply_plan_promotions(req, plan)
            except BaseException:
                self._abort(req)
                raise

            def commit() -> Tensor:
                promo_commit()
                self._apply_plan_evictions(plan)
                return Tensor(dest, 0, tensor.layout)

            req.commit = commit
            # (implicit tiles: the fresh destination is zero)
            req.submit_spans([src + (dest, k * T, T) for k, src in enumerate(sources) if src is not None])
            req.submit_spans(promo_spans)
        req.seal()
        return handle.wait()

    def _tile_reader(self, purpose: str = "operation") -> Any:
        """The hook a native direct operation (CPU primary) uses to read
        every tile about a tile at a time (see ``_tiled_direct``):
        ``tiles(spans)`` gives ``(carrier, offset)`` per span of a tile in the
        primary's class, ``close(ok)`` ends the request. Conflicts with a
        pending residency request raise RuntimeError at once, like
        ``_operand``."""
        return _tile_reader(self, purpose)

    def _gradient(self, tensor: Tensor, dense_grad: object, zero_tiles: Optional[Iterable[int]] = None,
                  adopt: bool = False) -> Tensor:
        """The gradient of a full TiledEvictable Tensor from a dense
        cotangent with the same Layout (what ``_operand`` produced): a fresh
        TiledEvictable of this geometry and tier classes whose primary holds
        the cotangent's slots (primary-resident and dirty), except the tiles
        whose ordinals ``zero_tiles`` lists (all-zero slots, found by the
        caller), which stay valid implicit zero. ``adopt`` says the caller
        just allocated the cotangent's storage and hands it over: when it is
        the full primary slab this instance would allocate (its class, every
        slot, offset 0), the gradient takes it as its primary instead of a
        copy (one tensor less at the backward's peak)."""
        if not isinstance(dense_grad, Tensor) or dense_grad.layout != tensor.layout:
            raise ValueError("the dense gradient must have the operand's Layout")
        st = self._st
        zero = set(zero_tiles or ())
        src = dense_grad.carrier
        if (adopt and type(src) is type(st.primary_proto) and dense_grad.offset == 0 and src.size() == st.total
                and src.dtype() is st.dtype and src.is_mutable() and not src.is_owned() and not src.is_released()):
            if len(zero) == st.N:
                src.release()
                return Tensor(self._fresh_result(implicit=True), 0, tensor.layout)
            out = TiledEvictable(src, st.secondary_proto.allocate_like(0), st.grid, st.tile,
                                 residency_policy=st.policy)
            ost = out._st
            for k in zero:
                ost.loc[k], ost.dirty[k] = _IMPLICIT, False
            return Tensor(out, 0, tensor.layout)
        out = self._fresh_result(implicit=True)
        ost = out._st
        if len(zero) == st.N:
            return Tensor(out, 0, tensor.layout)
        T = st.T
        with ost.lock:
            prim = out._ensure_tier(_PRIMARY)
            with _Access(ost.tokens_all()):
                if not zero:
                    _route_copy(src, dense_grad.offset, prim, 0, st.total)
                k = 0
                while k < st.N:
                    if k in zero:
                        k += 1
                        continue
                    run = k  # one copy per run of non-zero tiles
                    while run < st.N and run not in zero:
                        ost.loc[run], ost.dirty[run] = _PRIMARY, True
                        run += 1
                    if zero:
                        _route_copy(src, dense_grad.offset + k * T, prim, k * T, (run - k) * T)
                    k = run
        return Tensor(out, 0, tensor.layout)

    def _sum_gradients(self, tensor: Tensor, grads: Sequence[object]) -> Union[Tensor, NotImplementedType]:
        """Hook of the native gradient accumulation for a full tensor of this
        carrier: the sum of ``grads`` as a fresh TiledEvictable-backed
        Tensor in tensor's Layout, tile by tile (untouched tiles implicit
        zero), or NotImplemented when a contribution does not fit (the
        caller then sums value by value)."""
        r = _sum_tile_gradients(self, tensor, grads)
        return NotImplemented if r is None else r

    # ------------------------------------------------------------ scatter

    def scatter(self, compact: Tensor, template: Tensor, selection: TileSelection,
                reduction: str = "replace") -> AwaitMove:
        """Start writing ``compact`` at the tiles of ``selection`` of a fresh
        TiledEvictable shaped like ``template``; returns a completion handle
        whose wait() gives the full result Tensor."""
        st = self._st
        if not isinstance(compact, Tensor):
            raise TypeError(f"scatter() compact must be a Tensor, not {type(compact).__name__}")
        if not isinstance(template, Tensor):
            raise TypeError(f"scatter() template must be a Tensor, not {type(template).__name__}")
        want = type(st.primary_proto)
        if type(compact.carrier) is not want:
            raise TypeError(f"scatter() compact must be backed by a {want.__name__} carrier (the primary tier's "
                            f"class), not {type(compact.carrier).__name__}")
        if template.carrier is not self:
            raise TypeError("scatter() template must be backed by this TiledEvictable, not by "
                            f"{type(template.carrier).__name__}")
        if not isinstance(selection, TileSelection):
            raise TypeError(f"scatter() selection must be a TileSelection, not {type(selection).__name__}")
        if reduction not in ("replace", "add"):
            raise ValueError(f"scatter() reduction must be 'replace' or 'add', not {reduction!r}")
        self._check_live()
        if compact.carrier.is_released():
            raise RuntimeError(f"scatter() compact {type(compact.carrier).__name__} carrier is released")
        if compact.dtype() is not st.dtype:
            raise TypeError(f"scatter() compact dtype {compact.dtype()!r} must match the TiledEvictable dtype "
                            f"{st.dtype!r}")
        selection._bind(st.grid)
        geom = self._geometry(template)
        cgrid = selection.compact_grid_shape
        expected = canonical_layout(cgrid, st.tile).shape
        if compact.layout.shape != expected:
            raise ValueError(f"scatter() compact shape {compact.layout.shape!r} must be the selected region's shape "
                             f"{expected!r}")
        coords = selection.coordinates
        ords = [_encode(c, st.grid) for c in coords]
        plan = None if st.policy is None else self._consult_policy(selection.tile_set, "scatter")
        handle = _h.new_handle("move")
        with st.lock:
            self._check_live()
            for k in ords:
                if self._in_residency_request(k):
                    raise RuntimeError(self._busy_message(k) + " (a residency request)")
            if reduction == "add":
                bad = [k for k in ords if st.loc[k] == _INVALID]
                if bad:
                    raise RuntimeError(f"tile {_tile_coord(bad[0], st.grid)} of the template is invalid: it "
                                       "holds no value to add to")
            out = self._fresh_result(implicit=False)
            ost = out._st
            oprim = out._ensure_tier(_PRIMARY)
            claims = []
            tok = compact.carrier._claim_ownership() if not compact.carrier.is_owned() else 0
            if tok:
                claims.append((compact.carrier, tok))
            req = _Request(self, handle, reads=ords if reduction == "add" else [], claims=claims)
            for k in req.reads:
                st.readers[k] = st.readers.get(k, 0) + 1
            st.pending.add(req)
            locs = [st.loc[k] for k in ords]
            try:
                promo_spans, promo_commit = self._apply_plan_promotions(req, plan)
            except BaseException:
                self._abort(req)
                raise
            want_grad = req.grad_mode and (compact.is_differentiable() or template.is_differentiable())
            out_tokens = ost.tokens_all()

            def commit() -> Tensor:
                promo_commit()
                for k in ords:
                    ost.loc[k], ost.dirty[k] = _PRIMARY, True
                result = Tensor(out, 0, template.layout)
                # One visible value-version step for the whole scatter.
                i0 = ords[0] * st.T
                out[i0] = out[i0]
                self._apply_plan_evictions(plan)
                if want_grad:
                    node = _ScatterOperation(self, selection, geom, reduction, result)
                    prev = is_grad_enabled()
                    set_grad_enabled(True)
                    try:
                        result = node.forward(compact, template)
                    finally:
                        set_grad_enabled(prev)
                return result

            req.commit = commit
            for j, (c, k, loc) in enumerate(zip(coords, ords, locs)):
                tier, tbase = (None, 0) if loc == _IMPLICIT else (
                    st.prim(k) if loc == _PRIMARY else (st.secondary, k * st.T))

                def job(c: Tuple[int, ...] = c, j: int = j, k: int = k, tier: Optional[Carrier] = tier,
                        tbase: int = tbase) -> None:
                    with _Access(out_tokens):
                        _scatter_tile(geom, c, compact, j, oprim, k * st.T,
                                      tier if reduction == "add" else None, reduction == "add", tbase)
                req.submit(job, compact.carrier, oprim)
            req.submit_spans(promo_spans)
        req.seal()
        return handle

    def _fresh_result(self, implicit: bool) -> "TiledEvictable":
        """A fresh TiledEvictable of this geometry and tier classes whose tiles
        are all implicit zero (implicit) or all invalid."""
        st = self._st
        te = TiledEvictable(st.primary_proto.allocate_like(0), st.secondary_proto.allocate_like(0), st.grid,
                            st.tile, residency_policy=st.policy)
        if not implicit:
            te._st.loc = [_INVALID] * st.N
        return te

    def __repr__(self) -> str:
        st = self._st
        if st.released:
            return "<TiledEvictable released>"
        counts: dict[str, int] = {}
        for loc in st.loc:
            counts[loc] = counts.get(loc, 0) + 1
        where = ", ".join(f"{n} {loc}" for loc, n in sorted(counts.items()))
        return (f"<TiledEvictable grid={st.grid} tile={st.tile} dtype={st.dtype!r} "
                f"primary={type(st.primary).__name__} secondary={type(st.secondary).__name__} tiles: {where}>")


register_carrier_definition(
    TiledEvictable,
    CarrierDefinition(StorageProvider(_p_supports, _p_size, _p_allocate, _p_release, _p_read, _p_write,
                                      elementwise_fallback=False)))
