"""TiledEvictable residency: promote_async / evict_async and their blocking
forms, exact-pair tile transfers, atomic commit, dirty preservation,
non-blocking conflicts, release rules and the residency policy hook."""
import threading
import time

import pytest

import strideweave as sw
from strideweave.carriers.move import register_move_operation, unregister_move_operation
from strideweave.carriers.tiled_evictable import (ResidencyPlan, TiledEvictable, TileSelection, TileSet,
                                                   TileState)

F32 = sw.DType.Float32
from support.builders import ramp_cpu as filled
from support.tiled import pending


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
    register_move_operation(GateSecondary, GatePrimary, GatedOp)
    register_move_operation(GatePrimary, GateSecondary, GatedOp)
    yield GATE
    GATE.open.set()
    unregister_move_operation(GateSecondary, GatePrimary)
    unregister_move_operation(GatePrimary, GateSecondary)


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
