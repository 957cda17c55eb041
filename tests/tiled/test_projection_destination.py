"""Projection into a caller-supplied destination: the destination is written
only at terminal success (through a staging carrier), so a failed
projection leaves its values and version untouched and it is usable again
(spec: "Failure after submission SHALL publish no partial destination")."""
import pytest

import strideweave as sw
from strideweave.carriers.move import register_move_operation, unregister_move_operation
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection, TileSet

F32 = sw.DType.Float32


class DPrimary(sw.Generic):
    pass


class DSecondary(sw.Generic):
    pass


class CopyOp(sw.MoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        for i in range(output.size()):
            output[i] = tensor[i]


class FailFromOffset4(sw.MoveOperation):
    """Copies tiles below slot 4, fails the rest (after others were written)."""

    def _copy(self, tensor, destination, output, element_count):
        if tensor.offset >= 4:
            raise OSError("injected gather failure")
        for i in range(output.size()):
            output[i] = tensor[i]


@pytest.fixture
def routes():
    register_move_operation(DPrimary, DSecondary, CopyOp)
    register_move_operation(DSecondary, DPrimary, FailFromOffset4)
    yield
    unregister_move_operation(DPrimary, DSecondary)
    unregister_move_operation(DSecondary, DPrimary)


def cold_tiled():
    te = TiledEvictable(DPrimary([float(i) for i in range(8)], dtype=F32), DSecondary([0.0] * 8, dtype=F32), (4,),
                        (2,))
    te.evict(TileSet([(k,) for k in range(4)]))
    return te, sw.Tensor(te, 0, te.canonical_layout())


def test_a_failed_projection_leaves_the_destination_untouched(routes):
    te, w = cold_tiled()
    dest = DPrimary([-1.0] * 5, dtype=F32)
    version = dest.version
    h = te.project(w, TileSelection([[0, 3]]), destination=dest)  # tile 0 copies, tile 3 fails
    with pytest.raises(OSError, match="injected gather failure"):
        h.wait()
    assert [dest[i] for i in range(5)] == [-1.0] * 5
    assert dest.version == version
    assert not dest.is_owned()
    dest[0] = 7.0  # writable again
    # the source is usable again too, and a good selection succeeds into it
    r = te.project(w, TileSelection([[1, 0]]), destination=dest).wait()
    assert r.carrier is dest
    assert [dest[i] for i in range(5)] == [2.0, 3.0, 0.0, 1.0, -1.0]  # slot 4 is beyond the selection


def test_implicit_tiles_project_as_zero_into_a_dirty_destination():
    te = TiledEvictable(sw.CPU(0), sw.CPU(0), (3,), (2,))  # every tile implicit zero
    te[2] = 5.0  # tile 1 becomes primary and dirty
    w = sw.Tensor(te, 0, te.canonical_layout())
    dest = sw.CPU(6)
    for i in range(6):
        dest[i] = -1.0
    r = te.project(w, TileSelection([[2, 1, 0]]), destination=dest).wait()
    assert r.carrier is dest
    assert [dest[i] for i in range(6)] == [0.0, 0.0, 5.0, 0.0, 0.0, 0.0]


def test_a_destination_projection_keeps_the_selected_values_and_order():
    c = sw.CPU(8)
    for i in range(8):
        c[i] = float(i)
    te = TiledEvictable(c, sw.FileBacked(dtype=F32), (4,), (2,))
    te.evict(TileSet([(1,), (3,)]))
    w = sw.Tensor(te, 0, te.canonical_layout())
    dest = sw.CPU(6)
    r = te.project(w, TileSelection([[3, 0, 1]]), destination=dest).wait()
    assert [r[i] for i in range(6)] == [6.0, 7.0, 0.0, 1.0, 2.0, 3.0]


def test_a_reused_staging_carrier_still_gives_zero_implicit_tiles():
    # projections into a caller's destination stage through a kept carrier;
    # its old values must not leak into an implicit (zero) tile
    te = TiledEvictable(sw.CPU(0), sw.FileBacked(dtype=sw.DType.Float32), (2,), (2,))
    te[0], te[1] = 1.0, 2.0
    w = sw.Tensor(te, 0, te.canonical_layout())
    dest = sw.CPU(2)
    r = te.project(w, TileSelection([[0]]), dest).wait()
    assert [r.carrier[0], r.carrier[1]] == [1.0, 2.0]
    r = te.project(w, TileSelection([[1]]), dest).wait()
    assert r.carrier is dest and [dest[0], dest[1]] == [0.0, 0.0]
    te.release()
    assert te.is_released()
