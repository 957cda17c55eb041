"""Float32 conversion of a finite value beyond binary32's range raises
OverflowError, as an Int32 conversion beyond 32 bits does; NaN and the
infinities are values and stay as they are."""
import math

import numpy as np
import pytest

import strideweave as sw

FLT_MAX = float(np.finfo(np.float32).max)


def file_f32(n):
    return sw.move(sw.Tensor(sw.CPU(n), 0, sw.Layout.canonical(sw.Shape(n))), sw.FileBacked(dtype=sw.float32)).carrier


@pytest.mark.parametrize("make", [lambda: sw.CPU(1), lambda: sw.Generic([0.0], dtype=sw.float32), lambda: file_f32(1)],
                         ids=["cpu", "generic", "file"])
def test_slot_writes_refuse_finite_values_beyond_the_range(make):
    c = make()
    for big in (1e39, -1e300, 2**200):
        with pytest.raises(OverflowError, match=r"value out of range for Float32: .* is finite but beyond"):
            c[0] = big
    assert c[0] == 0.0 and c.version == 0
    c[0] = FLT_MAX * (1 + 1e-9)  # less than half an ulp past FLT_MAX still rounds to it
    assert c[0] == FLT_MAX
    for v in (math.inf, -math.inf):
        c[0] = v
        assert c[0] == v
    c[0] = math.nan
    assert math.isnan(c[0])


def test_tensor_from_float64_data_refuses_them():
    with pytest.raises(OverflowError, match=r"value out of range for Float32 at index \(1,\) of data with shape \(3,\)"):
        sw.tensor(np.array([0.0, 1e40, 2.0]))
    with pytest.raises(OverflowError, match=r"at index \(0, 1\)"):
        sw.tensor(np.array([[1.0, -1e40]])[:, ::1])
    with pytest.raises(OverflowError, match=r"at index \(2,\)"):
        sw.tensor(np.array([1.0, 2.0, 3e38 * 10, 4.0])[::1].repeat(1)[::1])
    with pytest.raises(OverflowError, match="out of range for Float32"):
        sw.tensor(np.arange(8.0)[::2] * 1e39)  # strided source
    with pytest.raises(OverflowError, match=r"out of range for Float32.*at index \(1,\)"):
        sw.tensor([1.0, 1e39])
    with pytest.raises(OverflowError, match="out of range for Float32"):
        sw.tensor(1e39)
    with pytest.raises(OverflowError, match="out of range for Float32"):
        sw.tensor([1], dtype=sw.float32).carrier.new_like([1e39])
    t = sw.tensor(np.array([np.inf, -np.inf, np.nan, FLT_MAX]))
    r = t.tolist()
    assert r[0] == math.inf and r[1] == -math.inf and math.isnan(r[2]) and r[3] == FLT_MAX


def test_constructors_refuse_them():
    with pytest.raises(OverflowError, match="out of range for Float32"):
        sw.full(3, 1e39)
    assert sw.full(2, math.inf).tolist() == [math.inf, math.inf]
