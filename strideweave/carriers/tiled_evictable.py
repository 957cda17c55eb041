"""TiledEvictable and its value types (docs/reference.md, "TiledEvictable").

``TiledEvictable``, ``AwaitProjection`` and ``AwaitResidency`` are native
(``strideweave._core``): the tile geometry, residency state, requests and
transfers live in the engine. This module adds the immutable value types the
carrier takes and gives (``TileSelection``, an ordered Cartesian product of
tile coordinates; ``TileSet``, any finite set of them; ``ResidencyPlan``, one
policy decision; ``TileState``, one tile's residency metadata) and the
``ResidencyPolicy`` protocol, and hands the types to ``_core`` at import.

The value types read each input once (a generator works), keep nothing of it
(later changes to the input change nothing), and refuse attribute assignment
with ``dataclasses.FrozenInstanceError``.
"""
from __future__ import annotations

import itertools
import operator
from dataclasses import FrozenInstanceError, dataclass
from types import SimpleNamespace
from typing import Iterable, Iterator, Optional, Protocol, Tuple, runtime_checkable

from .. import _core
from .._core import AwaitProjection, AwaitResidency, TiledEvictable

__all__ = ["TiledEvictable", "TileSelection", "TileSet", "ResidencyPlan", "ResidencyPolicy", "TileState",
           "AwaitProjection", "AwaitResidency"]

Coord = Tuple[int, ...]


def _as_int(value: object, what: str) -> int:
    # bool is an int subclass but never a coordinate (as Layout keys refuse it).
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{what} must be an integer, not {type(value).__name__}")
    return operator.index(value)  # type: ignore[arg-type]


def _as_tuple(value: object, what: str) -> Tuple[object, ...]:
    # "Finite iterable": anything iter() accepts, read once. A str is refused
    # outright (its items would be reported as non-integers anyway).
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{what} must be a finite iterable of integers, not {type(value).__name__}")
    try:
        it = iter(value)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(f"{what} must be a finite iterable, not {type(value).__name__}") from None
    return tuple(it)


class _Immutable:
    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}: {type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}: {type(self).__name__} is immutable")


class TileSet(_Immutable):
    """An immutable finite set of full-rank tile coordinates.

    ``coordinates`` is sorted first-axis-fastest (by each coordinate's
    reversed tuple). The empty set is rank-agnostic. The set need not be a
    Cartesian product.
    """

    # _grid is set (and _coords built on first use) for the set of every tile
    # of a grid that the tile-set properties return: 2**22 tiles would be
    # hundreds of MiB of tuples, most often only tested or passed back.
    __slots__ = ("_coords", "_rank", "_grid")
    _coords: Optional[Tuple[Coord, ...]]
    _rank: Optional[int]
    _grid: Optional[Coord]

    def __init__(self, coordinates: Iterable[Iterable[int]] = ()) -> None:
        entries = _as_tuple(coordinates, "TileSet coordinates")
        coords = []
        seen = set()
        rank = None
        for k, entry in enumerate(entries):
            comps = _as_tuple(entry, f"TileSet coordinate {k}")
            c = tuple(_as_int(x, f"TileSet coordinate {k} component") for x in comps)
            if rank is None:
                rank = len(c)
            elif len(c) != rank:
                raise ValueError(f"TileSet coordinates have mixed ranks {sorted({rank, len(c)})}")
            if any(x < 0 for x in c):
                raise ValueError(f"TileSet coordinate {c} has a negative component")
            if c in seen:
                raise ValueError(f"TileSet contains the duplicate coordinate {c}")
            seen.add(c)
            coords.append(c)
        object.__setattr__(self, "_coords", tuple(sorted(coords, key=lambda c: c[::-1])))
        object.__setattr__(self, "_rank", rank)
        object.__setattr__(self, "_grid", None)

    @classmethod
    def _trusted(cls, coords: Tuple[Coord, ...], rank: int) -> TileSet:
        """Private (the native core): a set of distinct, ordered, valid coordinates."""
        ts = object.__new__(cls)
        object.__setattr__(ts, "_coords", coords)
        object.__setattr__(ts, "_rank", rank if coords else None)
        object.__setattr__(ts, "_grid", None)
        return ts

    @classmethod
    def _every(cls, grid: Coord) -> TileSet:
        """Private (the native core): every tile of grid (extents >= 1),
        its coordinates built on first use."""
        ts = object.__new__(cls)
        object.__setattr__(ts, "_coords", None)
        object.__setattr__(ts, "_rank", len(grid))
        object.__setattr__(ts, "_grid", tuple(grid))
        return ts

    def _iter_every(self) -> Iterator[Coord]:
        # First axis fastest: axis i's component repeats each value
        # prod(grid[:i]) times, cyclically; zip builds each tuple once.
        assert self._grid is not None
        def column(g: int, stride: int) -> Iterator[int]:
            period = itertools.chain.from_iterable(itertools.repeat(x, stride) for x in range(g))
            return itertools.islice(itertools.cycle(period), n)

        n, stride, columns = len(self), 1, []
        for g in self._grid:
            columns.append(column(g, stride))
            stride *= g
        return zip(*columns)

    @property
    def coordinates(self) -> Tuple[Coord, ...]:
        if self._coords is None:
            object.__setattr__(self, "_coords", tuple(self._iter_every()))
        assert self._coords is not None
        return self._coords

    @property
    def rank(self) -> Optional[int]:
        """The coordinates' rank, or None for the empty (rank-agnostic) set."""
        return self._rank

    def __len__(self) -> int:
        if self._coords is None and self._grid is not None:
            n = 1
            for g in self._grid:
                n *= g
            return n
        return len(self.coordinates)

    def __iter__(self) -> Iterator[Coord]:
        if self._coords is None and self._grid is not None:
            return self._iter_every()
        return iter(self.coordinates)

    def __contains__(self, coord: object) -> bool:
        if self._coords is None and self._grid is not None and isinstance(coord, tuple):
            # What membership in the built tuple answers: equal to an in-range
            # int tuple (as (1.0, 0) == (1, 0)).
            if len(coord) != len(self._grid):
                return False
            try:
                ints = tuple(int(x) for x in coord)
            except (TypeError, ValueError, OverflowError):
                return coord in self.coordinates
            return ints == coord and all(0 <= x < g for x, g in zip(ints, self._grid))
        return coord in self.coordinates

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TileSet):
            return False
        if self._grid is not None and other._grid is not None:
            return self._grid == other._grid
        return len(self) == len(other) and other.coordinates == self.coordinates

    def __hash__(self) -> int:
        return hash(("TileSet", self.coordinates))

    def __repr__(self) -> str:
        return f"TileSet({list(self.coordinates)!r})"


class TileSelection(_Immutable):
    """The ordered Cartesian product of per-axis tile coordinates gathered
    into one compact Tensor.

    ``per_axis`` keeps the caller's order; ``coordinates`` enumerates the
    product first-mode-fastest (axis 0 varies fastest), the order of
    ``Shape.encode`` over ``compact_grid_shape``.
    """

    __slots__ = ("_per_axis", "_coords")
    _per_axis: Tuple[Coord, ...]
    _coords: Tuple[Coord, ...]

    def __init__(self, per_axis: Iterable[Iterable[int]]) -> None:
        axes = _as_tuple(per_axis, "TileSelection per_axis")
        if not axes:
            raise ValueError("TileSelection needs at least one axis")
        out = []
        for k, axis in enumerate(axes):
            items = _as_tuple(axis, f"TileSelection axis {k}")
            coords = tuple(_as_int(x, f"TileSelection axis {k} coordinate") for x in items)
            if not coords:
                raise ValueError(f"TileSelection axis {k} is empty")
            if any(x < 0 for x in coords):
                raise ValueError(f"TileSelection axis {k} has a negative coordinate: {coords}")
            if len(set(coords)) != len(coords):
                raise ValueError(f"TileSelection axis {k} contains a duplicate coordinate: {coords}")
            out.append(coords)
        per = tuple(out)
        object.__setattr__(self, "_per_axis", per)
        # itertools.product varies its last factor fastest: reverse in and out.
        object.__setattr__(self, "_coords", tuple(c[::-1] for c in itertools.product(*per[::-1])))

    @property
    def per_axis(self) -> Tuple[Coord, ...]:
        return self._per_axis

    @property
    def rank(self) -> int:
        return len(self._per_axis)

    @property
    def compact_grid_shape(self) -> Coord:
        return tuple(len(a) for a in self._per_axis)

    @property
    def coordinates(self) -> Tuple[Coord, ...]:
        return self._coords

    @property
    def tile_set(self) -> TileSet:
        return TileSet._trusted(tuple(sorted(self._coords, key=lambda c: c[::-1])), self.rank)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TileSelection) and other._per_axis == self._per_axis

    def __hash__(self) -> int:
        return hash(("TileSelection", self._per_axis))

    def __repr__(self) -> str:
        return f"TileSelection({[list(a) for a in self._per_axis]!r})"


class ResidencyPlan(_Immutable):
    """One immutable residency decision: tiles to promote, retain and evict.

    Omitted fields are empty TileSets; a tile may occur in one field only.
    """

    __slots__ = ("_promote", "_retain", "_evict")
    _promote: TileSet
    _retain: TileSet
    _evict: TileSet

    def __init__(self, promote: Optional[TileSet] = None, retain: Optional[TileSet] = None,
                 evict: Optional[TileSet] = None) -> None:
        fields = {}
        for name, value in (("promote", promote), ("retain", retain), ("evict", evict)):
            if value is None:
                value = TileSet()
            elif not isinstance(value, TileSet):
                raise TypeError(f"ResidencyPlan {name} must be a TileSet or None, not {type(value).__name__}")
            fields[name] = value
        names = list(fields)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                both = set(fields[a].coordinates) & set(fields[b].coordinates)
                if both:
                    raise ValueError(f"ResidencyPlan tile {min(both)} occurs in both {a} and {b}")
        for name, value in fields.items():
            object.__setattr__(self, "_" + name, value)

    @property
    def promote(self) -> TileSet:
        return self._promote

    @property
    def retain(self) -> TileSet:
        return self._retain

    @property
    def evict(self) -> TileSet:
        return self._evict

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ResidencyPlan) and (self._promote, self._retain, self._evict)
                == (other._promote, other._retain, other._evict))

    def __hash__(self) -> int:
        return hash(("ResidencyPlan", self._promote, self._retain, self._evict))

    def __repr__(self) -> str:
        return f"ResidencyPlan(promote={self._promote!r}, retain={self._retain!r}, evict={self._evict!r})"


@runtime_checkable
class ResidencyPolicy(Protocol):
    """Structural protocol of a residency scheduler: one method,
    ``plan(required, purpose) -> ResidencyPlan``, purpose being one of
    ``"operation"``, ``"projection"``, ``"scatter"``, ``"backward"``. A policy
    only optimizes: required values are made available regardless."""

    def plan(self, required: TileSet, purpose: str) -> ResidencyPlan: ...


@dataclass(frozen=True)
class TileState:
    """One tile's residency metadata. ``location`` is ``"primary"``,
    ``"secondary"``, ``"implicit"`` (a declared zero, no storage) or
    ``"invalid"`` (no readable value); ``dirty`` marks a primary value the
    secondary does not hold yet."""

    location: str
    valid: bool
    dirty: bool


# Private knobs the tests turn (the native core reads them): dense_only makes
# direct operations read a tiled operand as one dense copy instead of band by
# band; a list in dense_spy records the purpose of every such copy.
_options = SimpleNamespace(dense_only=False, dense_spy=None)

_core._install_tiled_values(TileSet=TileSet, TileSelection=TileSelection, ResidencyPlan=ResidencyPlan,
                            TileState=TileState, ResidencyPolicy=ResidencyPolicy, options=_options)
