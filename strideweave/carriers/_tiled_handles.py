"""Completion handles for tiled requests.

The native ``AwaitProjection`` / ``AwaitResidency`` / ``AwaitMove`` types have
no constructor and no completion entry point reachable from Python (their
``await_new`` / ``await_complete`` / ``await_fail`` are C-internal), so
TiledEvictable, written in Python, cannot produce them yet. When
``_core`` grows the private hooks ``_await_new(kind)``,
``_await_complete(handle, value)`` and ``_await_fail(handle, exc)`` they are
used and the handles are the native types; until then the stand-ins below
implement the same contract (``done``, ``wait()`` returning or raising the
same object every time, no ``__await__``, not user-constructible,
weak-referenceable) but are not subclasses of the native ``AwaitResult``.
"""
from __future__ import annotations

import threading
from typing import Any

from .. import _core

__all__ = ["new_handle", "complete", "fail", "NATIVE_HANDLES"]

_native_new = getattr(_core, "_await_new", None)
_native_complete = getattr(_core, "_await_complete", None)
_native_fail = getattr(_core, "_await_fail", None)
NATIVE_HANDLES = bool(_native_new and _native_complete and _native_fail)

_TOKEN = object()


class _PyAwait:
    """Python stand-in for a framework-created completion handle."""

    __slots__ = ("_event", "_result", "_error", "_lock", "__weakref__")

    def __init__(self, token: object = None) -> None:
        if token is not _TOKEN:
            raise TypeError(f"{type(self).__name__} handles are created by the framework only")
        self._event = threading.Event()
        self._result: Any = None
        self._error: BaseException | None = None
        self._lock = threading.Lock()

    @property
    def done(self) -> bool:
        """True once a terminal success or failure is recorded."""
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> Any:
        """Block until terminal, then return the result or raise the recorded
        exception (the same object every time)."""
        if timeout is not None and not (timeout >= 0):
            raise ValueError("timeout must be a non-negative number or None")
        # Short slices keep the main thread responsive to Ctrl-C.
        import time
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._event.wait(0.1):
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError("the operation did not complete within the timeout")
        if self._error is not None:
            raise self._error
        return self._result

    def __repr__(self) -> str:
        state = "pending" if not self.done else ("failed" if self._error is not None else "done")
        return f"<{type(self).__name__} {state}>"


class PendingProjection(_PyAwait):
    """Stand-in for AwaitProjection: wait() returns one compact Tensor."""
    __slots__ = ()


class PendingResidency(_PyAwait):
    """Stand-in for AwaitResidency: wait() returns None."""
    __slots__ = ()


class PendingMove(_PyAwait):
    """Stand-in for AwaitMove[Tensor] (tiled scatter)."""
    __slots__ = ()


_KINDS = {"projection": PendingProjection, "residency": PendingResidency, "move": PendingMove}


def new_handle(kind: str):
    if NATIVE_HANDLES:
        return _native_new(kind)  # type: ignore[misc]
    return _KINDS[kind](_TOKEN)


def complete(handle, value: Any) -> None:
    if NATIVE_HANDLES and not isinstance(handle, _PyAwait):
        _native_complete(handle, value)  # type: ignore[misc]
        return
    with handle._lock:
        if handle._event.is_set():
            return
        handle._result = value
        handle._event.set()


def fail(handle, exc: BaseException) -> None:
    if NATIVE_HANDLES and not isinstance(handle, _PyAwait):
        _native_fail(handle, exc)  # type: ignore[misc]
        return
    with handle._lock:
        if handle._event.is_set():
            return
        handle._error = exc
        handle._event.set()
