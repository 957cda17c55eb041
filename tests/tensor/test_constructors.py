"""strideweave.zeros, ones, full, empty and arange: fresh CPU tensors in
the row-major layout strideweave.tensor gives data of the same shape."""
import numpy as np
import pytest

import strideweave as sw


@pytest.mark.parametrize("shape", [3, (3,), (2, 3), [2, 1, 4]])
def test_zeros_ones_full_empty_are_row_major_cpu_tensors(shape):
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    same = sw.tensor(np.zeros(dims, np.float32))
    for t in (sw.zeros(shape), sw.ones(shape), sw.full(shape, 2.5), sw.empty(shape)):
        assert type(t.carrier) is sw.CPU and t.offset == 0
        assert t.layout == same.layout and t.shape == dims
        assert t.dtype() is sw.DType.Float32 and t.carrier.size() == int(np.prod(dims))
    assert np.asarray(sw.zeros(shape)).tolist() == np.zeros(dims).tolist()
    assert np.asarray(sw.ones(shape)).tolist() == np.ones(dims).tolist()
    assert np.asarray(sw.full(shape, 2.5)).tolist() == np.full(dims, 2.5).tolist()


def test_dtypes_of_the_constructors():
    assert sw.zeros(2, dtype=sw.int32).tolist() == [0, 0]
    assert sw.ones(2, dtype=sw.bool_).tolist() == [True, True]
    assert sw.ones(2, dtype=np.int32).dtype() is sw.DType.Int32
    # full infers its dtype from the value, as tensor() does.
    assert sw.full(2, 7).dtype() is sw.DType.Int32 and sw.full(2, 7).tolist() == [7, 7]
    assert sw.full(2, True).dtype() is sw.DType.Bool and sw.full(2, np.bool_(False)).tolist() == [False, False]
    assert sw.full(2, 1.5).dtype() is sw.DType.Float32
    assert sw.full(2, 3, dtype=sw.float32).tolist() == [3.0, 3.0]
    with pytest.raises(ValueError, match=r"zeros\(\) makes CPU tensors, which cannot hold dtype DType.Floating"):
        sw.zeros(2, dtype=sw.DType.Floating)
    with pytest.raises(TypeError, match="Int32 slot expects an int"):
        sw.full(2, 1.5, dtype=sw.int32)
    with pytest.raises(TypeError, match=r"full\(\) value must be a number or a bool"):
        sw.full(2, "x")


def test_shape_errors():
    with pytest.raises(ValueError, match=r"every extent >= 0.*\(2, -1\)"):
        sw.zeros((2, -1))
    with pytest.raises(ValueError, match="every extent >= 0"):
        sw.ones(-1)
    with pytest.raises(TypeError, match=r"zeros\(\) shape must be an int or a tuple of ints, not str"):
        sw.zeros("3")
    with pytest.raises(TypeError, match="shape must be an int"):
        sw.zeros((2, 1.5))
    with pytest.raises(TypeError, match="missing required argument 'shape'"):
        sw.zeros()
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        sw.zeros(2, dtyp=sw.int32)
    assert sw.zeros(shape=(1, 2)).shape == (1, 2)
    assert sw.ones(np.array([2, 3])).shape == (2, 3) and sw.ones(np.int64(4)).shape == (4,)
    assert sw.zeros(range(1, 3)).shape == (1, 2)
    with pytest.raises(TypeError, match="not bool"):
        sw.zeros(True)


def test_large_tensors_fill_natively():
    n = 1 << 20  # past the size where the GIL is released for the fill
    assert np.asarray(sw.ones(n)).sum() == n
    a = np.asarray(sw.arange(n))
    assert a[0] == 0 and a[-1] == n - 1 and a.dtype == np.int32
    assert not np.asarray(sw.zeros(n)).any()


@pytest.mark.parametrize("args", [(5,), (2, 7), (7, 2, -2), (1, 10, 3), (-3, 3)])
def test_arange_of_ints_is_numpys(args):
    t = sw.arange(*args)
    assert t.dtype() is sw.DType.Int32 and t.ndim == 1
    assert t.tolist() == np.arange(*args).tolist()


@pytest.mark.parametrize("args", [(0.0, 1.0, 0.1), (1, 2, 0.25), (2.5,), (5, 0, -1.5)])
def test_arange_of_floats_has_numpys_length_and_rounded_values(args):
    t = sw.arange(*args)
    expected = np.arange(*args, dtype=np.float64)
    assert t.dtype() is sw.DType.Float32 and t.shape == expected.shape
    # Each value is start + i * step in double, rounded once to binary32.
    assert t.tolist() == [float(np.float32(v)) for v in expected]


def test_arange_errors():
    with pytest.raises(ValueError, match="step must not be zero"):
        sw.arange(0, 3, 0)
    with pytest.raises(OverflowError, match="leaves the Int32 range"):
        sw.arange(2**31 - 2, 2**31 + 2)
    with pytest.raises(OverflowError, match="leaves the Float32 range"):
        sw.arange(1e39, 2e39, 1e38)
    with pytest.raises(TypeError, match="arange\\(\\) start must be an int or a float, not bool"):
        sw.arange(True, 3)
    with pytest.raises(TypeError, match="with dtype Int32 takes int arguments"):
        sw.arange(0.5, 3, dtype=sw.int32)
    with pytest.raises(ValueError, match="not Bool"):
        sw.arange(3, dtype=sw.bool_)
    assert sw.arange(3, dtype=np.float32).tolist() == [0.0, 1.0, 2.0]


def test_tensors_of_one_shape_may_share_their_layout_object():
    a, b = sw.zeros((2, 3)), sw.ones((2, 3))
    assert a.layout == b.layout
    assert a.carrier is not b.carrier  # storage is never shared
    b[0, 0] = 5.0
    assert a[0, 0] == 0.0
