"""Completion handles and profiling records of tiled requests.

Requests return the native handle kinds (``AwaitProjection``,
``AwaitResidency``, ``AwaitMove``), created and finished through the private
``_core`` hooks ``_await_new(kind)``, ``_await_complete(handle, value)`` and
``_await_fail(handle, exc)``: the handles keep the whole ``AwaitResult``
contract (``done``, ``wait()`` with the GIL released, the same result or
exception object every time, not user-constructible, weak-referenceable).

Tile transfers are recorded like native moves: a ``move.submit`` event on the
thread that starts the request and a ``move.complete`` event (its
``parent_id`` the submit's id) on whichever thread finishes the transfer,
through ``_core._profiler_session`` / ``_profiler_record``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Literal, Optional, overload

if TYPE_CHECKING:
    from .._core import AwaitMove, AwaitProjection, AwaitResidency, AwaitResult, _ProfileSession

from .. import _core

__all__ = ["new_handle", "complete", "fail", "set_runner", "Transfer", "active_session"]

_new = _core._await_new
_complete = _core._await_complete
_fail = _core._await_fail
_set_runner = _core._await_set_runner
_session = _core._profiler_session
_record = _core._profiler_record
_now = _core._profiler_now_ns


@overload
def new_handle(kind: Literal["move"]) -> AwaitMove: ...
@overload
def new_handle(kind: Literal["projection"]) -> AwaitProjection: ...
@overload
def new_handle(kind: Literal["residency"]) -> AwaitResidency: ...
def new_handle(kind: str) -> AwaitResult[Any]:
    """A fresh pending native handle: kind is "move", "projection" or "residency"."""
    return _new(kind)


def complete(handle: AwaitResult[Any], value: Any) -> bool:
    """Records success; False when the handle was already terminal."""
    return _complete(handle, value)


def fail(handle: AwaitResult[Any], exc: BaseException) -> bool:
    """Records failure with exc; False when the handle was already terminal."""
    return _fail(handle, exc)


def set_runner(handle: AwaitResult[Any], runner: Optional[Callable[[], object]]) -> bool:
    """The callable the first untimed ``wait()`` on the pending handle runs
    (GIL held) before it blocks; dropped when the handle becomes terminal.
    False when the handle is already terminal."""
    return _set_runner(handle, runner)


def active_session() -> Optional[_ProfileSession]:
    """The calling thread's active profiling session, or None."""
    return _session()


class Transfer:
    """Profiling of one tile transfer: ``submitted()`` on the calling thread
    records move.submit, ``finished(ok)`` on the worker records move.complete.
    Without an active session both are no-ops."""

    __slots__ = ("session", "carrier_type", "impl_type", "shapes", "start", "submit_id")

    def __init__(self, session: Optional[_ProfileSession], carrier_type: Optional[type], impl_type: Optional[type],
                 shapes: Optional[tuple[Any, ...]] = None) -> None:
        self.session = session
        self.carrier_type = carrier_type
        self.impl_type = impl_type
        self.shapes = shapes  # kept by sessions that record shapes
        self.start = _now() if session is not None else 0
        self.submit_id = 0

    def submitted(self) -> None:
        if self.session is None:
            return
        self.submit_id = _record(self.session, "move.submit", self.carrier_type, self.impl_type, self.start,
                                 _now() - self.start, True, None, self.shapes)

    def finished(self, ok: bool) -> None:
        if self.session is None:
            return
        _record(self.session, "move.complete", self.carrier_type, self.impl_type, self.start, _now() - self.start,
                ok, self.submit_id, self.shapes)


def timed(transfer: Optional[Transfer], fn: Callable[[], None]) -> Callable[[], None]:
    """fn wrapped so that its end is recorded as transfer's move.complete."""
    if transfer is None or transfer.session is None:
        return fn

    def run() -> None:
        ok = False
        try:
            fn()
            ok = True
        finally:
            transfer.finished(ok)
    return run
