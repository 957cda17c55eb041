"""dtype= of FileBacked.open and FileBacked.create takes what every other
dtype= takes: a DType, a NumPy dtype or a NumPy scalar type (a NumPy dtype
used to be read as a DType: "invalid item size", "size must be
non-negative"); a string or a dtype StrideWeave has not is refused."""
import numpy as np
import pytest

import strideweave as sw

ACCEPTED = [
    (np.float32, sw.DType.Float32, np.float32),
    (np.dtype("int32"), sw.DType.Int32, np.int32),
    (sw.float32, sw.DType.Float32, np.float32),
]


@pytest.mark.parametrize("arg, dtype, np_type", ACCEPTED)
def test_open_takes_numpy_dtypes(tmp_path, arg, dtype, np_type):
    p = tmp_path / "data.bin"
    np.arange(4, dtype=np_type).tofile(p)
    f = sw.FileBacked.open(p, dtype=arg)
    assert f.dtype() is dtype and f.size() == 4
    assert [f[i] for i in range(4)] == [0, 1, 2, 3]
    f.release()


@pytest.mark.parametrize("arg, dtype, np_type", ACCEPTED)
def test_create_takes_numpy_dtypes(tmp_path, arg, dtype, np_type):
    p = tmp_path / "new.bin"
    f = sw.FileBacked.create(p, 2, dtype=arg)
    assert f.dtype() is dtype and f.size() == 2
    f[1] = 7
    f.release()
    assert np.fromfile(p, dtype=np_type).tolist() == [0, 7]


@pytest.mark.parametrize("make", ["open", "create"])
def test_strings_and_foreign_dtypes_are_refused_before_the_file_is_touched(tmp_path, make):
    p = tmp_path / "x.bin"
    if make == "open":
        np.zeros(2, np.float32).tofile(p)

    def call(dtype):
        return sw.FileBacked.open(p, dtype=dtype) if make == "open" else sw.FileBacked.create(p, 2, dtype=dtype)

    # The same refusals as FileBacked(dtype=...).
    with pytest.raises(TypeError, match="dtype must be a DType .or a NumPy dtype., not str"):
        call("float32")
    with pytest.raises(ValueError, match="int64"):
        call(np.int64)
    assert p.exists() == (make == "open")  # create made nothing
