"""A carrier whose slots live in a TensorStore array (docs/reference.md, "TensorStore carrier").

TensorStore (zarr v3 by default) keeps the slots on local disk, in memory or
in object storage (S3, GCS) shared by many machines. The carrier is built only
on the public extension API: a ``CarrierDefinition`` whose ``StorageProvider``
reads and writes single slots (the elementwise fallback path), an incoming
``(CPU, TensorStoreCarrier)`` route and an outgoing ``(TensorStoreCarrier,
CPU)`` route. Each route's ``submit()`` starts TensorStore's asynchronous
write or read of the tensor's whole physical span ``[offset, offset +
cosize)`` (holes included, like the bulk CPU<->FileBacked operations) straight
from or into the CPU carrier's memory (a DLPack view of the span), and
returns a ``ProviderCompletion`` over TensorStore's future: the move's worker
waits on it with the GIL released, no Python thread is blocked per transfer.

``tensorstore`` is an optional dependency (the ``tensorstore`` extra: from a
clone ``pip install ".[tensorstore]"``, or ``pip install tensorstore`` next
to an installed wheel); nothing else in the library imports it.

Decisions the contract leaves open:

- A carrier's slots are the array's elements in C order; ``open_tensor``
  gives an N-d array a row-major Layout over them. A span that is not one
  box of the array is transferred as at most ``2 * rank - 1`` boxes.
- ``release()`` drops the carrier's handle to the store and never deletes
  persistent data. The in-memory store of ``TensorStoreCarrier(slots, ...)``
  is freed with its last handle.
- An empty (0-slot) carrier that is a move destination grows: the in-memory
  one is replaced by a store of the needed size, a persistent one is resized
  (its metadata rewritten).
- An array whose domain does not start at 0 (a spec with a translated
  ``transform``, say) is seen from a zero origin: slot 0 is its first
  element in C order, wherever its domain starts.
- Sizes: one dimension of a TensorStore array holds at most ``2**62 - 1``
  elements (TensorStore's own limit), and a carrier at most ``2**63 - 1``
  slots (a 64-bit index); beyond either, ``TensorStoreCarrier(slots)``,
  ``create``/``open``/``open_tensor`` and a growing move destination raise
  ``ValueError`` naming the limit.
- S3 requests are retried at most 3 times in all (``max_retries: 3``),
  0.1 s after the first failure, then twice as long each time, at most 1 s
  apart (``S3_REQUEST_RETRIES``, the ``s3_request_retries`` resource of the
  fresh context every ``create``/``open``/``open_tensor`` opens its store
  in): a move to a server that goes away fails within about a second with
  the store's error and gives its source back, instead of retrying for many
  minutes (TensorStore's own default, 32 attempts up to 32 s apart) and
  holding up the process's other S3 requests meanwhile. A ``context`` in the
  spec overrides it (``{"context": {"s3_request_retries": {...}}, ...}``).
  A server that stops answering without closing its connections is bounded
  only by TensorStore's process-wide curl settings
  (``TENSORSTORE_CURL_LOW_SPEED_TIME_SECONDS``,
  ``TENSORSTORE_CURL_LOW_SPEED_LIMIT_BYTES``), which StrideWeave leaves as
  they are; ``wait(timeout=...)`` bounds the wait for the result.
- Errors from the store (missing array or bucket, permission, network)
  propagate as TensorStore raises them (``ValueError``/``OSError`` subclasses
  with the store's message): from ``create``/``open``/``open_tensor``
  directly, from a move as the handle's recorded exception (the source stays
  live).
"""
from __future__ import annotations

import math
import sys
import threading
from typing import Any, Iterator, cast

try:
    import tensorstore as _ts
except ImportError as _error:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "strideweave.carriers.tensorstore needs the optional 'tensorstore' package (the tensorstore "
        "extra): pip install tensorstore, or from a clone pip install \".[tensorstore]\"") from _error
import numpy as _np  # a dependency of tensorstore

from .. import _core
from .extension import (CarrierDefinition, PreparedTransfer, ProviderCompletion, StorageProvider, TransferProvider,
                        TransferRequest, TransferRoute, Unsupported, register_carrier_definition)

__all__ = ["TensorStoreCarrier", "open_tensor"]

_DType = _core.DType
# StrideWeave dtype <-> (TensorStore dtype, NumPy dtype)
_DTYPES = {
    _DType.Float32: (_ts.float32, _np.float32),
    _DType.Int32: (_ts.int32, _np.int32),
}


# TensorStore's largest extent (its finite indices end at 2**62 - 2) and a
# carrier's largest slot count (a 64-bit index).
_MAX_EXTENT = 2**62 - 1
_MAX_SLOTS = sys.maxsize


def _zero_origin(store: Any) -> Any:
    """The store seen from a zero origin in every dimension."""
    if store.rank and any(int(o) != 0 for o in store.origin):
        return store[_ts.d[:].translate_to[0]]
    return store


def _check_extent(slots: Any) -> None:
    """A new store's slot count against TensorStore's largest extent (its
    own error for a larger one says only "domain must be specified")."""
    if isinstance(slots, int) and not isinstance(slots, bool) and slots > _MAX_EXTENT:
        raise ValueError(f"slots must be at most 2**62 - 1 ({_MAX_EXTENT}), TensorStore's largest array "
                         f"extent, not {slots}")


def _check_slots(shape: Any, what: str) -> int:
    n = math.prod(int(e) for e in shape)
    if n > _MAX_SLOTS:
        raise ValueError(f"{what}: an array of shape {list(shape)} has {n} elements; a carrier holds at most "
                         f"2**63 - 1 ({_MAX_SLOTS}) slots")
    return n


def _sw_dtype(store: Any) -> Any:
    for d, (tsd, _) in _DTYPES.items():
        if store.dtype == tsd:
            return d
    raise ValueError(f"TensorStoreCarrier supports only Float32 and Int32 arrays (zarr float32, int32), "
                     f"not {store.dtype.name}")


# The S3 retry bound of the context every create()/open()/open_tensor()
# opens its store in (a fresh one each time, as TensorStore's own default
# is; see the module docstring). A context in the spec itself overrides it.
S3_REQUEST_RETRIES = {"max_retries": 3, "initial_delay": "0.1s", "max_delay": "1s"}


def _open(spec: Any, **kwargs: Any) -> Any:
    context = _ts.Context({"s3_request_retries": S3_REQUEST_RETRIES})
    return _ts.open(_normalise_spec(spec), context=context, **kwargs).result()


def _normalise_spec(spec: Any) -> Any:
    """A path string means zarr v3 on the local file system."""
    if isinstance(spec, str):
        return {"driver": "zarr3", "kvstore": {"driver": "file", "path": spec}}
    if isinstance(spec, (dict, _ts.Spec)):
        return spec
    raise TypeError(f"spec must be a TensorStore spec dict or a path str, not {type(spec).__name__}")


# The store create()/open() hand to the next allocate() on this thread
# (the construction contract Cls(slots, *, dtype, mutable) has no room for it).
_handoff = threading.local()


class TensorStoreCarrier(_core.Carrier):
    """Slots in a TensorStore array (zarr v3 by default): Float32 or Int32.

    ``TensorStoreCarrier(slots, *, dtype=DType.Float32, mutable=True)``
    builds one over a fresh in-memory store; ``create(spec, slots, ...)``
    creates a persistent 1-D array and ``open(spec)`` opens one."""

    _store: Any
    _shape: tuple[int, ...]

    def __init__(self, slots: int, *, dtype: Any = _DType.Float32, mutable: bool = True) -> None:
        if getattr(_handoff, "store", None) is None:  # a fresh in-memory store (open/create hand theirs over)
            _check_extent(slots)
        super().__init__(slots, dtype=dtype, mutable=mutable)

    @classmethod
    def _adopt(cls, store: Any, *, mutable: bool, what: str = "TensorStoreCarrier.open()") -> TensorStoreCarrier:
        dtype = _sw_dtype(store)
        store = _zero_origin(store)
        n = _check_slots(store.shape, what)
        _handoff.store = store
        try:
            return cls(n, dtype=dtype, mutable=mutable)
        finally:
            _handoff.store = None

    @classmethod
    def create(cls, spec: Any, slots: int, *, dtype: Any = _DType.Float32,
               chunk_slots: int | None = None) -> TensorStoreCarrier:
        """Create a 1-D array of ``slots`` zero elements at ``spec`` (fails if
        one exists there) and return a carrier over it."""
        if isinstance(slots, bool) or not isinstance(slots, int):
            raise TypeError(f"slots must be an int, not {type(slots).__name__}")
        if slots < 0:
            raise ValueError("slots must be non-negative")
        dtype = _core._as_dtype(dtype)  # a NumPy dtype names its DType
        _check_extent(slots)
        if dtype not in _DTYPES:
            raise ValueError(f"TensorStoreCarrier supports only Float32 and Int32, not {dtype!r}")
        kw: dict[str, Any] = {}
        if chunk_slots is not None:
            if isinstance(chunk_slots, bool) or not isinstance(chunk_slots, int):
                raise TypeError(f"chunk_slots must be an int, not {type(chunk_slots).__name__}")
            if chunk_slots < 1:
                raise ValueError("chunk_slots must be positive")
            if chunk_slots > _MAX_EXTENT:
                raise ValueError(f"chunk_slots must be at most 2**62 - 1 ({_MAX_EXTENT}), not {chunk_slots}")
            kw["chunk_layout"] = _ts.ChunkLayout(chunk_shape=[chunk_slots])
        store = _open(spec, create=True, dtype=_DTYPES[dtype][0], shape=[slots], **kw)
        return cls._adopt(store, mutable=True, what="TensorStoreCarrier.create()")

    @classmethod
    def open(cls, spec: Any, *, mutable: bool = True) -> TensorStoreCarrier:
        """Open an existing 1-D Float32 or Int32 array (``open_tensor`` opens
        arrays of any rank)."""
        store = _open(spec, open=True, read=True, write=bool(mutable))
        if store.rank != 1:
            raise ValueError(f"TensorStoreCarrier.open() needs a 1-D array, this one has rank {store.rank}; "
                             "use open_tensor() for N-d arrays")
        return cls._adopt(store, mutable=mutable)

    def spec(self) -> dict[str, Any]:
        """The store's TensorStore JSON spec."""
        store = self.__dict__.get("_store")
        if store is None:
            raise RuntimeError("TensorStoreCarrier is released")
        spec: dict[str, Any] = store.spec().to_json()
        return spec


def open_tensor(spec: Any, *, mutable: bool = True) -> Any:
    """Open an existing N-d Float32/Int32 array (written by anyone) as a
    Tensor: its Layout is the array's shape with row-major strides over a
    TensorStoreCarrier of prod(shape) slots in C order."""
    store = _open(spec, open=True, read=True, write=bool(mutable))
    shape = [int(n) for n in store.shape]
    if not shape or any(n < 1 for n in shape):
        raise ValueError(f"open_tensor() needs an array of rank >= 1 with non-empty extents, not shape {shape}")
    carrier = TensorStoreCarrier._adopt(store, mutable=mutable, what="open_tensor()")
    strides = [math.prod(shape[k + 1:]) for k in range(len(shape))]
    layout = _core.Layout(_core.Shape(shape), _core.Stride(strides))
    return _core.Tensor(carrier, 0, layout)


# ------------------------------------------------------------------ storage

def _memory_store(slots: int, dtype: Any) -> Any:
    return _ts.open({"driver": "zarr3", "kvstore": {"driver": "memory"}}, create=True,
                    dtype=_DTYPES[dtype][0], shape=[slots]).result()


def _supports_dtype(carrier: Any, dtype: Any) -> bool:
    return dtype in _DTYPES


def _physical_size(carrier: Any) -> int:
    return math.prod(carrier._shape) if carrier.__dict__.get("_store") is not None else 0


def _allocate(carrier: Any, slots: int) -> None:
    store = getattr(_handoff, "store", None)
    _handoff.store = None
    if store is None:
        _check_extent(slots)
        current = carrier.__dict__.get("_store")
        if current is not None and current.rank == 1 and current.shape[0] == 0 and not _is_memory(current):
            # An empty persistent array grows in place (a move destination).
            store = current.resize(exclusive_max=[slots], expand_only=True).result()
        else:
            store = _memory_store(slots, carrier.dtype())
    carrier._store = store
    carrier._shape = tuple(int(n) for n in store.shape)


def _is_memory(store: Any) -> bool:
    kv = store.kvstore
    return kv is not None and kv.spec().to_json().get("driver") == "memory"


def _release(carrier: Any) -> None:
    # Drop the handle only: persistent data stays.
    carrier._store = None


def _unravel(carrier: Any, i: int) -> tuple[int, ...]:
    return tuple(int(k) for k in _np.unravel_index(i, carrier._shape))


def _read(carrier: Any, i: int) -> Any:
    return carrier._store[_unravel(carrier, i)].read().result().item()


def _write(carrier: Any, i: int, value: Any) -> None:
    carrier._store[_unravel(carrier, i)].write(value).result()


# ------------------------------------------------------------------ bulk routes

def _boxes(shape: tuple[int, ...], start: int, stop: int) -> Iterator[tuple[tuple[slice | int, ...], int, int]]:
    """Decompose the C-order element range [start, stop) of an array of
    shape into boxes: (index expression, first element, element count)."""
    if start >= stop:
        return
    if len(shape) == 1:
        yield (slice(start, stop),), start, stop - start
        return
    inner = math.prod(shape[1:])
    first, last = start // inner, (stop - 1) // inner  # rows touched
    if start % inner == 0 and stop % inner == 0:
        yield (slice(first, last + 1),) + (slice(None),) * (len(shape) - 1), start, stop - start
        return
    if first == last:
        for idx, s, n in _boxes(shape[1:], start - first * inner, stop - first * inner):
            yield (first,) + idx, first * inner + s, n
        return
    head_stop = (first + 1) * inner
    if start % inner:
        yield from _boxes(shape, start, head_stop)
        start = head_stop
    body_stop = (stop // inner) * inner
    if body_stop > start:
        yield from _boxes(shape, start, body_stop)
    if stop > body_stop:
        yield from _boxes(shape, body_stop, stop)


def _host_view(carrier: Any, offset: int, n: int) -> Any:
    """A NumPy view of CPU slots [offset, offset + n) (a DLPack export: the
    route runs with owner access, so the view is writable)."""
    t = _core.Tensor(carrier, offset, _core.Layout.canonical(_core.Shape([n])))
    return _np.from_dlpack(t)


class _Completion(ProviderCompletion):
    """Terminal once every TensorStore future of the transfer is; wait()
    blocks in future.result() (which releases the GIL) and then drops the
    host views, so nothing addresses the CPU memory after commit."""

    def __init__(self, futures: list[Any], keep: list[Any]) -> None:
        self._futures = futures
        self._keep = keep

    @property
    def done(self) -> bool:  # type: ignore[override]  # the protocol's done may be any bool attribute
        return all(f.done() for f in self._futures)

    def wait(self) -> None:
        # Every future is waited for, even after one failed: the host views
        # must outlive every request that may still read or write them.
        failure: BaseException | None = None
        try:
            for f in self._futures:
                try:
                    f.result()
                except Exception as e:
                    failure = failure or e
        finally:
            self._keep = []
        if failure is not None:
            raise failure


def _check(request: TransferRequest) -> Unsupported | None:
    if request.dtype not in _DTYPES:
        return Unsupported(f"TensorStoreCarrier moves only Float32 and Int32, not {request.dtype!r}")
    return None


def _submit_write(request: TransferRequest) -> _Completion:
    """CPU span -> TensorStore slots [destination_offset, + span)."""
    n, at = request.physical_span, request.destination_offset
    host = _host_view(request.tensor.carrier, request.tensor.offset, n)
    destination = cast(TensorStoreCarrier, request.destination)  # the route's destination_class
    store = destination._store
    futures, keep = [], [host]
    for idx, first, count in _boxes(destination._shape, at, at + n):
        part = store[idx]
        futures.append(part.write(host[first - at:first - at + count].reshape(part.shape)))
    return _Completion(futures, keep)


def _submit_read(request: TransferRequest) -> _Completion:
    """TensorStore span [offset, offset + span) -> CPU slots [destination_offset, + span)."""
    n, offset = request.physical_span, request.tensor.offset
    host = _host_view(request.destination, request.destination_offset, n)
    source = cast(TensorStoreCarrier, request.tensor.carrier)  # the route's source_class
    futures, keep = [], [host]
    for idx, first, count in _boxes(source._shape, offset, offset + n):
        part = source._store[idx]
        target = _ts.array(host[first - offset:first - offset + count].reshape(part.shape), copy=False, write=True)
        keep.append(target)
        futures.append(target.write(part))
    return _Completion(futures, keep)


def _prepare_write(request: TransferRequest) -> PreparedTransfer | Unsupported:
    return _check(request) or PreparedTransfer(lambda: _submit_write(request))


def _prepare_read(request: TransferRequest) -> PreparedTransfer | Unsupported:
    return _check(request) or PreparedTransfer(lambda: _submit_read(request))


register_carrier_definition(
    TensorStoreCarrier,
    CarrierDefinition(
        StorageProvider(_supports_dtype, _physical_size, _allocate, _release, _read, _write,
                        elementwise_fallback=True),
        (
            # Incoming routes: CPU carries no definition of its own.
            TransferRoute(_core.CPU, TensorStoreCarrier, "cpu-to-tensorstore", TransferProvider(_prepare_write)),
            TransferRoute(TensorStoreCarrier, _core.CPU, "tensorstore-to-cpu", TransferProvider(_prepare_read)),
        ),
    ),
)
