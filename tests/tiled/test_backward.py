"""The backward of mul and relu on full TiledEvictable tensors reads the tiled
input band by band, like the forward (issue 13, item 6 leftovers): no dense
copy of the tiled operand, gradients identical to the dense path's (same
kernels, same arithmetic per coordinate) and to NumPy, over random mixes of
tile states (secondary, dirty primary, clean primary, implicit zero) and
several layouts. A gradient whose storage the backward just allocated
becomes the TiledEvictable gradient's primary (no copy).

The dense path is what the private ``_options.dense_only`` knob forces
(the opt-out the measurements use), so both run in one build.
"""
import numpy as np
import pytest

import strideweave as sw
from strideweave.carriers.move import register_move_operation, unregister_move_operation
from strideweave.carriers.tiled_evictable import ResidencyPlan, TiledEvictable, TileSet

from support.carriers import FailSecondary
from support.tiled import dense_only, dense_spy

F32 = sw.DType.Float32
GRID, TILE = (4, 3), (8, 4)  # 12 tiles of 32 slots
T, N = 32, 12
STATES = ("secondary", "dirty", "clean", "implicit")

LAYOUTS = {
    "canonical": None,
    "permuted": sw.Layout(sw.Shape([[8, 4], [4, 3]]), sw.Stride([[4, 32], [1, 128]])),
    "flat": sw.Layout(sw.Shape([[2, 4, 4], [4, 3]]), sw.Stride([[1, 2, 32], [8, 128]])),
}


def flat(n):
    return sw.Layout(sw.Shape(n), sw.Stride(1))


def cpu_array(values):
    c = sw.CPU(len(values), dtype=F32, empty=True)
    np.from_dlpack(sw.Tensor(c, 0, flat(len(values))))[:] = values
    return c


def values(t):
    return np.array([t[k] for k in range(t.size())], dtype=np.float32)


def tiled_values(t):
    return np.array([t.carrier[t.offset + t.layout.index(k)] for k in range(t.size())], dtype=np.float32)


def coord(k):
    return (k % GRID[0], k // GRID[0])


def locations(te):
    return [te.tile_state(coord(k)).location for k in range(N)]


def random_tiled(seed, policy=None, states=None):
    """A TiledEvictable whose tiles are in random states: secondary (on the
    file), dirty primary (written), clean primary (promoted back), implicit
    zero. Returns (te, slot values, states)."""
    rng = np.random.default_rng(seed)
    states = list(states or rng.choice(STATES, N))
    v = (rng.standard_normal(N * T) * 3).astype(np.float32)
    v[rng.random(N * T) < 0.1] = 0.0  # some exact zeros (relu's boundary)
    te = TiledEvictable(sw.CPU(0), sw.FileBacked(dtype=F32), GRID, TILE, residency_policy=policy)
    for k, s in enumerate(states):
        if s == "implicit":
            v[k * T:(k + 1) * T] = 0
            continue
        for j in range(T):
            te[k * T + j] = v[k * T + j].item()
    written = [coord(k) for k, s in enumerate(states) if s != "implicit"]
    if written:
        te.evict(TileSet(written))
    back = [coord(k) for k, s in enumerate(states) if s in ("dirty", "clean")]
    if back:
        te.promote(TileSet(back))
    for k, s in enumerate(states):
        if s == "dirty":
            te[k * T] = v[k * T].item()  # a write marks it dirty (same value)
    want = ["secondary" if s == "secondary" else "implicit" if s == "implicit" else "primary" for s in states]
    assert locations(te) == want
    assert [te.tile_state(coord(k)).dirty for k in range(N)] == [s == "dirty" for s in states]
    return te, v, states




def full(te, name):
    lay = LAYOUTS[name]
    return sw.Tensor(te, 0, lay if lay is not None else te.canonical_layout())


def cpu_like(t, v):
    return sw.Tensor(cpu_array(v), 0, sw.Layout.canonical(t.layout.shape))


OPS = ["mul_dense", "mul_self", "mul_two_tiled", "mul_num", "relu", "relu_of_mul", "add", "add_self", "reduce_sum"]


def run(op, seed, layout):
    """Forward and backward of op on fresh random inputs; returns the
    gradients (NumPy, logical order) and the reference (NumPy)."""
    te, _, _ = random_tiled(seed)
    t = full(te, layout)
    x = tiled_values(t)
    rng = np.random.default_rng(seed + 1000)
    cv = rng.standard_normal(N * T).astype(np.float32)
    c = cpu_like(t, cv)  # the cotangent reaching op's result: c
    ov = rng.standard_normal(N * T).astype(np.float32)
    other = cpu_like(t, ov)
    te2 = None
    if op == "mul_dense":
        r = sw.mul(t, other)
        want = {"t": cv * ov, "other": cv * x}
    elif op == "mul_self":
        r = sw.mul(t, t)
        want = {"t": cv * x + cv * x}
    elif op == "mul_two_tiled":
        te2, _, _ = random_tiled(seed + 7)
        t2 = full(te2, layout)
        y = tiled_values(t2)
        r = sw.mul(t, t2)
        want = {"t": cv * y, "t2": cv * x}
    elif op == "mul_num":
        r = sw.mul(t, 1.5)
        want = {"t": (cv.astype(np.float64) * 1.5).astype(np.float32)}
    elif op == "relu":
        r = sw.relu(t)
        want = {"t": np.where(x > 0, cv, 0).astype(np.float32)}
    elif op == "relu_of_mul":  # relu on a dense tensor, mul's backward reads the tiles
        r = sw.relu(sw.mul(other, t))
        p = ov * x
        want = {"t": np.where(p > 0, cv, 0) * ov, "other": np.where(p > 0, cv, 0) * x}
    elif op == "add":
        r = sw.add(other, t)
        want = {"t": cv, "other": cv}
    elif op == "add_self":
        r = sw.add(t, t)
        want = {"t": cv + cv}
    else:
        r = sw.reduce_sum(t)
        c = sw.Tensor(cpu_array(cv[:1]), 0, r.layout)
        want = {"t": np.full(N * T, cv[0], np.float32)}
    before = locations(te)
    sw.reduce_sum(sw.mul(r, c)).backward()
    assert locations(te) == before  # backward changes no residency
    got = {"t": t.grad}
    if "other" in want:
        got["other"] = other.grad
    if te2 is not None:
        got["t2"] = t2.grad
    for name, g in got.items():
        if name == "other":
            assert type(g.carrier) is sw.CPU
        else:
            assert type(g.carrier) is TiledEvictable and g.layout == t.layout
            assert type(g.carrier.primary) in (sw.CPU,)
    return {k: (tiled_values(g) if k != "other" else values(g)) for k, g in got.items()}, want, got


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("op", OPS)
def test_gradients_equal_the_dense_path_and_numpy(op, layout, monkeypatch):
    for seed in (1, 2, 3):
        calls = dense_spy(monkeypatch)
        tiles, want, _ = run(op, seed, layout)
        assert "backward" not in calls and "operation" not in calls, calls  # no dense copy of a tile
        dense_only(monkeypatch)  # the dense path
        dense, _, _ = run(op, seed, layout)
        monkeypatch.undo()
        assert sorted(tiles) == sorted(dense) == sorted(want)
        for name in tiles:
            np.testing.assert_array_equal(tiles[name], dense[name], err_msg=f"{op} {name} seed {seed}")
            np.testing.assert_allclose(tiles[name], want[name], rtol=1e-6, atol=1e-6)


def test_the_dense_opt_out_really_takes_the_dense_path(monkeypatch):
    dense_only(monkeypatch)
    calls = dense_spy(monkeypatch)
    run("relu_of_mul", 5, "canonical")
    assert calls == ["operation", "backward"]


@pytest.mark.parametrize("op", ["relu", "mul_num", "reduce_sum", "mul_dense"])
def test_zero_gradient_tiles_stay_implicit_and_the_rest_is_the_adopted_slab(op):
    te, v, states = random_tiled(11, states=["implicit", "dirty", "secondary", "clean"] * 3)
    t = sw.Tensor(te, 0, te.canonical_layout())
    x = tiled_values(t)
    other = cpu_like(t, np.ones(N * T, np.float32))
    r = {"relu": lambda: sw.relu(t), "mul_num": lambda: sw.mul(t, 2.0), "reduce_sum": lambda: sw.reduce_sum(t),
         "mul_dense": lambda: sw.mul(t, other)}[op]()
    sw.reduce_sum(r).backward()
    want = {"relu": (x > 0).astype(np.float32), "mul_num": np.full_like(x, 2.0), "reduce_sum": np.ones_like(x),
            "mul_dense": np.ones_like(x)}[op]
    np.testing.assert_array_equal(tiled_values(t.grad), want)
    gte = t.grad.carrier
    locs = locations(gte)
    for k in range(N):
        slots = np.array([gte[k * T + j] for j in range(T)])
        if not slots.any():
            assert locs[k] == "implicit", (k, locs)
        else:
            assert gte.tile_state(coord(k)) == sw.TileState("primary", True, True)
    if op == "relu":
        assert all(locs[k] == "implicit" for k in range(0, N, 4))  # implicit inputs: zero gradient
    else:
        assert locs == ["primary"] * N
    # one full primary slab of the primary's class
    assert type(gte.primary) is sw.CPU and gte.primary.size() == N * T
    assert gte._primary_bytes() == N * T * 4


def test_the_gradient_takes_the_backward_buffer_instead_of_a_copy():
    # relu's backward allocates its gradient buffer: the TiledEvictable
    # gradient keeps it as its slab (owned, one full primary) instead of a
    # copy (the peak memory test shows the copy is gone)
    te, _, _ = random_tiled(13, states=["dirty"] * N)
    t = sw.Tensor(te, 0, te.canonical_layout())
    r = sw.relu(t)
    ones = sw.Tensor(cpu_array(np.ones(N * T, np.float32)), 0, r.layout)
    (g,) = r.autograd_ctx.backward(ones)
    buf = g.carrier.primary
    assert type(buf) is sw.CPU and buf.is_owned() and buf.size() == N * T
    assert g.carrier._primary_bytes() == N * T * 4
    # add passes the cotangent itself on: never adopted (the caller keeps it)
    r = sw.add(t, t)
    ga, gb = r.autograd_ctx.backward(ones)
    assert not ones.carrier.is_owned()
    assert ga.carrier.primary is not ones.carrier and gb.carrier.primary is not ones.carrier


def test_an_all_zero_gradient_is_all_implicit():
    te, _, _ = random_tiled(3, states=["implicit"] * N)
    t = sw.Tensor(te, 0, te.canonical_layout())
    sw.reduce_sum(sw.relu(t)).backward()
    assert locations(t.grad.carrier) == ["implicit"] * N
    assert t.grad.carrier._primary_bytes() == 0


def test_the_policy_is_asked_once_per_tiled_read_with_purpose_backward():
    class Recording:
        def __init__(self):
            self.calls = []

        def plan(self, required, purpose):
            self.calls.append((len(required), purpose))
            return ResidencyPlan()

    pol = Recording()
    te, _, _ = random_tiled(4, policy=pol)
    t = sw.Tensor(te, 0, te.canonical_layout())
    y = cpu_like(t, np.full(N * T, 2.0, np.float32))
    s = sw.reduce_sum(sw.relu(sw.mul(y, t)))
    pol.calls.clear()
    s.backward()
    assert pol.calls == [(N, "backward")]  # mul reads t once, for y's gradient
    pol.calls.clear()
    s2 = sw.reduce_sum(sw.mul(t, t))
    pol.calls.clear()
    s2.backward()
    assert pol.calls == [(N, "backward")] * 2  # one read per gradient, as the dense path did


def test_a_policy_promotion_during_backward_commits():
    class PromoteAll:
        def plan(self, required, purpose):
            return ResidencyPlan(promote=required) if purpose == "backward" else ResidencyPlan()

    te, v, states = random_tiled(6, policy=PromoteAll(), states=["secondary"] * N)
    t = sw.Tensor(te, 0, te.canonical_layout())
    s = sw.reduce_sum(sw.relu(t))
    assert locations(te) == ["secondary"] * N
    s.backward()
    assert locations(te) == ["primary"] * N
    x = tiled_values(t)
    np.testing.assert_array_equal(tiled_values(t.grad), (x > 0).astype(np.float32))


def test_a_summing_gradient_across_and_within_tiles_stays_on_the_dense_path(monkeypatch):
    # mul(t, b) with b a broadcast scalar: b's gradient sums coordinates both
    # within and across tiles; tile order would change the double sum's
    # order, so that backward keeps the dense copy.
    te, _, _ = random_tiled(8)
    t = sw.Tensor(te, 0, te.canonical_layout())
    x = tiled_values(t)
    b = sw.Tensor(cpu_array(np.array([0.5], np.float32)), 0,
                  sw.Layout(sw.Shape([[1, 1], [1, 1]]), sw.Stride([[0, 0], [0, 0]])))
    calls = dense_spy(monkeypatch)
    s = sw.reduce_sum(sw.mul(t, b))
    assert calls == []  # the forward is tile by tile
    s.backward()
    assert calls == ["backward"]
    np.testing.assert_allclose(values(b.grad), [x.astype(np.float64).sum()], rtol=1e-5)
    np.testing.assert_array_equal(tiled_values(t.grad), np.full(N * T, 0.5, np.float32))


# b's shape against ((8, 4), (4, 3)) (within-tile extents 8 and 4, grid 4 and 3)
SUMMED = {
    "across": ([[8, 1], [4, 1]], True),   # b per within-tile coordinate: sums over the tiles
    "within": ([[1, 4], [1, 3]], True),   # b per tile: sums within each tile
    "both": ([[1, 4], [4, 1]], False),    # within along mode 0, across along mode 1: dense
}


@pytest.mark.parametrize("layout", ["canonical", "permuted"])
@pytest.mark.parametrize("kind", sorted(SUMMED))
def test_a_summing_gradient_in_one_direction_reads_the_tiles_in_tile_order(kind, layout, monkeypatch):
    shape, tiled = SUMMED[kind]
    for seed in (21, 22):
        results = []
        for mode in ("tiles", "dense"):
            if mode == "dense":
                dense_only(monkeypatch)
            te, _, _ = random_tiled(seed)
            t = full(te, layout)
            x = tiled_values(t)
            n = int(np.prod([e for m in shape for e in m]))
            bv = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
            b = sw.Tensor(cpu_array(bv), 0, sw.Layout.canonical(sw.Shape(shape)))
            cv = np.random.default_rng(seed + 1).standard_normal(N * T).astype(np.float32)
            c = cpu_like(t, cv)
            calls = dense_spy(monkeypatch)
            sw.reduce_sum(sw.mul(sw.mul(t, b), c)).backward()
            if mode == "tiles":
                assert calls == ([] if tiled else ["backward"]), calls
            results.append((values(b.grad), tiled_values(t.grad)))
            # NumPy: b's gradient sums c * x over the broadcast coordinates
            bt = sw.Tensor(b.carrier, 0, sw.Layout(sw.Shape([[8, 4], [4, 3]]),
                                                   b.layout.broadcast_to(t.layout.shape).stride))
            idx = np.array([bt.layout.index(k) for k in range(N * T)])
            want = np.zeros(n, np.float64)
            np.add.at(want, idx, (cv * x).astype(np.float32).astype(np.float64))
            np.testing.assert_allclose(values(b.grad), want.astype(np.float32), rtol=1e-5, atol=1e-5)
            monkeypatch.undo()
        (gb_t, gt_t), (gb_d, gt_d) = results
        np.testing.assert_array_equal(gb_t, gb_d)  # the same sums in the same order: bit for bit
        np.testing.assert_array_equal(gt_t, gt_d)


@pytest.mark.parametrize("kind", ["across", "within"])
def test_a_summed_gradient_keeps_the_dense_summation_order(kind, monkeypatch):
    # Products 1e30, -1e30, 1 summed in double give 1 in that order and 0 in
    # others: the tile path must add them as the dense path does (coordinate
    # order), across tiles (ordinal order) and across the bands of a tile.
    shape, _ = SUMMED[kind]
    n = int(np.prod([e for m in shape for e in m]))
    got = []
    for mode in ("tiles", "dense"):
        if mode == "dense":
            dense_only(monkeypatch)
        te, _, _ = random_tiled(30, states=["dirty"] * N)
        t = sw.Tensor(te, 0, te.canonical_layout())  # logical ordinal: within-tile coordinates first
        lay = t.layout
        for k in range(N * T):
            te[lay.index(k)] = 0.0
        big = float(np.float32(1e30))
        if kind == "across":  # one within-tile coordinate (ordinal 0) of tiles 0, 1, 2 (grid ordinals)
            at = [0 + 8 * 0, 0 + 8 * 1, 0 + 8 * 2]  # mode 0 = (8 within, 4 grid): grid coordinate 0, 1, 2
            spots = [lay.index(i) for i in at]
        else:  # tile 0, within-tile coordinates (0, 0), (0, 1), (0, 2): three bands of mode 1
            spots = [lay.index(0 + 32 * w1) for w1 in range(3)]
        for slot, v in zip(spots, [big, -big, 1.0]):
            te[slot] = v
        b = sw.Tensor(cpu_array(np.ones(n, np.float32)), 0, sw.Layout.canonical(sw.Shape(shape)))
        calls = dense_spy(monkeypatch)
        sw.reduce_sum(sw.mul(t, b)).backward()
        assert calls == ([] if mode == "tiles" else ["operation", "backward"]), calls
        got.append(values(b.grad))
        monkeypatch.undo()
    tiles, dense = got
    np.testing.assert_array_equal(tiles, dense)
    assert tiles[0] == 1.0 and not tiles[1:].any()


# ------------------------------------------------------------------ errors, as on the dense path

@pytest.mark.parametrize("mode", ["tiles", "dense"])
def test_backward_after_release_is_a_runtime_error(mode, monkeypatch):
    if mode == "dense":
        dense_only(monkeypatch)
    te, _, _ = random_tiled(9)
    t = sw.Tensor(te, 0, te.canonical_layout())
    y = cpu_like(t, np.ones(N * T, np.float32))
    s = sw.reduce_sum(sw.mul(t, y))
    s2 = sw.reduce_sum(sw.relu(t))
    te.release()
    for loss in (s, s2):
        with pytest.raises(RuntimeError, match="released"):
            loss.backward()
    assert y.grad is None


class GateSecondary(sw.Generic):
    pass


class PlainOp(sw.MoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        for j in range(element_count):
            output.carrier[output.offset + output.layout.index(j)] = tensor.carrier[
                tensor.offset + tensor.layout.index(j)]


class FailingRead(sw.MoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        raise OSError("injected tile read failure")


@pytest.mark.parametrize("mode", ["tiles", "dense"])
def test_a_pending_residency_request_fails_the_backward_and_it_can_run_later(mode, monkeypatch):
    import threading
    gate = threading.Event()

    class GatedOp(PlainOp):
        def _copy(self, tensor, destination, output, element_count):
            gate.wait(10)
            super()._copy(tensor, destination, output, element_count)

    if mode == "dense":
        dense_only(monkeypatch)
    register_move_operation(sw.CPU, GateSecondary, GatedOp)
    register_move_operation(GateSecondary, sw.CPU, PlainOp)
    try:
        te = TiledEvictable(cpu_array(np.array([1, -2, 3, -4], np.float32)), GateSecondary([0.0] * 4, dtype=F32),
                            (2,), (2,))
        t = sw.Tensor(te, 0, te.canonical_layout())
        s = sw.reduce_sum(sw.relu(t))
        h = te.evict_async(TileSet([(1,)]))  # its write-back waits for the gate
        with pytest.raises(RuntimeError, match="relu backward: .*wait") as e:
            s.backward(retain_graph=True)
        # The library's own error: where it surfaced is in its message.
        assert not hasattr(e.value, "__notes__")
        assert t.grad is None and not h.done
        gate.set()
        h.wait()
        s.backward()
        assert tiled_values(t.grad).tolist() == [1.0, 0.0, 1.0, 0.0]
    finally:
        gate.set()
        unregister_move_operation(sw.CPU, GateSecondary)
        unregister_move_operation(GateSecondary, sw.CPU)


@pytest.mark.parametrize("mode", ["tiles", "dense"])
def test_a_failed_tile_read_fails_the_backward_and_gives_every_tile_back(mode, monkeypatch):
    if mode == "dense":
        dense_only(monkeypatch)
    register_move_operation(sw.CPU, FailSecondary, PlainOp)
    try:
        te = TiledEvictable(cpu_array(np.array([1, -2, 3, -4], np.float32)), FailSecondary([0.0] * 4, dtype=F32),
                            (2,), (2,))
        t = sw.Tensor(te, 0, te.canonical_layout())
        y = cpu_like(t, np.ones(4, np.float32))
        s = sw.reduce_sum(sw.mul(y, sw.relu(t)))
        s2 = sw.reduce_sum(sw.mul(t, y))
        te.evict(TileSet([(1,)]))
        register_move_operation(FailSecondary, sw.CPU, FailingRead)
        with pytest.raises(OSError, match="injected tile read failure"):
            s.backward()
        with pytest.raises(OSError, match="injected tile read failure"):
            s2.backward()
        assert t.grad is None and y.grad is None
        assert [te.tile_state((k,)).location for k in range(2)] == ["primary", "secondary"]
        te[0] = 5.0  # no tile is still held by the failed read
        te.evict(TileSet([(0,)]))
        assert te[0] == 5.0
    finally:
        unregister_move_operation(FailSecondary, sw.CPU)
        unregister_move_operation(sw.CPU, FailSecondary)


def test_the_profiler_sees_the_tile_transfers_of_a_backward_read():
    te, _, _ = random_tiled(12, states=["secondary"] * 6 + ["dirty"] * 6)
    t = sw.Tensor(te, 0, te.canonical_layout())
    s = sw.reduce_sum(sw.relu(t))
    with sw.profile() as prof:
        s.backward()
    events = prof.events()
    submits = [e for e in events if e.name == "move.submit"]
    completes = [e for e in events if e.name == "move.complete"]
    assert len(submits) == len(completes) == 6  # one transfer per secondary tile
    assert {e.parent_id for e in completes} == {e.id for e in submits}
