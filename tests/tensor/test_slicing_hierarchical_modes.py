"""A range on a hierarchical mode is a view whenever the offsets it selects
are evenly spaced (one leaf of that stride), not only when it stays inside a
run of the fastest leaf or takes whole runs; other ranges are refused with a
message saying the offsets are not evenly spaced (or that they decrease)."""
import numpy as np
import pytest

import strideweave as sw


def ramp_tensor(shape, stride, n):
    """A tensor of the layout over a CPU carrier whose slot i holds i."""
    return sw.Tensor(sw.tensor(np.arange(n, dtype=np.float32)).carrier, 0,
                     sw.Layout(sw.Shape(shape), sw.Stride(stride)))


@pytest.fixture
def h():
    # Mode 0 is (2, 3):(1, 10): ordinals 0..5 are offsets 0, 1, 10, 11, 20, 21.
    return ramp_tensor(((2, 3), 4), ((1, 10), 30), 128)


@pytest.mark.parametrize("key, offsets", [
    ((slice(0, 6, 3), 0), [0, 11]),
    ((slice(None, None, 5), 0), [0, 21]),
    ((slice(1, 6, 2), 1), [31, 41, 51]),
    ((slice(2, 4), 2), [70, 71]),   # inside one run: as before
])
def test_evenly_spaced_ranges_are_views(h, key, offsets):
    v = h[key]
    assert v.tolist() == [float(o) for o in offsets]
    assert v.carrier is h.carrier and v.offset == offsets[0]
    assert v.layout == sw.Layout(sw.Shape(len(offsets)), sw.Stride(offsets[1] - offsets[0]))
    v[len(offsets) - 1] = -1.0  # writes go to the carrier
    assert h.carrier[offsets[-1]] == -1.0


def test_progressions_that_are_not_runs_of_the_leaves():
    # (2, 2, 2):(1, 5, 7): ordinals 3, 4, 5 are offsets 6, 7, 8.
    t = ramp_tensor([[2, 2, 2]], [[1, 5, 7]], 16)
    v = t[3:6]
    assert v.tolist() == [6.0, 7.0, 8.0] and v.layout == sw.Layout(sw.Shape(3), sw.Stride(1))


def test_uneven_offsets_are_refused_saying_so(h):
    with pytest.raises(TypeError, match=r"hierarchical mode 0 .*cannot be expressed by a layout: the offsets it "
                                        r"selects are not evenly spaced"):
        h[0:3, 0]  # offsets 0, 1, 10


def test_falling_offsets_are_refused_saying_so():
    t = ramp_tensor([[2, 3]], [[10, 1]], 16)  # ordinals 1, 2 are offsets 10, 1
    with pytest.raises(TypeError, match=r"evenly spaced but decrease \(by 9\).*strides are non-negative"):
        t[1:3]


def test_gradients_flow_through_an_evenly_spaced_view(h):
    sw.reduce_sum(h[0:6:3, 0] * 2.0).backward()
    # Ordinals 0 and 3 of mode 0 are leaf coordinates (0, 0) and (1, 1); mode 1 at 0.
    want = np.zeros((2, 3, 4), np.float32)
    want[0, 0, 0] = want[1, 1, 0] = 2.0
    assert h.grad.layout == h.layout and h.grad.tolist() == want.tolist()
