"""What TiledEvictable takes from user code is checked like every native
path: a tier class's allocate_like() results (class, size, dtype) before a
tile buffer or a projection result is used, a compact tensor's carrier
(not owned by pending work, claimed while a scatter uses it), and hooks that
drop the caller's references while a request runs."""
import threading

import pytest

import strideweave as sw
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection, TileSet, TileState

from support.process import assert_child_ok, run_python
from support.tiled import pending, tiles_layout

F32 = sw.DType.Float32


class ShortCPU(sw.CPU):
    """allocate_like() gives one slot whatever is asked for."""

    def allocate_like(self, size, *, mutable=True, dtype=None, empty=False):
        return ShortCPU(1)


class IntCPU(sw.CPU):
    """allocate_like() gives Int32 storage whatever the dtype."""

    def allocate_like(self, size, *, mutable=True, dtype=None, empty=False):
        return IntCPU(size, dtype=sw.DType.Int32)


def ramp(cls, n):
    c = cls(n)
    for i in range(n):
        c[i] = float(i)
    return c


@pytest.mark.parametrize("cls, exc, fragment", [(ShortCPU, RuntimeError, "expected at least 4"),
                                                 (IntCPU, TypeError, "dtype")])
def test_a_bad_tile_buffer_is_refused_before_anything_changes(cls, exc, fragment):
    te = TiledEvictable(cls(0), ramp(sw.CPU, 8), (2,), (4,))
    v = te.version
    with pytest.raises(exc, match=fragment):
        te.promote(TileSet([(1,)]))
    assert te.tile_state((1,)) == TileState("secondary", True, False) and te.version == v
    with pytest.raises(exc, match=fragment):
        te[5] = 1.0  # a slot write promotes its tile first
    assert te.tile_state((1,)) == TileState("secondary", True, False) and te[5] == 5.0
    assert pending(te) == 0


@pytest.mark.parametrize("cls, exc, fragment", [(ShortCPU, RuntimeError, "expected at least 8"),
                                                 (IntCPU, TypeError, "dtype")])
def test_a_bad_projection_result_is_refused(cls, exc, fragment):
    te = TiledEvictable(cls(0), ramp(sw.CPU, 8), (2,), (4,))
    w = sw.Tensor(te, 0, te.canonical_layout())
    with pytest.raises(exc, match=fragment):
        te.project(w, TileSelection([[1, 0]]))
    assert pending(te) == 0
    # a good one still works
    ok = TiledEvictable(sw.CPU(0), ramp(sw.CPU, 8), (2,), (4,))
    r = ok.project(sw.Tensor(ok, 0, ok.canonical_layout()), TileSelection([[1, 0]])).wait()
    assert r.dtype() is F32 and [r[i] for i in range(8)] == [4.0, 5.0, 6.0, 7.0, 0.0, 1.0, 2.0, 3.0]


class Held(sw.CPU):
    pass


def test_scatter_refuses_a_compact_a_pending_move_owns_and_claims_the_one_it_uses():
    te = TiledEvictable(ramp(sw.CPU, 8), sw.CPU(0), (4,), (2,))
    t = sw.Tensor(te, 0, te.canonical_layout())
    sel = TileSelection([[1]])
    compact = sw.Tensor(ramp(sw.CPU, 2), 0, tiles_layout((1,), (2,)))
    gate, entered = threading.Event(), threading.Event()

    class Slow(sw.ElementwiseMoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            entered.set()
            assert gate.wait(10)
            super()._copy(tensor, destination, output, element_count)

    # a pending move owns the compact's carrier
    sw.register_move_operation(sw.CPU, Held, Slow)
    try:
        h = sw.move_async(compact, Held(2))
        assert entered.wait(10)
        with pytest.raises(RuntimeError, match="owned"):
            te.scatter(compact, t, sel)
        assert pending(te) == 0
        gate.set()
        moved = h.wait()
    finally:
        sw.unregister_move_operation(sw.CPU, Held)
    # a compact the scatter uses is claimed until the scatter ends
    compact = sw.Tensor(ramp(sw.CPU, 2), 0, tiles_layout((1,), (2,)))
    out = te.scatter(compact, t, sel)
    out.wait()
    assert not compact.carrier.is_owned()
    compact.carrier[0] = 5.0  # writable again
    assert moved.carrier.size() == 2


HOOK_DROPS = """
import gc
import strideweave as sw
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection, TileSet
F32 = sw.DType.Float32
box = {}
class Dropping(sw.Generic):
    # size() runs while the request plans its copies: it drops every
    # reference the caller holds and collects
    def size(self):
        if box.pop("armed", False):
            box.clear()
            gc.collect()
        return super().size()
te = TiledEvictable(sw.CPU(0), Dropping([float(i) for i in range(8)], dtype=F32), (4,), (2,))
w = sw.Tensor(te, 0, te.canonical_layout())
box.update(te=te, w=w, armed=True)
h = te.project(w, TileSelection([[3, 1]]))
del te, w
r = h.wait()
print([r[i] for i in range(4)])
box["armed"] = True
gc.collect()
"""


def test_a_hook_dropping_the_callers_references_mid_request_is_harmless():
    r = run_python(HOOK_DROPS, timeout=60)
    assert_child_ok(r)
    assert r.stdout.strip() == "[6.0, 7.0, 2.0, 3.0]"
