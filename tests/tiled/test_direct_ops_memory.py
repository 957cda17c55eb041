"""Direct operations on full TiledEvictable tensors run tile by tile (issue
13: "direct ops ... materialize a dense copy of every tile"): add, mul, relu
and reduce_sum on a CPU-primary TiledEvictable read one tile at a time (in
place when primary-resident, else through a one-tile staging buffer), so
their peak extra memory is about a tile beyond the result, not the tensor.

The values, the single node and its backward, the residency policy call,
the conflicts and the profiling are the ones tests/tiled/test_direct_ops.py fixes
for the dense path; here on tensors of many tiles, mixed residency and
several layouts, checked against NumPy; the peak RSS is measured in a child
process (VmHWM after resetting it)."""
import json
import sys
import threading
import time

import numpy as np
import pytest

import strideweave as sw
from strideweave.carriers.move import register_move_operation, unregister_move_operation
from strideweave.carriers.tiled_evictable import ResidencyPlan, TiledEvictable, TileSet

from support.carriers import FailSecondary
from support.tiled import HWM_CHILD_PRELUDE, dense_spy, hwm_only, run_hwm_child

F32 = sw.DType.Float32
I32 = sw.DType.Int32
GRID, TILE = (4, 3), (8, 4)  # 12 tiles of 32 slots
T = 32
N = 12


def flat(n):
    return sw.Layout(sw.Shape(n), sw.Stride(1))


def cpu_array(values, dtype=F32):
    c = sw.CPU(len(values), dtype=dtype, empty=True)
    np.from_dlpack(sw.Tensor(c, 0, flat(len(values))))[:] = values
    return c


def values(t):
    """Logical values of a CPU tensor, flat ordinal order."""
    return np.array([t[k] for k in range(t.size())])


def tiled_values(t):
    return np.array([t.carrier[t.offset + t.layout.index(k)] for k in range(t.size())])


def mixed(dtype=F32, policy=None, seed=0):
    """12 tiles: ordinals 0-3 secondary (FileBacked), 4-7 primary (dirty,
    per-tile buffers), 8-9 implicit zero, 10-11 primary. Returns (te, slot
    values)."""
    rng = np.random.default_rng(seed)
    v = (rng.standard_normal(N * T) * 4).astype(np.float32) if dtype is F32 else \
        rng.integers(-50, 50, N * T).astype(np.int32)
    v[8 * T:10 * T] = 0
    te = TiledEvictable(sw.CPU(0, dtype=dtype), sw.FileBacked(dtype=dtype), GRID, TILE, residency_policy=policy)
    for k in list(range(8)) + [10, 11]:
        for j in range(T):
            te[k * T + j] = v[k * T + j].item()
    te.evict(TileSet([(k % 4, k // 4) for k in range(4)]))
    return te, v


def locations(te):
    return [te.tile_state((k % GRID[0], k // GRID[0])).location for k in range(N)]




# Layouts of the full tensor: canonical, within-tile permuted modes, and flat
# modes (one leaf per mode, split at the tile extent by the engine).
LAYOUTS = {
    "canonical": None,
    "permuted": sw.Layout(sw.Shape([[8, 4], [4, 3]]), sw.Stride([[4, 32], [1, 128]])),
    "flat": sw.Layout(sw.Shape([[2, 4, 4], [4, 3]]), sw.Stride([[1, 2, 32], [8, 128]])),
}


@pytest.fixture(params=sorted(LAYOUTS))
def case(request):
    te, slots = mixed()
    lay = LAYOUTS[request.param]
    t = sw.Tensor(te, 0, lay if lay is not None else te.canonical_layout())
    return te, t, slots


def test_the_fixture_mixes_every_location():
    te, _ = mixed()
    assert locations(te) == ["secondary"] * 4 + ["primary"] * 4 + ["implicit"] * 2 + ["primary"] * 2


@pytest.mark.parametrize("op", ["add_self", "add_dense", "add_scalar_tensor", "mul_self", "mul_dense", "mul_num",
                                "num_mul", "relu", "reduce_sum"])
def test_forward_and_backward_match_numpy_tile_by_tile(case, op, monkeypatch):
    te, t, slots = case
    x = tiled_values(t).astype(np.float32)
    shape = t.layout.shape
    other_v = np.linspace(-3, 3, N * T).astype(np.float32)
    other = sw.Tensor(cpu_array(other_v), 0, sw.Layout.canonical(shape))
    before = locations(te)
    calls = dense_spy(monkeypatch)
    if op == "add_self":
        r, want = sw.add(t, t), x + x
    elif op == "add_dense":
        r, want = sw.add(other, t), other_v + x
    elif op == "add_scalar_tensor":
        ones = [[1] * len(t.layout[i].leaves()) for i in range(2)]  # the shape's profile, every extent 1
        one = sw.Tensor(cpu_array(np.array([0.5], np.float32)), 0,
                        sw.Layout(sw.Shape(ones), sw.Stride([[0] * len(m) for m in ones])))
        r, want = sw.add(t, one), x + np.float32(0.5)
    elif op == "mul_self":
        r, want = sw.mul(t, t), x * x
    elif op == "mul_dense":
        r, want = sw.mul(t, other), x * other_v
    elif op == "mul_num":
        r, want = sw.mul(t, 1.25), (x.astype(np.float64) * 1.25).astype(np.float32)
    elif op == "num_mul":
        r, want = sw.mul(-3, t), x * np.float32(-3)
    elif op == "relu":
        r, want = sw.relu(t), np.maximum(x, 0)
    else:
        r, want = sw.reduce_sum(t), np.array([x.astype(np.float64).sum()], dtype=np.float32)
    assert calls == []  # no dense copy of the tiles in forward
    assert type(r.carrier) is sw.CPU and r.dtype() is F32
    if op != "reduce_sum":
        assert r.layout == sw.Layout.canonical(shape)
        np.testing.assert_array_equal(values(r), want)
    else:
        np.testing.assert_allclose(values(r), want, rtol=1e-6)
    assert locations(te) == before and t.carrier is te
    # one node of the operation, saving the tiled tensor itself
    assert all(s is t or s is other or s.carrier is not te for s in r.autograd_ctx.inputs())
    # backward: a fresh TiledEvictable gradient, values against NumPy
    s = r if op == "reduce_sum" else sw.reduce_sum(r)
    s.backward()
    g = t.grad
    assert type(g.carrier) is TiledEvictable and g.carrier is not te and g.layout == t.layout
    gv = tiled_values(g)
    want_g = {"add_self": np.full_like(x, 2), "add_dense": np.ones_like(x), "add_scalar_tensor": np.ones_like(x),
              "mul_self": 2 * x, "mul_dense": other_v, "mul_num": np.full_like(x, 1.25),
              "num_mul": np.full_like(x, -3), "relu": (x > 0).astype(np.float32),
              "reduce_sum": np.ones_like(x)}[op]
    np.testing.assert_allclose(gv, want_g, rtol=1e-6)
    if op == "mul_dense":
        np.testing.assert_allclose(values(other.grad), x, rtol=1e-6)


def test_relu_gradient_keeps_untouched_tiles_implicit():
    te, slots = mixed()
    t = sw.Tensor(te, 0, te.canonical_layout())
    sw.reduce_sum(sw.relu(t)).backward()
    locs = locations(t.grad.carrier)
    assert locs[8] == locs[9] == "implicit"  # zero inputs: zero gradient tiles stay implicit


def test_two_tiled_evictables_of_one_grid_combine_tile_by_tile(monkeypatch):
    te1, v1 = mixed(seed=1)
    te2, v2 = mixed(seed=2)
    te2.promote(TileSet([(0, 0), (1, 0)]))  # other residency than te1
    t1 = sw.Tensor(te1, 0, te1.canonical_layout())
    t2 = sw.Tensor(te2, 0, te2.canonical_layout())
    x1, x2 = tiled_values(t1).astype(np.float32), tiled_values(t2).astype(np.float32)
    calls = dense_spy(monkeypatch)
    np.testing.assert_array_equal(values(sw.add(t1, t2)), x1 + x2)
    m = sw.mul(t1, t2)
    np.testing.assert_array_equal(values(m), x1 * x2)
    assert calls == []
    sw.reduce_sum(m).backward()
    np.testing.assert_allclose(tiled_values(t1.grad), x2, rtol=1e-6)
    np.testing.assert_allclose(tiled_values(t2.grad), x1, rtol=1e-6)


def test_int32_tiles():
    te, v = mixed(dtype=I32)
    t = sw.Tensor(te, 0, te.canonical_layout())
    x = tiled_values(t).astype(np.int64)
    np.testing.assert_array_equal(values(sw.mul(t, 3)), x * 3)
    np.testing.assert_array_equal(values(sw.add(t, t)), x + x)
    np.testing.assert_array_equal(values(sw.relu(t)), np.maximum(x, 0))
    assert sw.reduce_sum(t)[0] == x.sum()


def test_a_failed_operation_changes_nothing_and_frees_its_tiles():
    te = TiledEvictable(sw.CPU(0, dtype=I32), sw.FileBacked(dtype=I32), (4,), (2,))
    for i in range(8):
        te[i] = 2 ** 30 if i == 5 else i
    te.evict(TileSet([(0,), (1,)]))
    t = sw.Tensor(te, 0, te.canonical_layout())
    before = locations_1d(te)
    with pytest.raises(OverflowError, match="out of range"):
        sw.mul(t, 4)
    with pytest.raises(OverflowError, match="out of range"):
        sw.reduce_sum(sw.Tensor(te, 0, te.canonical_layout()) * 2)
    assert locations_1d(te) == before
    te.evict(TileSet([(k,) for k in range(4)]))  # no tile is still held by the failed reads
    te.promote(TileSet([(2,)]))
    assert te[5] == 2 ** 30


def locations_1d(te):
    return [te.tile_state((k,)).location for k in range(te.grid_shape[0])]


def test_the_policy_is_asked_once_and_its_promotions_commit():
    class Promote:
        calls = []

        def plan(self, required, purpose):
            self.calls.append((len(required), purpose))
            return ResidencyPlan(promote=TileSet([(0, 0), (1, 0)]))

    pol = Promote()
    te, _ = mixed(policy=pol)
    t = sw.Tensor(te, 0, te.canonical_layout())
    x = tiled_values(t).astype(np.float32)
    np.testing.assert_array_equal(values(sw.relu(t)), np.maximum(x, 0))
    assert pol.calls == [(N, "operation")]
    assert locations(te)[:2] == ["primary", "primary"] and locations(te)[2:4] == ["secondary"] * 2


def test_profiling_one_transfer_per_secondary_tile_and_one_event_per_operation():
    te, _ = mixed()
    t = sw.Tensor(te, 0, te.canonical_layout())
    with sw.profile() as prof:
        sw.reduce_sum(sw.add(t, t))
    events = prof.events()
    names = [e.name for e in events]
    assert [n for n in names if not n.startswith("move.")] == ["add", "reduce_sum"], names
    submits = {e.id for e in events if e.name == "move.submit"}
    completes = [e for e in events if e.name == "move.complete"]
    # add(t, t) reads each of the 4 secondary tiles once; resident and implicit tiles are read in place
    assert len(submits) == 4 and len(completes) == 4 and {e.parent_id for e in completes} == submits


# ------------------------------------------------------------------ conflicts (CPU primary)

class GateSecondary(sw.Generic):
    pass


_GATE = threading.Event()


class GatedOp(sw.MoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        assert _GATE.wait(10)
        for i in range(output.size()):
            output[i] = tensor[i]


class PlainOp(sw.MoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        for i in range(output.size()):
            output[i] = tensor[i]


def test_a_pending_residency_request_is_a_conflict_not_a_wait():
    _GATE.clear()
    register_move_operation(sw.CPU, GateSecondary, GatedOp)
    register_move_operation(GateSecondary, sw.CPU, PlainOp)
    try:
        te = TiledEvictable(cpu_array(np.array([1, -2, 3, -4], np.float32)), GateSecondary([0.0] * 4, dtype=F32),
                            (2,), (2,))
        t = sw.Tensor(te, 0, te.canonical_layout())
        h = te.evict_async(TileSet([(1,)]))  # dirty: its write-back waits for the gate
        t0 = time.monotonic()
        for call in (lambda: sw.add(t, t), lambda: sw.mul(t, 2.0), lambda: sw.relu(t), lambda: sw.reduce_sum(t)):
            with pytest.raises(RuntimeError, match="wait"):
                call()
        assert time.monotonic() - t0 < 2.0 and not h.done
        _GATE.set()
        h.wait()
        assert locations_1d(te) == ["primary", "secondary"]
        r = sw.mul(t, 2.0)  # tile 1 staged from the Generic secondary through its route
        assert type(r.carrier) is sw.CPU and values(r).tolist() == [2.0, -4.0, 6.0, -8.0]
    finally:
        _GATE.set()
        unregister_move_operation(sw.CPU, GateSecondary)
        unregister_move_operation(GateSecondary, sw.CPU)


class FailingRead(sw.MoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        raise OSError("injected tile read failure")


def test_a_failed_tile_read_fails_the_operation_and_gives_every_tile_back():
    register_move_operation(FailSecondary, sw.CPU, FailingRead)
    register_move_operation(sw.CPU, FailSecondary, PlainOp)
    try:
        te = TiledEvictable(cpu_array(np.array([1, -2, 3, -4], np.float32)), FailSecondary([0.0] * 4, dtype=F32),
                            (2,), (2,))
        t = sw.Tensor(te, 0, te.canonical_layout())
        te.evict(TileSet([(1,)]))
        for call in (lambda: sw.add(t, t), lambda: sw.relu(t), lambda: sw.reduce_sum(t)):
            with pytest.raises(OSError, match="injected tile read failure"):
                call()
        assert locations_1d(te) == ["primary", "secondary"]
        te[0] = 5.0  # no tile is still held by a failed read: writes and evictions go through
        te.evict(TileSet([(0,)]))
        assert locations_1d(te) == ["secondary", "secondary"] and te[0] == 5.0
    finally:
        unregister_move_operation(FailSecondary, sw.CPU)
        unregister_move_operation(sw.CPU, FailSecondary)


# ------------------------------------------------------------------ peak memory

RSS_CHILD = HWM_CHILD_PRELUDE + r"""

n_tiles, rows, cols = NTILES, ROWS, COLS
tile = rows * cols
n = n_tiles * tile
flat = sw.Layout(sw.Shape(n), sw.Stride(1))
c = sw.CPU(n, empty=True)
np.from_dlpack(sw.Tensor(c, 0, flat))[:] = np.arange(n, dtype=np.float32) % 7 - 3
fb = sw.move(sw.Tensor(c, 0, flat), sw.FileBacked(dtype=sw.DType.Float32)).carrier
c.release()
del c
te = TiledEvictable(sw.CPU(0), fb, (n_tiles, 1, 1), (1, rows, cols))  # every tile on the file
w = sw.Tensor(te, 0, te.canonical_layout())
out = {}

def measure(name, fn):
    reset()
    base = hwm()
    t0 = time.perf_counter()
    r = fn()
    out[name + "_s"] = time.perf_counter() - t0
    out[name] = hwm() - base
    return r

with sw.no_grad():
    r = measure("add", lambda: sw.add(w, w))
    r.carrier.release(); del r
    r = measure("reduce_sum", lambda: sw.reduce_sum(w))
    out["sum"] = float(r[0])
    # the dense path (what the forward did before): a dense copy of every tile, then the kernel
    import strideweave.carriers.tiled_evictable as tev
    def dense(fn):
        tev._options.dense_only = True
        try:
            return fn()
        finally:
            tev._options.dense_only = False
    dense_add = lambda: dense(lambda: sw.add(w, w))
    dense_sum = lambda: dense(lambda: sw.reduce_sum(w))
    r = measure("dense_add", dense_add)
    r.carrier.release(); del r
    r = measure("dense_reduce_sum", dense_sum)
    del r

    def best(fn):  # seconds, the best of REPEAT calls (results released)
        ts = []
        for _ in range(REPEAT):
            t0 = time.perf_counter()
            got = fn()
            ts.append(time.perf_counter() - t0)
            for x in got if isinstance(got, tuple) else (got,):
                x.carrier.release()
        return min(ts) if ts else None

    def cases():
        yield "add", lambda: sw.add(w, w)
        yield "reduce_sum", lambda: sw.reduce_sum(w)
        yield "dense_add", dense_add
        yield "dense_reduce_sum", dense_sum
    for name, fn in cases():
        out[name + "_cold_best_s"] = best(fn)
    te.promote(TileSet([(k, 0, 0) for k in range(n_tiles)]))
    for name, fn in cases():
        out[name + "_warm_best_s"] = best(fn)
print(json.dumps(out))
"""


def rss_child(n_tiles, rows, cols, repeat=0):
    return run_hwm_child(RSS_CHILD, NTILES=n_tiles, ROWS=rows, COLS=cols, REPEAT=repeat)


@hwm_only
def test_peak_memory_is_about_a_tile_beyond_the_result():
    MiB = 1 << 20
    n_tiles, tile = 32, 256 * 1024  # 32 tiles of 256 x 1024 Float32 (1 MiB): a 32 MiB tensor
    r = rss_child(n_tiles, 256, 1024)
    total = n_tiles * MiB
    assert r["sum"] == float(sum((np.arange(n_tiles * tile) % 7 - 3).astype(np.float64)))
    # the result (32 MiB) plus about one staging tile, not a second copy of the tensor
    assert r["add"] < total + 8 * MiB, r
    assert r["reduce_sum"] < 8 * MiB, r
    # the measurement sees a dense copy: the dense path peaks a tensor higher
    assert r["dense_add"] > 2 * total - 4 * MiB, r
    assert r["dense_reduce_sum"] > total - 4 * MiB, r


def test_large_tiles_in_bands_match_numpy():
    # 4 tiles of 64 x 4096: each tile is computed in bands and cache-sized
    # parts of bands (the result interleaves the tiles); values from NumPy.
    g, R, C = 4, 64, 4096
    Tn = R * C
    slots = (np.arange(g * Tn, dtype=np.float32) % 13 - 6) * 0.5
    fb = sw.move(sw.Tensor(cpu_array(slots), 0, flat(g * Tn)), sw.FileBacked(dtype=F32)).carrier
    te = TiledEvictable(sw.CPU(0), fb, (g, 1, 1), (1, R, C))
    te.promote(TileSet([(1, 0, 0)]))  # one tile resident, three on the file
    t = sw.Tensor(te, 0, te.canonical_layout())
    # logical ordinal e + g * (r + R * c) holds slot e * Tn + r + R * c
    x = slots.reshape(g, C, R).transpose(1, 2, 0).reshape(-1)
    other_v = np.linspace(-1, 1, g * Tn).astype(np.float32)
    other = sw.Tensor(cpu_array(other_v), 0, sw.Layout.canonical(t.layout.shape))

    def arr(r):
        assert r.layout == sw.Layout.canonical(t.layout.shape)
        return np.from_dlpack(sw.Tensor(r.carrier, 0, flat(g * Tn))).copy()

    with sw.no_grad():
        np.testing.assert_array_equal(arr(sw.add(t, t)), x + x)
        np.testing.assert_array_equal(arr(sw.add(t, other)), x + other_v)
        np.testing.assert_array_equal(arr(sw.mul(t, other)), x * other_v)
        np.testing.assert_array_equal(arr(sw.mul(t, 2.0)), x * 2)
        np.testing.assert_array_equal(arr(sw.relu(t)), np.maximum(x, 0))
        np.testing.assert_allclose(sw.reduce_sum(t)[0], x.astype(np.float64).sum(), rtol=1e-6)
    assert [te.tile_state((e, 0, 0)).location for e in range(g)] == ["secondary", "primary", "secondary",
                                                                      "secondary"]


if __name__ == "__main__":
    # The measurement of the report: peak RSS above the start (bytes) and the
    # best-of-3 times (s) of add(w, w) and reduce_sum(w) tile by tile and on
    # the dense path (a dense copy of every tile, then the same kernel), all
    # tiles cold (on the file) and warm (primary-resident):
    #   STRIDEWEAVE_BUILD=build-dev PYTHONPATH=.:tests python tests/tiled/test_direct_ops_memory.py 64 1024 1024
    print(json.dumps(rss_child(*map(int, sys.argv[1:4]), repeat=3), indent=1))
