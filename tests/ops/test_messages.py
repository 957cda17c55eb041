"""Error messages of the operations and of backward, pinned in full where
they name who failed: the engine raises the bare reason, the binding adds
the operation ("add(): ...", "mul backward: ...", "Op.backward() gradient
k: ..."). Written when the layout math moved into the engine, to keep the
messages exactly as they were."""
import re

import pytest

import strideweave as sw
from strideweave import DType, Layout, Operation, Shape, Stride

from support.builders import tensor as make


def test_host_kernel_overflow_names_the_operation():
    big = make([2**31 - 1], dtype=DType.Int32)
    with pytest.raises(OverflowError, match=r"^add\(\): Int32 result out of range$"):
        sw.add(big, big)
    with pytest.raises(OverflowError, match=r"^mul\(\): Int32 result out of range$"):
        sw.mul(big, 2)
    with pytest.raises(OverflowError, match=r"^mul\(\): Int32 result out of range$"):
        sw.mul(big, big)
    with pytest.raises(OverflowError, match=r"^reduce_sum\(\): Int32 result out of range$"):
        sw.reduce_sum(make([2**31 - 1, 1], dtype=DType.Int32))


def test_broadcast_errors_name_the_operation_and_the_reason():
    t = make([1.0, 2.0])
    with pytest.raises(ValueError, match=re.escape(
            "broadcast_to(): cannot broadcast: mode 0 has extent 2, target extent 3 (only extent 1 widens)")):
        sw.broadcast_to(t, Shape([3]))
    with pytest.raises(ValueError, match=r"^add\(\): shapes .* are not broadcast-compatible "
                                         r"\(extents 2 and 3 differ and neither is 1\)$"):
        sw.add(t, make([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"^mul\(\): shapes .* are not broadcast-compatible "
                                         r"\(modes of different ranks \(1 and 2\)\)$"):
        sw.mul(t, make([1.0, 2.0], Layout.canonical(Shape([1, 2]))))


def _recorded(op_type, *inputs):
    op = op_type()
    r = op.forward(*inputs)
    assert r.autograd_ctx is op
    return op


def test_native_backward_rejects_a_cotangent_of_another_shape():
    x = make([1.0, 2.0])
    wrong = make([1.0, 2.0, 3.0])
    msg = "the gradient's shape does not match the input's shape"
    with pytest.raises(ValueError, match=f"^add backward: {msg}$"):
        _recorded(sw.AddOperation, x, x).backward(wrong)
    with pytest.raises(ValueError, match=f"^broadcast_to backward: {msg}$"):
        _recorded(sw.BroadcastToOperation, x, Shape([2])).backward(wrong)
    # mul(a, b) first widens the other operand to the cotangent's shape.
    with pytest.raises(ValueError, match=re.escape(
            "mul backward: cannot broadcast: mode 0 has extent 2, target extent 3 (only extent 1 widens)")):
        _recorded(sw.MulOperation, x, x).backward(wrong)
    with pytest.raises(ValueError, match=f"^mul backward: {msg}$"):
        _recorded(sw.MulOperation, x, 2.0).backward(wrong)
    with pytest.raises(ValueError, match=f"^relu backward: {msg}$"):
        _recorded(sw.ReluOperation, x).backward(wrong)


def test_backward_names_the_node_that_broke_the_cotangent_contract():
    class Bad(Operation):
        def _forward(self, t):
            with sw.no_grad():
                return sw.mul(t, 1.0)

        def backward(self, g):
            return (make([1.0, 1.0], Layout(Shape([2]), Stride([2]))),)

    x = make([1.0, 2.0])
    with pytest.raises(ValueError, match=r"^Bad\.backward\(\) gradient 0: gradient layout .* must equal "
                                         r"the injective tensor's layout"):
        Bad().forward(x).backward(make([1.0, 1.0]))
    assert x.grad is None
