"""The carrier's dlpack_info() hook as export sees it: a Python carrier that
keeps the base hook is refused with BufferError, an exception an override
raises propagates unchanged, and __dlpack__ and __dlpack_device__ fail
identically."""
import pytest

import strideweave as sw

from support.dlpack import cpu_tensor
from support.process import snippet_stdout


F32 = sw.DType.Float32
LAY2 = sw.Layout.canonical(sw.Shape(2))


class BaseHookCarrier(sw.Carrier):
    """A minimal Python carrier that keeps the base dlpack_info hook; its
    dtype() reads a module global, as user code does."""

    def __init__(self):
        super().__init__()

    def size(self):
        return 2

    def dtype(self):
        return F32

    def get_value(self, i):
        return 0.0


class RaisingGeneric(sw.Generic):
    """A native-storage carrier whose override raises a BufferError of its own."""

    error = BufferError("mine")

    def dlpack_info(self):
        raise type(self).error


def _refusal(call):
    with pytest.raises(BaseException) as e:
        call()
    return e.value


def test_an_overriding_hooks_buffer_error_propagates_unchanged():
    t = sw.Tensor(RaisingGeneric([1.0, 2.0], dtype=F32), 0, LAY2)
    for call in [t.__dlpack__, lambda: t.__dlpack__(max_version=(1, 0)), t.__dlpack_device__]:
        err = _refusal(call)
        assert err is RaisingGeneric.error
        assert str(err) == "mine"


def test_a_python_carrier_with_the_base_hook_is_refused_with_buffer_error():
    t = sw.Tensor(BaseHookCarrier(), 0, LAY2)
    for call in [t.__dlpack__, lambda: t.__dlpack__(max_version=(1, 0)), t.__dlpack_device__]:
        err = _refusal(call)
        assert type(err) is BufferError, repr(err)
        assert "DLPack is not supported" in str(err)
    # The carrier's dtype hook keeps working afterwards.
    assert t.carrier.dtype() is F32


def _generic():
    return sw.Generic([1.0, 2.0], dtype=F32)


def _file_backed():
    return sw.move(cpu_tensor([1.0, 2.0]), sw.FileBacked(dtype=F32)).carrier


def _evicted():
    ev = sw.Evictable(sw.CPU(2), sw.FileBacked(dtype=F32))
    ev.evict()
    return ev


@pytest.mark.parametrize("make", [BaseHookCarrier, _generic, _file_backed,
                                  lambda: sw.Evictable(sw.CPU(2), sw.FileBacked(dtype=F32)), _evicted],
                         ids=["base-hook", "Generic", "FileBacked", "Evictable-promoted", "Evictable-evicted"])
def test_dlpack_and_dlpack_device_fail_identically(make):
    t = sw.Tensor(make(), 0, LAY2)
    errors = [_refusal(t.__dlpack__), _refusal(lambda: t.__dlpack__(max_version=(1, 0))),
              _refusal(t.__dlpack_device__)]
    assert {type(e) for e in errors} == {BufferError}
    assert len({str(e) for e in errors}) == 1, [str(e) for e in errors]
    assert "not supported" in str(errors[0])


def test_dlpack_info_mutated_by_value_conversion():
    # Converting device_type runs __index__, which empties the hook's dict:
    # the borrowed device_id value must not be read after it is freed.
    out = snippet_stdout("""
        from strideweave import Carrier, DType, Layout, Shape, Stride, Tensor
        info = {}
        class DeviceType:
            def __index__(self):
                info.clear()
                return 1
        class C(Carrier):
            def size(self): return 4
            def dtype(self): return DType.Float32
            def dlpack_info(self): return info
        def fill():
            info.update(pointer=4096, device_type=DeviceType(), device_id=int("".join(["12", "345"])))
        fill()
        t = Tensor(C(), 0, Layout(Shape(4), Stride(1)))
        print(t.__dlpack_device__())
    """, dev=True)
    assert out.strip() == "(1, 12345)"
