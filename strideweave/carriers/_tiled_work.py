"""TiledEvictable request machinery: the daemon worker pool, owner-access
scopes, one request's jobs and atomic terminal commit, the per-carrier
bookkeeping, and the exit and fork hooks."""
from __future__ import annotations

import os
import threading
import weakref
from math import prod
from typing import TYPE_CHECKING, Any, Callable, Iterable, List, Literal, Optional, Tuple

from .._core import CPU, AwaitProjection, Carrier, CpuToFileBackedMoveOperation, DType
from .._core import ElementwiseMoveOperation, FileBacked
from .._core import FileBackedToCpuMoveOperation, Layout, Shape, Stride, Tensor, dispatch_move
from .._core import _tiled_gather
from .._core import is_grad_enabled, set_grad_enabled
from . import _tiled_handles as _h

if TYPE_CHECKING:
    import queue

    from .._core import AwaitResult
    from ._tiled_geometry import TileGeometry
    from ._tiled_values import ResidencyPolicy
    from .tiled_evictable import TiledEvictable

    # A worker job: a callable and its argument.
    _Job = Tuple[Callable[[Any], None], Any]

_PRIMARY, _SECONDARY, _IMPLICIT, _INVALID = "primary", "secondary", "implicit", "invalid"

_pool_lock = threading.Lock()
_pool: Optional["_Pool"] = None
_EXIT_WAIT_S = 10.0
# Threads one projection's native gather is dealt to. One: on a busy
# machine (the 2 shared vCPUs this was measured on) handing a lane to an
# engine worker costs milliseconds, more than a second lane saves on 16 MiB
# (warm destination: 1.2 ms on one lane, 5.3 ms median on two).
_GATHER_WAYS = 1
# Evicted tiles' primary buffers kept for reuse by later promotions (they
# count as primary memory: see TiledEvictable._primary_bytes()).
_POOL_TILES = 2
# An untimed wait() on a projection's handle runs the request's
# jobs no worker has started yet, in order, while their bytes add up to at
# most this much (the rest stay with the workers): a waiter running a copy
# cannot take Ctrl-C until that copy returns (tens of milliseconds from a
# disk for this much), where a worker's copy leaves it free to.
_WAITER_BYTES = 64 << 20


class _Pool:
    """A few daemon worker threads fed by one queue. Daemon threads (unlike
    ThreadPoolExecutor's) let the interpreter exit without joining a transfer
    that never ends; the exit hook below bounds the wait instead."""

    def __init__(self, workers: int = 4) -> None:
        import queue
        self.q: "queue.SimpleQueue[_Job]" = queue.SimpleQueue()
        for n in range(workers):
            threading.Thread(target=self._loop, name=f"strideweave-tiled-{n}", daemon=True).start()

    def _loop(self) -> None:
        _disfavour_wakeups()
        while True:
            fn, arg = self.q.get()
            fn(arg)

    def submit(self, fn: Callable[[Any], None], arg: Any) -> None:
        self.q.put((fn, arg))


def _disfavour_wakeups() -> None:
    """Puts the calling worker thread under SCHED_BATCH where the platform
    has it (Linux; an unprivileged thread may): the same CPU share, but its
    wake-up does not preempt the thread that woke it. A projection wakes a
    worker and then usually runs the job itself in wait(); on a loaded
    machine the woken worker used to preempt that thread inside project()
    (measured: project() p90 2-5 ms against 0.1 ms under SCHED_BATCH).
    Elsewhere, or when refused, the thread keeps its policy."""
    setter = getattr(os, "sched_setscheduler", None)
    batch = getattr(os, "SCHED_BATCH", None)
    if setter is None or batch is None:
        return
    try:
        setter(0, batch, os.sched_param(0))
    except OSError:
        pass


class _QueuedJob:
    """One queued job of a request: run exactly once, by the worker that
    dequeues it or by a thread waiting on the request's handle, whichever
    takes it first (under the request's lock). Taking it clears it: a job
    the waiter ran may sit in the pool's queue until a worker wakes, and
    must not keep the request (its handle, the result's storage) alive."""

    __slots__ = ("req", "fn", "nbytes")

    def __init__(self, req: "_Request", fn: Callable[[], None], nbytes: int) -> None:
        self.req: Optional[_Request] = req
        self.fn: Optional[Callable[[], None]] = fn
        self.nbytes = nbytes


def _run_queued(job: _QueuedJob) -> None:
    """A worker's turn: runs job unless a waiter took it."""
    req = job.req
    if req is None:  # (a waiter took it: cleared under the request's lock, read under the GIL)
        return
    fn = req._claim(job)
    if fn is not None:
        req._run(fn)


def _at_exit() -> None:
    """Waits (bounded) for tiled requests still pending at exit; a request
    still unfinished is abandoned with a warning on stderr."""
    import sys
    import time
    deadline = time.monotonic() + _EXIT_WAIT_S
    for st in list(_live_states):
        for req in list(st.pending):
            left = deadline - time.monotonic()
            try:
                req.handle.wait(timeout=max(left, 0.0))
            except TimeoutError:
                print("strideweave: abandoning a tiled request still pending at exit", file=sys.stderr)
                return
            except BaseException:
                pass


import atexit  # noqa: E402

atexit.register(_at_exit)


_live_states: "weakref.WeakSet[_State]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """The workers did not survive the fork: every request pending at fork
    fails with RuntimeError ("pending at fork") and gives its tiles and
    claims back, and the child starts a fresh pool on first use."""
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()
    for st in list(_live_states):
        st.lock = threading.RLock()
        for req in list(st.pending):
            req.lock = threading.Lock()
            req.queued.clear()  # (the parent's jobs: nobody runs them here)
            for c, tok in req.claims:
                try:
                    c._relinquish_ownership(tok)
                except Exception:
                    pass
            _h.fail(req.handle, RuntimeError("the tiled request was pending at fork; its work did not continue in "
                                             "the child process"))
        st.pending.clear()
        st.readers.clear()
        st.writers.clear()
        st.retained.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _executor() -> "_Pool":
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = _Pool()
        return _pool


def _zero_of(dtype: DType) -> Any:
    if dtype is DType.Bool:
        return False
    if dtype is DType.Int32 or (dtype.is_subtype_of(DType.Integer)):
        return 0
    return 0.0


def _flat(n: int) -> Layout:
    return Layout(Shape([n]), Stride([1]))


def _route_class(src_cls: type, dst_cls: type) -> type:
    try:
        return dispatch_move(src_cls, dst_cls)
    except Exception:
        return ElementwiseMoveOperation


# The exact-pair routes whose _copy is the engine's bulk span copy; a pair
# routed to one of them (its built-in class, not a registered override) is
# copied by _core._tiled_gather with the same span plan, but with the GIL
# released: a route _copy over a TiledEvictable tier (owned, copied under
# owner access) keeps the GIL for the whole copy.
_NATIVE_ROUTES = {(CPU, FileBacked): CpuToFileBackedMoveOperation,
                  (FileBacked, CPU): FileBackedToCpuMoveOperation,
                  (CPU, CPU): ElementwiseMoveOperation}


def _native_pair(src: Carrier, dst: Carrier) -> bool:
    key = (type(src), type(dst))
    want = _NATIVE_ROUTES.get(key)
    return want is not None and _route_class(*key) is want


def _gather_spans(copies: List[Tuple[Carrier, int, Carrier, int, int]]) -> None:
    """Every (src, src_first, dst, dst_first, count) span, all native pairs
    (_native_pair), as one engine call without the GIL."""
    _tiled_gather(copies, _GATHER_WAYS)


def _route_copy(src: Carrier, src_off: int, dst: Carrier, dst_off: int, count: int) -> None:
    """Physical span copy through the exact-pair move route of (src, dst)."""
    if _native_pair(src, dst):
        _tiled_gather([(src, src_off, dst, dst_off, count)], 1)
        return
    op = dispatch_move(type(src), type(dst))()
    lay = _flat(count)
    op._copy(Tensor(src, src_off, lay), dst, Tensor(dst, dst_off, lay), count)


def _logical_copy(src: Carrier, src_off: int, src_lay: Layout, dst: Carrier, dst_off: int, dst_lay: Layout) -> None:
    """Copy of every logical element (same shapes, any layouts)."""
    ElementwiseMoveOperation()._copy(Tensor(src, src_off, src_lay), dst, Tensor(dst, dst_off, dst_lay),
                                     src_lay.cosize)


class _Access:
    """Owner access on this thread to the given (carrier, token) pairs."""

    def __init__(self, pairs: Iterable[Tuple[Carrier, int]]) -> None:
        self.pairs = [p for p in pairs if p[1]]

    def __enter__(self) -> _Access:
        done = []
        try:
            for c, tok in self.pairs:
                c._begin_owner_access(tok)
                done.append((c, tok))
        except BaseException:
            for c, tok in reversed(done):
                c._end_owner_access(tok)
            raise
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        for c, tok in reversed(self.pairs):
            c._end_owner_access(tok)
        return False


class _Request:
    """One tiled request: worker jobs, the tiles it holds, its terminal commit."""

    def __init__(self, te: "TiledEvictable", handle: AwaitResult[Any], *, reads: Iterable[int] = (),
                 writes: Iterable[int] = (), claims: Iterable[Tuple[Carrier, int]] = ()) -> None:
        self.te = te
        self.handle = handle
        self.reads = list(reads)
        self.writes = list(writes)
        self.claims = list(claims)  # (carrier, token) the request claimed and gives back
        self.lock = threading.Lock()
        self.pending = 1  # the seal
        self.error: Optional[BaseException] = None
        self.commit: Callable[[], Any] = lambda: None
        self.grad_mode = is_grad_enabled()
        self.session = _h.active_session()  # the starting thread's profiler, if any
        self.finalizers: List[Callable[[], Any]] = []  # run once at terminal, success or failure
        self.queued: List[_QueuedJob] = []  # submitted jobs nobody has started (guarded by lock)
        # A projection's untimed wait() runs its queued jobs (run_on_waiter).
        # Not a residency request's: its transfers complete on the workers
        # (tests/test_tiled_profiling.py pins the completing threads).
        self.waiter_runs = isinstance(handle, AwaitProjection)
        self.item_bytes = max(1, (te._st.dtype.bits or 8) // 8)

    def submit(self, fn: Callable[[], None], src: Optional[Carrier] = None, dst: Optional[Carrier] = None,
               impl: Optional[type] = None) -> None:
        """Runs fn on a worker. With src (the tier or carrier it reads) and dst
        the job is a tile transfer: profiled as a move.submit / move.complete
        pair whose implementation is impl (default: the pair's move route)."""
        if self.session is not None and src is not None:
            if impl is None and dst is not None:
                impl = _route_class(type(src), type(dst))
            transfer = _h.Transfer(self.session, type(src), impl, (Shape(list(self.te._st.tile)),))
            transfer.submitted()
            fn = _h.timed(transfer, fn)
        self._queue(fn, self.te._st.T * self.item_bytes if src is not None else 0)

    def submit_group(self, fn: Callable[[], None],
                     parts: List[Tuple[Optional[Carrier], Optional[Carrier], Optional[type]]],
                     nbytes: Optional[int] = None) -> None:
        """Runs fn, one native call doing several tile transfers (src, dst,
        impl) at once, as one worker job: each transfer is profiled as its
        own move.submit / move.complete pair, all completing when fn returns
        (failed, if it raised). nbytes: what it copies (default: a tile
        per part)."""
        transfers = []
        if self.session is not None:
            for src, dst, impl in parts:
                if src is None:
                    continue
                if impl is None and dst is not None:
                    impl = _route_class(type(src), type(dst))
                transfer = _h.Transfer(self.session, type(src), impl, (Shape(list(self.te._st.tile)),))
                transfer.submitted()
                transfers.append(transfer)

        def run_group() -> None:
            ok = False
            try:
                fn()
                ok = True
            finally:
                for transfer in transfers:
                    transfer.finished(ok)
        self._queue(run_group if transfers else fn,
                    len(parts) * self.te._st.T * self.item_bytes if nbytes is None else nbytes)

    def submit_spans(self, spans: List[Tuple[Carrier, int, Carrier, int, int]]) -> None:
        """Tile span copies (src, src_first, dst, dst_first, count): the
        native ones (_native_pair) as one engine call in one worker job,
        every other one as its own job through its route _copy."""
        native = [sp for sp in spans if _native_pair(sp[0], sp[2])]
        if native:
            self.submit_group(lambda: _gather_spans(native), [(sp[0], sp[2], None) for sp in native],
                              sum(sp[4] for sp in native) * self.item_bytes)
        for sp in spans:
            if sp in native:
                continue

            def job(sp: Tuple[Carrier, int, Carrier, int, int] = sp) -> None:
                _route_copy(*sp)
            self.submit(job, sp[0], sp[2])

    def _queue(self, fn: Callable[[], None], nbytes: int) -> None:
        job = _QueuedJob(self, fn, nbytes)
        with self.lock:
            self.pending += 1
            self.queued.append(job)
        _executor().submit(_run_queued, job)

    def _claim(self, job: _QueuedJob) -> Optional[Callable[[], None]]:
        """Takes job out of the queue: its function for the one caller that
        got it, None for any other."""
        with self.lock:
            for i, q in enumerate(self.queued):
                if q is job:
                    del self.queued[i]
                    fn, job.fn, job.req = job.fn, None, None
                    return fn
        return None

    def run_on_waiter(self) -> None:
        """The handle's runner (an untimed wait() calls it once, before
        blocking): runs on the waiting thread, in order, the jobs no worker
        has started, while they total at most _WAITER_BYTES; completion,
        profiling and the terminal commit are those of a worker's run (the
        last job to finish commits, on whichever thread ran it). A
        KeyboardInterrupt raised in a job's Python code while it runs here
        fails the request with it, as any exception of a job does."""
        budget = _WAITER_BYTES
        while True:
            with self.lock:  # (taking the first queued job is _claim's removal, in one lock round)
                if not self.queued or self.queued[0].nbytes > budget:
                    return
                job = self.queued.pop(0)
                fn, job.fn, job.req = job.fn, None, None
            budget -= job.nbytes
            if fn is not None:
                self._run(fn)

    def _run(self, fn: Callable[[], None]) -> None:
        prev = is_grad_enabled()
        set_grad_enabled(False)
        try:
            with _Access(self.te._st.tokens_all() + self.claims):
                fn()
        except BaseException as e:  # recorded on the handle
            with self.lock:
                if self.error is None:
                    self.error = e
        finally:
            set_grad_enabled(prev)
            self._done_one()

    def seal(self) -> None:
        """All jobs are submitted; finish now if they already ran. The
        handle's untimed wait() may run the jobs still queued then."""
        if self.waiter_runs:
            with self.lock:
                queued = bool(self.queued)
            if queued:
                _h.set_runner(self.handle, self.run_on_waiter)
        self._done_one()

    def _done_one(self) -> None:
        with self.lock:
            self.pending -= 1
            last = self.pending == 0
        if last:
            self._finish()

    def unregister(self) -> None:
        """Drops this request's tile reads/writes, pending entry and claims
        (lock held): at terminal completion, or on abort before submission."""
        st = self.te._st
        for k in self.reads:
            n = st.readers.get(k, 0) - 1
            if n > 0:
                st.readers[k] = n
            else:
                st.readers.pop(k, None)
        for k in self.writes:
            if st.writers.get(k) is self:
                del st.writers[k]
        st.pending.discard(self)
        for c, tok in self.claims:
            try:
                c._relinquish_ownership(tok)
            except Exception:  # keep the request's own outcome
                pass

    def _finish(self) -> None:
        st = self.te._st
        result = None
        error = self.error
        with st.lock:
            try:
                if error is None:
                    with _Access(st.tokens_all() + self.claims):
                        st.committing = self  # (its own reads do not defer its plan's evictions)
                        try:
                            result = self.commit()
                        finally:
                            st.committing = None
            except BaseException as e:
                error = e
            finally:
                self.unregister()
                for fn in self.finalizers:
                    try:
                        fn()
                    except Exception:
                        pass
                try:
                    self.te._after_request()  # outside owner access: it relinquishes carriers
                except Exception:
                    pass
        if error is None:
            _h.complete(self.handle, result)
        else:
            _h.fail(self.handle, error)


class _State:
    """Mutable bookkeeping of one TiledEvictable (guarded by ``lock``)."""

    def __init__(self, dtype: DType, grid: Tuple[int, ...], tile: Tuple[int, ...], primary: Carrier,
                 secondary: Carrier, policy: Optional[ResidencyPolicy]) -> None:
        self.lock = threading.RLock()
        self.dtype = dtype
        self.grid = grid
        self.tile = tile
        self.T = prod(tile)
        self.N = prod(grid)
        self.total = self.T * self.N
        self.primary = primary
        self.secondary = secondary
        self.primary_proto = primary
        self.secondary_proto = secondary
        self.policy = policy
        self.tokens: dict[int, Tuple[Carrier, int]] = {}  # id(carrier) -> (carrier, token): every claimed tier carrier
        self.loc: List[str] = []
        self.dirty: List[bool] = []
        self.readers: dict[int, int] = {}  # tile ordinal -> count of pending reading requests
        self.writers: dict[int, _Request] = {}  # tile ordinal -> the pending request changing its residency
        self.pending: set[_Request] = set()
        self.committing: Optional[_Request] = None  # the request whose commit() is running (lock held)
        self.deferred: set[int] = set()  # tiles a plan evicts once no pending request reads or retains them
        self.retained: dict[int, int] = {}  # tile ordinal -> count of pending requests whose plan retains it
        self.released = False
        self.zeros: Optional[Carrier] = None
        # Per-tile primary storage: tile ordinal -> a private carrier of T
        # slots of the primary's class (offset 0). A primary-resident tile
        # not listed here lives in ``primary`` (the slab: a full carrier,
        # the constructor's or a fresh result's) at k * T.
        self.ptile: dict[int, Carrier] = {}
        # Freed tile buffers kept for the next promotion (at most _POOL_TILES).
        self.pool: List[Carrier] = []
        self.stages: List[Carrier] = []  # a kept staging carrier for projections into a caller's destination
        self.doomed: List[Carrier] = []  # freed tile buffers beyond the pool, released after the request
        self.geometry_cache: dict[Tuple[int, str], TileGeometry] = {}
        self.dense_layouts: dict[Tuple[int, ...], Layout] = {}  # compact grid -> its dense Layout
        self.last_geometry: Optional[Tuple[Layout, int, TileGeometry]] = None  # the last Layout checked
        _live_states.add(self)

    def prim(self, k: int) -> Tuple[Carrier, int]:
        """(carrier, slot offset) of primary-resident tile k's storage."""
        c = self.ptile.get(k)
        return (c, 0) if c is not None else (self.primary, k * self.T)

    def tokens_all(self) -> List[Tuple[Carrier, int]]:
        return list(self.tokens.values())

    def token(self, c: Carrier) -> int:
        return self.tokens[id(c)][1]

    def claim(self, c: Carrier) -> None:
        self.tokens[id(c)] = (c, c._claim_ownership())


def _tile_coord(k: int, grid: Tuple[int, ...]) -> Tuple[int, ...]:
    out = []
    for e in grid:
        out.append(k % e)
        k //= e
    return tuple(out)
