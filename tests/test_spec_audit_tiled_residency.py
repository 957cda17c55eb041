"""Spec audit (tiled-carrier-composition): residency invariants, conflicts
that raise instead of blocking, release with pending work, dropped handles,
invalid tiles and the residency policy's evictions."""
import gc
import threading
import time

import pytest

import strideweave as sw
from strideweave.carriers.move import register_move_operation, unregister_move_operation
from strideweave.carriers.tiled_evictable import (ResidencyPlan, TiledEvictable, TileSelection, TileSet,
                                                   TileState)
from support.builders import ramp_cpu
from support.carriers import FailingOp
from support.tiled import pending

F32 = sw.DType.Float32


class AuditPrimary(sw.Generic):
    pass


class AuditSecondary(sw.Generic):
    pass


class _Gate:
    def __init__(self):
        self.open = threading.Event()
        self.started = threading.Semaphore(0)


GATE = _Gate()


class GatedCopy(sw.MoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        GATE.started.release()
        assert GATE.open.wait(10)
        for i in range(output.size()):
            output[i] = tensor[i]


@pytest.fixture
def gate():
    global GATE
    GATE = _Gate()
    register_move_operation(AuditSecondary, AuditPrimary, GatedCopy)
    register_move_operation(AuditPrimary, AuditSecondary, GatedCopy)
    yield GATE
    GATE.open.set()
    unregister_move_operation(AuditSecondary, AuditPrimary)
    unregister_move_operation(AuditPrimary, AuditSecondary)


def rearm(gate):
    """Shuts the gate again and forgets the transfers already started."""
    gate.open.clear()
    gate.started = threading.Semaphore(0)


def gated(n_tiles=4, tile=2, policy=None):
    n = n_tiles * tile
    return TiledEvictable(AuditPrimary([float(i) for i in range(n)], dtype=F32),
                          AuditSecondary([0.0] * n, dtype=F32), (n_tiles,), (tile,), residency_policy=policy)


def full(te):
    return sw.Tensor(te, 0, te.canonical_layout())


def slots(te):
    return [te[i] for i in range(te.size())]


def locations(te):
    return [te.tile_state((k,)).location for k in range(te.grid_shape[0])]


class SettablePolicy:
    def __init__(self):
        self.next = ResidencyPlan()
        self.calls = []

    def plan(self, required, purpose):
        self.calls.append((required, purpose))
        return self.next


# ------------------------------------------------------------------ invariants of residency transitions

def test_residency_transitions_change_no_shape_layout_dtype_extent_identity_or_version():
    te = TiledEvictable(ramp_cpu(12), sw.FileBacked(dtype=F32), (2, 2), (3, 1))
    t = full(te)
    before = (t.layout, t.dtype(), te.size(), te.version, t.version, slots(te))
    te.evict(TileSet([(0, 0), (1, 1)]))
    te.promote(TileSet([(1, 1)]))
    te.evict_async(TileSelection([[0, 1], [0, 1]])).wait()
    te.promote_async(TileSet([(0, 1)])).wait()
    assert (t.layout, t.dtype(), te.size(), te.version, t.version, slots(te)) == before
    assert t.carrier is te and t.autograd_ctx is None


def test_a_non_product_tile_set_is_a_valid_cache_set():
    te = TiledEvictable(ramp_cpu(4), sw.FileBacked(dtype=F32), (2, 2), (1, 1))
    te.evict(TileSet([(0, 0), (1, 0), (0, 1), (1, 1)]))
    te.promote(TileSet([(0, 0), (0, 1), (1, 0)]))
    assert [te.tile_state(c).location for c in ((0, 0), (1, 0), (0, 1), (1, 1))] == \
        ["primary", "primary", "primary", "secondary"]
    r = te.project(full(te), TileSelection([[0, 1], [0, 1]])).wait()
    assert [r[i] for i in range(4)] == [0.0, 1.0, 2.0, 3.0]


def test_evicting_dirty_tiles_commits_every_value_to_the_secondary_and_returns_none():
    sec = sw.FileBacked(dtype=F32)
    te = TiledEvictable(sw.CPU(0), sec, (3,), (2,))
    for i in range(6):
        te[i] = 10.0 + i
    assert all(te.tile_state((k,)).dirty for k in range(3))
    assert te.evict(TileSet([(0,), (2,)])) is None
    assert [te.tile_state((k,)) for k in range(3)] == [TileState("secondary", True, False),
                                                       TileState("primary", True, True),
                                                       TileState("secondary", True, False)]
    assert [sec[i] for i in (0, 1, 4, 5)] == [10.0, 11.0, 14.0, 15.0]
    assert slots(te) == [10.0 + i for i in range(6)]


def test_a_failed_residency_request_keeps_values_version_and_ownership(gate):
    te = gated(n_tiles=2)
    v = te.version
    unregister_move_operation(AuditPrimary, AuditSecondary)
    register_move_operation(AuditPrimary, AuditSecondary, FailingOp)
    with pytest.raises(OSError, match="injected"):
        te.evict(TileSet([(0,), (1,)]))
    assert [te.tile_state((k,)) for k in range(2)] == [TileState("primary", True, True)] * 2
    assert te.version == v and slots(te) == [0.0, 1.0, 2.0, 3.0]
    assert te.primary.is_owned() and pending(te) == 0
    te[0] = 5.0  # writable again: the request holds nothing


# ------------------------------------------------------------------ conflicts never block

def test_scatter_overlapping_a_pending_residency_request_raises_without_blocking(gate):
    te = gated()
    t = full(te)
    comp = te.project(t, TileSelection([[1]])).wait()
    h = te.evict_async(TileSet([(1,), (2,)]))
    assert gate.started.acquire(timeout=5)
    t0 = time.monotonic()
    for reduction in ("replace", "add"):
        with pytest.raises(RuntimeError, match="wait"):
            te.scatter(comp, t, TileSelection([[1]]), reduction)
    assert time.monotonic() - t0 < 2.0 and not h.done
    # a disjoint scatter proceeds
    out = te.scatter(comp, t, TileSelection([[3]])).wait()
    assert [out[6], out[7]] == [2.0, 3.0]
    gate.open.set()
    assert h.wait() is None
    assert locations(te) == ["primary", "secondary", "secondary", "primary"]


def test_a_pending_projection_protects_its_source_tiles_and_its_destination(gate):
    te = gated()
    gate.open.set()
    te.evict(TileSet([(0,)]))
    rearm(gate)
    t = full(te)
    dest = AuditPrimary([7.0] * 4, dtype=F32)
    h = te.project(t, TileSelection([[0, 1]]), dest)
    assert gate.started.acquire(timeout=5)
    assert not h.done
    with pytest.raises(RuntimeError, match="wait"):
        te[2] = 1.0                       # a selected tile: its value is captured by the projection
    with pytest.raises(RuntimeError):
        dest[0] = 1.0                     # the destination stays valid for the request
    with pytest.raises(RuntimeError):
        dest.release()
    te[6] = 60.0                          # an unselected tile is free
    gate.open.set()
    r = h.wait()
    assert r.carrier is dest and [r[i] for i in range(4)] == [0.0, 1.0, 2.0, 3.0]
    dest[0] = 1.0
    te[2] = 1.0


def test_release_with_a_pending_scatter_raises_and_cancels_nothing(gate):
    te = gated()
    gate.open.set()
    te.evict(TileSet([(2,)]))
    rearm(gate)
    t = full(te)
    sel = TileSelection([[2]])
    compact = sw.Tensor(AuditPrimary([1.0, 1.0], dtype=F32), 0, sw.Layout(sw.Shape([[2, 1]]), sw.Stride([[1, 2]])))
    h = te.scatter(compact, t, sel, "add")   # reads tile 2 from the secondary: gated
    assert gate.started.acquire(timeout=5)
    with pytest.raises(RuntimeError, match="wait"):
        te.release()
    assert not te.is_released()
    gate.open.set()
    out = h.wait()
    assert [out[4], out[5]] == [5.0, 6.0]
    assert te.release() is None and te.is_released()
    assert te.release() is None


def test_a_dropped_residency_handle_still_reaches_its_terminal_commit(gate):
    te = gated()
    h = te.evict_async(TileSet([(0,), (3,)]))
    assert gate.started.acquire(timeout=5)
    del h
    gc.collect()
    assert locations(te) == ["primary"] * 4
    gate.open.set()
    end = time.monotonic() + 10
    while pending(te) and time.monotonic() < end:
        time.sleep(0.01)
    assert locations(te) == ["secondary", "primary", "primary", "secondary"]
    assert slots(te) == [float(i) for i in range(8)]


def test_concurrent_waits_on_one_projection_see_the_same_tensor(gate):
    te = gated()
    gate.open.set()
    te.evict(TileSet([(1,)]))
    rearm(gate)
    h = te.project(full(te), TileSelection([[1, 0]]))
    got = []
    threads = [threading.Thread(target=lambda: got.append(h.wait())) for _ in range(3)]
    for th in threads:
        th.start()
    time.sleep(0.05)
    gate.open.set()
    for th in threads:
        th.join(10)
    assert len(got) == 3 and got[0] is got[1] is got[2] is h.wait()


# ------------------------------------------------------------------ invalid tiles

def test_invalid_tiles_are_not_readable_by_any_request():
    te = TiledEvictable(ramp_cpu(6), sw.CPU(0), (3,), (2,))
    t = full(te)
    sel = TileSelection([[1]])
    out_t = te.scatter(te.project(t, sel).wait(), t, sel).wait()
    out = out_t.carrier
    for call in (lambda: out.project(out_t, TileSelection([[0]])),
                 lambda: out.promote(TileSet([(2,)])),
                 lambda: sw.reduce_sum(out_t),
                 lambda: out.scatter(te.project(t, sel).wait(), out_t, TileSelection([[0]]), "add"),
                 lambda: out[0]):
        with pytest.raises(RuntimeError, match="invalid"):
            call()
    assert out.tile_state((0,)) == TileState("invalid", False, False) and pending(out) == 0
    # replace scatter initialises an invalid tile
    again = out.scatter(te.project(t, sel).wait(), out_t, TileSelection([[0]])).wait()
    assert again.carrier.tile_state((0,)) == TileState("primary", True, True)
    assert [again[0], again[1]] == [2.0, 3.0]


# ------------------------------------------------------------------ policy evictions

@pytest.mark.parametrize("purpose", ["projection", "operation", "scatter"])
def test_a_plan_evicting_the_requests_own_tiles_evicts_them_after_the_request(purpose):
    pol = SettablePolicy()
    te = TiledEvictable(ramp_cpu(8), sw.FileBacked(dtype=F32), (4,), (2,), residency_policy=pol)
    t = full(te)
    sel = TileSelection([[1, 2]])
    compact = None
    if purpose == "scatter":
        compact = te.project(t, sel).wait()
    pol.next = ResidencyPlan(evict=TileSet([(1,), (2,)]))
    if purpose == "projection":
        r = te.project(t, sel).wait()
        assert [r[i] for i in range(4)] == [2.0, 3.0, 4.0, 5.0]
    elif purpose == "operation":
        assert sw.reduce_sum(t).item() == 28.0
    else:
        te.scatter(compact, t, sel, "add").wait()
    assert pol.calls[-1][1] == purpose
    assert [te.tile_state((k,)) for k in range(4)] == [TileState("primary", True, True),
                                                       TileState("secondary", True, False),
                                                       TileState("secondary", True, False),
                                                       TileState("primary", True, True)]
    assert slots(te) == [float(i) for i in range(8)]


def test_a_plan_eviction_of_a_tile_earlier_pending_work_needs_is_deferred_until_it_ends(gate):
    pol = SettablePolicy()
    te = gated(policy=pol)
    gate.open.set()
    te.evict(TileSet([(0,)]))
    rearm(gate)
    t = full(te)
    first = te.project(t, TileSelection([[0, 1]]))   # tile 0 gated on the secondary, tile 1 primary
    assert gate.started.acquire(timeout=5)
    pol.next = ResidencyPlan(evict=TileSet([(1,)]))
    r2 = te.project(t, TileSelection([[3]])).wait()  # primary tile only: completes while `first` is pending
    assert [r2[0], r2[1]] == [6.0, 7.0]
    assert te.tile_state((1,)).location == "primary"
    gate.open.set()
    r = first.wait()
    assert [r[i] for i in range(4)] == [0.0, 1.0, 2.0, 3.0]
    # the deferred eviction happens once no live work needs the tile
    assert te.tile_state((1,)) == TileState("secondary", True, False)
    assert [te[2], te[3]] == [2.0, 3.0]


def test_a_scatter_plan_promotes_its_promote_tiles():
    pol = SettablePolicy()
    te = TiledEvictable(sw.CPU(0), ramp_cpu(8), (4,), (2,), residency_policy=pol)
    t = full(te)
    sel = TileSelection([[1, 2]])
    compact = te.project(t, sel).wait()
    pol.next = ResidencyPlan(promote=TileSet([(1,), (3,)]))
    for reduction in ("replace", "add"):
        res = te.scatter(compact, t, sel, reduction).wait()
        assert pol.calls[-1] == (sel.tile_set, "scatter")
        assert [te.tile_state((k,)).location for k in range(4)] == ["secondary", "primary", "secondary", "primary"]
        assert slots(te) == [float(i) for i in range(8)]
        want = [2.0, 3.0, 4.0, 5.0] if reduction == "replace" else [4.0, 6.0, 8.0, 10.0]
        assert [res[i] for i in range(2, 6)] == want
        te.evict(TileSet([(1,), (3,)]))


def test_a_tile_a_pending_requests_plan_retains_stays_primary_until_that_request_ends(gate):
    pol = SettablePolicy()
    te = gated(policy=pol)
    gate.open.set()
    te.evict(TileSet([(0,)]))
    rearm(gate)
    t = full(te)
    pol.next = ResidencyPlan(retain=TileSet([(1,)]))
    first = te.project(t, TileSelection([[0]]))       # gated on the secondary; retains tile 1
    assert gate.started.acquire(timeout=5)
    pol.next = ResidencyPlan(evict=TileSet([(1,)]))
    r2 = te.project(t, TileSelection([[3]])).wait()   # completes while `first` is pending
    assert [r2[0], r2[1]] == [6.0, 7.0]
    assert te.tile_state((1,)) == TileState("primary", True, True)
    gate.open.set()
    r = first.wait()
    assert [r[0], r[1]] == [0.0, 1.0]
    assert te.tile_state((1,)) == TileState("secondary", True, False)
    assert slots(te) == [float(i) for i in range(8)]
    assert te._request_counts() == {"pending": 0, "retained": 0, "deferred": 0}


def test_a_policy_promotion_of_pending_work_is_no_conflict_for_other_data_requests(gate):
    # A policy may only optimize: with a policy promoting what a request needs,
    # overlapping projections and scatters started before the first is waited
    # for must succeed exactly as they do without a policy.
    pol = SettablePolicy()
    te = gated(policy=pol)
    gate.open.set()
    te.evict(TileSet([(0,), (1,)]))
    rearm(gate)
    t = full(te)
    pol.next = ResidencyPlan(promote=TileSet([(0,), (1,)]))
    first = te.project(t, TileSelection([[0, 1]]))     # gathers and promotes: gated
    assert gate.started.acquire(timeout=5)
    second = te.project(t, TileSelection([[1]]))
    compact = sw.Tensor(AuditPrimary([10.0, 20.0], dtype=F32), 0, sw.Layout(sw.Shape([[2, 1]]), sw.Stride([[1, 2]])))
    third = te.scatter(compact, t, TileSelection([[0]]), "add")
    gate.open.set()
    assert [first.wait()[i] for i in range(4)] == [0.0, 1.0, 2.0, 3.0]
    assert [second.wait()[i] for i in range(2)] == [2.0, 3.0]
    out = third.wait()
    assert [out[0], out[1]] == [10.0, 21.0]
    assert [te.tile_state((k,)).location for k in range(2)] == ["primary", "primary"]
    assert slots(te) == [float(i) for i in range(8)]
    # an explicit residency request is still a conflict for them
    rearm(gate)
    h = te.evict_async(TileSet([(3,)]))
    assert gate.started.acquire(timeout=5)
    with pytest.raises(RuntimeError, match="wait"):
        te.project(t, TileSelection([[3]]))
    gate.open.set()
    h.wait()


def test_an_operation_reads_tiles_another_requests_policy_is_promoting(gate):
    pol = SettablePolicy()
    te = gated(policy=pol)
    gate.open.set()
    te.evict(TileSet([(0,), (1,)]))
    rearm(gate)
    t = full(te)
    pol.next = ResidencyPlan(promote=TileSet([(0,), (1,)]))
    first = te.project(t, TileSelection([[0]]))        # promotes tiles 0 and 1: gated
    assert gate.started.acquire(timeout=5)
    pol.next = ResidencyPlan()
    opener = threading.Timer(0.2, gate.open.set)        # the operation's own reads are gated too
    opener.start()
    try:
        assert sw.reduce_sum(t).item() == 28.0
    finally:
        opener.join()
    assert [first.wait()[i] for i in range(2)] == [0.0, 1.0]
    assert [te.tile_state((k,)).location for k in range(4)] == ["primary"] * 4


def test_a_plan_promotes_a_tile_that_other_pending_work_is_reading(gate):
    pol = SettablePolicy()
    te = gated(policy=pol)
    gate.open.set()
    te.evict(TileSet([(0,), (1,)]))
    rearm(gate)
    t = full(te)
    first = te.project(t, TileSelection([[0, 1]]))      # no plan: reads both from the secondary (gated)
    assert gate.started.acquire(timeout=5)
    pol.next = ResidencyPlan(promote=TileSet([(0,)]))
    second = te.project(t, TileSelection([[0]]))
    gate.open.set()
    assert [second.wait()[i] for i in range(2)] == [0.0, 1.0]
    assert [first.wait()[i] for i in range(4)] == [0.0, 1.0, 2.0, 3.0]
    assert te.tile_state((0,)) == TileState("primary", True, False)
    assert te.tile_state((1,)) == TileState("secondary", True, False)
