"""Conformance audit of the DLPack half of spec interop-movement: the points
the scenario tests in test_dlpack.py / test_dlpack_lifetime.py did not pin
down (see docs/spec_coverage_interop.md for the full map).

- "an exception the hook raises SHALL propagate unchanged": a dlpack_info()
  override raising BufferError kept its identity only by accident (the
  class-and-fix explanation was added for carriers with a native dtype).
- A Python carrier keeping the base hook: its refusal called the dtype()
  hook with the BufferError still set (SystemError for some hooks).
- "both __dlpack__ and __dlpack_device__ SHALL fail identically".
- "two ... non-negative integers": an integer with __index__ (NumPy, IntEnum)
  is an integer.
- "every version token snapshotted from it SHALL still compare equal";
  "its autograd_ctx and .grad are unchanged" for a non-leaf with a .grad.
"""
import enum

import numpy as np
import pytest

import strideweave as sw
from support.dlpack import READ_ONLY, cpu_tensor, inspect, kDLCPU

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


# ------------------------------------------------ the carrier opt-in


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


# ------------------------------------------------ integer arguments


class DeviceType(enum.IntEnum):
    kDLCPU = 1


class Index:
    def __init__(self, v):
        self.v = v

    def __index__(self):
        return self.v


@pytest.mark.parametrize("ceiling", [(np.int64(1), np.int64(0)), [np.uint8(2), 0], (Index(1), Index(3))])
def test_max_version_accepts_any_integer(ceiling):
    info = inspect(cpu_tensor([1.0, 2.0]).__dlpack__(max_version=ceiling))
    assert info["name"] == "dltensor_versioned" and info["version"] == (1, 0)


@pytest.mark.parametrize("ceiling", [(np.int64(0), np.int64(5)), (Index(0), 0)])
def test_a_zero_major_integer_ceiling_gives_the_legacy_capsule(ceiling):
    assert inspect(cpu_tensor([1.0]).__dlpack__(max_version=ceiling))["name"] == "dltensor"


def test_a_negative_index_component_still_fails_with_value_error():
    t = cpu_tensor([1.0])
    for bad in [(np.int64(-1), 0), (1, Index(-2))]:
        with pytest.raises(ValueError, match="non-negative"):
            t.__dlpack__(max_version=bad)


@pytest.mark.parametrize("device", [(DeviceType.kDLCPU, 0), (np.int32(kDLCPU), np.int64(0)), [Index(1), Index(0)]])
def test_dl_device_accepts_any_integer(device):
    t = cpu_tensor([1.0, 2.0])
    info = inspect(t.__dlpack__(dl_device=device, max_version=(1, 0)))
    assert info["device"] == (kDLCPU, 0) and info["data"] == t.carrier.pointer()
    with pytest.raises(BufferError, match="cross-device exports are not supported"):
        t.__dlpack__(dl_device=(np.int32(2), np.int32(0)))


def test_an_index_hook_that_mutates_the_list_is_safe():
    t = cpu_tensor([1.0])
    ceiling = []

    class Shrinking:
        def __index__(self):
            ceiling.clear()
            return 1

    ceiling.extend([Shrinking(), 0])
    info = inspect(t.__dlpack__(max_version=ceiling))
    assert info["version"] == (1, 0)


def test_an_index_hook_error_propagates():
    class Broken:
        def __index__(self):
            raise ZeroDivisionError("no")

    with pytest.raises(ZeroDivisionError):
        cpu_tensor([1.0]).__dlpack__(max_version=(Broken(), 0))


# ------------------------------------------------ version and gradient tracking


def test_a_foreign_write_leaves_every_snapshotted_version_token_equal():
    a = cpu_tensor([1.0, 2.0, 3.0])
    b = cpu_tensor([4.0, 5.0, 6.0])
    y = sw.mul(a, b)
    node = y.autograd_ctx
    tokens = node.input_versions()
    arr = np.from_dlpack(a)
    assert arr.flags.writeable
    arr[:] = [7.0, 8.0, 9.0]
    assert node.input_versions() == tokens
    assert tuple(t.version for t in node.inputs()) == tokens
    y.backward(cpu_tensor([1.0, 1.0, 1.0]))
    assert [b.grad[i] for i in range(3)] == [7.0, 8.0, 9.0]


def test_export_leaves_a_non_leaf_grad_and_ctx_as_they_were():
    a = cpu_tensor([1.0, 2.0])
    y = sw.mul(a, 3.0)
    y.retain_grad()
    z = sw.mul(y, 2.0)
    z.backward(cpu_tensor([1.0, 1.0]), retain_graph=True)
    grad, ctx, version = y.grad, y.autograd_ctx, y.version
    assert grad is not None and [grad[i] for i in range(2)] == [2.0, 2.0]
    caps = [y.__dlpack__(), y.__dlpack__(max_version=(1, 0)), grad.__dlpack__(max_version=(1, 0))]
    assert np.from_dlpack(y).tolist() == [3.0, 6.0]
    assert y.grad is grad and y.autograd_ctx is ctx and y.version == version
    assert [grad[i] for i in range(2)] == [2.0, 2.0]
    # The same graph is traversed again: gradients accumulate.
    z.backward(cpu_tensor([1.0, 1.0]))
    assert [a.grad[i] for i in range(2)] == [12.0, 12.0]
    del caps


def test_an_immutable_export_flags_read_only_only_in_the_versioned_form():
    c = sw.CPU(2).new_like([1.0, 2.0], mutable=False)
    t = sw.Tensor(c, 0, LAY2)
    assert inspect(t.__dlpack__(max_version=(1, 0)))["flags"] == READ_ONLY
    assert inspect(t.__dlpack__(max_version=(7, 1)))["flags"] == READ_ONLY
    assert "flags" not in inspect(t.__dlpack__())


def test_the_flag_follows_is_mutable_under_thread_bound_owner_access():
    """Public mutability is tensor.is_mutable(): an owner-access scope makes
    the carrier mutable on its own thread only, and the flag follows."""
    import threading

    t = cpu_tensor([1.0, 2.0])
    c = t.carrier
    token = c._claim_ownership()
    try:
        assert inspect(t.__dlpack__(max_version=(1, 0)))["flags"] == READ_ONLY
        c._begin_owner_access(token)
        try:
            assert t.is_mutable()
            assert inspect(t.__dlpack__(max_version=(1, 0)))["flags"] == 0
            seen = []
            other = threading.Thread(
                target=lambda: seen.append((t.is_mutable(), inspect(t.__dlpack__(max_version=(1, 0)))["flags"])))
            other.start()
            other.join(10)
            assert seen == [(False, READ_ONLY)]
        finally:
            c._end_owner_access(token)
    finally:
        c._relinquish_ownership(token)
    assert inspect(t.__dlpack__(max_version=(1, 0)))["flags"] == 0
