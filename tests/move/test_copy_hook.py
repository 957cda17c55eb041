"""A built-in _copy called directly refuses a destination whose dtype is not
the tensor's, exactly as move does (TypeError, "dtype must match"), instead
of copying the bits: Int32 and Float32 share an item size, so a raw copy
turned [1, 2] into [1.4e-45, 2.8e-45]. Nothing is written and both carriers
are given back."""
import pytest

import strideweave as sw
from strideweave import _testing

from support.builders import F32, I32, canonical

MESSAGE = "dtype must match"


def pair(src_dtype, dst_kind, dst_dtype):
    src = sw.tensor([1, 2]) if src_dtype is I32 else sw.tensor([1.5, 2.5])
    if dst_kind == "cpu":
        dst = sw.CPU(2, dtype=dst_dtype)
    elif dst_kind == "file":
        dst = sw.FileBacked(dtype=dst_dtype)
        sw.move(sw.tensor([0, 0], dtype=dst_dtype), dst)  # a 2-slot file
    else:
        dst = sw.Generic([0, 0], dtype=dst_dtype)
    return src, dst, sw.Tensor(dst, 0, canonical([2]))


@pytest.mark.parametrize("src_dtype,dst_dtype", [(I32, F32), (F32, I32)])
@pytest.mark.parametrize("dst_kind", ["cpu", "generic"])
def test_elementwise_copy_refuses_int32_float32_pairs(src_dtype, dst_dtype, dst_kind):
    src, dst, out = pair(src_dtype, dst_kind, dst_dtype)
    before = out.tolist()
    with pytest.raises(TypeError, match=MESSAGE) as e:
        sw.ElementwiseMoveOperation()._copy(src, dst, out, 2)
    assert str(src_dtype) in str(e.value) and str(dst_dtype) in str(e.value)
    assert out.tolist() == before
    assert src.tolist() == ([1, 2] if src_dtype is I32 else [1.5, 2.5])
    assert not src.carrier.is_owned() and not dst.is_owned()


@pytest.mark.parametrize("src_dtype,dst_dtype", [(I32, F32), (F32, I32)])
def test_bulk_copies_refuse_int32_float32_pairs(src_dtype, dst_dtype):
    src, dst, out = pair(src_dtype, "file", dst_dtype)
    with pytest.raises(TypeError, match=MESSAGE):
        sw.CpuToFileBackedMoveOperation()._copy(src, dst, out, 2)
    assert out.tolist() == [0, 0]
    back = sw.CPU(2, dtype=src_dtype)
    with pytest.raises(TypeError, match=MESSAGE):
        sw.FileBackedToCpuMoveOperation()._copy(out, back, sw.Tensor(back, 0, canonical([2])), 2)
    assert back[0] == 0 and back[1] == 0
    assert not dst.is_owned() and not back.is_owned()


def test_metal_copy_refuses_a_dtype_mismatch():
    ctl = _testing.install_fake_metal_runtime()
    try:
        src = sw.tensor([1, 2])
        dst = sw.Metal(2, dtype=F32)
        with pytest.raises(TypeError, match=MESSAGE):
            sw.CpuToMetalMoveOperation()._copy(src, dst, sw.Tensor(dst, 0, canonical([2])), 2)
        assert dst[0] == 0.0 and dst[1] == 0.0
    finally:
        ctl.hold_synchronize(False)
        _testing.remove_metal_runtime()


@pytest.mark.parametrize("op", [sw.ElementwiseMoveOperation, sw.CpuToFileBackedMoveOperation])
def test_a_matching_dtype_still_copies(op):
    src, dst, out = pair(I32, "file" if op is sw.CpuToFileBackedMoveOperation else "cpu", I32)
    op()._copy(src, dst, out, 2)
    assert out.tolist() == [1, 2]


def test_move_refuses_the_same_pairs_with_the_same_message():
    with pytest.raises(TypeError, match=MESSAGE):
        sw.move(sw.tensor([1, 2]), sw.CPU(2, dtype=F32))
