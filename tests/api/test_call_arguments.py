"""Argument binding of the native functions that take their arguments without
a tuple and dict (move, move_async, CPU, zeros/ones/empty, from_dlpack,
__dlpack__, Carrier.set_value): every one reports a wrong call with the same
TypeError wording, and a keyword-name tuple seen before binds exactly as a
fresh equal one does.
"""
import numpy as np
import pytest

import strideweave as sw


def runtime_name(*parts):
    """A keyword name built at run time: equal to a call site's constant, another object."""
    return "".join(parts)


def cpu_tensor(values):
    c = sw.CPU(len(values))
    for i, v in enumerate(values):
        c[i] = v
    return sw.Tensor(c, 0, sw.Layout.canonical(sw.Shape([len(values)])))


@pytest.mark.parametrize("fn", [sw.move, sw.move_async], ids=["move", "move_async"])
def test_move_reports_each_kind_of_wrong_call(fn):
    name = fn.__name__
    t = cpu_tensor([1.0, 2.0])
    d = sw.CPU(2)
    with pytest.raises(TypeError, match=rf"^{name}\(\) takes exactly 2 positional arguments \(3 given\)$"):
        fn(t, d, None)
    with pytest.raises(TypeError, match=rf"^{name}\(\) missing required argument 'destination' \(pos 2\)$"):
        fn(t)
    with pytest.raises(TypeError, match=rf"^{name}\(\) missing required argument 'tensor' \(pos 1\)$"):
        fn(destination=d)
    with pytest.raises(TypeError, match=rf"^{name}\(\) got an unexpected keyword argument 'bogus'$"):
        fn(t, destination=d, bogus=1)
    with pytest.raises(TypeError, match=rf"^{name}\(\) got multiple values for argument 'tensor'$"):
        fn(t, d, tensor=t)
    # Nothing moved: the source is still live and readable.
    assert not t.carrier.is_released() and t.tolist() == [1.0, 2.0]


def test_move_binds_by_keyword_as_by_position():
    for _ in range(3):  # the same keyword tuple again, then a fresh equal one
        moved = sw.move(tensor=cpu_tensor([3.0]), destination=sw.CPU(1))
        assert moved.tolist() == [3.0]
        moved = sw.move(**{runtime_name("ten", "sor"): cpu_tensor([4.0]), "destination": sw.CPU(1)})
        assert moved.tolist() == [4.0]
        handle = sw.move_async(cpu_tensor([5.0]), destination=sw.CPU(1))
        assert handle.wait(timeout=30).tolist() == [5.0]


def test_cpu_reports_each_kind_of_wrong_call():
    with pytest.raises(TypeError, match=r"^CPU\(\) takes exactly 1 positional argument \(2 given\)$"):
        sw.CPU(2, sw.DType.Int32)
    with pytest.raises(TypeError, match=r"^CPU\(\) missing required argument 'size' \(pos 1\)$"):
        sw.CPU(dtype=sw.DType.Int32)
    with pytest.raises(TypeError, match=r"^CPU\(\) got an unexpected keyword argument 'bogus'$"):
        sw.CPU(2, bogus=True)
    with pytest.raises(TypeError, match=r"^CPU\(\) got multiple values for argument 'size'$"):
        sw.CPU(2, size=2)


def test_cpu_keywords_bind_the_same_from_a_remembered_and_a_fresh_tuple():
    # Alternating call sites replace the remembered tuple on every call; the
    # repeated ones bind from it.
    for _ in range(3):
        a = sw.CPU(3, dtype=sw.DType.Int32, mutable=False)
        assert a.dtype() == sw.DType.Int32 and not a.is_mutable() and a.size() == 3
        b = sw.CPU(2, mutable=False, dtype=sw.DType.Bool)
        assert b.dtype() == sw.DType.Bool and not b.is_mutable()
        c = sw.CPU(size=4)
        assert c.size() == 4 and c.is_mutable() and c.dtype() == sw.DType.Float32
        e = sw.CPU(2, **{runtime_name("emp", "ty"): True, runtime_name("dt", "ype"): sw.DType.Int32})
        assert e.dtype() == sw.DType.Int32 and e.size() == 2


@pytest.mark.parametrize("fn", [sw.zeros, sw.ones, sw.empty], ids=["zeros", "ones", "empty"])
def test_constructors_report_each_kind_of_wrong_call(fn):
    name = fn.__name__
    with pytest.raises(TypeError, match=rf"^{name}\(\) takes exactly 1 positional argument \(2 given\)$"):
        fn((2,), sw.int32)
    with pytest.raises(TypeError, match=rf"^{name}\(\) missing required argument 'shape' \(pos 1\)$"):
        fn(dtype=sw.int32)
    with pytest.raises(TypeError, match=rf"^{name}\(\) got multiple values for argument 'shape'$"):
        fn((2,), shape=(2,))
    for _ in range(3):
        assert fn(shape=(2, 3)).shape == (2, 3)
        assert fn((4,), dtype=sw.int32).dtype() == sw.DType.Int32
        assert fn(**{runtime_name("sha", "pe"): (1, 2)}).shape == (1, 2)


def test_from_dlpack_keywords_bind_the_same_from_a_remembered_and_a_fresh_tuple():
    a = np.arange(3, dtype=np.float32)
    for _ in range(3):
        copied = sw.from_dlpack(a, copy=True)
        assert copied.carrier.pointer() != a.ctypes.data and copied.tolist() == [0.0, 1.0, 2.0]
        viewed = sw.from_dlpack(a, device=(1, 0))
        assert viewed.carrier.pointer() == a.ctypes.data
        fresh = sw.from_dlpack(a, **{runtime_name("co", "py"): True})
        assert fresh.carrier.pointer() != a.ctypes.data


def test_dlpack_export_reports_too_many_positional_arguments():
    t = cpu_tensor([1.0])
    with pytest.raises(TypeError, match=r"^__dlpack__\(\) takes at most 1 positional argument \(2 given\)$"):
        t.__dlpack__(None, (1, 0))


def test_positional_only_functions_count_their_arguments():
    c = sw.CPU(2)
    with pytest.raises(TypeError, match=r"^set_value\(\) takes exactly 2 arguments \(1 given\)$"):
        c.set_value(1)
    with pytest.raises(TypeError, match=r"^set_value\(\) takes exactly 2 arguments \(3 given\)$"):
        c.set_value(0, 1.0, 2.0)
    c.set_value(1, 5.0)
    assert c[1] == 5.0
    h = sw._core._await_new("move")
    with pytest.raises(TypeError, match=r"^_await_complete\(\) takes exactly 2 arguments \(1 given\)$"):
        sw._core._await_complete(h)
    with pytest.raises(TypeError, match=r"^_await_fail\(\) takes exactly 2 arguments \(3 given\)$"):
        sw._core._await_fail(h, ValueError("x"), None)
    with pytest.raises(TypeError, match=r"^_await_set_runner\(\) takes exactly 2 arguments \(0 given\)$"):
        sw._core._await_set_runner()
    assert sw._core._await_complete(h, 7) is True and h.wait(timeout=30) == 7
