"""Operators as a NumPy user writes them: t + s, s + t, t - u, t - s, s - t,
t / s through the differentiable add and mul (so backward sees them),
NumPy's trailing alignment of a lower-rank operand, and float(), int() and
bool() of one-element tensors."""
import math

import numpy as np
import pytest

import strideweave as sw


def m23():
    return sw.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])


def test_numbers_on_either_side():
    t = m23()
    assert (t + 1.0).tolist() == [[2.0, 3.0, 4.0], [5.0, 6.0, 7.0]]
    assert (1 + t).tolist() == (t + 1).tolist()
    assert (t - 1.5).tolist() == [[-0.5, 0.5, 1.5], [2.5, 3.5, 4.5]]
    assert (10 - t).tolist() == [[9.0, 8.0, 7.0], [6.0, 5.0, 4.0]]
    assert (t / 4).tolist() == [[0.25, 0.5, 0.75], [1.0, 1.25, 1.5]]
    assert (2 * t - t).tolist() == t.tolist()
    assert isinstance((t + 1.0).autograd_ctx, sw.AddOperation)
    assert isinstance((t / 2).autograd_ctx, sw.MulOperation)


def test_numpy_scalars_are_numbers_on_either_side():
    t = m23()
    for s in (np.float32(0.5), np.float64(0.5), np.int64(2)):
        assert isinstance(t + s, sw.Tensor) and isinstance(s + t, sw.Tensor) and isinstance(s * t, sw.Tensor)
    assert (np.float32(2) * t).tolist() == (t * 2).tolist()
    assert (sw.tensor([1, 2]) + np.int32(3)).tolist() == [4, 5]


def test_division_by_zero_follows_ieee():
    r = (sw.tensor([1.0, -1.0, 0.0]) / 0.0).tolist()
    assert r[0] == math.inf and r[1] == -math.inf and math.isnan(r[2])


def test_int32_rules():
    i = sw.tensor([1, 2, 3])
    assert (i + 1).tolist() == [2, 3, 4] and (5 - i).tolist() == [4, 3, 2] and (i - i).tolist() == [0, 0, 0]
    with pytest.raises(TypeError, match="an Int32 tensor adds only an int"):
        i + 0.5
    with pytest.raises(TypeError, match=r"t / s of an Int32 tensor is not supported"):
        i / 2
    with pytest.raises(OverflowError, match="Int32 result out of range"):
        i + 2**31


def test_unsupported_operands_are_type_errors():
    t = m23()
    for bad in (lambda: t + "x", lambda: t - None, lambda: 2 / t, lambda: t / t, lambda: t + True,
                lambda: np.ones(3) + t):
        with pytest.raises(TypeError):
            bad()


def test_the_add_function_still_takes_tensors_only():
    with pytest.raises(TypeError, match=r"add\(\) expects a Tensor, not float"):
        sw.add(m23(), 1.0)


def test_a_lower_rank_operand_aligns_at_the_trailing_modes():
    t = m23()
    u = sw.tensor([10.0, 20.0, 30.0])
    assert (t + u).tolist() == [[11.0, 22.0, 33.0], [14.0, 25.0, 36.0]]
    assert (u + t).tolist() == (t + u).tolist()
    assert (t - u).tolist() == [[-9.0, -18.0, -27.0], [-6.0, -15.0, -24.0]]
    assert (u * t).tolist() == (np.array([10, 20, 30]) * np.arange(1, 7).reshape(2, 3)).astype(float).tolist()
    col = sw.tensor([[100.0], [200.0]])  # extent-1 leaves widen as before
    assert (t + col).tolist() == [[101.0, 102.0, 103.0], [204.0, 205.0, 206.0]]
    assert (t + sw.tensor(1.0)).tolist() == (t + 1.0).tolist()  # rank 0


def test_shapes_that_do_not_broadcast_name_both():
    with pytest.raises(ValueError, match=r"shapes \(2, 3\) and \(2,\)"):
        m23() + sw.tensor([1.0, 2.0])
    with pytest.raises(ValueError, match=r"shapes \(2, 3\) and \(4, 3\)"):
        m23() * sw.tensor(np.ones((4, 3), np.float32))


def test_gradients_flow_through_the_operators():
    t = m23()
    u = sw.tensor([10.0, 20.0, 30.0])
    y = sw.reduce_sum((t - u) * 2.0 + 3.0 - t / 4 + (1 - u))
    y.backward()
    assert t.grad.tolist() == [[1.75] * 3] * 2  # 2 - 1/4
    assert u.grad.tolist() == [-6.0] * 3  # (-2 - 1) per row: (1 - u) is broadcast over both rows too


def test_float_int_bool_of_one_element():
    assert float(sw.tensor(3.5)) == 3.5 and float(sw.tensor([[2.5]])) == 2.5
    assert int(sw.tensor([7.9])) == 7 and int(sw.tensor([-3])) == -3
    assert bool(sw.tensor(0.0)) is False and bool(sw.tensor([2.0])) is True
    assert bool(sw.tensor([False])) is False
    with pytest.raises(ValueError, match=r"ambiguous \(shape \(2,\)\)"):
        bool(sw.tensor([0.0, 0.0]))
    with pytest.raises(TypeError, match=r"float\(\) needs a one-element tensor.*shape \(2, 3\)"):
        float(m23())
    with pytest.raises(TypeError, match=r"int\(\) needs a one-element tensor"):
        int(m23())


def test_generic_tensors_take_numbers_on_the_values_path():
    g = sw.Tensor(sw.Generic([1.0, 2.0, 3.0]), 0, sw.Layout.canonical(sw.Shape(3)))
    y = (g + 1.5) * 2 - g / 2
    assert y.tolist() == [4.5, 6.0, 7.5] and type(y.carrier) is sw.Generic
    sw.reduce_sum(y).backward()
    assert g.grad.tolist() == [1.5, 1.5, 1.5]
    i = sw.Tensor(sw.Generic([1, 2], dtype=sw.int32), 0, sw.Layout.canonical(sw.Shape(2)))
    assert (10 - i).tolist() == [9, 8] and (10 - i).dtype() is sw.DType.Int32
