"""Reverse-mode autograd (API.md sections 4 and 6): the Operation base,
thread-local grad mode, Tensor.backward traversal, accumulation, saved-input
version checks, the cotangent layout contract, graph freeing, retain_grad,
and collection of graphs."""
import ctypes
import gc
import threading
import weakref

import pytest

import strideweave as sw
from strideweave import CPU, DType, Generic, Layout, Operation, Shape, Stride, Tensor

KINDS = ["cpu", "generic"]
from support.builders import BOOL, F32, I32, carrier_of, f32, flat_layout, tensor as make, values as vals, whole
from support.process import snippet_stdout


def canonical(*extents):
    return Layout.canonical(Shape(list(extents)))


GAPPED = Layout(Shape([2, [3, 2]]), Stride([1, [4, 13]]))


# ---------------------------------------------------------------- Operation base


class Square(Operation):
    """x -> x*x with a Python backward; counts backward calls."""

    def __init__(self):
        super().__init__()
        self.calls = 0
        self.mode_inside = None

    def _forward(self, x, note=None):
        self.mode_inside = sw.is_grad_enabled()
        with sw.no_grad():
            return sw.mul(x, x)

    def backward(self, g):
        self.calls += 1
        (x,) = self.inputs()
        return (sw.mul(sw.mul(g, x), 2.0),)


def test_operation_base_surface():
    op = Operation()
    assert op.inputs() == ()
    assert op.input_versions() == ()
    op.note = "anything"  # __dict__ support
    assert op.__dict__ == {"note": "anything"}
    assert weakref.ref(op)() is op
    with pytest.raises(TypeError):
        Operation(1)
    with pytest.raises(NotImplementedError, match="_forward"):
        op.forward(make([1.0]))
    with pytest.raises(NotImplementedError, match="backward"):
        op.backward(make([1.0]))


def test_forward_records_node_inputs_and_versions():
    x = make([3.0, -1.0])
    x[0] = 3.0  # version 4 now: 2 sentinel fills + 2 value writes + this one
    op = Square()
    y = op.forward(x, "not a tensor")
    assert vals(y) == [9.0, 1.0]
    assert y.autograd_ctx is op
    assert op.inputs() == (x,)  # only Tensor inputs are saved
    assert op.input_versions() == (x.version,)
    assert op.mode_inside is False  # _forward runs with grad mode off
    assert sw.is_grad_enabled() is True
    y.backward(make([1.0, 1.0]))
    assert vals(x.grad) == [6.0, -2.0]
    assert op.calls == 1


def test_forward_without_differentiable_input_records_nothing():
    i = make([1, 2], dtype=DType.Int32)

    class Ident(Operation):
        def _forward(self, t):
            return sw.mul(t, 1)

    op = Ident()
    r = op.forward(i)
    assert r.autograd_ctx is None
    assert op.inputs() == ()


def test_forward_contract_errors():
    x = make([1.0])
    op = Square()
    op.forward(x)
    with pytest.raises(RuntimeError, match="already recorded"):
        op.forward(x)

    class NotTensor(Operation):
        def _forward(self, t):
            return 1.0

    with pytest.raises(TypeError, match="must return a Tensor"):
        NotTensor().forward(x)

    class Identity(Operation):
        def _forward(self, t):
            return t

    with pytest.raises(RuntimeError, match="returned one of its inputs"):
        Identity().forward(x)
    assert x.autograd_ctx is None


def test_backward_hook_result_is_validated():
    class Bad(Operation):
        def __init__(self, result):
            super().__init__()
            self.result = result

        def _forward(self, t):
            with sw.no_grad():
                return sw.mul(t, 1.0)

        def backward(self, g):
            return self.result

    x = make([1.0, 2.0])
    g = make([1.0, 1.0])
    with pytest.raises(TypeError, match="tuple or list"):
        Bad(g).forward(x).backward(g)
    with pytest.raises(ValueError, match="1 saved inputs"):
        Bad((g, g)).forward(x).backward(g)
    with pytest.raises(TypeError, match="Tensor"):
        Bad((1.0,)).forward(x).backward(g)
    with pytest.raises(ValueError, match="layout"):
        Bad([make([1.0, 1.0], Layout(Shape([2]), Stride([2])))]).forward(x).backward(g)
    assert x.grad is None  # failed passes commit nothing
    Bad([None]).forward(x).backward(g)  # None: no gradient for that input
    assert x.grad is None


# ---------------------------------------------------------------- grad mode


def test_no_grad_context_manager_restores_mode():
    assert sw.is_grad_enabled() is True
    with sw.no_grad():
        assert sw.is_grad_enabled() is False
        with sw.no_grad():
            assert sw.is_grad_enabled() is False
        assert sw.is_grad_enabled() is False
    assert sw.is_grad_enabled() is True
    with pytest.raises(ZeroDivisionError):
        with sw.no_grad():
            1 / 0
    assert sw.is_grad_enabled() is True
    sw.set_grad_enabled(False)
    try:
        with sw.no_grad():
            pass
        assert sw.is_grad_enabled() is False  # restores the previous mode, not True
    finally:
        sw.set_grad_enabled(True)
    ng = sw.no_grad()
    with ng:
        with ng:  # one object entered twice
            pass
        assert sw.is_grad_enabled() is False
    assert sw.is_grad_enabled() is True


def test_set_grad_enabled_requires_bool():
    with pytest.raises(TypeError, match="bool"):
        sw.set_grad_enabled(1)
    with pytest.raises(TypeError):
        sw.no_grad(True)


def test_grad_mode_is_thread_local():
    seen = {}
    inside = threading.Event()
    release = threading.Event()

    def worker():
        seen["before"] = sw.is_grad_enabled()
        sw.set_grad_enabled(False)
        inside.set()
        assert release.wait(10)
        seen["after"] = sw.is_grad_enabled()
        x = make([1.0])
        seen["node"] = (x * 2.0).autograd_ctx

    with sw.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        assert inside.wait(10)
        assert sw.is_grad_enabled() is False
    assert sw.is_grad_enabled() is True  # the worker's set_grad_enabled(False) did not leak
    release.set()
    t.join(10)
    assert seen == {"before": True, "after": False, "node": None}


@pytest.mark.parametrize("kind", KINDS)
def test_no_grad_builds_no_node(kind):
    x = make([1.0, 2.0], kind=kind)
    with sw.no_grad():
        ys = [sw.add(x, x), sw.mul(x, 3.0), sw.relu(x), sw.reduce_sum(x), sw.broadcast_to(x, Shape([2])), -x]
    assert all(y.autograd_ctx is None for y in ys)
    sw.set_grad_enabled(False)
    try:
        assert sw.mul(x, x).autograd_ctx is None
    finally:
        sw.set_grad_enabled(True)
    # A tensor built without a node is a leaf: backward stops there.
    y = ys[1]
    y.backward(make([1.0, 1.0], kind=kind))
    assert vals(y.grad) == [1.0, 1.0]
    assert x.grad is None


# ---------------------------------------------------------------- gradients


@pytest.mark.parametrize("kind", KINDS)
def test_small_graph_hand_computed(kind):
    # z = sum(relu(x*w) + x) ** 2 elementwise, i.e. sum(y*y) with y = relu(x*w) + x
    x = make([1.0, -2.0, 3.0], kind=kind)
    w = make([0.5, 2.0, -1.0], kind=kind)
    y = sw.relu(x * w) + x
    z = sw.reduce_sum(y * y)
    assert vals(y) == [1.5, -2.0, 3.0]
    assert z[()] == 15.25
    z.backward()
    # dz/dy = 2y = [3, -4, 6]; relu'(xw) = [1, 0, 0]
    assert vals(x.grad) == [3.0 * 1.5, -4.0, 6.0]
    assert vals(w.grad) == [3.0, 0.0, 0.0]
    for leaf in (x, w):
        assert type(leaf.grad.carrier) is type(leaf.carrier)
        assert leaf.grad.layout == leaf.layout
        assert leaf.grad.autograd_ctx is None


def test_small_graph_matches_torch():
    torch = pytest.importorskip("torch")
    xs = [0.3, -1.7, 2.2, 0.9, -0.4, 1.1]
    ws = [1.5, 0.25, -0.75, 2.0, -3.0, 0.5]
    bs = [0.1, -0.2]
    x = make(xs, canonical(2, 3))
    w = make(ws, canonical(2, 3))
    b = make(bs, canonical(2, 1))
    h = sw.relu(sw.add(sw.mul(x, w), b))
    z = sw.reduce_sum(sw.mul(h, x) + -w)
    z.backward()

    tx = torch.tensor([f32(v) for v in xs], dtype=torch.float32).reshape(3, 2).T.clone().requires_grad_()
    tw = torch.tensor([f32(v) for v in ws], dtype=torch.float32).reshape(3, 2).T.clone().requires_grad_()
    tb = torch.tensor([f32(v) for v in bs], dtype=torch.float32).reshape(1, 2).T.clone().requires_grad_()
    tz = (torch.relu(tx * tw + tb) * tx - tw).sum()
    tz.backward()

    def flat(t):  # colexicographic order, as vals() reads
        return t.detach().T.reshape(-1).tolist()

    assert z[()] == pytest.approx(tz.item(), rel=1e-6)
    assert vals(x.grad) == pytest.approx(flat(tx.grad), rel=1e-6)
    assert vals(w.grad) == pytest.approx(flat(tw.grad), rel=1e-6)
    assert vals(b.grad) == pytest.approx(flat(tb.grad), rel=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_x_plus_x_accumulates(kind):
    x = make([1.0, 2.0], kind=kind)
    (x + x).backward(make([1.0, 10.0], kind=kind))
    assert vals(x.grad) == [2.0, 20.0]
    y = make([3.0, -1.0], kind=kind)
    sw.reduce_sum(y * y).backward()
    assert vals(y.grad) == [6.0, -2.0]


@pytest.mark.parametrize("kind", KINDS)
def test_grad_accumulates_across_passes(kind):
    x = make([1.0, 2.0], kind=kind)
    z = sw.reduce_sum(sw.mul(x, 3.0))
    z.backward(retain_graph=True)
    first = x.grad
    assert vals(first) == [3.0, 3.0]
    z.backward()
    assert vals(x.grad) == [6.0, 6.0]
    assert vals(first) == [3.0, 3.0]  # fresh storage each time, the old grad is unchanged
    assert x.grad.carrier is not first.carrier


@pytest.mark.parametrize("kind", KINDS)
def test_broadcast_summation(kind):
    b = make([1.0, 2.0], canonical(2, 1), kind=kind)
    v = sw.broadcast_to(b, Shape([2, 3]))
    assert isinstance(v.autograd_ctx, sw.BroadcastToOperation)
    g = make([float(i) for i in range(6)], canonical(2, 3), kind=kind)
    v.backward(g)
    # b[i] collects g[i, j] over j: i=0 -> 0+2+4, i=1 -> 1+3+5
    assert vals(b.grad) == [6.0, 9.0]
    assert b.grad.layout == b.layout
    # add broadcasting on both sides sums each operand's broadcast leaves.
    col = make([1.0, 2.0, 3.0], canonical(3, 1), kind=kind)
    row = make([1.0, 1.0, 1.0, 1.0], canonical(1, 4), kind=kind)
    sw.reduce_sum(sw.mul(col, row) + col).backward()
    # 4 columns of row (= 1 each) plus 4 more where "+ col" broadcasts over them
    assert vals(col.grad) == [8.0, 8.0, 8.0]
    assert vals(row.grad) == [6.0] * 4        # 1 + 2 + 3 per column


@pytest.mark.parametrize("kind", KINDS)
def test_hierarchical_gapped_leaf_gets_grad_in_its_layout(kind):
    xs = [float(i) - 6.0 for i in range(12)]
    x = make(xs, GAPPED, kind=kind, offset=2)
    sw.reduce_sum(sw.mul(sw.relu(x), x)).backward()
    g = x.grad
    assert g.layout == x.layout and g.layout is x.layout
    assert g.offset == 0
    assert g.carrier.size() == GAPPED.cosize
    assert vals(g) == [2.0 * v if v > 0 else 0.0 for v in xs]
    addressed = {GAPPED.index(i) for i in range(12)}
    assert all(g.carrier[s] == 0.0 for s in range(GAPPED.cosize) if s not in addressed)


@pytest.mark.parametrize("kind", KINDS)
def test_broadcast_leaf_gets_canonical_grad(kind):
    # A leaf whose own layout is stride-0 (non-injective) gets an injective,
    # canonical gradient of its shape.
    c = make([2.0], kind=kind)
    leaf = Tensor(c.carrier, 0, Layout(Shape([3]), Stride([0])))
    sw.reduce_sum(sw.mul(leaf, leaf)).backward()
    assert leaf.grad.layout == canonical(3)
    assert vals(leaf.grad) == [4.0, 4.0, 4.0]


def test_mixed_hierarchical_graph_matches_torch():
    torch = pytest.importorskip("torch")
    xs = [0.5 * i - 2.0 for i in range(12)]
    x = make(xs, GAPPED, offset=1)
    s = make([1.5, -0.5], Layout(Shape([2, [1, 1]]), Stride([2, [1, 1]])))
    y = sw.mul(sw.relu(sw.add(x, sw.broadcast_to(s, Shape([2, [3, 2]])))), x)
    sw.reduce_sum(y).backward()
    tx = torch.tensor(xs, dtype=torch.float32, requires_grad=True)
    ts = torch.tensor([1.5, -0.5], dtype=torch.float32, requires_grad=True)
    ts_b = ts.repeat(6)  # colexicographic: the first leaf (extent 2) is fastest
    (torch.relu(tx + ts_b) * tx).sum().backward()
    assert vals(x.grad) == pytest.approx(tx.grad.tolist(), rel=1e-6)
    assert vals(s.grad) == pytest.approx(ts.grad.tolist(), rel=1e-6)


def test_generic_floating_gradients_are_double():
    x = make([0.1, 0.2], kind="generic", dtype=DType.Floating)
    sw.reduce_sum(sw.mul(x, x)).backward()
    assert vals(x.grad) == [0.2, 0.4]
    assert x.grad.dtype() is DType.Floating
    assert type(x.grad.carrier) is Generic


def test_each_node_runs_once_after_all_consumers():
    x = make([1.0, 2.0])
    op = Square()
    b = op.forward(x)
    c = b + b
    d = sw.mul(b, 3.0)
    e = sw.reduce_sum(sw.add(c, d))
    e.backward()
    assert op.calls == 1
    # de/db = 2 + 3 = 5; db/dx = 2x
    assert vals(x.grad) == [10.0, 20.0]


# ---------------------------------------------------------------- retain_grad, leaves


def test_non_leaf_grad_is_none_unless_retained():
    x = make([1.0, -2.0])
    h = sw.mul(x, 2.0)
    k = sw.mul(x, 3.0)
    k.retain_grad()
    sw.reduce_sum(sw.add(h, k)).backward()
    assert h.grad is None
    assert vals(k.grad) == [1.0, 1.0]
    assert vals(x.grad) == [5.0, 5.0]


def test_grad_of_released_leaf_is_fresh_storage_of_its_class():
    x = make([1.0, 2.0])
    w = make([3.0, 4.0])
    y = sw.add(x, w)
    x.carrier.release()
    y.backward(make([1.0, -1.0]))
    assert type(x.grad.carrier) is CPU
    assert not x.grad.carrier.is_released()
    assert vals(x.grad) == [1.0, -1.0]


def test_backward_on_a_leaf_sets_its_grad():
    x = make([1.0, 2.0])
    g = make([0.5, 0.25])
    x.backward(g)
    assert vals(x.grad) == [0.5, 0.25]
    assert x.grad is not g and x.grad.carrier is not g.carrier


# ---------------------------------------------------------------- root gradient rules


def test_gradient_required_unless_one_element_scalar():
    x = make([1.0, 2.0])
    y = sw.mul(x, 2.0)
    with pytest.raises(RuntimeError, match="one-element scalar"):
        y.backward()
    one = make([3.0], canonical(1, 1))
    sw.mul(one, 5.0).backward()
    assert vals(one.grad) == [5.0]


def test_cotangent_layout_contract():
    x = make([1.0, 2.0, 3.0, 4.0], canonical(2, 2))
    y = sw.mul(x, 1.0)  # compact, injective
    with pytest.raises(TypeError, match="Tensor"):
        y.backward([1.0, 1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="shape"):
        y.backward(make([1.0] * 4, canonical(4)))
    transposed = make([1.0] * 4, Layout(Shape([2, 2]), Stride([2, 1])))
    with pytest.raises(ValueError, match="layout"):
        y.backward(transposed)
    gapped = make([1.0] * 4, Layout(Shape([2, 2]), Stride([1, 3])))
    with pytest.raises(ValueError, match="layout"):
        y.backward(gapped)
    with pytest.raises(TypeError, match="Float32 or Floating"):
        y.backward(make([1, 1, 1, 1], canonical(2, 2), dtype=DType.Int32))
    dead = make([1.0] * 4, canonical(2, 2))
    dead.carrier.release()
    with pytest.raises(RuntimeError, match="released"):
        y.backward(dead)
    assert x.grad is None

    # A broadcast (non-injective) tensor takes any injective same-shape layout.
    b = make([1.0, 2.0], canonical(2, 1))
    v = sw.broadcast_to(b, Shape([2, 3]))
    with pytest.raises(ValueError, match="injective"):
        v.backward(sw.broadcast_to(make([1.0, 1.0], canonical(2, 1)), Shape([2, 3])))
    with pytest.raises(ValueError, match="shape"):
        v.backward(make([1.0] * 6, canonical(3, 2)))
    v.backward(make([1.0] * 6, Layout(Shape([2, 3]), Stride([3, 1]))), retain_graph=True)
    assert vals(b.grad) == [3.0, 3.0]
    v.backward(make([1.0] * 6, Layout(Shape([2, 3]), Stride([1, 5]))))
    assert vals(b.grad) == [6.0, 6.0]


def test_non_differentiable_tensors_rejected():
    i = make([1, 2], dtype=DType.Int32)
    with pytest.raises(RuntimeError, match="not differentiable|non-differentiable"):
        i.backward(make([1.0, 1.0]))
    with pytest.raises(RuntimeError, match="non-differentiable"):
        sw.reduce_sum(i).backward()
    with pytest.raises(RuntimeError):
        i.grad
    with pytest.raises(RuntimeError):
        i.retain_grad()
    g = make([1, 2], kind="generic", dtype=DType.Int32)
    assert sw.mul(g, g).autograd_ctx is None
    assert i.is_differentiable() is False


# ---------------------------------------------------------------- versions, graph freeing


@pytest.mark.parametrize("kind", KINDS)
def test_in_place_modification_detected(kind):
    x = make([1.0, 2.0], kind=kind)
    w = make([3.0, 4.0], kind=kind)
    z = sw.reduce_sum(sw.mul(x, w))
    x[0] = 10.0
    with pytest.raises(RuntimeError, match="modified in-place"):
        z.backward()
    assert x.grad is None and w.grad is None
    x2 = make([1.0, -1.0], kind=kind)
    r = sw.relu(x2)
    x2.carrier[1] = 5.0  # a write through the carrier bumps the same version
    with pytest.raises(RuntimeError, match="modified in-place"):
        r.backward(make([1.0, 1.0], kind=kind))


def test_foreign_write_is_not_detected_and_backward_reads_storage():
    x = make([1.0, 2.0])
    w = make([3.0, 4.0])
    z = sw.reduce_sum(sw.mul(x, w))
    version = x.version
    ctypes.c_float.from_address(x.carrier.pointer()).value = 10.0  # bypasses the carrier
    assert x.version == version
    z.backward()
    assert vals(w.grad) == [10.0, 2.0]  # dz/dw = x as stored now
    assert vals(x.grad) == [3.0, 4.0]


def test_second_backward_needs_retain_graph():
    x = make([1.0, 2.0])
    z = sw.reduce_sum(sw.mul(x, x))
    z.backward()
    op = z.autograd_ctx
    assert op.inputs() == ()  # graph freed
    with pytest.raises(RuntimeError, match=r"retain_graph=True"):
        z.backward()
    with pytest.raises(RuntimeError, match=r"retain_graph=True"):
        op.backward(make([1.0], Layout(Shape(), Stride())))
    assert vals(x.grad) == [2.0, 4.0]

    y = make([1.0, 2.0])
    z2 = sw.reduce_sum(sw.mul(y, y))
    z2.backward(retain_graph=True)
    z2.backward(retain_graph=True)
    z2.backward()
    assert vals(y.grad) == [6.0, 12.0]
    with pytest.raises(RuntimeError, match=r"retain_graph=True"):
        z2.backward()


def test_shared_subgraph_freed_by_another_root():
    x = make([1.0, 2.0])
    h = sw.mul(x, 2.0)
    a = sw.reduce_sum(h)
    b = sw.reduce_sum(sw.relu(h))
    a.backward()
    with pytest.raises(RuntimeError, match=r"retain_graph=True"):
        b.backward()


# ---------------------------------------------------------------- collection


def test_graph_objects_are_collected_after_backward():
    x = make([1.0, 2.0])
    h = sw.mul(x, x)
    z = sw.reduce_sum(sw.relu(h))
    refs = [weakref.ref(h), weakref.ref(z), weakref.ref(h.autograd_ctx), weakref.ref(z.autograd_ctx)]
    z.backward()
    del h, z
    gc.collect()
    assert all(r() is None for r in refs)
    assert vals(x.grad) == [2.0, 4.0]


def test_retained_graph_is_collected_when_unreachable():
    x = make([1.0, 2.0])
    z = sw.reduce_sum(sw.mul(x, 3.0))
    z.backward(retain_graph=True)
    refs = [weakref.ref(z), weakref.ref(z.autograd_ctx)]
    del z
    gc.collect()
    assert all(r() is None for r in refs)


def test_tensor_operation_cycles_are_collected():
    class Keep(Operation):
        def _forward(self, t):
            out = sw.mul(t, 2.0)
            self.out = out  # result -> op -> result: a reference cycle
            return out

        def backward(self, g):
            return (sw.mul(g, 2.0),)

    x = make([1.0])
    y = Keep().forward(x)
    refs = [weakref.ref(y), weakref.ref(y.autograd_ctx), weakref.ref(x)]
    y.backward(make([1.0]), retain_graph=True)
    del y, x
    gc.collect()
    assert all(r() is None for r in refs)


def test_long_chain_is_freed_without_recursion_overflow():
    x = make([1.0])
    y = x
    for _ in range(20000):
        y = sw.mul(y, 1.0)
    ref = weakref.ref(y.autograd_ctx)
    y.backward(make([1.0]), retain_graph=True)
    assert vals(x.grad) == [1.0]
    del y
    gc.collect()
    assert ref() is None


def test_no_grad_as_a_decorator_builds_no_node_and_restores_the_mode():
    import strideweave as sw

    calls = []

    @sw.no_grad()
    def double(t):
        """Doubles t."""
        calls.append(sw.is_grad_enabled())
        return t * 2.0

    x = sw.Tensor(sw.CPU(2), 0, sw.Layout(sw.Shape(2), sw.Stride(1)))
    y = double(x)
    assert calls == [False]
    assert y.autograd_ctx is None
    assert sw.is_grad_enabled() is True
    assert double.__name__ == "double" and double.__doc__ == "Doubles t."

    class Model:
        @sw.no_grad()
        def run(self, t):
            return sw.is_grad_enabled()

    assert Model().run(x) is False
    with pytest.raises(TypeError):
        sw.no_grad()(1)


def test_long_grad_chain_deallocates_without_recursion():
    snippet_stdout("""
        from strideweave import CPU, Layout, Shape, Stride, Tensor
        layout = Layout(Shape(1), Stride(1))
        head = tail = Tensor(CPU(1), 0, layout)
        for _ in range(300000):
            nxt = Tensor(CPU(1), 0, layout)
            tail.grad = nxt
            tail = nxt
        del tail, nxt
        del head
    """, dev=True)


# ------------------------------------------------------------ the grad setter


def test_grad_setter_validates_dtype_shape_and_subtensors():
    x = whole(carrier_of([1.0, 2.0, 3.0]))
    with pytest.raises(TypeError, match="grad must be a Tensor or None"):
        x.grad = [1.0, 2.0, 3.0]
    with pytest.raises(TypeError, match="Float32 or Floating"):
        x.grad = whole(carrier_of([1, 2, 3], dtype=I32))
    with pytest.raises(TypeError, match="Float32 or Floating"):
        x.grad = whole(carrier_of([True, False, True], dtype=BOOL))
    with pytest.raises(ValueError, match="does not match the tensor's shape"):
        x.grad = whole(carrier_of([1.0, 2.0]))
    assert x.grad is None
    g = whole(carrier_of([0.5, 0.5, 0.5]))
    x.grad = g
    assert x.grad is g
    sw.reduce_sum(x).backward()
    assert x.grad.tolist() == [1.5, 1.5, 1.5]
    x.grad = None
    assert x.grad is None


def test_grad_setter_refuses_a_multi_subtensor_tensor():
    from strideweave.core import Subtensor, TensorRepresentation

    class Planar(sw.CompoundDType):
        simple_types = (F32, I32)

    layout = flat_layout(2)
    rep = TensorRepresentation(Planar(), [Subtensor(F32, sw.CPU(2), 0, layout),
                                          Subtensor(I32, sw.CPU(2, dtype=I32), 0, layout)], [layout])
    multi = sw.Tensor._from_representation(rep)
    x = whole(carrier_of([1.0, 2.0]))
    with pytest.raises(NotImplementedError, match="Multi-subtensor Tensor as grad"):
        x.grad = multi
    assert x.grad is None
