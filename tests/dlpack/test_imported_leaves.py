"""Imported tensors are ordinary leaf tensors: moves (to FileBacked and
back), move_async, the differentiable operations and backward work on them,
strided or read-only; a writable import is a move destination that writes
into the producer's memory."""
import numpy as np
import pytest

import strideweave as sw

from support.moves import WAIT


def test_an_import_moves_to_a_file_and_back():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    t = sw.from_dlpack(a)
    f = sw.move(t, sw.FileBacked(dtype=sw.DType.Float32))
    assert t.carrier.is_released()
    assert f.layout == t.layout and f.tolist() == a.tolist()
    back = sw.move_async(f, sw.CPU(f.layout.cosize)).wait(timeout=WAIT)
    assert back.tolist() == a.tolist()
    assert a.tolist() == [[0.0, 2.0], [4.0, 6.0], [8.0, 10.0]]  # the producer's memory is untouched


def test_a_read_only_import_can_be_moved_away():
    a = np.arange(3, dtype=np.int32)
    a.flags.writeable = False
    t = sw.from_dlpack(a)
    out = sw.move(t, sw.CPU(3, dtype=sw.DType.Int32))
    assert out.tolist() == [0, 1, 2] and out.is_mutable()


def test_operations_on_imports():
    a = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
    x = sw.from_dlpack(a)
    y = sw.from_dlpack(np.asfortranarray(a))
    assert sw.add(x, y).tolist() == (2 * a).tolist()
    assert (x * 3.0).tolist() == (3 * a).tolist()
    assert sw.relu(x).tolist() == np.maximum(a, 0).tolist()
    assert sw.reduce_sum(x).item() == pytest.approx(float(a.sum()))
    b = sw.broadcast_to(sw.from_dlpack(np.array([[1.0, 2.0, 3.0]], np.float32)), sw.Shape(2, 3))
    assert sw.add(x, b).tolist() == (a + np.array([1.0, 2.0, 3.0], np.float32)).tolist()
    assert type(sw.relu(x).carrier) is sw.CPU


def test_backward_reaches_an_imported_leaf():
    a = np.array([1.0, -2.0, 3.0], np.float32)
    x = sw.from_dlpack(a)
    assert x.autograd_ctx is None and x.is_differentiable()
    y = sw.reduce_sum(sw.relu(x * 2.0 + x))
    y.backward()
    assert x.grad.tolist() == [3.0, 0.0, 3.0]
    assert x.grad.carrier.pointer() != a.ctypes.data  # gradients live in fresh storage


def test_backward_through_a_strided_read_only_import():
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    base.flags.writeable = False
    view = base[::2, 1::2]
    x = sw.from_dlpack(view)
    assert not x.is_mutable()
    sw.reduce_sum(sw.mul(x, x)).backward()
    assert x.grad.tolist() == (2 * view).tolist()
    assert x.grad.layout == x.layout  # an injective leaf's gradient has its layout


def test_a_write_into_an_import_is_seen_by_backward_as_in_place():
    a = np.array([1.0, 2.0], np.float32)
    x = sw.from_dlpack(a)
    y = sw.reduce_sum(sw.mul(x, x))
    x[(0,)] = 5.0  # a public write: the version moves
    with pytest.raises(RuntimeError, match="modified in-place"):
        y.backward()


def test_a_writable_import_is_a_move_destination():
    a = np.zeros(4, np.float32)
    dest = sw.from_dlpack(a).carrier
    src = sw.tensor([1.0, 2.0, 3.0, 4.0])
    out = sw.move(src, dest)
    assert out.carrier is dest
    assert a.tolist() == [1.0, 2.0, 3.0, 4.0]


def test_a_read_only_import_is_not_a_move_destination():
    a = np.zeros(2, np.float32)
    a.flags.writeable = False
    with pytest.raises(RuntimeError, match="mutable"):
        sw.move(sw.tensor([1.0, 2.0]), sw.from_dlpack(a).carrier)


def test_zero_size_imports_in_operations_and_moves():
    x = sw.from_dlpack(np.zeros((0, 3), np.float32))
    assert sw.relu(x).tolist() == []
    assert sw.reduce_sum(x).item() == 0.0
    assert sw.move(x, sw.FileBacked(dtype=sw.DType.Float32)).tolist() == []
