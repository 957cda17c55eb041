"""from_dlpack's copy= and device= are checked before the producer is asked:
copy is None, True or False (NumPy bools and the ints 0 and 1 count; a
string or any other value is ValueError, where its truth used to decide),
device is None or the CPU device (1, 0) as a tuple or list of two integers
(another device or non-integers ValueError, another type TypeError)."""
import numpy as np
import pytest

import strideweave as sw

from support.dlpack import Producer


@pytest.mark.parametrize("copy", ["yes", "", 2, -1, 1.0, 0.0, [], [True], object()])
def test_copy_outside_none_true_false_is_a_value_error(copy):
    a = np.arange(3, dtype=np.float32)
    with pytest.raises(ValueError, match=r"from_dlpack\(\) copy must be None, True or False, not "):
        sw.from_dlpack(a, copy=copy)


@pytest.mark.parametrize("copy", ["yes", 2])
def test_a_refused_copy_asks_the_producer_nothing(copy):
    p = Producer([1.0, 2.0], [2])
    with pytest.raises(ValueError, match="copy must be None, True or False"):
        sw.from_dlpack(p, copy=copy)
    assert p.calls == []


@pytest.mark.parametrize("copy,aliases", [(None, True), (False, True), (True, False), (np.True_, False),
                                          (np.False_, True), (0, True), (1, False)])
def test_none_and_the_bools_choose_view_or_copy(copy, aliases):
    a = np.arange(3, dtype=np.float32)
    t = sw.from_dlpack(a, copy=copy)
    assert (t.carrier.pointer() == a.ctypes.data) is aliases
    assert t.tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("device,exc,fragment", [
    ((2, 0), ValueError, r"device must be None or the CPU device \(1, 0\), not \(2, 0\)"),
    ((1, 1), ValueError, r"the CPU device \(1, 0\), not \(1, 1\)"),
    ((1,), ValueError, "exactly two elements"),
    ((1, 0, 0), ValueError, "exactly two elements"),
    ("cpu", TypeError, "device must be a tuple or list, not str"),
    (1, TypeError, "device must be a tuple or list, not int"),
    ((1.0, 0), ValueError, "device must hold two integers, got float"),
])
def test_device_other_than_the_cpu_is_refused(device, exc, fragment):
    p = Producer([1.0, 2.0], [2])
    with pytest.raises(exc, match=fragment):
        sw.from_dlpack(p, device=device)
    assert p.calls == []
