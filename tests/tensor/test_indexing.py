"""Tensor indexing as a NumPy user reaches for it: shape, ndim, len,
iteration over mode 0, and basic slicing views (same carrier, no copy,
shared version), next to the CuTe element keys that stay as they were (a
single int is the flat first-mode-fastest ordinal)."""
import random

import numpy as np
import pytest

import strideweave as sw
from support.builders import two_plane_tensor


def rowmajor(shape, dtype=np.float32):
    return sw.tensor(np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape))


def hier():
    """(2, (3, 4)):(1, (2, 6)): a hierarchical mode 1 over a ramp."""
    lay = sw.Layout(sw.Shape(2, (3, 4)), sw.Stride(1, (2, 6)))
    c = sw.CPU(lay.cosize)
    np.from_dlpack(sw.Tensor(c, 0, sw.Layout(sw.Shape(24), sw.Stride(1))))[:] = np.arange(24)
    return sw.Tensor(c, 0, lay)


# ------------------------------------------------------------ shape, len, iteration

def test_shape_ndim_len_are_the_top_level_modes():
    t = rowmajor((2, 3))
    assert t.shape == (2, 3) and t.ndim == 2 and len(t) == 2
    h = hier()
    assert h.shape == (2, 12) and h.ndim == 2 and len(h) == 2  # a hierarchical mode counts all its coordinates
    r0 = sw.tensor(1.5)
    assert r0.shape == () and r0.ndim == 0
    with pytest.raises(TypeError, match="rank-0"):
        len(r0)


def test_iteration_yields_views_over_mode_0():
    t = rowmajor((2, 3))
    rows = list(t)
    assert [r.tolist() for r in rows] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert all(r.carrier is t.carrier for r in rows)
    # A rank-1 tensor yields rank-0 views (as torch does).
    items = list(sw.tensor([1.0, 2.0]))
    assert [x.shape for x in items] == [(), ()] and [x.item() for x in items] == [1.0, 2.0]
    with pytest.raises(TypeError, match="rank-0"):
        iter(sw.tensor(1.0))


# ------------------------------------------------------------ element keys stay

def test_a_single_int_is_the_flat_first_mode_fastest_ordinal():
    t = rowmajor((2, 3))
    assert [t[i] for i in range(6)] == [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    assert t[1] == 3.0


def test_a_full_rank_int_tuple_is_one_element():
    t = rowmajor((2, 3))
    assert t[1, 2] == 5.0 and isinstance(t[1, 2], float)
    assert t[[1, 2]] == 5.0
    h = hier()
    assert h[(1, (2, 3))] == 23.0 and h[1, 11] == 23.0
    with pytest.raises(ValueError, match="not in domain"):
        t[(0,)]  # an int-only key stays strict: no missing modes
    with pytest.raises(ValueError, match="not in domain"):
        t[-1, 0]  # ... and no negative ordinals


# ------------------------------------------------------------ views

def test_int_drops_a_mode_and_colon_keeps_it():
    t = rowmajor((2, 3))
    row = t[1, :]
    assert row.tolist() == [3.0, 4.0, 5.0] and row.shape == (3,)
    assert row.carrier is t.carrier and row.offset == 3
    assert row.layout == sw.Layout(sw.Shape(3), sw.Stride(1))
    col = t[:, 2]
    assert col.tolist() == [2.0, 5.0] and col.layout == sw.Layout(sw.Shape(2), sw.Stride(3))
    assert t[0:1].tolist() == [[0.0, 1.0, 2.0]]
    assert t[-1, :].tolist() == [3.0, 4.0, 5.0]  # NumPy's negative index in a view key


def test_ranges_on_leaf_modes_scale_the_stride():
    t = rowmajor((4, 5))
    v = t[1::2, ::2]
    assert v.layout == sw.Layout(sw.Shape(2, 3), sw.Stride(10, 2)) and v.offset == 5
    assert v.tolist() == [[5.0, 7.0, 9.0], [15.0, 17.0, 19.0]]
    assert t[:, 3:100].shape == (4, 2)  # bounds clamp as Python slices do


def test_ellipsis_and_new_axes():
    t = rowmajor((2, 3, 4))
    assert t[..., 1].tolist() == np.arange(24, dtype=np.float32).reshape(2, 3, 4)[..., 1].tolist()
    assert t[1, ...].shape == (3, 4)
    assert t[...].layout == t.layout
    n = t[None, :, 0, None]
    assert n.shape == (1, 2, 1, 4)


def test_colon_keeps_a_hierarchical_mode_whole():
    h = hier()
    v = h[1, :]
    assert v.layout == sw.Layout(sw.Shape([[3, 4]]), sw.Stride([[2, 6]])) and v.offset == 1


def test_a_range_the_layout_can_express_on_a_hierarchical_mode():
    h = hier()
    v = h[0, 3:9]  # mode (3, 4):(2, 6) is one run of 12 with stride 2
    assert v.layout == sw.Layout(sw.Shape(6), sw.Stride(2)) and v.offset == 6
    assert v.tolist() == [6.0, 8.0, 10.0, 12.0, 14.0, 16.0]


def test_a_range_the_layout_cannot_express_is_a_type_error():
    lay = sw.Layout(sw.Shape(2, (3, 4)), sw.Stride(1, (2, 7)))  # rows of 3, 7 apart: no single run
    t = sw.Tensor(sw.CPU(lay.cosize), 0, lay)
    with pytest.raises(TypeError, match=r"hierarchical mode 1 .*cannot be\s+expressed by a layout"):
        t[:, 0:4]
    assert t[:, 3:9].layout == sw.Layout(sw.Shape(2, (3, 2)), sw.Stride(1, (2, 7)))  # whole rows: fine
    assert t[:, 1:3].layout == sw.Layout(sw.Shape(2, 2), sw.Stride(1, 2))  # inside a row: fine


def test_nested_parts_slice_inside_a_hierarchical_mode():
    h = hier()
    v = h[:, (1, slice(1, 3))]
    assert v.layout == sw.Layout(sw.Shape(2, (2,)), sw.Stride(1, (6,))) and v.offset == 2 + 6
    with pytest.raises(TypeError, match="leaf"):
        h[(0, slice(None)), :]


def test_view_key_errors():
    t = rowmajor((2, 3))
    with pytest.raises(IndexError, match=r"index 5 is out of range for mode 0 of size 2"):
        t[5, :]
    with pytest.raises(IndexError, match="too many indices"):
        t[:, :, :]
    with pytest.raises(IndexError, match="single ellipsis"):
        t[..., ...]
    with pytest.raises(ValueError, match="step must be positive"):
        t[::-1]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        t[::0]
    with pytest.raises(ValueError, match="selects no element"):
        t[2:1]
    with pytest.raises(TypeError, match="bool"):
        t[True, :]
    with pytest.raises(TypeError, match="advanced indexing"):
        t[np.array([0, 1]), :]


def test_views_share_the_carrier_and_its_version():
    t = rowmajor((2, 3))
    v = t[1, 1:]
    assert v.version == t.version == 0
    v[0] = 40.0  # a write through the view goes to the carrier
    assert t[1, 1] == 40.0 and t.version == v.version == 1
    t[0, 0] = -1.0
    assert v.version == 2
    assert np.asarray(v).ctypes.data == t.carrier.pointer() + 4 * 4  # the same memory, no copy


def test_a_view_of_a_view():
    t = rowmajor((3, 4))
    v = t[1:, :][1, 1:3]
    assert v.tolist() == [9.0, 10.0] and v.carrier is t.carrier


def test_slice_assignment_is_refused_with_the_way_to_write():
    t = rowmajor((2, 3))
    with pytest.raises(TypeError, match=r"v\[i\] = x"):
        t[0, :] = 1.0
    assert t.version == 0


def test_views_of_a_released_carrier_are_refused():
    t = rowmajor((2, 3))
    sw.move(t, sw.CPU(6))
    with pytest.raises(RuntimeError, match="CPU carrier is released"):
        t[0, :]


def test_views_keep_the_carrier_class_and_dtype():
    g = sw.Tensor(sw.Generic([1, 2, 3, 4], dtype=sw.DType.Int32), 0, sw.Layout.canonical(sw.Shape(4)))
    v = g[1:3]
    assert v.tolist() == [2, 3] and v.dtype() is sw.DType.Int32 and v.carrier is g.carrier
    f = sw.move(rowmajor((2, 2)), sw.FileBacked(dtype=sw.float32))
    assert f[1, :].tolist() == [2.0, 3.0]


def test_basic_slicing_agrees_with_numpy():
    rnd = random.Random(23)

    def part(extent):
        r = rnd.random()
        if r < 0.3:
            return rnd.randrange(-extent, extent)
        lo = rnd.choice([None, rnd.randrange(-extent, extent)])
        hi = rnd.choice([None, rnd.randrange(-extent - 1, extent + 2)])
        return slice(lo, hi, rnd.choice([None, 1, 2, 3]))

    checked = 0
    for _ in range(400):
        shape = tuple(rnd.randint(1, 5) for _ in range(rnd.randint(1, 3)))
        a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
        t = sw.tensor(a)
        k = rnd.randint(1, len(shape))
        if rnd.random() < 0.3:  # ... first: the parts address the trailing modes
            key = [Ellipsis] + [part(e) for e in shape[len(shape) - k:]]
        else:
            key = [part(e) for e in shape[:k]] + ([Ellipsis] if rnd.random() < 0.3 else [])
        if rnd.random() < 0.2:
            key.insert(rnd.randint(0, len(key)), None)
        key = tuple(key)
        if not any(isinstance(k, slice) or k is Ellipsis or k is None for k in key):
            continue  # an int-only key is an element key
        expected = a[key]
        if expected.size == 0:
            with pytest.raises(ValueError, match="selects no element"):
                t[key]
            continue
        v = t[key]
        assert v.shape == expected.shape, key
        assert np.asarray(v).tolist() == expected.tolist(), key
        checked += 1
    assert checked > 200


def test_multi_subtensor_indexing_is_not_implemented():
    t = two_plane_tensor()
    with pytest.raises(NotImplementedError, match="Multi-subtensor Tensor indexing"):
        t[0:1]
    with pytest.raises(NotImplementedError, match="Multi-subtensor Tensor iteration"):
        iter(t)
