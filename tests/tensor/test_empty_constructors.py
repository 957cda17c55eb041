"""The constructors and tensor() make empty tensors, as NumPy's do: an
extent 0 in a shape, an empty range or empty (nested) data gives a tensor of
size 0 whose Layout has that extent-0 mode, as a DLPack import of an empty
array has. A Shape object itself still refuses extent 0, and negative
extents and ragged data are still errors."""
import numpy as np
import pytest

import strideweave as sw

SHAPES = [0, (0,), (0, 3), (3, 0), (2, 0, 4)]


def as_tuple(shape):
    return (shape,) if isinstance(shape, int) else shape


def check_empty(t, shape, dtype):
    shape = as_tuple(shape)
    assert t.shape == shape and t.size() == 0 and t.layout.size == 0 and t.layout.cosize == 0
    assert t.dtype() is dtype and isinstance(t.carrier, sw.CPU)
    assert np.asarray(t).shape == shape and np.asarray(t).size == 0  # a DLPack export for Float32/Int32


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("make,dtype", [
    (lambda s: sw.zeros(s), sw.float32),
    (lambda s: sw.ones(s, dtype=sw.int32), sw.int32),
    (lambda s: sw.empty(s, dtype=np.bool_), sw.bool_),
    (lambda s: sw.full(s, 7), sw.int32),
], ids=["zeros", "ones", "empty", "full"])
def test_an_extent_zero_makes_an_empty_tensor(shape, make, dtype):
    t = make(shape)
    check_empty(t, shape, dtype)
    assert t.tolist() == np.zeros(as_tuple(shape)).tolist()


@pytest.mark.parametrize("args,dtype", [((0,), sw.int32), ((3, 1), sw.int32), ((5, 5, 2), sw.int32),
                                        ((1.0, 0.5), sw.float32), ((0, 3, -1), sw.int32),
                                        ((-2**31, -2**31), sw.int32)])
def test_an_empty_range_makes_an_empty_tensor(args, dtype):
    t = sw.arange(*args)
    assert len(np.arange(*args)) == 0
    check_empty(t, (0,), dtype)


@pytest.mark.parametrize("data,shape", [([], (0,)), ([[]], (1, 0)), ([[], []], (2, 0)), ([[[]], [[]]], (2, 1, 0)),
                                        ((), (0,))])
def test_empty_nested_data_makes_an_empty_tensor(data, shape):
    assert np.array(data).shape == shape
    check_empty(sw.tensor(data), shape, sw.float32)  # NumPy's float64 default, as Float32
    check_empty(sw.tensor(data, dtype=sw.int32), shape, sw.int32)


@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0)])
@pytest.mark.parametrize("np_dtype,dtype", [(np.float64, sw.float32), (np.int32, sw.int32), (np.bool_, sw.bool_)])
def test_an_empty_buffer_makes_an_empty_tensor(shape, np_dtype, dtype):
    check_empty(sw.tensor(np.zeros(shape, np_dtype)), shape, dtype)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0)])
def test_an_empty_tensor_copies_with_its_shape_and_dtype(shape):
    t = sw.tensor(sw.zeros(shape, dtype=sw.int32))
    check_empty(t, shape, sw.int32)
    check_empty(sw.tensor(sw.from_dlpack(np.zeros(shape, np.float32)), dtype=sw.bool_), shape, sw.bool_)


def test_an_empty_layout_is_accepted_for_empty_data():
    lay = sw.zeros((2, 0)).layout
    t = sw.tensor(np.zeros((2, 0)), layout=lay)
    assert t.layout == lay and t.size() == 0


def test_empty_tensors_work_with_ops_and_moves():
    t = sw.zeros((0, 3))
    assert sw.add(t, t).shape == (0, 3) and sw.mul(t, 2.0).tolist() == []
    assert sw.reduce_sum(t).item() == 0.0
    assert sw.move(sw.zeros((2, 0)), sw.CPU(0)).shape == (2, 0)
    assert list(t) == [] and len(sw.zeros((2, 0))) == 2


def test_shapes_still_refuse_zero_and_negative_extents():
    with pytest.raises(ValueError, match="Shape extent must be >= 1"):
        sw.Shape(0)
    with pytest.raises(ValueError, match=r"zeros\(\) needs every extent >= 0.*\(2, -1\)"):
        sw.zeros((2, -1))
    with pytest.raises(ValueError, match=r"rectangular.*length 1 instead of 0"):
        sw.tensor([[], [1]])
    with pytest.raises(ValueError, match=r"rectangular.*a number where a sequence was expected"):
        sw.tensor([[], 5])
    with pytest.raises(ValueError, match="rectangular"):
        sw.tensor([[5], [[]]])
