"""repr(Tensor): values with NumPy-style summarisation, dtype, carrier
class, offset and layout; "released" for a released carrier. Reading the
values for a repr changes no residency and no version."""
import re

import numpy as np

import strideweave as sw
from support.tiled import tiled_ramp


def test_values_dtype_carrier_and_layout():
    t = sw.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) / 10)
    assert repr(t) == ("Tensor([[0.0, 0.1, 0.2],\n"
                       "        [0.3, 0.4, 0.5]], dtype=DType.Float32, carrier=CPU, "
                       "layout=Layout<Shape<(2, 3)>, Stride<(3, 1)>>)")
    assert repr(t[1, :]) == ("Tensor([0.3, 0.4, 0.5], dtype=DType.Float32, carrier=CPU, offset=3, "
                             "layout=Layout<Shape<(3,)>, Stride<(1,)>>)")
    assert repr(sw.tensor(2.5)).startswith("Tensor(2.5, dtype=DType.Float32")
    assert repr(sw.tensor([True, False])).startswith("Tensor([ True, False], dtype=DType.Bool")
    assert repr(sw.tensor([[1, 20], [300, 4]])).startswith("Tensor([[  1,  20],\n        [300,   4]]")


def test_float32_values_print_their_shortest_text():
    assert repr(sw.tensor([0.1, 1e20, 16777217.0])).startswith("Tensor([       0.1,      1e+20, 16777216.0]")


def test_large_tensors_are_summarised_with_edge_items():
    t = sw.arange(2000)
    r = repr(t)
    assert r.startswith("Tensor([   0,    1,    2, ..., 1997, 1998, 1999], dtype=DType.Int32")
    m = sw.Tensor(sw.arange(3000).carrier, 0, sw.Layout.canonical(sw.Shape(60, 50)))
    lines = repr(m).splitlines()
    assert lines[3].strip() == "...," and len(lines) == 7
    assert lines[0] == "Tensor([[   0,   60,  120, ..., 2820, 2880, 2940],"


def test_a_released_carrier_says_so():
    t = sw.tensor([1.0, 2.0])
    sw.move(t, sw.CPU(2))
    assert re.match(r"Tensor\(<released: the CPU carrier's storage was given up \(moved or released\)>, "
                    r"dtype=DType.Float32, carrier=CPU, layout=Layout<", repr(t))


def test_an_evicted_evictable_shows_its_values_without_a_promote():
    e = sw.Evictable(sw.CPU(2), sw.FileBacked(dtype=sw.float32))
    t = sw.Tensor(e, 0, sw.Layout.canonical(sw.Shape(2)))
    t[0] = 4.0
    e.evict()
    version = e.version
    assert repr(t).startswith("Tensor([4.0, 0.0], dtype=DType.Float32, carrier=Evictable")
    assert e.is_evicted() and e.version == version


def test_file_backed_and_generic_values():
    f = sw.move(sw.tensor(np.arange(3, dtype=np.float32)), sw.FileBacked(dtype=sw.float32))
    assert repr(f).startswith("Tensor([0.0, 1.0, 2.0], dtype=DType.Float32, carrier=FileBacked")
    assert f.carrier.version == 0
    g = sw.Tensor(sw.Generic([1, "a", None], dtype=sw.DType.Any), 0, sw.Layout.canonical(sw.Shape(3)))
    assert repr(g).startswith("Tensor([   1,  'a', None], dtype=DType.Any, carrier=Generic")


def test_a_tiled_evictable_tensor_keeps_its_residency():
    te, t = tiled_ramp()
    te.evict(sw.TileSet([(1,)]))  # one tile secondary-resident
    before = [te.tile_state([k]) for k in range(4)]
    r = repr(t)
    assert r.startswith("Tensor([[ 0.0,  3.0,  6.0,  9.0],")  # read where each tile is
    assert [te.tile_state([k]) for k in range(4)] == before


def test_hooked_carriers_are_not_read():
    from support.carriers import ListCarrier

    class Counting(ListCarrier):
        reads = 0

        def get_value(self, i):
            Counting.reads += 1
            return super().get_value(i)

    t = sw.Tensor(Counting([1.0, 2.0]), 0, sw.Layout.canonical(sw.Shape(2)))
    assert "<values not shown: a Counting carrier" in repr(t)
    assert Counting.reads == 0


def test_multi_subtensor_repr():
    from support.builders import two_plane_tensor

    assert repr(two_plane_tensor()).startswith("Tensor(<multi-subtensor Planar()>")
