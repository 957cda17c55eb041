"""DType names a NumPy user writes: sw.float32 / sw.int32 / sw.bool_,
DType.from_name with NumPy's names, and NumPy dtypes in every dtype=
argument, found without importing NumPy."""
import numpy as np
import pytest

import strideweave as sw
from support.process import run_python

F32, I32, B = sw.DType.Float32, sw.DType.Int32, sw.DType.Bool


def test_aliases_are_the_singletons():
    assert sw.float32 is F32 and sw.int32 is I32 and sw.bool_ is B


def test_from_name_takes_numpy_names():
    assert sw.DType.from_name("float32") is F32 and sw.DType.from_name("Float32") is F32
    assert sw.DType.from_name("int32") is I32 and sw.DType.from_name("bool") is B
    assert sw.DType.from_name("bool_") is B and sw.DType.from_name("float64") is sw.DType.Float64
    with pytest.raises(ValueError, match="int64"):
        sw.DType.from_name("int64")


@pytest.mark.parametrize("np_dtype, expected", [(np.float32, F32), (np.dtype("float32"), F32), (np.int32, I32),
                                                (np.dtype("int32"), I32), (np.bool_, B), (np.dtype(bool), B)])
def test_every_dtype_argument_takes_numpy_dtypes(np_dtype, expected):
    assert sw.CPU(2, dtype=np_dtype).dtype() is expected
    assert sw.Generic([], dtype=np_dtype).dtype() is expected
    if expected is not B:  # FileBacked holds no Bool
        assert sw.FileBacked(dtype=np_dtype).dtype() is expected
    assert sw.zeros(2, dtype=np_dtype).dtype() is expected
    assert sw.CPU(1).new_like([], dtype=np_dtype).dtype() is expected
    assert sw.CPU(1).allocate_like(1, dtype=np_dtype).dtype() is expected
    value = {F32: [1.0], I32: [1], B: [True]}[expected]
    assert sw.tensor(value, dtype=np_dtype).dtype() is expected


def test_numpy_dtypes_without_a_dtype_are_refused():
    with pytest.raises(ValueError, match=r"NumPy dtype <class 'numpy.int64'> has no StrideWeave DType"):
        sw.CPU(2, dtype=np.int64)
    with pytest.raises(ValueError, match="native byte order"):
        sw.zeros(2, dtype=np.dtype(">f4"))
    with pytest.raises(ValueError, match="CPU does not support dtype DType.Float64"):
        sw.CPU(2, dtype=np.float64)
    with pytest.raises(TypeError, match=r"CPU dtype must be a DType \(or a NumPy dtype\), not str"):
        sw.CPU(2, dtype="float32")


def test_import_does_not_import_numpy():
    out = run_python("import sys, strideweave as sw\n"
                     "t = sw.zeros(2, dtype=sw.float32) + 1.0\n"
                     "print(repr(t)[:7], 'numpy' in sys.modules)")
    assert out.stdout.split() == ["Tensor(", "False"], out
