"""Python side of profiling: frozen event records, aggregation, rendering.

The native ``_ProfileSession`` records raw events (operations, and the
``move.submit`` / ``move.complete`` pair of every move); this module turns
them into :class:`ProfilerEvent` records. Self time is computed here from the
parent links: an event's duration minus the durations of its direct children
that ran nested inside it on the same thread.
"""
from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from typing import Any, Iterable, Literal, Optional, Union

from ._core import _ProfileSession

__all__ = ["ProfilerEvent", "ProfilerAverage", "profile", "Profiler"]


@dataclass(frozen=True)
class ProfilerEvent:
    id: int
    parent_id: Optional[int]
    name: str
    carrier_type: Optional[type]
    implementation_type: Optional[type]
    input_shapes: Optional[tuple[Any, ...]]
    start_time_ns: int
    duration_ns: int
    self_time_ns: int
    thread_id: int
    succeeded: bool


@dataclass(frozen=True)
class ProfilerAverage:
    name: str
    carrier_type: Optional[type]
    implementation_type: Optional[type]
    count: int
    total_duration_ns: int
    self_time_ns: int
    failures: int

    @property
    def average_duration_ns(self) -> float:
        return self.total_duration_ns / self.count if self.count else 0.0


def _plain_shapes(shapes: Optional[tuple[Any, ...]]) -> Optional[tuple[Any, ...]]:
    """Recorded input shapes as plain nested tuples of ints (``((2,),)``):
    a record is data, detached from the library's Shape type."""
    if shapes is None:
        return None
    return tuple(s.top_level if hasattr(s, "top_level") else s for s in shapes)


def _type_name(t: Any) -> str:
    return "-" if t is None else getattr(t, "__name__", str(t))


class profile:
    """Single-use profiling context: ``with profile() as p: ...; p.events()``.

    ``carriers`` restricts recording to events whose carrier class is one of
    the given classes (or a subclass); ``record_shapes`` keeps the input
    shapes of operation events.
    """

    def __init__(self, *, carriers: Union[type, Iterable[type], None] = None, record_shapes: bool = False) -> None:
        self._session = _ProfileSession(carriers=carriers, record_shapes=bool(record_shapes))
        self._entered = False

    def __enter__(self) -> "profile":
        self._session._enter()
        self._entered = True
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self._session._exit()
        return False

    def events(self) -> list[ProfilerEvent]:
        raw = self._session._events()
        child_time: dict[int, int] = {}
        by_id = {r[0]: r for r in raw}
        for r in raw:
            parent = by_id.get(r[1]) if r[1] else None
            # Only a child nested inside its parent's span on the parent's
            # thread is part of the parent's time: a move.complete is linked
            # to its move.submit but outlives it (even when an inline
            # completion runs on the submitting thread).
            if (parent is not None and parent[8] == r[8] and parent[6] <= r[6]
                    and r[6] + r[7] <= parent[6] + parent[7]):
                child_time[parent[0]] = child_time.get(parent[0], 0) + r[7]
        return [
            ProfilerEvent(
                id=r[0],
                parent_id=r[1] or None,
                name=r[2],
                carrier_type=r[3],
                implementation_type=r[4],
                input_shapes=_plain_shapes(r[5]),
                start_time_ns=r[6],
                duration_ns=r[7],
                self_time_ns=max(0, r[7] - child_time.get(r[0], 0)),
                thread_id=r[8],
                succeeded=r[9],
            )
            for r in raw
        ]

    def key_averages(self) -> list[ProfilerAverage]:
        groups: dict[tuple[Any, ...], list[ProfilerEvent]] = {}
        for e in self.events():
            groups.setdefault((e.name, e.carrier_type, e.implementation_type), []).append(e)
        out = [
            ProfilerAverage(
                name=k[0], carrier_type=k[1], implementation_type=k[2], count=len(v),
                total_duration_ns=sum(e.duration_ns for e in v),
                self_time_ns=sum(e.self_time_ns for e in v),
                failures=sum(not e.succeeded for e in v),
            )
            for k, v in groups.items()
        ]
        out.sort(key=lambda a: a.total_duration_ns, reverse=True)
        return out

    def table(self) -> str:
        rows = [("name", "carrier", "implementation", "count", "total us", "self us", "avg us", "failed")]
        for a in self.key_averages():
            rows.append((a.name, _type_name(a.carrier_type), _type_name(a.implementation_type), str(a.count),
                         f"{a.total_duration_ns / 1e3:.1f}", f"{a.self_time_ns / 1e3:.1f}",
                         f"{a.average_duration_ns / 1e3:.1f}", str(a.failures)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def to_chrome_trace(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Write the events as Chrome trace-event JSON (opens in Perfetto).

        Operations and ``move.submit`` are complete ("X") slices on their
        thread's track. A ``move.complete`` spans submission to terminal
        commit and may overlap other work on its thread (queued moves, an
        inline completion on the submitting thread), which "X" slices must
        not, so it is an async ("b"/"e") slice whose id is the submit event's
        id. Perfetto reads pid/tid as 32-bit values, so threads get small
        track numbers; the recorded ``thread_id`` stays in each slice's args
        and names its track.
        """
        pid = os.getpid()
        events = self.events()
        names = {t.ident: t.name for t in threading.enumerate()}
        tids: dict[int, int] = {}
        for e in sorted(events, key=lambda e: e.start_time_ns):
            tids.setdefault(e.thread_id, len(tids) + 1)
        # Metadata carries ts 0 as Chrome writes it (some importers need a ts).
        trace: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "ts": 0,
                              "args": {"name": "strideweave"}}]
        for ident, tid in tids.items():
            trace.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "ts": 0,
                          "args": {"name": names.get(ident, f"thread {ident}")}})
        for e in events:
            args = {"id": e.id, "parent_id": e.parent_id, "thread_id": e.thread_id,
                    "carrier_type": _type_name(e.carrier_type),
                    "implementation_type": _type_name(e.implementation_type),
                    "succeeded": e.succeeded,
                    "input_shapes": list(e.input_shapes) if e.input_shapes else None}
            common = {"name": e.name, "pid": pid, "tid": tids[e.thread_id]}
            if e.name == "move.complete":
                # Correlated with its submission by id (= the submit event's id).
                corr = e.parent_id if e.parent_id else e.id
                trace.append({**common, "cat": "move", "ph": "b", "id": corr,
                              "ts": e.start_time_ns / 1e3, "args": args})
                trace.append({**common, "cat": "move", "ph": "e", "id": corr,
                              "ts": (e.start_time_ns + e.duration_ns) / 1e3})
            else:
                trace.append({**common, "cat": "move" if e.name.startswith("move.") else "operation",
                              "ph": "X", "ts": e.start_time_ns / 1e3, "dur": e.duration_ns / 1e3,
                              "args": args})
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"traceEvents": trace, "displayTimeUnit": "ns"}, f)

Profiler = profile
