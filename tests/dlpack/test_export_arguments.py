"""__dlpack__'s arguments: max_version and dl_device take any integers
(IntEnum, __index__ objects), a zero-major ceiling gives the legacy capsule,
and an __index__ hook that raises or mutates its list is safe.

__dlpack__ also remembers the last keyword-name tuple, max_version and
dl_device it parsed (export no slower than NumPy's); these tests pin that the
remembered objects never change an outcome: the same tuple object must give
the same answer as a fresh equal one, mutable arguments are parsed every
time, and errors are raised on every call, not only the first.
"""
import enum

import numpy as np
import pytest

import strideweave as sw

from support.dlpack import InfoCarrier, cpu_carrier, cpu_tensor, inspect, kDLCPU, kDLCUDA


def runtime_name(*parts):
    """A keyword name built at run time: equal to the interned one, another object."""
    return "".join(parts)


class Int(int):
    pass


def test_the_same_keyword_tuple_binds_the_same_way_each_time():
    t = cpu_tensor([1.0, 2.0])
    # One call site, so one keyword-name tuple ('stream',) for both calls:
    # the second call binds it from the remembered slots and must still
    # see the positional stream.
    for _ in range(3):
        assert inspect(t.__dlpack__(stream=None))["name"] == "dltensor"
        with pytest.raises(TypeError, match="got multiple values for argument 'stream'"):
            t.__dlpack__(None, stream=None)


def test_runtime_built_keyword_names_bind_by_value():
    t = cpu_tensor([1.0, 2.0])
    mv, dev, cp = runtime_name("max_", "version"), runtime_name("dl_", "device"), runtime_name("co", "py")
    for _ in range(3):
        # **kwargs makes a new keyword-name tuple on every call.
        assert inspect(t.__dlpack__(**{mv: (1, 0)}))["name"] == "dltensor_versioned"
        assert inspect(t.__dlpack__(**{cp: False}))["name"] == "dltensor"
        info = inspect(t.__dlpack__(**{dev: (kDLCPU, 0), mv: (1, 0), cp: None}))
        assert info["name"] == "dltensor_versioned" and info["device"] == (kDLCPU, 0)
        with pytest.raises(BufferError, match="copy exports are not supported"):
            t.__dlpack__(**{mv: (1, 0), cp: True})
        with pytest.raises(TypeError, match="unexpected keyword argument 'max_versio'"):
            t.__dlpack__(**{runtime_name("max_", "versio"): (1, 0)})
        with pytest.raises(TypeError, match="got multiple values for argument 'stream'"):
            t.__dlpack__(None, **{runtime_name("str", "eam"): None})


def test_a_remembered_max_version_gives_the_same_answer():
    t = cpu_tensor([1.0])
    v1, v0, neg = (1, 0), (0, 5), (1, -1)
    for _ in range(3):
        assert inspect(t.__dlpack__(max_version=v1))["name"] == "dltensor_versioned"
        assert inspect(t.__dlpack__(max_version=v0))["name"] == "dltensor"
        # A refused tuple is refused on every call, remembered or not.
        with pytest.raises(ValueError, match="max_version components must be non-negative"):
            t.__dlpack__(max_version=neg)
        with pytest.raises(ValueError, match="max_version components must be non-negative"):
            t.__dlpack__(max_version=neg)
        # int subclasses are parsed by value, as before.
        assert inspect(t.__dlpack__(max_version=(Int(1), 0)))["name"] == "dltensor_versioned"


def test_a_list_max_version_is_read_on_every_call():
    t = cpu_tensor([1.0])
    ceiling = [1, 0]
    assert inspect(t.__dlpack__(max_version=ceiling))["name"] == "dltensor_versioned"
    ceiling[0] = 0
    assert inspect(t.__dlpack__(max_version=ceiling))["name"] == "dltensor"
    ceiling[1] = -3
    with pytest.raises(ValueError, match="max_version components must be non-negative"):
        t.__dlpack__(max_version=ceiling)


def test_a_remembered_dl_device_gives_the_same_answer():
    t = cpu_tensor([1.0])
    own, other = (kDLCPU, 0), (kDLCUDA, 0)
    for _ in range(3):
        assert inspect(t.__dlpack__(dl_device=own))["device"] == (kDLCPU, 0)
        with pytest.raises(BufferError, match="cross-device exports are not supported"):
            t.__dlpack__(dl_device=other)
        with pytest.raises(BufferError, match="cross-device exports are not supported"):
            t.__dlpack__(dl_device=other)
    device = [kDLCPU, 0]
    assert inspect(t.__dlpack__(dl_device=device))["device"] == (kDLCPU, 0)
    device[1] = 1
    with pytest.raises(BufferError, match="cross-device exports are not supported"):
        t.__dlpack__(dl_device=device)


def test_dlpack_device_of_cpu_and_python_carriers():
    t = cpu_tensor([1.0])
    backing = cpu_carrier([0.0, 0.0])
    u = sw.Tensor(InfoCarrier(2, {"pointer": backing.pointer(), "device_type": kDLCUDA, "device_id": 3}, backing),
                  0, sw.Layout.canonical(sw.Shape(2)))
    for _ in range(2):
        assert t.__dlpack_device__() == (kDLCPU, 0)
        assert type(t.__dlpack_device__()) is tuple
        assert u.__dlpack_device__() == (kDLCUDA, 3)


def test_np_from_dlpack_alternating_tensors_reads_each_one():
    # np.from_dlpack passes the same keyword tuple and max_version on every
    # call: each import must still describe its own tensor.
    a = cpu_tensor([1.0, 2.0, 3.0])
    b = cpu_tensor([4.0, 5.0], mutable=False)
    c = sw.Tensor(sw.CPU(6), 0, sw.Layout(sw.Shape([2, 3]), sw.Stride([1, 2])))
    for _ in range(3):
        x, y, z = np.from_dlpack(a), np.from_dlpack(b), np.from_dlpack(c)
        assert x.tolist() == [1.0, 2.0, 3.0] and x.flags.writeable
        assert y.tolist() == [4.0, 5.0] and not y.flags.writeable  # read-only flag of the versioned form
        assert z.shape == (2, 3) and z.strides == (4, 8)
        x[0] = 7.0
        assert a[0] == 7.0
        x[0] = 1.0


# ------------------------------------------------------------ what max_version and dl_device accept


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
