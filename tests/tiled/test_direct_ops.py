"""Direct operations on full TiledEvictable tensors (spec: "A direct tiled
operand means the full logical Tensor"; API.md sections 6 and 13): add, mul
(tensor x tensor, tensor x number, number x tensor), relu and reduce_sum read
every tile wherever it lives, return an ordinary dense tensor of the
primary's class, record exactly one node, and hand the tiled input a
TiledEvictable gradient."""
import threading
import time

import numpy as np
import pytest

import strideweave as sw
from strideweave.carriers.move import register_move_operation, unregister_move_operation
from strideweave.carriers.tiled_evictable import ResidencyPlan, TiledEvictable, TileSelection, TileSet, TileState

F32 = sw.DType.Float32
GRID, TILE = (3, 2), (2, 2)  # 6 tiles of 4 slots


def slot_values():
    """Slot i of the mixed carrier below (tiles 4 and 5 stay implicit zero)."""
    v = np.zeros(24, dtype=np.float32)
    for i in range(16):
        v[i] = (i - 7.5) * 0.5  # tiles 0, 1 negative, tiles 2, 3 positive
    return v


def mixed(layout=None, policy=None):
    """A partially resident TiledEvictable: tiles 0 and 2 secondary
    (FileBacked), tiles 1 and 3 primary (dirty), tiles 4 and 5 implicit
    zero. Returns (te, full tensor, slot values)."""
    te = TiledEvictable(sw.CPU(0), sw.FileBacked(dtype=F32), GRID, TILE, residency_policy=policy)
    v = slot_values()
    for i in range(16):
        te[i] = float(v[i])
    te.evict(TileSet([(0, 0), (2, 0)]))  # tiles 0 and 2 by ordinal (first axis fastest)
    t = sw.Tensor(te, 0, layout if layout is not None else te.canonical_layout())
    return te, t, v


def logical(t, slots):
    """The logical values of tensor t (flat ordinals) from its slot values."""
    return np.array([slots[t.offset + t.layout.index(k)] for k in range(t.size())], dtype=np.float32)


def dense_values(r):
    return np.array([r[k] for k in range(r.size())], dtype=np.float32)


def cpu_of(values):
    c = sw.CPU(len(values))
    for i, x in enumerate(values):
        c[i] = float(x)
    return c


def states(te):
    return [te.tile_state((a, b)) for b in range(GRID[1]) for a in range(GRID[0])]


def test_the_fixture_is_partially_resident():
    te, t, _ = mixed()
    assert [s.location for s in states(te)] == ["secondary", "primary", "secondary", "primary", "implicit",
                                                "implicit"]


# ------------------------------------------------------------------ values

@pytest.mark.parametrize("op", ["add_self", "add_cpu", "mul_self", "mul_cpu", "mul_num", "num_mul", "relu",
                                "reduce_sum", "operators"])
def test_values_match_numpy_on_a_partially_resident_tensor(op):
    te, t, slots = mixed()
    before = states(te)
    x = logical(t, slots)
    other_vals = np.arange(24, dtype=np.float32) * 0.25 - 2.0
    other = sw.Tensor(cpu_of(other_vals), 0, sw.Layout.canonical(t.layout.shape))
    if op == "add_self":
        r, want = sw.add(t, t), x + x
    elif op == "add_cpu":
        r, want = sw.add(t, other), x + other_vals
    elif op == "mul_self":
        r, want = sw.mul(t, t), x * x
    elif op == "mul_cpu":
        r, want = sw.mul(other, t), other_vals * x
    elif op == "mul_num":
        r, want = sw.mul(t, 1.5), x * np.float32(1.5)
    elif op == "num_mul":
        r, want = sw.mul(-2, t), x * -2
    elif op == "relu":
        r, want = sw.relu(t), np.maximum(x, 0)
    elif op == "reduce_sum":
        r, want = sw.reduce_sum(t), np.array([x.sum()], dtype=np.float32)
    else:
        r, want = 3.0 * t + (-t), x * 3 - x
    assert type(r.carrier) is sw.CPU  # the primary's class, not TiledEvictable
    assert r.dtype() is F32
    if op != "reduce_sum":
        assert r.layout == sw.Layout.canonical(t.layout.shape)
    np.testing.assert_allclose(dense_values(r), want, rtol=1e-6)
    # the operand still denotes the full tensor; no policy: residency unchanged
    assert t.carrier is te and states(te) == before


def test_a_within_tile_permuted_layout_is_honoured():
    # mode 0 and mode 1 swap strides inside each tile: a compatible Layout
    lay = sw.Layout(sw.Shape([[2, 3], [2, 2]]), sw.Stride([[2, 4], [1, 12]]))
    te, t, slots = mixed(layout=lay)
    x = logical(t, slots)
    canon = logical(sw.Tensor(te, 0, te.canonical_layout()), slots)
    assert not np.array_equal(x, canon)
    np.testing.assert_allclose(dense_values(sw.mul(t, 2.0)), x * 2)
    sw.reduce_sum(sw.relu(t)).backward()
    g = t.grad
    assert type(g.carrier) is TiledEvictable and g.layout == lay
    np.testing.assert_array_equal(dense_values(g), (x > 0).astype(np.float32))


def test_generic_primary_results_are_generic():
    te = TiledEvictable(sw.Generic([1.0, -2.0, 3.0, -4.0], dtype=F32), sw.Generic([], dtype=F32), (2,), (2,))
    t = sw.Tensor(te, 0, te.canonical_layout())
    te.evict(TileSet([(0,)]))
    r = sw.relu(sw.add(t, t))
    assert type(r.carrier) is sw.Generic
    assert dense_values(r).tolist() == [2.0, 0.0, 6.0, 0.0]


def test_int32_tiles_compute_without_a_node():
    c = sw.CPU(4, dtype=sw.DType.Int32)
    for i in range(4):
        c[i] = i - 1
    te = TiledEvictable(c, sw.FileBacked(dtype=sw.DType.Int32), (2,), (2,))
    te.evict(TileSet([(1,)]))
    t = sw.Tensor(te, 0, te.canonical_layout())
    r = sw.mul(t, 3)
    assert r.dtype() is sw.DType.Int32 and r.autograd_ctx is None
    assert dense_values(r).tolist() == [-3, 0, 3, 6]
    assert sw.reduce_sum(t)[0] == 2


# ------------------------------------------------------------------ one node, gradients

def test_one_visible_node_per_direct_operation():
    te, t, _ = mixed()
    m = sw.mul(t, 2.0)
    assert type(m.autograd_ctx) is sw.MulOperation
    (saved,) = m.autograd_ctx.inputs()
    assert saved is t and t.autograd_ctx is None  # the tiled tensor itself, a leaf
    s = sw.reduce_sum(m)
    assert type(s.autograd_ctx) is sw.ReduceSumOperation and s.autograd_ctx.inputs()[0] is m
    a = sw.add(t, t)
    assert type(a.autograd_ctx) is sw.AddOperation
    assert all(x is t for x in a.autograd_ctx.inputs())
    assert type(sw.relu(t).autograd_ctx) is sw.ReluOperation
    with sw.no_grad():
        assert sw.mul(t, 2.0).autograd_ctx is None


def test_the_profiler_sees_one_event_per_operation():
    te, t, _ = mixed()
    with sw.profile() as prof:
        sw.reduce_sum(sw.mul(t, 2.0))
    events = prof.events()
    names = [e.name for e in events]
    # One operation event per op; the tile transfers that made the values
    # available are move events (not operations), paired submit/complete.
    assert [n for n in names if not n.startswith("move.")] == ["mul", "reduce_sum"], names
    submits = {e.id for e in events if e.name == "move.submit"}
    completes = [e for e in events if e.name == "move.complete"]
    assert len(completes) == len(submits) and {e.parent_id for e in completes} == submits


def test_gradient_of_reduce_sum_of_mul_by_number_is_a_fresh_tiled_evictable():
    te, t, slots = mixed()
    sw.reduce_sum(sw.mul(t, 2.0)).backward()
    g = t.grad
    gte = g.carrier
    assert type(gte) is TiledEvictable and gte is not te
    assert g.layout == t.layout
    assert gte.grid_shape == GRID and gte.tile_shape == TILE
    assert type(gte.primary) is sw.CPU and type(gte.secondary) is sw.FileBacked
    np.testing.assert_array_equal(dense_values(g), np.full(24, 2.0, dtype=np.float32))


def test_relu_gradient_leaves_zero_tiles_implicit():
    te, t, slots = mixed()
    x = logical(t, slots)
    sw.reduce_sum(sw.relu(t)).backward()
    g = t.grad
    np.testing.assert_array_equal(dense_values(g), (x > 0).astype(np.float32))
    locs = [s.location for s in states(g.carrier)]
    # tiles 0, 1 (all negative) and 4, 5 (implicit zero inputs) get a zero gradient
    assert locs[0] == locs[1] == locs[4] == locs[5] == "implicit"
    assert g.carrier.tile_state((2, 0)) == TileState("primary", True, True)


def test_mul_of_tiled_and_cpu_gradients_reach_both():
    te, t, slots = mixed()
    x = logical(t, slots)
    yv = np.linspace(-1, 1, 24).astype(np.float32)
    y = sw.Tensor(cpu_of(yv), 0, sw.Layout.canonical(t.layout.shape))
    sw.reduce_sum(sw.mul(t, y)).backward()
    np.testing.assert_allclose(dense_values(t.grad), yv, rtol=1e-6)
    np.testing.assert_allclose(dense_values(y.grad), x, rtol=1e-6)
    assert type(t.grad.carrier) is TiledEvictable and type(y.grad.carrier) is sw.CPU


def test_add_mixing_a_tiled_and_a_cpu_tensor():
    te, t, slots = mixed()
    x = logical(t, slots)
    y = sw.Tensor(cpu_of(np.ones(24)), 0, sw.Layout.canonical(t.layout.shape))
    r = sw.add(y, t)
    assert type(r.carrier) is sw.CPU
    np.testing.assert_allclose(dense_values(r), x + 1)
    sw.reduce_sum(r).backward()
    assert dense_values(t.grad).tolist() == [1.0] * 24 and dense_values(y.grad).tolist() == [1.0] * 24
    # a scalar-shaped CPU tensor broadcasts against the tiled operand
    one = sw.Tensor(cpu_of([5.0]), 0, sw.Layout(sw.Shape([[1, 1], [1, 1]]), sw.Stride([[0, 0], [0, 0]])))
    np.testing.assert_allclose(dense_values(sw.add(t, one)), x + 5)


def test_add_refuses_a_tiled_tensor_with_another_compute_class():
    te, t, _ = mixed()
    g = sw.Tensor(sw.Generic([0.0] * 24, dtype=F32), 0, sw.Layout.canonical(t.layout.shape))
    with pytest.raises(TypeError, match="one carrier class"):
        sw.add(t, g)
    with pytest.raises(TypeError, match="one carrier class"):
        sw.mul(g, t)


def test_self_products_and_sums_accumulate():
    te, t, slots = mixed()
    x = logical(t, slots)
    sw.reduce_sum(sw.add(sw.mul(t, t), t)).backward()
    np.testing.assert_allclose(dense_values(t.grad), 2 * x + 1, rtol=1e-6)
    assert type(t.grad.carrier) is TiledEvictable


def test_backward_reads_evicted_tiles_again():
    class Recording:
        def __init__(self):
            self.calls = []

        def plan(self, required, purpose):
            self.calls.append((len(required), purpose))
            return ResidencyPlan()

    pol = Recording()
    te, t, slots = mixed(policy=pol)
    x = logical(t, slots)
    y = sw.Tensor(cpu_of(np.full(24, 3.0)), 0, sw.Layout.canonical(t.layout.shape))
    s = sw.reduce_sum(sw.relu(sw.mul(y, t)))
    assert pol.calls == [(6, "operation")]  # mul alone reads tiles; relu reads its dense input
    te.evict(TileSet([(a, b) for a in range(3) for b in range(2)]))
    pol.calls.clear()
    s.backward()
    # relu reads its (dense) input, mul reads the tiled input for y's gradient
    assert pol.calls == [(6, "backward")]
    np.testing.assert_allclose(dense_values(y.grad), np.where(3 * x > 0, x, 0), rtol=1e-6)
    np.testing.assert_allclose(dense_values(t.grad), np.where(3 * x > 0, 3.0, 0.0), rtol=1e-6)


def test_an_add_backward_reads_no_tile_and_calls_no_policy():
    class Recording:
        calls = []

        def plan(self, required, purpose):
            self.calls.append(purpose)
            return ResidencyPlan()

    pol = Recording()
    te, t, _ = mixed(policy=pol)
    s = sw.reduce_sum(sw.add(t, 1.0 * t))
    Recording.calls.clear()
    s.backward()
    assert Recording.calls == []
    assert dense_values(t.grad).tolist() == [2.0] * 24


def test_backward_after_an_in_place_write_is_refused():
    te, t, _ = mixed()
    s = sw.reduce_sum(sw.mul(t, 2.0))
    te[20] = 1.0
    with pytest.raises(RuntimeError, match="modified in-place"):
        s.backward()


# ------------------------------------------------------------------ refusals

def test_released_carrier_is_a_runtime_error():
    te, t, _ = mixed()
    te.release()
    for call in (lambda: sw.add(t, t), lambda: sw.mul(t, 2.0), lambda: sw.mul(2.0, t), lambda: sw.relu(t),
                 lambda: sw.reduce_sum(t)):
        with pytest.raises(RuntimeError, match="released"):
            call()


def test_backward_after_release_is_a_runtime_error():
    te, t, _ = mixed()
    y = sw.Tensor(cpu_of(np.ones(24)), 0, sw.Layout.canonical(t.layout.shape))
    s = sw.reduce_sum(sw.mul(t, y))
    te.release()
    with pytest.raises(RuntimeError, match="released"):
        s.backward()
    assert y.grad is None
    # a backward that reads no tile still hands out its tiled gradient
    te2, t2, _ = mixed()
    s2 = sw.reduce_sum(sw.mul(t2, 2.0))
    te2.release()
    s2.backward()
    assert dense_values(t2.grad).tolist() == [2.0] * 24


@pytest.mark.parametrize("layout", [
    sw.Layout(sw.Shape([24]), sw.Stride([1])),                                 # rank mismatch
    sw.Layout(sw.Shape([[2, 3], [2, 2]]), sw.Stride([[1, 2], [6, 12]])),       # tiles span carrier tiles
    sw.Layout(sw.Shape([[2, 3], [2, 2]]), sw.Stride([[1, 4], [0, 12]])),       # repeats a slot
    sw.Layout(sw.Shape([[2, 3], [2, 2]]), sw.Stride([[1, 8], [2, 4]])),        # tile coordinates remapped
])
def test_incompatible_layouts_are_value_errors_before_any_work(layout):
    class Recording:
        calls = []

        def plan(self, required, purpose):
            self.calls.append(purpose)
            return ResidencyPlan(promote=TileSet([(0, 0)]))

    te, good, _ = mixed(policy=Recording())
    bad = sw.Tensor(te, 0, layout)
    before = states(te)
    Recording.calls.clear()
    for call in (lambda: sw.add(good, bad), lambda: sw.mul(bad, good), lambda: sw.mul(bad, 2.0),
                 lambda: sw.relu(bad), lambda: sw.reduce_sum(bad)):
        with pytest.raises(ValueError, match="tile-footprint compatible"):
            call()
    # validation of both operands precedes the materialization of the good one
    assert Recording.calls == [] and states(te) == before


@pytest.mark.parametrize("kind", ["projection", "residency", "move"])
def test_pending_handles_are_not_tensor_operands(kind):
    te, t, _ = mixed()
    if kind == "projection":
        h = te.project(t, TileSelection([[0, 1], [0]]))
    elif kind == "residency":
        h = te.promote_async(TileSet([(0, 0)]))
    else:
        compact = te.project(t, TileSelection([[0], [0]])).wait()
        h = te.scatter(compact, t, TileSelection([[0], [0]]))
    for call in (lambda: sw.add(h, t), lambda: sw.add(t, h), lambda: sw.mul(h, t), lambda: sw.mul(h, 2.0),
                 lambda: sw.relu(h), lambda: sw.reduce_sum(h)):
        with pytest.raises(TypeError):
            call()
    with pytest.raises(TypeError):
        t + h
    h.wait()


def test_a_native_await_move_is_not_a_tensor_operand():
    te, t, _ = mixed()
    src = sw.Tensor(cpu_of(np.ones(24)), 0, sw.Layout.canonical(t.layout.shape))
    h = sw.move_async(src, sw.FileBacked(dtype=F32))
    assert isinstance(h, sw.AwaitMove)
    for call in (lambda: sw.add(t, h), lambda: sw.mul(h, t), lambda: sw.mul(t, h), lambda: sw.relu(h),
                 lambda: sw.reduce_sum(h)):
        with pytest.raises(TypeError):
            call()
    h.wait()


# ------------------------------------------------------------------ pending residency conflicts

class GatePrimary(sw.Generic):
    pass


class GateSecondary(sw.Generic):
    pass


_GATE = threading.Event()


class GatedOp(sw.MoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        assert _GATE.wait(10)
        for i in range(output.size()):
            output[i] = tensor[i]


@pytest.fixture
def gate():
    _GATE.clear()
    register_move_operation(GatePrimary, GateSecondary, GatedOp)
    yield _GATE
    _GATE.set()
    unregister_move_operation(GatePrimary, GateSecondary)


def test_a_pending_residency_request_is_a_conflict_not_a_wait(gate):
    p = GatePrimary([1.0, -2.0, 3.0, -4.0], dtype=F32)
    te = TiledEvictable(p, GateSecondary([0.0] * 4, dtype=F32), (2,), (2,))
    t = sw.Tensor(te, 0, te.canonical_layout())
    h = te.evict_async(TileSet([(1,)]))  # dirty: its write-back is held by the gate
    assert not h.done
    t0 = time.monotonic()
    for call in (lambda: sw.add(t, t), lambda: sw.mul(t, 2.0), lambda: sw.relu(t), lambda: sw.reduce_sum(t)):
        with pytest.raises(RuntimeError, match="wait"):
            call()
    assert time.monotonic() - t0 < 2.0
    assert not h.done
    gate.set()
    h.wait()
    assert te.tile_state((1,)).location == "secondary"
    r = sw.mul(t, 2.0)
    assert dense_values(r).tolist() == [2.0, -4.0, 6.0, -8.0]
    assert type(r.carrier) is GatePrimary


# ------------------------------------------------------------------ gradient hand-off and accumulation

def test_the_node_hands_a_tiled_gradient_with_zero_tiles_implicit():
    te, t, slots = mixed()
    r = sw.relu(t)
    ones = sw.Tensor(cpu_of(np.ones(24)), 0, r.layout)
    (g,) = r.autograd_ctx.backward(ones)
    assert type(g.carrier) is TiledEvictable and g.carrier is not te and g.layout == t.layout
    locs = [s.location for s in states(g.carrier)]
    assert locs == ["implicit", "implicit", "primary", "primary", "implicit", "implicit"]
    np.testing.assert_array_equal(dense_values(g), (logical(t, slots) > 0).astype(np.float32))


def test_accumulation_sums_tiled_and_dense_contributions_into_one_tiled_gradient():
    # (the sum runs tile by tile in the native core: whole spans, never
    # slot by slot through the carriers)
    te, t, slots = mixed()
    x = logical(t, slots)
    s = sw.add(sw.reduce_sum(sw.mul(t, 3.0)), sw.reduce_sum(sw.relu(t)))
    part = te.project(t, TileSelection([[1, 2], [1]])).wait()  # tiles (1, 1), (2, 1): ordinals 4 and 5
    s = sw.add(s, sw.reduce_sum(part))
    s.backward()
    want = 3.0 + (x > 0)
    ords = np.array([t.layout.index(k) // 4 for k in range(24)])  # tile ordinal of each element
    want = want + np.isin(ords, [4, 5])
    np.testing.assert_allclose(dense_values(t.grad), want)
    assert type(t.grad.carrier) is TiledEvictable


def test_dense_and_tiled_contributions_sum_into_one_tiled_gradient():
    class Twice(sw.Operation):
        """Hands its input a dense CPU gradient of 2 (a user-defined node)."""

        def _forward(self, x):
            return sw.Tensor(cpu_of([0.0]), 0, sw.Layout(sw.Shape([]), sw.Stride([])))

        def backward(self, g):
            (x,) = self.inputs()
            return (sw.Tensor(cpu_of(np.full(24, 2.0)), 0, x.layout),)

    te = TiledEvictable(sw.CPU(0), sw.FileBacked(dtype=F32), GRID, TILE)  # all implicit zero
    t = sw.Tensor(te, 0, te.canonical_layout())
    s = sw.add(Twice().forward(t), sw.reduce_sum(sw.relu(t)))  # relu of zeros: zero gradient
    s.backward()
    assert dense_values(t.grad).tolist() == [2.0] * 24
    s2 = sw.reduce_sum(sw.relu(t))
    s2.backward()  # adds an all-zero (implicit) tiled gradient to the earlier one
    assert dense_values(t.grad).tolist() == [2.0] * 24


def test_generic_primary_gradients():
    te = TiledEvictable(sw.Generic([1.0, -2.0, 3.0, -4.0], dtype=F32), sw.Generic([], dtype=F32), (2,), (2,))
    t = sw.Tensor(te, 0, te.canonical_layout())
    sw.reduce_sum(sw.add(sw.mul(t, t), sw.relu(t))).backward()
    assert type(t.grad.carrier) is TiledEvictable and type(t.grad.carrier.primary) is sw.Generic
    assert dense_values(t.grad).tolist() == [3.0, -4.0, 7.0, -8.0]


def test_operand_errors_of_the_other_argument_come_before_any_tile_is_read():
    class Recording:
        calls = []

        def plan(self, required, purpose):
            self.calls.append(purpose)
            return ResidencyPlan()

    te, t, _ = mixed(policy=Recording())
    wrong = sw.Tensor(cpu_of(np.ones(5)), 0, sw.Layout(sw.Shape([5]), sw.Stride([1])))
    with pytest.raises(ValueError, match="broadcast"):
        sw.add(t, wrong)
    with pytest.raises(TypeError, match="expects a Tensor or a Python int/float"):
        sw.mul(t, "2")
    c = sw.CPU(4, dtype=sw.DType.Int32)
    ti = TiledEvictable(c, sw.CPU(0, dtype=sw.DType.Int32), (2,), (2,), residency_policy=Recording())
    with pytest.raises(TypeError, match="only by an int"):
        sw.mul(sw.Tensor(ti, 0, ti.canonical_layout()), 2.5)
    assert Recording.calls == []
