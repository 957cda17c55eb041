"""Zero-size tensors (an extent-0 mode, as DLPack imports of empty arrays
and the constructors make) outside ops and moves: pickle and deepcopy keep
their layout (a Shape object refuses extent 0, so a reduction cannot go
through Shape(...)), gradients through them are empty, and their truth
value is ambiguous for being empty, as NumPy's is."""
import copy
import pickle

import numpy as np
import pytest

import strideweave as sw

SHAPES = [(0,), (0, 3), (3, 0), (2, 0, 4)]


def imported(shape):
    return sw.from_dlpack(np.zeros(shape, np.float32))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("clone", [lambda t: pickle.loads(pickle.dumps(t)), copy.deepcopy],
                         ids=["pickle", "deepcopy"])
def test_pickle_and_deepcopy_keep_an_empty_layout(shape, clone):
    t = imported(shape)
    u = clone(t)
    assert u.layout == t.layout and u.shape == shape and u.size() == 0
    assert u.tolist() == t.tolist() and u.dtype() is t.dtype()
    assert u.carrier is not t.carrier


@pytest.mark.parametrize("shape", SHAPES)
def test_layout_and_shape_of_an_empty_tensor_pickle(shape):
    lay = imported(shape).layout
    back = pickle.loads(pickle.dumps(lay))
    assert back == lay and back.size == 0 and back.cosize == 0
    s = pickle.loads(pickle.dumps(lay.shape))
    assert type(s) is sw.Shape and s == lay.shape
    assert copy.deepcopy(lay.shape) == lay.shape


def test_the_empty_layout_reconstructor_builds_only_empty_layouts():
    with pytest.raises(ValueError, match="only layouts with an extent-0 mode"):
        sw._core._empty_layout(sw.Stride((2, 3)), sw.Stride((1, 2)))
    with pytest.raises(TypeError):
        sw._core._empty_layout(sw.Shape((2, 3)), sw.Stride((1, 2)))


def test_a_nonempty_shape_still_pickles_as_a_shape():
    s = sw.Shape(((2, 3), 4))
    assert pickle.loads(pickle.dumps(s)) == s
    assert pickle.dumps(s).count(b"_empty_layout") == 0


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("op", [lambda t: sw.mul(t, 2.0), lambda t: sw.mul(t, 2), lambda t: sw.mul(t, t),
                                lambda t: sw.add(t, t)], ids=["mul-float", "mul-int", "mul-self", "add-self"])
def test_backward_through_an_empty_tensor_gives_an_empty_gradient(shape, op):
    t = imported(shape)
    r = sw.reduce_sum(op(t))
    assert r.item() == 0.0
    r.backward()
    assert t.grad is not None and t.grad.shape == shape and t.grad.size() == 0


@pytest.mark.parametrize("shape", SHAPES)
def test_the_truth_value_of_an_empty_tensor_says_empty(shape):
    with pytest.raises(ValueError, match=r"truth value of an empty tensor is ambiguous \(shape " + re_shape(shape)):
        bool(imported(shape))
    with pytest.raises(ValueError, match="empty tensor"):
        bool(sw.zeros(shape))


def re_shape(shape):
    return str(tuple(shape)).replace("(", r"\(").replace(")", r"\)")


def test_truth_values_of_one_and_many_elements_are_unchanged():
    assert bool(sw.tensor([1.0])) is True and bool(sw.tensor([0])) is False
    with pytest.raises(ValueError, match="more than one element"):
        bool(sw.tensor([1.0, 2.0]))
