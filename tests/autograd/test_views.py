"""Autograd through basic-indexing views: a view is recorded like any
operation (a SliceOperation node), and its backward gives the source a
gradient that is the cotangent where the view looked and 0 elsewhere."""
import numpy as np
import pytest

import strideweave as sw


def ramp(shape):
    return sw.tensor(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape))


def test_a_view_records_a_slice_node_in_grad_mode():
    t = ramp((2, 3))
    v = t[1, :]
    assert isinstance(v.autograd_ctx, sw.SliceOperation)
    assert v.autograd_ctx.inputs() == (t,) and v.autograd_ctx.input_versions() == (0,)
    assert sw.SliceOperation.op_name == "slice"
    with sw.no_grad():
        assert t[1, :].autograd_ctx is None
    assert sw.tensor([1, 2])[0:1].autograd_ctx is None  # Int32 is not differentiable


def test_the_gradient_is_the_cotangent_where_the_view_looked():
    t = ramp((3, 4))
    sw.reduce_sum(t[1:, ::2] * 2.0).backward()
    expected = np.zeros((3, 4), np.float32)
    expected[1:, ::2] = 2.0
    assert np.asarray(t.grad).tolist() == expected.tolist()
    assert t.grad.layout == t.layout


def test_gradients_of_overlapping_views_add_up():
    t = ramp((4,))
    sw.reduce_sum(t[0:3] + t[1:4]).backward()
    assert t.grad.tolist() == [1.0, 2.0, 2.0, 1.0]


def test_an_explicit_cotangent_flows_through_a_row_and_a_column():
    t = ramp((2, 3))
    row = t[1, :]
    row.backward(sw.tensor([1.0, 2.0, 3.0]))
    assert t.grad.tolist() == [[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]]
    col = t[:, 0]  # stride 3: the cotangent of an injective tensor has its layout
    col.backward(sw.tensor([5.0, 7.0], layout=col.layout))
    assert t.grad.tolist() == [[5.0, 0.0, 0.0], [8.0, 2.0, 3.0]]


def test_new_axes_and_ellipsis_pass_the_gradient_through():
    t = ramp((2, 3))
    v = t[None, ..., 2]
    assert v.shape == (1, 2)
    v.backward(sw.tensor([[4.0, 6.0]], layout=v.layout))
    assert t.grad.tolist() == [[0.0, 0.0, 4.0], [0.0, 0.0, 6.0]]


def test_a_view_of_a_broadcast_tensor_gets_a_compact_gradient():
    x = sw.tensor([1.0, 2.0, 3.0])
    b = sw.broadcast_to(x[None, :], sw.Shape(2, 3))  # stride 0 on mode 0: not injective
    sw.reduce_sum(b[1, 1:]).backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0]


def test_a_generic_tensor_view_backward_runs_on_the_values_path():
    g = sw.Tensor(sw.Generic([1.0, 2.0, 3.0, 4.0], dtype=sw.DType.Floating), 0, sw.Layout.canonical(sw.Shape(4)))
    sw.reduce_sum(g[1::2]).backward()
    assert g.grad.tolist() == [0.0, 1.0, 0.0, 1.0]
    assert type(g.grad.carrier) is sw.Generic


def test_writing_through_a_view_before_backward_is_caught():
    t = ramp((2,))
    v = t[0:1]
    y = sw.reduce_sum(v)
    v[0] = 5.0  # the view shares t's carrier: t changed after the node saved it
    with pytest.raises(RuntimeError, match="modified in-place"):
        y.backward()


def test_the_profiler_records_the_slice_event():
    t = ramp((2, 3))
    with sw.profile() as p:
        v = t[0, :]
    assert v.tolist() == [0.0, 1.0, 2.0] and isinstance(v.autograd_ctx, sw.SliceOperation)
    names = [e.name for e in p.events()]
    assert names == ["slice"]
    sw.reduce_sum(v).backward()
    assert t.grad.tolist() == [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]


def test_a_view_node_is_built_once_when_asked_for():
    t = ramp((2, 3))
    v = t[:, 1]
    t[0, 0] = 9.0  # after the view: its node keeps the version the view saw
    node = v.autograd_ctx
    assert node is v.autograd_ctx and node.inputs() == (t,) and node.input_versions() == (0,)
    v.autograd_ctx = None  # an explicit ctx (here: none) replaces it
    assert v.autograd_ctx is None


def test_a_view_kept_as_its_sources_grad_is_collected():
    import gc
    import weakref

    t = ramp((2, 2))
    v = t[0:2, :]
    t.grad = v  # a cycle: t -> its grad v -> v's source (for the node it has not built yet) t
    ref = weakref.ref(t)
    del t, v
    gc.collect()
    assert ref() is None
