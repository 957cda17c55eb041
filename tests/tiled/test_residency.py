"""TiledEvictable residency: promote_async / evict_async and their blocking
forms, exact-pair tile transfers, atomic commit, dirty preservation,
non-blocking conflicts, release rules and the residency policy hook."""
import threading
import time

import pytest

import strideweave as sw
from strideweave.carriers.move import register_move_operation, unregister_move_operation
from strideweave.carriers.tiled_evictable import ResidencyPlan, TiledEvictable, TileSelection, TileSet, TileState

F32 = sw.DType.Float32
from support.builders import ramp_cpu as filled
from support.tiled import pending
from support.carriers import FailingOp
from support.moves import routes_both_ways
import gc
from support.builders import ramp_cpu


class GatePrimary(sw.Generic):
    pass


class GateSecondary(sw.Generic):
    pass


class Gate:
    """Controls the gated tile transfers: records starts, holds them until
    opened, fails the tiles whose source offset is in ``fail``."""

    def __init__(self):
        self.open = threading.Event()
        self.started = []
        self.fail = set()
        self.lock = threading.Lock()

    def wait_started(self, n, timeout=5.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                if len(self.started) >= n:
                    return True
            time.sleep(0.005)
        return False


GATE = Gate()


class GatedOp(sw.MoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        with GATE.lock:
            GATE.started.append((type(tensor.carrier).__name__, tensor.offset))
        assert GATE.open.wait(10)
        if tensor.offset in GATE.fail:
            raise OSError(f"injected failure at {tensor.offset}")
        for i in range(output.size()):
            output[i] = tensor[i]


@pytest.fixture
def gate():
    global GATE
    GATE = Gate()
    with routes_both_ways(GateSecondary, GatePrimary, GatedOp):
        yield GATE
        GATE.open.set()


def gated(n_tiles=4, tile=2):
    n = n_tiles * tile
    p = GatePrimary([float(i) for i in range(n)], dtype=F32)
    s = GateSecondary([0.0] * n, dtype=F32)
    return TiledEvictable(p, s, (n_tiles,), (tile,))


def file_tiled(n_tiles=4, tile=3):
    return TiledEvictable(filled(n_tiles * tile), sw.FileBacked(dtype=F32), (n_tiles,), (tile,))


def handle_contract(h):
    assert isinstance(h.done, bool)
    assert not hasattr(h, "__await__")
    with pytest.raises(TypeError):
        type(h)()


# ------------------------------------------------------------------ basic transitions

def test_evict_then_promote_round_trip_through_file_backed():
    te = file_tiled()
    h = te.evict_async(TileSet([(1,), (3,)]))
    handle_contract(h)
    assert h.wait() is None and h.wait() is None and h.done
    assert te.tile_state((1,)) == TileState("secondary", True, False)
    assert te.tile_state((0,)) == TileState("primary", True, True)
    assert [te[i] for i in range(12)] == [float(i) for i in range(12)]
    assert te.promote(TileSet([(1,)])) is None
    assert te.tile_state((1,)) == TileState("primary", True, False)
    assert te.tile_state((3,)).location == "secondary"


def test_residency_accepts_a_tile_selection_as_its_tile_set():
    te = file_tiled()
    te.evict(TileSelection([[0, 2]]))
    assert te.tile_state((0,)).location == "secondary" and te.tile_state((2,)).location == "secondary"


def test_residency_argument_errors():
    te = file_tiled()
    for bad in ([(0,)], (0,), None, "x"):
        with pytest.raises(TypeError, match="TileSet"):
            te.promote_async(bad)
    with pytest.raises(ValueError, match="rank"):
        te.evict_async(TileSet([(0, 0)]))
    with pytest.raises(ValueError, match="out of range"):
        te.evict_async(TileSet([(4,)]))
    te.release()
    with pytest.raises(RuntimeError, match="released"):
        te.promote_async(TileSet([(0,)]))
    with pytest.raises(RuntimeError, match="released"):
        te.evict(TileSet([(0,)]))


def test_repeating_a_satisfied_request_is_idempotent_and_copies_nothing(gate):
    te = gated()
    gate.open.set()
    te.evict(TileSet([(0,)]))
    n = len(gate.started)
    te.evict(TileSet([(0,)]))
    h = te.evict_async(TileSet([(0,)]))
    assert h.done  # nothing to transfer: complete on return
    assert len(gate.started) == n
    te.promote(TileSet([(1,)]))  # already primary
    assert len(gate.started) == n


def test_dirty_values_are_preserved_and_clean_evictions_copy_nothing(gate):
    te = gated()
    gate.open.set()
    te.evict(TileSet([(1,)]))          # dirty: copied
    assert gate.started == [("GatePrimary", 2)]
    te.promote(TileSet([(1,)]))        # clean primary now
    assert te.tile_state((1,)) == TileState("primary", True, False)
    te.evict(TileSet([(1,)]))          # clean: no copy
    assert len(gate.started) == 2
    assert [te[2], te[3]] == [2.0, 3.0]
    te[3] = 9.0                        # write: promote (copy) + dirty
    te.evict(TileSet([(1,)]))
    assert te.secondary[3] == 9.0


def test_promotion_creates_no_autograd_node_and_keeps_identity():
    te = file_tiled()
    t = sw.Tensor(te, 0, te.canonical_layout())
    te.evict(TileSet([(0,), (1,)]))
    te.promote(TileSelection([[0, 1]]))
    assert t.autograd_ctx is None and t.carrier is te
    assert t.layout == te.canonical_layout()


def test_implicit_tiles_promote_to_zero_primary_values():
    te = TiledEvictable(sw.CPU(0), sw.FileBacked(dtype=F32), (3,), (2,))
    te.promote(TileSet([(1,)]))
    assert te.tile_state((1,)) == TileState("primary", True, True)
    assert te.tile_state((0,)) == TileState("implicit", True, False)
    te.evict(TileSet([(1,)]))
    assert te.tile_state((1,)) == TileState("secondary", True, False)
    assert [te[2], te[3]] == [0.0, 0.0]


# ------------------------------------------------------------------ asynchrony, atomicity, conflicts

def test_every_tile_transfer_starts_before_the_call_returns_and_commit_is_atomic(gate):
    te = gated(n_tiles=4)
    h = te.evict_async(TileSet([(0,), (1,), (3,)]))
    assert gate.wait_started(3), gate.started  # all three run concurrently while the gate is shut
    assert not h.done
    # nothing committed while pending
    assert all(te.tile_state((k,)).location == "primary" for k in range(4))
    assert [te[i] for i in range(8)] == [float(i) for i in range(8)]  # reads continue
    gate.open.set()
    assert h.wait() is None
    assert [te.tile_state((k,)).location for k in range(4)] == ["secondary", "secondary", "primary", "secondary"]


def test_a_failed_request_changes_nothing_and_records_one_exception(gate):
    te = gated(n_tiles=3)
    gate.fail = {2}
    h = te.evict_async(TileSet([(0,), (1,), (2,)]))
    gate.open.set()
    with pytest.raises(OSError, match="injected failure") as e1:
        h.wait()
    with pytest.raises(OSError) as e2:
        h.wait()
    assert e1.value is e2.value
    assert all(te.tile_state((k,)) == TileState("primary", True, True) for k in range(3))
    # usable again: the tiles are no longer held
    gate.fail = set()
    te.evict(TileSet([(1,)]))
    assert te.tile_state((1,)).location == "secondary"


def test_conflicts_raise_instead_of_blocking(gate):
    te = gated(n_tiles=4)
    t = sw.Tensor(te, 0, te.canonical_layout())
    h = te.evict_async(TileSet([(0,), (1,)]))
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="wait"):
        te.promote_async(TileSet([(1,), (2,)]))
    with pytest.raises(RuntimeError, match="wait"):
        te.project(t, TileSelection([[1]]))
    with pytest.raises(RuntimeError, match="wait"):
        te[0] = 5.0
    with pytest.raises(RuntimeError, match="wait"):
        te.release()
    assert not te.is_released()
    assert time.monotonic() - t0 < 2.0
    # a disjoint request proceeds
    h2 = te.evict_async(TileSet([(2,)]))
    gate.open.set()
    h.wait()
    h2.wait()
    assert [te.tile_state((k,)).location for k in range(4)] == ["secondary"] * 3 + ["primary"]
    te.release()
    assert te.is_released()


def test_eviction_cannot_commit_tiles_a_pending_projection_needs(gate):
    te = gated(n_tiles=2)
    t = sw.Tensor(te, 0, te.canonical_layout())
    gate.open.set()
    te.evict(TileSet([(0,), (1,)]))
    gate.open.clear()
    p = te.project(t, TileSelection([[1, 0]]))  # secondary -> GatePrimary destination: gated
    assert gate.wait_started(4)
    assert not p.done
    for call in (te.evict_async, te.promote_async):
        with pytest.raises(RuntimeError, match="wait"):
            call(TileSet([(0,)]))
    with pytest.raises(RuntimeError, match="wait"):
        te.release()
    gate.open.set()
    r = p.wait()
    assert [r[i] for i in range(4)] == [2.0, 3.0, 0.0, 1.0]
    assert type(r.carrier) is GatePrimary
    te.promote(TileSet([(0,)]))  # the tiles are free again


# ------------------------------------------------------------------ release

def test_release_after_completed_work_releases_both_tiers():
    te = file_tiled()
    te.evict(TileSet([(0,), (1,)]))
    prim, sec = te.primary, te.secondary
    te.release()
    assert prim.is_released() and sec.is_released()
    with pytest.raises(RuntimeError, match="released"):
        te.promote(TileSet([(0,)]))
    with pytest.raises(RuntimeError, match="released"):
        te[0]


def test_empty_tiers_get_storage_on_first_use():
    p, s = sw.CPU(0), sw.FileBacked(dtype=F32)
    te = TiledEvictable(p, s, (2,), (2,))
    te[1] = 4.0
    # primary residency is per tile: the written tile got a private 2-slot
    # buffer, the primary carrier itself stays empty
    assert te.primary.size() == 0 and type(te.primary) is sw.CPU and te._primary_bytes() == 2 * 4
    te.evict(TileSet([(0,)]))
    assert s.size() == 4 and te.secondary is s  # FileBacked grows in place
    assert te[1] == 4.0
    te.release()
    assert p.is_released() and s.is_released() and te.primary.is_released()


# ------------------------------------------------------------------ policy

class RecordingPolicy:
    def __init__(self, plan=None, exc=None):
        self.calls = []
        self.result = plan if plan is not None else sw.ResidencyPlan()
        self.exc = exc

    def plan(self, required, purpose):
        self.calls.append((required, purpose))
        if self.exc:
            raise self.exc
        return self.result


def policy_tiled(policy):
    return TiledEvictable(sw.CPU(0), filled(8), (4,), (2,), residency_policy=policy)


def test_policy_is_called_with_the_required_set_and_purpose():
    pol = RecordingPolicy()
    te = policy_tiled(pol)
    t = sw.Tensor(te, 0, te.canonical_layout())
    sel = TileSelection([[2, 0]])
    te.project(t, sel).wait()
    assert pol.calls == [(sel.tile_set, "projection")]
    assert te.residency_policy is pol


def test_policy_plan_is_applied():
    pol = RecordingPolicy(ResidencyPlan(promote=TileSet([(1,)])))
    te = policy_tiled(pol)
    t = sw.Tensor(te, 0, te.canonical_layout())
    r = te.project(t, TileSelection([[1, 3]])).wait()
    assert [r[i] for i in range(4)] == [2.0, 3.0, 6.0, 7.0]
    assert te.tile_state((1,)).location == "primary"
    assert te.tile_state((3,)).location == "secondary"
    pol.result = ResidencyPlan(evict=TileSet([(1,)]))
    te.project(t, TileSelection([[3]])).wait()
    assert te.tile_state((1,)).location == "secondary"


@pytest.mark.parametrize("result, exc, fragment", [
    ("not a plan", TypeError, "ResidencyPlan"),
    (None, TypeError, "ResidencyPlan"),
])
def test_a_bad_policy_result_fails_before_any_work(result, exc, fragment):
    class P:
        def plan(self, required, purpose):
            return result

    te = policy_tiled(P())
    t = sw.Tensor(te, 0, te.canonical_layout())
    with pytest.raises(exc, match=fragment):
        te.project(t, TileSelection([[0]]))
    assert pending(te) == 0 and te.tile_state((0,)).location == "secondary"


def test_an_out_of_grid_plan_is_a_value_error_and_a_policy_exception_propagates():
    te = policy_tiled(RecordingPolicy(ResidencyPlan(promote=TileSet([(9,)]))))
    t = sw.Tensor(te, 0, te.canonical_layout())
    with pytest.raises(ValueError, match="out of range"):
        te.project(t, TileSelection([[0]]))
    te2 = policy_tiled(RecordingPolicy(exc=KeyError("boom")))
    t2 = sw.Tensor(te2, 0, te2.canonical_layout())
    with pytest.raises(KeyError, match="boom"):
        te2.project(t2, TileSelection([[0]]))
    assert pending(te2) == 0


# ------------------------------------------------------------ invariants, conflicts that raise instead of blocking, and the policy's evictions


class CountedPrimary(sw.Generic):
    pass


class CountedSecondary(sw.Generic):
    pass


class _Gate:
    def __init__(self):
        self.open = threading.Event()
        self.started = threading.Semaphore(0)


COUNTED_GATE = _Gate()


class GatedCopy(sw.MoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        COUNTED_GATE.started.release()
        assert COUNTED_GATE.open.wait(10)
        for i in range(output.size()):
            output[i] = tensor[i]


@pytest.fixture
def gate_counted():
    global COUNTED_GATE
    COUNTED_GATE = _Gate()
    with routes_both_ways(CountedSecondary, CountedPrimary, GatedCopy):
        yield COUNTED_GATE
        COUNTED_GATE.open.set()


def rearm(gate_counted):
    """Shuts the gate again and forgets the transfers already started."""
    gate_counted.open.clear()
    gate_counted.started = threading.Semaphore(0)


def gated_counted(n_tiles=4, tile=2, policy=None):
    n = n_tiles * tile
    return TiledEvictable(CountedPrimary([float(i) for i in range(n)], dtype=F32),
                          CountedSecondary([0.0] * n, dtype=F32), (n_tiles,), (tile,), residency_policy=policy)


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


def test_a_failed_residency_request_keeps_values_version_and_ownership(gate_counted):
    te = gated_counted(n_tiles=2)
    v = te.version
    unregister_move_operation(CountedPrimary, CountedSecondary)
    register_move_operation(CountedPrimary, CountedSecondary, FailingOp)
    with pytest.raises(OSError, match="injected"):
        te.evict(TileSet([(0,), (1,)]))
    assert [te.tile_state((k,)) for k in range(2)] == [TileState("primary", True, True)] * 2
    assert te.version == v and slots(te) == [0.0, 1.0, 2.0, 3.0]
    assert te.primary.is_owned() and pending(te) == 0
    te[0] = 5.0  # writable again: the request holds nothing


def test_scatter_overlapping_a_pending_residency_request_raises_without_blocking(gate_counted):
    te = gated_counted()
    t = full(te)
    comp = te.project(t, TileSelection([[1]])).wait()
    h = te.evict_async(TileSet([(1,), (2,)]))
    assert gate_counted.started.acquire(timeout=5)
    t0 = time.monotonic()
    for reduction in ("replace", "add"):
        with pytest.raises(RuntimeError, match="wait"):
            te.scatter(comp, t, TileSelection([[1]]), reduction)
    assert time.monotonic() - t0 < 2.0 and not h.done
    # a disjoint scatter proceeds
    out = te.scatter(comp, t, TileSelection([[3]])).wait()
    assert [out[6], out[7]] == [2.0, 3.0]
    gate_counted.open.set()
    assert h.wait() is None
    assert locations(te) == ["primary", "secondary", "secondary", "primary"]


def test_a_pending_projection_protects_its_source_tiles_and_its_destination(gate_counted):
    te = gated_counted()
    gate_counted.open.set()
    te.evict(TileSet([(0,)]))
    rearm(gate_counted)
    t = full(te)
    dest = CountedPrimary([7.0] * 4, dtype=F32)
    h = te.project(t, TileSelection([[0, 1]]), dest)
    assert gate_counted.started.acquire(timeout=5)
    assert not h.done
    with pytest.raises(RuntimeError, match="wait"):
        te[2] = 1.0                       # a selected tile: its value is captured by the projection
    with pytest.raises(RuntimeError):
        dest[0] = 1.0                     # the destination stays valid for the request
    with pytest.raises(RuntimeError):
        dest.release()
    te[6] = 60.0                          # an unselected tile is free
    gate_counted.open.set()
    r = h.wait()
    assert r.carrier is dest and [r[i] for i in range(4)] == [0.0, 1.0, 2.0, 3.0]
    dest[0] = 1.0
    te[2] = 1.0


def test_release_with_a_pending_scatter_raises_and_cancels_nothing(gate_counted):
    te = gated_counted()
    gate_counted.open.set()
    te.evict(TileSet([(2,)]))
    rearm(gate_counted)
    t = full(te)
    sel = TileSelection([[2]])
    compact = sw.Tensor(CountedPrimary([1.0, 1.0], dtype=F32), 0, sw.Layout(sw.Shape([[2, 1]]), sw.Stride([[1, 2]])))
    h = te.scatter(compact, t, sel, "add")   # reads tile 2 from the secondary: gated
    assert gate_counted.started.acquire(timeout=5)
    with pytest.raises(RuntimeError, match="wait"):
        te.release()
    assert not te.is_released()
    gate_counted.open.set()
    out = h.wait()
    assert [out[4], out[5]] == [5.0, 6.0]
    assert te.release() is None and te.is_released()
    assert te.release() is None


def test_a_dropped_residency_handle_still_reaches_its_terminal_commit(gate_counted):
    te = gated_counted()
    h = te.evict_async(TileSet([(0,), (3,)]))
    assert gate_counted.started.acquire(timeout=5)
    del h
    gc.collect()
    assert locations(te) == ["primary"] * 4
    gate_counted.open.set()
    end = time.monotonic() + 10
    while pending(te) and time.monotonic() < end:
        time.sleep(0.01)
    assert locations(te) == ["secondary", "primary", "primary", "secondary"]
    assert slots(te) == [float(i) for i in range(8)]


def test_concurrent_waits_on_one_projection_see_the_same_tensor(gate_counted):
    te = gated_counted()
    gate_counted.open.set()
    te.evict(TileSet([(1,)]))
    rearm(gate_counted)
    h = te.project(full(te), TileSelection([[1, 0]]))
    got = []
    threads = [threading.Thread(target=lambda: got.append(h.wait())) for _ in range(3)]
    for th in threads:
        th.start()
    time.sleep(0.05)
    gate_counted.open.set()
    for th in threads:
        th.join(10)
    assert len(got) == 3 and got[0] is got[1] is got[2] is h.wait()


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


def test_a_plan_eviction_of_a_tile_earlier_pending_work_needs_is_deferred_until_it_ends(gate_counted):
    pol = SettablePolicy()
    te = gated_counted(policy=pol)
    gate_counted.open.set()
    te.evict(TileSet([(0,)]))
    rearm(gate_counted)
    t = full(te)
    first = te.project(t, TileSelection([[0, 1]]))   # tile 0 gated on the secondary, tile 1 primary
    assert gate_counted.started.acquire(timeout=5)
    pol.next = ResidencyPlan(evict=TileSet([(1,)]))
    r2 = te.project(t, TileSelection([[3]])).wait()  # primary tile only: completes while `first` is pending
    assert [r2[0], r2[1]] == [6.0, 7.0]
    assert te.tile_state((1,)).location == "primary"
    gate_counted.open.set()
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


def test_a_tile_a_pending_requests_plan_retains_stays_primary_until_that_request_ends(gate_counted):
    pol = SettablePolicy()
    te = gated_counted(policy=pol)
    gate_counted.open.set()
    te.evict(TileSet([(0,)]))
    rearm(gate_counted)
    t = full(te)
    pol.next = ResidencyPlan(retain=TileSet([(1,)]))
    first = te.project(t, TileSelection([[0]]))       # gated on the secondary; retains tile 1
    assert gate_counted.started.acquire(timeout=5)
    pol.next = ResidencyPlan(evict=TileSet([(1,)]))
    r2 = te.project(t, TileSelection([[3]])).wait()   # completes while `first` is pending
    assert [r2[0], r2[1]] == [6.0, 7.0]
    assert te.tile_state((1,)) == TileState("primary", True, True)
    gate_counted.open.set()
    r = first.wait()
    assert [r[0], r[1]] == [0.0, 1.0]
    assert te.tile_state((1,)) == TileState("secondary", True, False)
    assert slots(te) == [float(i) for i in range(8)]
    assert te._request_counts() == {"pending": 0, "retained": 0, "deferred": 0}


def test_a_policy_promotion_of_pending_work_is_no_conflict_for_other_data_requests(gate_counted):
    # A policy may only optimize: with a policy promoting what a request needs,
    # overlapping projections and scatters started before the first is waited
    # for must succeed exactly as they do without a policy.
    pol = SettablePolicy()
    te = gated_counted(policy=pol)
    gate_counted.open.set()
    te.evict(TileSet([(0,), (1,)]))
    rearm(gate_counted)
    t = full(te)
    pol.next = ResidencyPlan(promote=TileSet([(0,), (1,)]))
    first = te.project(t, TileSelection([[0, 1]]))     # gathers and promotes: gated
    assert gate_counted.started.acquire(timeout=5)
    second = te.project(t, TileSelection([[1]]))
    compact = sw.Tensor(CountedPrimary([10.0, 20.0], dtype=F32), 0, sw.Layout(sw.Shape([[2, 1]]), sw.Stride([[1, 2]])))
    third = te.scatter(compact, t, TileSelection([[0]]), "add")
    gate_counted.open.set()
    assert [first.wait()[i] for i in range(4)] == [0.0, 1.0, 2.0, 3.0]
    assert [second.wait()[i] for i in range(2)] == [2.0, 3.0]
    out = third.wait()
    assert [out[0], out[1]] == [10.0, 21.0]
    assert [te.tile_state((k,)).location for k in range(2)] == ["primary", "primary"]
    assert slots(te) == [float(i) for i in range(8)]
    # an explicit residency request is still a conflict for them
    rearm(gate_counted)
    h = te.evict_async(TileSet([(3,)]))
    assert gate_counted.started.acquire(timeout=5)
    with pytest.raises(RuntimeError, match="wait"):
        te.project(t, TileSelection([[3]]))
    gate_counted.open.set()
    h.wait()


def test_an_operation_reads_tiles_another_requests_policy_is_promoting(gate_counted):
    pol = SettablePolicy()
    te = gated_counted(policy=pol)
    gate_counted.open.set()
    te.evict(TileSet([(0,), (1,)]))
    rearm(gate_counted)
    t = full(te)
    pol.next = ResidencyPlan(promote=TileSet([(0,), (1,)]))
    first = te.project(t, TileSelection([[0]]))        # promotes tiles 0 and 1: gated
    assert gate_counted.started.acquire(timeout=5)
    pol.next = ResidencyPlan()
    opener = threading.Timer(0.2, gate_counted.open.set)        # the operation's own reads are gated too
    opener.start()
    try:
        assert sw.reduce_sum(t).item() == 28.0
    finally:
        opener.join()
    assert [first.wait()[i] for i in range(2)] == [0.0, 1.0]
    assert [te.tile_state((k,)).location for k in range(4)] == ["primary"] * 4


def test_a_plan_promotes_a_tile_that_other_pending_work_is_reading(gate_counted):
    pol = SettablePolicy()
    te = gated_counted(policy=pol)
    gate_counted.open.set()
    te.evict(TileSet([(0,), (1,)]))
    rearm(gate_counted)
    t = full(te)
    first = te.project(t, TileSelection([[0, 1]]))      # no plan: reads both from the secondary (gated)
    assert gate_counted.started.acquire(timeout=5)
    pol.next = ResidencyPlan(promote=TileSet([(0,)]))
    second = te.project(t, TileSelection([[0]]))
    gate_counted.open.set()
    assert [second.wait()[i] for i in range(2)] == [0.0, 1.0]
    assert [first.wait()[i] for i in range(4)] == [0.0, 1.0, 2.0, 3.0]
    assert te.tile_state((0,)) == TileState("primary", True, False)
    assert te.tile_state((1,)) == TileState("secondary", True, False)
