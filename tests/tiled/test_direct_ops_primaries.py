"""Direct operations tile by tile on TiledEvictables whose primary is not an
exact CPU (issue 13, item 6 leftovers): a CPU subclass and a Float32 Generic
primary. The tile reader stages every span (primary, secondary, implicit)
into a CPU buffer through the tier's route; the result is in the primary's
class (a CPU subclass allocates it, a Generic one gets the host result
copied in), and equals the dense path's and NumPy's. What stays dense, and
why: an Int32 Generic primary (Generic's own range check raises the
overflow) and a Generic dense operand (no host memory to read in bands).
"""
import numpy as np
import pytest

import strideweave as sw
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSet

from support.tiled import dense_only, dense_spy

F32, I32 = sw.DType.Float32, sw.DType.Int32
GRID, TILE = (4, 3), (8, 4)
T, N = 32, 12


class SubCPU(sw.CPU):
    """A CPU subclass: host memory, but not the exact class read in place."""


def flat(n):
    return sw.Layout(sw.Shape(n), sw.Stride(1))


def coord(k):
    return (k % GRID[0], k // GRID[0])


def locations(te):
    return [te.tile_state(coord(k)).location for k in range(N)]


def logical(t):
    return np.array([t.carrier[t.offset + t.layout.index(k)] for k in range(t.size())])


def result_values(r):
    return np.array([r[k] for k in range(r.size())])


PRIMARIES = {
    "subclass": lambda dtype: SubCPU(0, dtype=dtype),
    "generic": lambda dtype: sw.Generic([], dtype=dtype),
}
SECONDARIES = {
    "file": lambda dtype: sw.FileBacked(dtype=dtype),
    "generic": lambda dtype: sw.Generic([], dtype=dtype),
}


def make(primary, secondary, dtype=F32, seed=0):
    """Tiles 0-3 secondary, 4-5 implicit zero, the rest primary (dirty)."""
    rng = np.random.default_rng(seed)
    v = ((rng.standard_normal(N * T) * 3).astype(np.float32) if dtype is F32 else
         rng.integers(-40, 40, N * T).astype(np.int32))
    v[4 * T:6 * T] = 0
    te = TiledEvictable(PRIMARIES[primary](dtype), SECONDARIES[secondary](dtype), GRID, TILE)
    for k in [k for k in range(N) if k not in (4, 5)]:
        for j in range(T):
            te[k * T + j] = v[k * T + j].item()
    te.evict(TileSet([coord(k) for k in range(4)]))
    assert locations(te) == ["secondary"] * 4 + ["implicit"] * 2 + ["primary"] * 6
    return te




LAYOUTS = {
    "canonical": None,
    "permuted": sw.Layout(sw.Shape([[8, 4], [4, 3]]), sw.Stride([[4, 32], [1, 128]])),
}

OPS = {
    "add_self": (lambda t, o: sw.add(t, t), lambda x, y: x + x),
    "add_dense": (lambda t, o: sw.add(o, t), lambda x, y: y + x),
    "mul_self": (lambda t, o: sw.mul(t, t), lambda x, y: x * x),
    "mul_dense": (lambda t, o: sw.mul(t, o), lambda x, y: x * y),
    "mul_num": (lambda t, o: sw.mul(t, 1.25), lambda x, y: (x.astype(np.float64) * 1.25).astype(np.float32)),
    "relu": (lambda t, o: sw.relu(t), lambda x, y: np.maximum(x, 0)),
    "reduce_sum": (lambda t, o: sw.reduce_sum(t), lambda x, y: np.array([x.astype(np.float64).sum()], np.float32)),
}


def other_for(t, te, primary):
    """A dense operand of the primary's class with host memory (SubCPU), or
    None (Generic: its dense operands are not read in bands)."""
    if primary != "subclass":
        return None
    ov = np.linspace(-2, 2, N * T).astype(np.float32)
    c = SubCPU(N * T, dtype=F32, empty=True)
    for i, x in enumerate(ov):
        c[i] = float(x)
    return sw.Tensor(c, 0, sw.Layout.canonical(t.layout.shape)), ov


# (a Generic dense operand takes the dense path: test_what_stays_dense)
CASES = [(op, p) for op in sorted(OPS) for p in sorted(PRIMARIES) if not (p == "generic" and op.endswith("_dense"))]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("secondary", sorted(SECONDARIES))
@pytest.mark.parametrize("op, primary", CASES)
def test_forward_tile_by_tile_equals_the_dense_path_and_numpy(op, primary, secondary, layout, monkeypatch):
    te = make(primary, secondary)
    lay = LAYOUTS[layout]
    t = sw.Tensor(te, 0, lay if lay is not None else te.canonical_layout())
    x = logical(t).astype(np.float32)
    od = other_for(t, te, primary)
    o, ov = od if od is not None else (None, None)
    fn, ref = OPS[op]
    before = locations(te)
    calls = dense_spy(monkeypatch)
    with sw.no_grad():
        r = fn(t, o)
    assert calls == []  # no dense copy of the tiles
    assert type(r.carrier) is type(te.primary)  # the primary's class
    assert locations(te) == before
    got = result_values(r).astype(np.float32)
    dense_only(monkeypatch)
    with sw.no_grad():
        d = fn(t, o)
    assert calls == ["operation"]
    assert type(d.carrier) is type(r.carrier) and d.layout == r.layout
    want = ref(x, ov)
    if op == "reduce_sum":  # summed per tile, then over tiles: the order differs from the dense sum
        np.testing.assert_allclose(got, result_values(d), rtol=1e-6)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    else:
        np.testing.assert_array_equal(got, result_values(d).astype(np.float32))
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("primary", sorted(PRIMARIES))
def test_backward_through_a_staged_primary(primary, monkeypatch):
    te = make(primary, "file", seed=3)
    t = sw.Tensor(te, 0, te.canonical_layout())
    x = logical(t).astype(np.float32)
    calls = dense_spy(monkeypatch)
    sw.reduce_sum(sw.mul(sw.relu(t), t)).backward()
    g = t.grad
    assert type(g.carrier) is TiledEvictable and type(g.carrier.primary) is type(te.primary)
    np.testing.assert_allclose(logical(g).astype(np.float32), np.where(x > 0, 2 * x, 0), rtol=1e-6)
    if primary == "subclass":
        assert calls == []  # a host cotangent: the backward reads the tiles in bands too
    else:
        # relu is tile by tile; mul(relu(t), t) has a Generic dense operand,
        # and a Generic cotangent has no host memory: both read densely
        assert calls == ["operation", "backward", "backward"]


def test_what_stays_dense(monkeypatch):
    calls = dense_spy(monkeypatch)
    # an Int32 Generic primary: Generic's coercion range checks the results
    te = make("generic", "file", dtype=I32)
    t = sw.Tensor(te, 0, te.canonical_layout())
    x = logical(t)
    r = sw.add(t, t)
    assert calls == ["operation"] and type(r.carrier) is sw.Generic
    np.testing.assert_array_equal(result_values(r), x + x)
    # a Generic dense operand
    calls.clear()
    te = make("generic", "file")
    t = sw.Tensor(te, 0, te.canonical_layout())
    x = logical(t).astype(np.float32)
    o = sw.Tensor(sw.Generic([2.0] * (N * T), dtype=F32), 0, sw.Layout.canonical(t.layout.shape))
    r = sw.mul(o, t)
    assert calls == ["operation"]
    np.testing.assert_array_equal(result_values(r).astype(np.float32), 2 * x)


def test_a_staged_read_changes_no_residency_and_the_staging_is_freed():
    te = make("subclass", "file")
    t = sw.Tensor(te, 0, te.canonical_layout())
    before = locations(te)
    bytes_before = te._primary_bytes()
    with sw.no_grad():
        for _ in range(3):
            sw.relu(t)
    assert locations(te) == before and te._primary_bytes() == bytes_before
    te.evict(TileSet([coord(k) for k in range(N)]))  # nothing left held by a reader
    assert set(locations(te)) <= {"secondary", "implicit"}


def test_int32_subclass_primary_overflow_is_the_kernels_error():
    te = TiledEvictable(SubCPU(0, dtype=I32), sw.FileBacked(dtype=I32), (2,), (2,))
    for i, v in enumerate([2 ** 30, 2 ** 30, 1, 2]):
        te[i] = v
    t = sw.Tensor(te, 0, te.canonical_layout())
    with pytest.raises(OverflowError, match="add\\(\\): .*Int32 result out of range"):
        sw.add(t, t)
    assert result_values(sw.mul(t, 1)).tolist() == [2 ** 30, 2 ** 30, 1, 2]
