"""Forward behaviour of the differentiable operations (API.md section 6):
broadcast_to, add, mul, relu, reduce_sum and the Tensor operators, on CPU
(native kernels) and Generic (Python values) tensors over compact,
hierarchical, gapped and broadcast layouts."""
import ctypes
import math

import pytest

import strideweave as sw
from strideweave import CPU, DType, Generic, Layout, Shape, Stride, Tensor

KINDS = ["cpu", "generic"]
from support.builders import f32, tensor as make, values as vals
from support.carriers import ConstCarrier


GAPPED = Layout(Shape([2, [3, 2]]), Stride([1, [4, 13]]))          # 12 values, cosize 23
TRANSPOSED = Layout(Shape([2, [3, 2]]), Stride([6, [2, 1]]))       # injective, not compact
BCAST_SRC = Layout(Shape([2, [1, 1]]), Stride([3, [1, 1]]))        # 2 values, gapped


def assert_fresh_compact(result, *operands):
    assert result.offset == 0
    assert result.layout == Layout.canonical(result.layout.shape)
    assert result.carrier.size() == result.layout.cosize
    for o in operands:
        assert result.carrier is not o.carrier
        assert type(result.carrier) is type(o.carrier)


# ---------------------------------------------------------------- values


@pytest.mark.parametrize("kind", KINDS)
def test_compact_float32_ops_match_reference(kind):
    a_vals = [1.5, -2.0, 0.1, 3.25]
    b_vals = [0.2, 4.0, -0.7, 0.0]
    a, b = make(a_vals, kind=kind), make(b_vals, kind=kind)
    a_vals = [f32(v) for v in a_vals]
    b_vals = [f32(v) for v in b_vals]
    s = sw.add(a, b)
    assert vals(s) == [f32(x + y) for x, y in zip(a_vals, b_vals)]
    assert_fresh_compact(s, a, b)
    p = sw.mul(a, b)
    assert vals(p) == [f32(x * y) for x, y in zip(a_vals, b_vals)]
    assert_fresh_compact(p, a, b)
    r = sw.relu(a)
    assert vals(r) == [max(0.0, x) for x in a_vals]
    assert_fresh_compact(r, a)
    t = sw.reduce_sum(a)
    assert t[()] == f32(sum(a_vals))
    for res in (s, p, r, t):
        assert res.dtype() is DType.Float32
        assert res.carrier.dtype() is DType.Float32


@pytest.mark.parametrize("kind", KINDS)
def test_float32_results_round_to_binary32(kind):
    a, b = make([0.1], kind=kind), make([0.2], kind=kind)
    got = sw.add(a, b)[0]
    assert got == f32(f32(0.1) + f32(0.2))
    assert got != f32(0.1) + f32(0.2)  # the double sum is not a binary32 value
    assert sw.mul(a, 0.1)[0] == f32(f32(0.1) * 0.1)


def test_generic_floating_keeps_double_precision():
    a = make([0.1, 0.2], kind="generic", dtype=DType.Floating)
    assert vals(sw.add(a, a)) == [0.2, 0.4]
    assert sw.mul(a, 3)[0] == 0.1 * 3
    assert sw.reduce_sum(a)[()] == 0.1 + 0.2
    assert sw.add(a, a).dtype() is DType.Floating


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("layout", [GAPPED, TRANSPOSED], ids=["gapped", "transposed"])
def test_hierarchical_layouts(kind, layout):
    xs = [float(i) - 5.5 for i in range(12)]
    ys = [0.5 * i for i in range(12)]
    a = make(xs, layout, kind=kind, offset=3)
    b = make(ys, Layout.canonical(layout.shape), kind=kind)
    assert vals(sw.add(a, b)) == [x + y for x, y in zip(xs, ys)]
    assert vals(sw.mul(b, a)) == [x * y for x, y in zip(xs, ys)]
    r = sw.relu(a)
    assert vals(r) == [max(0.0, x) for x in xs]
    assert r.layout == Layout.canonical(layout.shape)
    assert sw.reduce_sum(a)[()] == sum(xs)
    assert vals(sw.mul(a, -2)) == [-2 * x for x in xs]


@pytest.mark.parametrize("kind", KINDS)
def test_broadcast_layout_operands(kind):
    src = make([2.0, -3.0], BCAST_SRC, kind=kind, offset=1)
    view = sw.broadcast_to(src, Shape([2, [3, 2]]))
    full = make([float(i) for i in range(12)], GAPPED, kind=kind)
    expect_view = [2.0 if i % 2 == 0 else -3.0 for i in range(12)]
    assert vals(view) == expect_view
    assert vals(sw.add(view, full)) == [v + i for i, v in enumerate(expect_view)]
    assert vals(sw.mul(full, view)) == [v * i for i, v in enumerate(expect_view)]
    assert vals(sw.relu(view)) == [max(0.0, v) for v in expect_view]
    # Every logical coordinate counts, not every stored slot.
    assert sw.reduce_sum(view)[()] == 6 * 2.0 + 6 * -3.0


@pytest.mark.parametrize("kind", KINDS)
def test_add_broadcasts_both_operands(kind):
    col = make([1.0, 2.0, 3.0], Layout.canonical(Shape([3, 1])), kind=kind)
    row = make([10.0, 20.0, 30.0, 40.0], Layout.canonical(Shape([1, 4])), kind=kind)
    s = sw.add(col, row)
    assert s.layout.shape == Shape([3, 4])
    assert vals(s) == [row_v + col_v for row_v in (10.0, 20.0, 30.0, 40.0) for col_v in (1.0, 2.0, 3.0)]
    p = col * row
    assert vals(p) == [row_v * col_v for row_v in (10.0, 20.0, 30.0, 40.0) for col_v in (1.0, 2.0, 3.0)]
    # Nested modes broadcast leaf by leaf.
    h1 = make([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], Layout.canonical(Shape([2, [1, 3]])), kind=kind)
    h2 = make([0.0, 100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0],
              Layout.canonical(Shape([2, [4, 1]])), kind=kind)
    h = sw.add(h1, h2)
    assert h.layout.shape == Shape([2, [4, 3]])
    assert h[[1, [2, 1]]] == h1[[1, [0, 1]]] + h2[[1, [2, 0]]]


@pytest.mark.parametrize(
    "s1, s2",
    [
        (Shape([3]), Shape([4])),
        (Shape([3]), Shape([3, 1])),
        (Shape([2, [3, 1]]), Shape([2, 3])),
        (Shape([2, [3, 2]]), Shape([2, [2, 2]])),
    ],
)
def test_add_rejects_incompatible_shapes(s1, s2):
    a = make([1.0] * s1.size, Layout.canonical(s1))
    b = make([1.0] * s2.size, Layout.canonical(s2))
    with pytest.raises(ValueError, match="broadcast"):
        sw.add(a, b)
    with pytest.raises(ValueError, match="broadcast"):
        sw.mul(a, b)


# ---------------------------------------------------------------- broadcast_to


@pytest.mark.parametrize("kind", KINDS)
def test_broadcast_to_is_a_view_without_copy(kind):
    src = make([1.0, 2.0], Layout.canonical(Shape([2, 1])), kind=kind, offset=2)
    v = sw.broadcast_to(src, Shape([2, 5]))
    assert v.carrier is src.carrier
    assert v.offset == 2
    assert v.layout == Layout(Shape([2, 5]), Stride([1, 0]))
    assert not v.layout.is_injective
    assert vals(v) == [1.0, 2.0] * 5
    src[[1, 0]] = 9.0  # visible through the view: same storage
    assert vals(v) == [1.0, 9.0] * 5


def test_broadcast_to_errors():
    t = make([1.0, 2.0], Layout.canonical(Shape([2, 1])))
    with pytest.raises(TypeError, match="Shape"):
        sw.broadcast_to(t, [2, 3])
    with pytest.raises(ValueError, match="broadcast"):
        sw.broadcast_to(t, Shape([3, 3]))
    with pytest.raises(ValueError, match="broadcast"):
        sw.broadcast_to(t, Shape([2, 3, 1]))
    with pytest.raises(TypeError, match="Tensor"):
        sw.broadcast_to([1.0], Shape([2]))


def test_broadcast_to_is_a_view_for_any_dtype():
    b = make([True], Layout.canonical(Shape([1])), dtype=DType.Bool)
    v = sw.broadcast_to(b, Shape([4]))
    assert vals(v) == [True] * 4
    assert v.autograd_ctx is None  # Bool is not differentiable


# ---------------------------------------------------------------- scalars, operators


@pytest.mark.parametrize("kind", KINDS)
def test_mul_by_python_number_and_operators(kind):
    a = make([1.0, -2.0, 0.5], kind=kind)
    assert vals(sw.mul(a, 2)) == [2.0, -4.0, 1.0]
    assert vals(sw.mul(a, 0.5)) == [0.5, -1.0, 0.25]
    assert vals(sw.mul(3, a)) == [3.0, -6.0, 1.5]
    assert vals(a * 2) == [2.0, -4.0, 1.0]
    assert vals(2 * a) == [2.0, -4.0, 1.0]
    assert vals(-a) == [-1.0, 2.0, -0.5]
    assert vals(a + a) == [2.0, -4.0, 1.0]
    assert vals(a * a) == [1.0, 4.0, 0.25]
    assert isinstance((-a).autograd_ctx, sw.MulOperation)
    assert isinstance((a + a).autograd_ctx, sw.AddOperation)


def test_operator_type_errors():
    a = make([1.0, 2.0])
    with pytest.raises(TypeError):
        a + "x"
    with pytest.raises(TypeError):
        a * "x"
    with pytest.raises(TypeError):
        "x" * a
    with pytest.raises(TypeError, match="int/float"):
        sw.mul(a, True)
    with pytest.raises(TypeError, match="int/float"):
        sw.mul(a, [1.0])
    with pytest.raises(TypeError, match="Tensor"):
        sw.add(a, 1.0)
    with pytest.raises(TypeError, match="Tensor"):
        sw.relu(1.0)
    with pytest.raises(TypeError, match="Tensor"):
        sw.reduce_sum(None)
    with pytest.raises(TypeError):
        sw.add(a)


# ---------------------------------------------------------------- Int32 and other dtypes


@pytest.mark.parametrize("kind", KINDS)
def test_int32_ops_compute_without_nodes(kind):
    a = make([1, -2, 3], kind=kind, dtype=DType.Int32)
    b = make([4, 5, -6], kind=kind, dtype=DType.Int32)
    for r, expect in [
        (sw.add(a, b), [5, 3, -3]),
        (sw.mul(a, b), [4, -10, -18]),
        (sw.mul(a, 3), [3, -6, 9]),
        (-a, [-1, 2, -3]),
        (sw.relu(a), [1, 0, 3]),
    ]:
        assert vals(r) == expect
        assert all(type(v) is int for v in vals(r))
        assert r.dtype() is DType.Int32
        assert r.autograd_ctx is None
    s = sw.reduce_sum(b)
    assert s[()] == 3 and s.autograd_ctx is None


@pytest.mark.parametrize("kind", KINDS)
def test_int32_overflow_raises(kind):
    big = make([2**31 - 1], kind=kind, dtype=DType.Int32)
    with pytest.raises(OverflowError):
        sw.add(big, big)
    with pytest.raises(OverflowError):
        sw.mul(big, 2)
    with pytest.raises(OverflowError):
        sw.reduce_sum(make([2**31 - 1, 1], kind=kind, dtype=DType.Int32))


def test_int32_tensor_multiplies_only_by_int():
    a = make([1, 2], dtype=DType.Int32)
    with pytest.raises(TypeError, match="Int32"):
        sw.mul(a, 0.5)
    g = make([1, 2], kind="generic", dtype=DType.Int32)
    with pytest.raises(TypeError, match="Int32"):
        sw.mul(g, 0.5)


def test_generic_any_computes_with_python_semantics():
    a = make([1, 2.5, -3], kind="generic", dtype=DType.Any)
    assert vals(sw.add(a, a)) == [2, 5.0, -6]
    assert vals(sw.relu(a)) == [1, 2.5, 0]
    assert sw.reduce_sum(a)[()] == 0.5
    assert sw.add(a, a).autograd_ctx is None


@pytest.mark.parametrize("kind", KINDS)
def test_bool_tensors_rejected(kind):
    t = make([True, False], kind=kind, dtype=DType.Bool)
    for fn in (lambda: sw.add(t, t), lambda: sw.mul(t, t), lambda: sw.relu(t), lambda: sw.reduce_sum(t)):
        with pytest.raises(TypeError, match="Bool"):
            fn()


def test_mixed_carrier_classes_and_dtypes_rejected():
    c = make([1.0, 2.0])
    g = make([1.0, 2.0], kind="generic")
    with pytest.raises(TypeError, match="carrier class"):
        sw.add(c, g)
    with pytest.raises(TypeError, match="carrier class"):
        sw.mul(g, c)
    i = make([1, 2], dtype=DType.Int32)
    with pytest.raises(TypeError, match="dtype"):
        sw.add(c, i)
    gf = make([1.0, 2.0], kind="generic", dtype=DType.Floating)
    with pytest.raises(TypeError, match="dtype"):
        sw.mul(g, gf)


def test_unsupported_carrier_class_rejected():
    t = Tensor(ConstCarrier(2, DType.Float32, 1.0), 0, Layout.canonical(Shape([2])))  # neither CPU nor Generic
    with pytest.raises(TypeError, match="CPU and Generic"):
        sw.relu(t)
    with pytest.raises(TypeError, match="CPU and Generic"):
        sw.add(t, t)
    # A view needs no arithmetic, so broadcast_to accepts any carrier.
    assert vals(sw.broadcast_to(t, Shape([2]))) == [1.0, 1.0]


# ---------------------------------------------------------------- released carriers


@pytest.mark.parametrize("kind", KINDS)
def test_ops_on_released_carrier_raise(kind):
    live = make([1.0, 2.0], kind=kind)
    dead = make([1.0, 2.0], kind=kind)
    dead.carrier.release()
    calls = [
        lambda: sw.add(dead, live),
        lambda: sw.add(live, dead),
        lambda: sw.mul(dead, live),
        lambda: sw.mul(live, dead),
        lambda: sw.mul(dead, 2.0),
        lambda: dead * 2.0,
        lambda: -dead,
        lambda: dead + live,
        lambda: sw.relu(dead),
        lambda: sw.reduce_sum(dead),
        lambda: sw.broadcast_to(dead, Shape([2])),
    ]
    for call in calls:
        with pytest.raises(RuntimeError, match="released"):
            call()


# ---------------------------------------------------------------- details


def test_reduce_sum_is_a_rank0_scalar_with_double_accumulation():
    xs = [16777216.0] + [1.0] * 1000  # float32 accumulation would stall at 2**24
    s = sw.reduce_sum(make(xs))
    assert s.layout == Layout(Shape(), Stride())
    assert s.size() == 1
    assert s[()] == f32(16777216.0 + 1000.0)
    g = sw.reduce_sum(make(xs, kind="generic"))
    assert g[()] == s[()]


@pytest.mark.parametrize("kind", KINDS)
def test_relu_nan_and_signed_zero(kind):
    r = sw.relu(make([float("nan"), -0.0, -1e-30, 1e-30], kind=kind))
    v = vals(r)
    assert math.isnan(v[0])
    assert v[1] == 0.0 and math.copysign(1.0, v[1]) == 1.0
    assert v[2] == 0.0
    assert v[3] == f32(1e-30)


def test_cpu_kernel_reads_storage_written_through_pointer():
    t = make([1.0, 2.0])
    ctypes.c_float.from_address(t.carrier.pointer() + 4).value = 5.0
    assert vals(sw.add(t, t)) == [2.0, 10.0]


def test_cpu_subclass_results_keep_the_exact_class():
    class MyCPU(CPU):
        pass

    c = MyCPU(3)
    for i in range(3):
        c[i] = float(i)
    t = Tensor(c, 0, Layout.canonical(Shape([3])))
    for r in (sw.add(t, t), sw.mul(t, 2.0), sw.relu(t), sw.reduce_sum(t)):
        assert type(r.carrier) is MyCPU
    assert vals(sw.mul(t, t)) == [0.0, 1.0, 4.0]


def test_operation_classes_are_exposed():
    for cls, name in [
        (sw.BroadcastToOperation, "broadcast_to"),
        (sw.AddOperation, "add"),
        (sw.MulOperation, "mul"),
        (sw.ReluOperation, "relu"),
        (sw.ReduceSumOperation, "reduce_sum"),
    ]:
        assert issubclass(cls, sw.Operation)
        assert cls.op_name == name
    # Nodes can also be driven through Operation.forward directly.
    x = make([1.0, -1.0])
    op = sw.ReluOperation()
    y = op.forward(x)
    assert vals(y) == [1.0, 0.0]
    assert y.autograd_ctx is op


# ---------------------------------------------------------------- profiling


def test_each_operation_records_one_profiler_event():
    a = make([1.0, 2.0])
    b = make([3.0, 4.0], kind="generic")
    with sw.profile(record_shapes=True) as p:
        y = sw.add(a, a)
        sw.mul(y, 2.0)
        sw.relu(b)
        sw.reduce_sum(b)
        sw.broadcast_to(a, Shape([2]))
    ev = p.events()
    assert [e.name for e in ev] == ["add", "mul", "relu", "reduce_sum", "broadcast_to"]
    assert [e.carrier_type for e in ev] == [CPU, CPU, Generic, Generic, CPU]
    assert [e.implementation_type for e in ev] == [
        sw.AddOperation, sw.MulOperation, sw.ReluOperation, sw.ReduceSumOperation, sw.BroadcastToOperation]
    assert ev[0].input_shapes == ((2,), (2,))
    assert ev[1].input_shapes == ((2,),)
    assert all(e.succeeded and e.duration_ns >= 0 and e.parent_id is None for e in ev)


def test_nested_operation_events_get_the_outer_parent_and_failures_are_recorded():
    class Twice(sw.Operation):
        op_name = "twice"

        def _forward(self, x):
            return sw.add(x, x)

        def backward(self, g):
            return (sw.mul(g, 2.0),)

    a = make([1.0, 2.0])
    dead = make([1.0])
    dead.carrier.release()
    with sw.profile() as p:
        Twice().forward(a)
        with pytest.raises(RuntimeError, match="released"):
            sw.relu(dead)
    by_name = {e.name: e for e in p.events()}
    assert sorted(by_name) == ["add", "relu", "twice"]
    outer, inner, failed = by_name["twice"], by_name["add"], by_name["relu"]
    assert inner.parent_id == outer.id
    assert outer.implementation_type is Twice
    assert failed.name == "relu" and failed.succeeded is False


def test_multi_subtensor_tensors_rejected_first():
    from strideweave.core import Subtensor, TensorRepresentation

    class Planar(sw.CompoundDType):
        simple_types = (DType.Float32, DType.Int32)

    lay = Layout.canonical(Shape([2]))
    t = Tensor._from_representation(TensorRepresentation(
        Planar(), [Subtensor(DType.Float32, CPU(2), 0, lay), Subtensor(DType.Int32, CPU(2, dtype=DType.Int32), 0, lay)],
        [lay]))
    plain = make([1.0, 2.0])
    for call in (lambda: sw.add(t, plain), lambda: sw.add(plain, t), lambda: sw.mul(t, 2.0), lambda: -t,
                 lambda: sw.relu(t), lambda: sw.reduce_sum(t), lambda: sw.broadcast_to(t, Shape([2]))):
        with pytest.raises(NotImplementedError, match="Multi-subtensor Tensor"):
            call()
    with pytest.raises(NotImplementedError, match="Multi-subtensor Tensor backward"):
        t.backward(plain)
