"""Carrier definitions: storage providers and exact transfer routes.

The records (``StorageProvider``, ``TransferProvider``, ``TransferRoute``,
``CarrierDefinition``, ``TransferRequest``, ``PreparedTransfer``,
``Unsupported``) are frozen dataclasses defined here; ``ProviderCompletion``
is a runtime-checkable structural protocol. On import this module hands them
to ``strideweave._core`` (which builds ``TransferRequest`` objects and checks
``prepare()`` results natively), so every name is one object under every
path: ``strideweave.carriers.extension.TransferRoute is strideweave.TransferRoute
is strideweave._core.TransferRoute``. ``register_carrier_definition`` lives in
``_core``.

A Python subclass of ``Carrier`` becomes definition-backed with
``register_carrier_definition(cls, CarrierDefinition(storage, transfers))``:
instances are built as ``cls(slots, *, dtype, mutable=True)`` and store their
slots through the ``StorageProvider``; ``move``/``move_async`` perform an exact
``(type(source carrier), type(destination))`` pair through a ``TransferRoute``.
Decisions the contract leaves open or fixes (docs/reference.md, "Carrier extension API"):

- Definitions are exact-class in every use. A subclass of a defined class
  that registers no definition of its own cannot be constructed
  (``TypeError``), inherits no routes and no fallback permission, and is
  definition-free to the legacy registry.
- Routes are outgoing (``source_class`` is the defined class) or incoming
  (``destination_class`` is the defined class and ``source_class`` a
  definition-free class such as ``CPU``; registering one seals that source
  class, so it can never gain a definition of its own). Nothing is installed
  on the source class.
- Mixed pairs: a definition-free class (every built-in, plain Python
  carriers) keeps its legacy contract, under which an unregistered pair falls
  back, so the elementwise fallback serves a pair without a route when every
  definition-backed side permits it.
- Observing a class (an instance built, a route resolved, a legacy registry
  call naming it) also observes its Python bases.
- ``submit()`` raising is recorded on the handle (the provider has started
  submitting); ``prepare()`` raising is raised from ``move_async``.
- ``release`` runs exactly once, from ``release()`` or a successful move; a
  carrier garbage-collected unreleased is not released through the provider.
- Framework-owned transfers (``Evictable`` eviction and promotion) run a
  route synchronously: ``prepare``, ``submit`` and the completion's
  ``wait()`` on the calling thread.
"""
from __future__ import annotations

import sys
import typing
from dataclasses import dataclass

from .. import _core

__all__ = [
    "CarrierDefinition",
    "StorageProvider",
    "TransferProvider",
    "TransferRoute",
    "TransferRequest",
    "PreparedTransfer",
    "Unsupported",
    "ProviderCompletion",
    "register_carrier_definition",
]

register_carrier_definition = _core.register_carrier_definition


def _tname(o: object) -> str:
    return type(o).__name__


def _need_callable(record: str, field: str, value: object) -> None:
    # Not `if not callable(value)`: narrowing an object makes mypy add a
    # synthetic "<callable subtype of object>" to this module, which stubtest
    # then reports as missing at runtime.
    ok = callable(value)
    if not ok:
        raise TypeError(f"{record} {field} must be callable, not {_tname(value)}")


def _need_carrier_class(record: str, field: str, value: object) -> None:
    if not (isinstance(value, type) and issubclass(value, _core.Carrier)):
        raise TypeError(f"{record} {field} must be a Carrier subclass, not {value!r}")


# Records compare (and hash) by identity, as the native records did: a
# TransferRequest holds a Layout, which is unhashable.
@dataclass(frozen=True, eq=False)
class StorageProvider:
    """Storage of a definition-backed carrier class. Every callable takes the
    carrier first: ``supports_dtype(carrier, dtype) -> bool``,
    ``physical_size(carrier) -> int``, ``allocate(carrier, slots)`` (provide
    that many slots, each reading as the dtype's zero), ``release(carrier)``
    (called exactly once), ``read(carrier, i)``, ``write(carrier, i, value)``
    (value already coerced to the storage dtype). ``elementwise_fallback``
    permits ElementwiseMoveOperation for an exact pair without a route."""

    supports_dtype: typing.Callable[..., bool]
    physical_size: typing.Callable[..., int]
    allocate: typing.Callable[..., object]
    release: typing.Callable[..., object]
    read: typing.Callable[..., object]
    write: typing.Callable[..., object]
    elementwise_fallback: bool = False

    def __post_init__(self) -> None:
        for name in ("supports_dtype", "physical_size", "allocate", "release", "read", "write"):
            _need_callable("StorageProvider", name, getattr(self, name))
        if not isinstance(self.elementwise_fallback, bool):
            raise TypeError(
                f"StorageProvider elementwise_fallback must be a bool, not {_tname(self.elementwise_fallback)}")


@dataclass(frozen=True, eq=False)
class TransferProvider:
    """The mechanics of one route: ``prepare(request: TransferRequest)``
    returns a PreparedTransfer or Unsupported. It runs with grad mode off,
    after every validation."""

    prepare: typing.Callable[[TransferRequest], PreparedTransfer | Unsupported]

    def __post_init__(self) -> None:
        _need_callable("TransferProvider", "prepare", self.prepare)


@dataclass(frozen=True, eq=False)
class TransferRoute:
    """A route of a CarrierDefinition for one exact pair: outgoing (the
    defined class is ``source_class``) or incoming (it is
    ``destination_class`` and the source is definition-free). Matching uses
    class identity; no route is inherited by a subclass."""

    source_class: type[_core.Carrier]
    destination_class: type[_core.Carrier]
    route_id: str
    provider: TransferProvider

    def __post_init__(self) -> None:
        _need_carrier_class("TransferRoute", "source_class", self.source_class)
        _need_carrier_class("TransferRoute", "destination_class", self.destination_class)
        if not isinstance(self.route_id, str):
            raise TypeError(f"TransferRoute route_id must be a str, not {_tname(self.route_id)}")
        if not self.route_id:
            raise ValueError("TransferRoute route_id must be a non-empty str")
        if not isinstance(self.provider, TransferProvider):
            raise TypeError(f"TransferRoute provider must be a TransferProvider, not {_tname(self.provider)}")


@dataclass(frozen=True, eq=False)
class CarrierDefinition:
    """A carrier class's StorageProvider and its TransferRoutes (normalised to
    a tuple, at most one per exact pair). Register it with
    ``register_carrier_definition()``."""

    storage: StorageProvider
    transfers: tuple[TransferRoute, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.storage, StorageProvider):
            raise TypeError(f"CarrierDefinition storage must be a StorageProvider, not {_tname(self.storage)}")
        try:
            routes = tuple(self.transfers)
        except TypeError:
            raise TypeError("CarrierDefinition transfers must be an iterable of TransferRoute, "
                            f"not {_tname(self.transfers)}") from None
        seen: dict[tuple[type, type], TransferRoute] = {}
        for r in routes:
            if not isinstance(r, TransferRoute):
                raise TypeError(f"CarrierDefinition transfers must hold TransferRoute objects, not {_tname(r)}")
            key = (r.source_class, r.destination_class)
            if key in seen:
                raise ValueError(
                    f"CarrierDefinition declares two routes for the exact pair ({key[0].__name__}, "
                    f"{key[1].__name__}): {seen[key].route_id!r} and {r.route_id!r}; at most one route per "
                    "exact pair")
            seen[key] = r
        object.__setattr__(self, "transfers", routes)


@dataclass(frozen=True, eq=False)
class TransferRequest:
    """One validated move handed to ``TransferProvider.prepare``: the source
    Tensor, the destination carrier, both exact classes, the logical dtype,
    the Layout and its cosize (the physical span to transfer from the
    Tensor's offset), and the destination slot the span lands at
    (``destination_offset``: 0 for a move; a framework tile transfer, such as
    a TiledEvictable eviction, writes into the middle of its tier)."""

    tensor: _core.Tensor
    destination: _core.Carrier
    source_class: type[_core.Carrier]
    destination_class: type[_core.Carrier]
    dtype: _core.DType
    layout: _core.Layout
    physical_span: int
    destination_offset: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.tensor, _core.Tensor):
            raise TypeError(f"TransferRequest tensor must be a Tensor, not {_tname(self.tensor)}")
        if not isinstance(self.destination, _core.Carrier):
            raise TypeError(
                f"TransferRequest destination must be a Carrier instance, not {_tname(self.destination)}")
        _need_carrier_class("TransferRequest", "source_class", self.source_class)
        _need_carrier_class("TransferRequest", "destination_class", self.destination_class)
        if not isinstance(self.dtype, _core.DType):
            raise TypeError(f"TransferRequest dtype must be a DType, not {_tname(self.dtype)}")
        if not isinstance(self.layout, _core.Layout):
            raise TypeError(f"TransferRequest layout must be a Layout, not {_tname(self.layout)}")
        if not isinstance(self.physical_span, int) or isinstance(self.physical_span, bool):
            raise TypeError(f"TransferRequest physical_span must be an int, not {_tname(self.physical_span)}")
        if self.physical_span < 0:
            raise ValueError("TransferRequest physical_span must be non-negative")
        if not isinstance(self.destination_offset, int) or isinstance(self.destination_offset, bool):
            raise TypeError(f"TransferRequest destination_offset must be an int, not {_tname(self.destination_offset)}")
        if self.destination_offset < 0:
            raise ValueError("TransferRequest destination_offset must be non-negative")


@dataclass(frozen=True, eq=False)
class PreparedTransfer:
    """``submit()`` performs or starts the transfer on the calling thread
    (grad mode off, owner access to both carriers) and returns None when
    finished, or a ProviderCompletion a worker waits on."""

    submit: typing.Callable[[], ProviderCompletion | None]

    def __post_init__(self) -> None:
        _need_callable("PreparedTransfer", "submit", self.submit)


@dataclass(frozen=True, eq=False)
class Unsupported:
    """``prepare()``'s refusal: the permitted elementwise fallback runs
    instead, or move_async raises NotImplementedError containing reason."""

    reason: str

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str):
            raise TypeError(f"Unsupported reason must be a str, not {_tname(self.reason)}")


def _is_completion(obj: object) -> bool:
    if hasattr(obj, "__await__"):
        return False
    try:
        done: object = obj.done  # type: ignore[attr-defined]
    except Exception:
        return False
    return isinstance(done, bool) and callable(getattr(obj, "wait", None))


class _CompletionMeta(type(typing.Protocol)):  # type: ignore[misc]
    # Structural in full: runtime_checkable alone checks only that the
    # members exist, not that done is a bool or that __await__ is absent.
    def __instancecheck__(cls, obj: object) -> bool:
        if cls is ProviderCompletion:
            return _is_completion(obj)
        checked: bool = super().__instancecheck__(obj)
        return checked


@typing.runtime_checkable
class ProviderCompletion(typing.Protocol, metaclass=_CompletionMeta):
    """What ``PreparedTransfer.submit()`` may return for a transfer that
    finishes later: any object with a bool ``done`` (True once finished) and a
    blocking ``wait()`` returning None (or raising the transfer's failure),
    and no ``__await__``. ``isinstance(obj, ProviderCompletion)`` checks that
    structure. It is also an open base: subclasses provide both members (the
    base's ``wait()`` raises NotImplementedError). A worker calls ``wait()``
    and then performs the move's terminal commit."""

    done: bool

    def __init__(self) -> None:  # explicit, so the class stays instantiable as a base
        pass

    def wait(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement wait()")


if sys.version_info < (3, 11):
    # Python 3.10's Protocol replaces a protocol class's own __init__ with one
    # that refuses instantiation (3.11+ keeps an explicit one): put it back so
    # the base stays instantiable there too.
    def _base_init(self: ProviderCompletion) -> None:
        pass

    setattr(ProviderCompletion, "__init__", _base_init)


_core._install_extension_records(
    StorageProvider=StorageProvider,
    TransferProvider=TransferProvider,
    TransferRoute=TransferRoute,
    CarrierDefinition=CarrierDefinition,
    TransferRequest=TransferRequest,
    PreparedTransfer=PreparedTransfer,
    Unsupported=Unsupported,
    ProviderCompletion=ProviderCompletion,
)
