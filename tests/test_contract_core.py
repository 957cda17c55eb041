"""Contract audit of the core surface (API.md sections 0-7 and 10) for points
no other test file asserts: package shape and re-export identity, the DType
table, CompoundDType, Tensor construction and members, the multi-subtensor
boundary for every rejecting operation, the representation validation and
the introspectable __dlpack__ signature."""
import gc
import inspect
import weakref

import pytest

import strideweave as sw
from strideweave import CPU, DType, Generic, Layout, Shape, Stride, Tensor

from support.process import run_python

F32, I32 = DType.Float32, DType.Int32


def lay(*extents):
    return Layout.canonical(Shape(*extents))


# ------------------------------------------------------------ 0. package shape

MOVE_NAMES = ["move", "move_async", "AwaitResult", "AwaitMove", "MoveOperation", "ElementwiseMoveOperation",
              "CpuToFileBackedMoveOperation", "FileBackedToCpuMoveOperation", "CpuToMetalMoveOperation",
              "MetalToCpuMoveOperation", "MetalToMetalMoveOperation", "dispatch_move", "register_move_operation",
              "unregister_move_operation", "registered_move_operation"]
EXTENSION_NAMES = ["CarrierDefinition", "StorageProvider", "TransferProvider", "TransferRoute", "TransferRequest",
                   "PreparedTransfer", "Unsupported", "ProviderCompletion", "register_carrier_definition"]
CORE_NAMES = ["DType", "CompoundDType", "Shape", "Stride", "Layout", "Carrier", "CPU", "Generic", "FileBacked",
              "Evictable", "Metal", "Tensor", "Operation", "no_grad", "is_grad_enabled", "set_grad_enabled",
              "broadcast_to", "add", "mul", "relu", "reduce_sum", "Subtensor", "TensorRepresentation"]


def test_import_does_not_import_numpy(tmp_path):
    code = ("import sys, strideweave, strideweave.core, strideweave.carriers.move, "
            "strideweave.carriers.extension, strideweave.carriers.tiled_evictable\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'numpy'))")
    r = run_python(code, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


@pytest.mark.parametrize("name", MOVE_NAMES)
def test_move_path_names_the_same_object(name):
    import strideweave.carriers.move as move_mod

    assert getattr(move_mod, name) is getattr(sw, name) is getattr(sw._core, name)
    assert name in move_mod.__all__


@pytest.mark.parametrize("name", EXTENSION_NAMES)
def test_extension_path_names_the_same_object(name):
    import strideweave.carriers.extension as ext

    assert getattr(ext, name) is getattr(sw, name) is getattr(sw._core, name)


@pytest.mark.parametrize("name", ["AwaitProjection", "AwaitResidency"])
def test_tiled_evictable_path_names_the_same_object(name):
    import strideweave.carriers.tiled_evictable as te

    assert getattr(te, name) is getattr(sw, name) is getattr(sw._core, name)


@pytest.mark.parametrize("name", CORE_NAMES)
def test_core_names_live_in_the_extension(name):
    assert getattr(sw, name) is getattr(sw._core, name)


def test_representation_types_importable_from_core():
    from strideweave.core import Subtensor, TensorRepresentation

    assert Subtensor is sw.Subtensor and TensorRepresentation is sw.TensorRepresentation


# ----------------------------------------------------------------- 1. DType

# name: (kind, bits, supertype name)
DTYPES = {
    "Any": ("category", None, None),
    "Floating": ("category", None, "Any"),
    "Integer": ("category", None, "Any"),
    "Float32": ("simple", 32, "Floating"),
    "Float64": ("simple", 64, "Floating"),
    "Int32": ("simple", 32, "Integer"),
    "Bool": ("simple", 8, "Any"),
}


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_dtype_table(name):
    kind, bits, parent = DTYPES[name]
    d = getattr(DType, name)
    assert isinstance(d, DType)
    assert d.name == name and repr(d) == f"DType.{name}"
    assert d.bits == bits
    assert d.is_simple() is (kind == "simple")
    assert d.is_category() is (kind == "category")
    assert d.is_compound() is False
    assert d.supertype is (getattr(DType, parent) if parent else None)
    assert DType.from_name(name) is d
    assert getattr(DType, name) is d  # a process-wide singleton


def test_dtype_hierarchy():
    assert F32.is_subtype_of(DType.Floating) and DType.Float64.is_subtype_of(DType.Floating)
    assert I32.is_subtype_of(DType.Integer)
    for d in (DType.Floating, DType.Integer, DType.Bool, F32, I32):
        assert d.is_subtype_of(DType.Any)
    assert F32.is_subtype_of(F32)
    assert not I32.is_subtype_of(DType.Floating)
    assert not DType.Floating.is_subtype_of(F32)
    assert not DType.Bool.is_subtype_of(DType.Integer)


def test_dtype_cannot_be_constructed_or_mutated():
    with pytest.raises(TypeError):
        DType()
    with pytest.raises(AttributeError):
        F32.name = "x"
    assert F32.name == "Float32"


def test_dtype_from_name_unknown():
    with pytest.raises(ValueError, match="float16"):
        DType.from_name("float16")


def test_integer_category_is_never_storage():
    for make in (lambda: CPU(1, dtype=DType.Integer), lambda: Generic([1], dtype=DType.Integer),
                 lambda: sw.FileBacked(dtype=DType.Integer)):
        with pytest.raises(ValueError):
            make()


class Planar(sw.CompoundDType):
    simple_types = (F32, I32)


def test_compound_dtype_subclass():
    p = Planar()
    assert isinstance(p, DType) and isinstance(p, sw.CompoundDType)
    assert p.is_compound() and not p.is_simple() and not p.is_category()
    assert p.simple_types == (F32, I32)
    with pytest.raises(TypeError):
        Planar(1)
    with pytest.raises(TypeError):
        sw.CompoundDType()


@pytest.mark.parametrize("planes,exc", [((DType.Floating,), TypeError), ((F32, 3), TypeError),
                                        (None, TypeError), ((), ValueError)])
def test_compound_dtype_rejects_bad_planes(planes, exc):
    class Bad(sw.CompoundDType):
        simple_types = planes

    with pytest.raises(exc, match="simple_types"):
        Bad()


# ------------------------------------------------------------------ 4. Tensor


def test_tensor_positional_and_keyword_forms_keep_identity():
    c, layout = CPU(8), Layout(Shape(2, 3), Stride(1, 2))
    for t in (Tensor(c, 1, layout), Tensor(carrier=c, offset=1, layout=layout), Tensor(c, layout=layout, offset=1)):
        assert t.carrier is c and t.offset == 1 and t.layout is layout
        assert t.size() == 6 and t.dtype() is F32


@pytest.mark.parametrize("args,exc,fragment", [
    ((5, 0, lay(2)), TypeError, "Carrier"),
    ((CPU(2), 0, (2,)), TypeError, "Layout"),
    ((CPU(2), 0, Shape(2)), TypeError, "Layout"),
    ((CPU(2), -1, lay(2)), ValueError, "offset must be non-negative"),
    ((CPU(2), -2**70, lay(2)), ValueError, "offset must be non-negative"),
    ((CPU(2), 1, lay(2)), ValueError, "exceeds carrier size"),
    ((CPU(2), 2**70, lay(2)), ValueError, "exceeds carrier size"),
    ((CPU(2), 2**62, lay(2)), ValueError, "exceeds carrier size"),
    ((CPU(2), 1.0, lay(2)), TypeError, "offset"),
    ((CPU(2), True, lay(2)), TypeError, "offset"),
])
def test_tensor_construction_errors(args, exc, fragment):
    with pytest.raises(exc, match=fragment):
        Tensor(*args)


def test_tensor_span_fits_exactly_and_released_carrier_is_too_small():
    c = CPU(7)
    assert Tensor(c, 1, Layout(Shape(2, 3), Stride(1, 2))).offset == 1  # 1 + cosize 6 == 7
    c.release()
    with pytest.raises(ValueError, match="exceeds carrier size"):
        Tensor(c, 0, lay(1))


def test_tensor_reads_return_python_scalars_and_writes_go_through_the_carrier():
    c = CPU(4)
    t = Tensor(c, 1, lay(3))
    t[(1,)] = 2
    assert c[2] == 2.0 and type(t[1]) is float
    assert t.version == c.version == 1
    i = Tensor(CPU(2, dtype=I32), 0, lay(2))
    i[0] = 5
    assert type(i[0]) is int and i[0] == 5
    b = Tensor(CPU(1, dtype=DType.Bool), 0, lay(1))
    b[0] = True
    assert b[0] is True
    obj = object()
    a = Tensor(Generic([obj], dtype=DType.Any), 0, lay(1))
    assert a[0] is obj


def test_tensor_is_mutable_follows_public_mutability():
    assert Tensor(CPU(1), 0, lay(1)).is_mutable()
    assert not Tensor(CPU(1, mutable=False), 0, lay(1)).is_mutable()
    c = CPU(1)
    t = Tensor(c, 0, lay(1))
    token = c._claim_ownership()
    assert not t.is_mutable()
    c._begin_owner_access(token)
    assert t.is_mutable()
    c._end_owner_access(token)
    c._relinquish_ownership(token)
    assert t.is_mutable()


@pytest.mark.parametrize("make,diff", [
    (lambda: CPU(1), True), (lambda: Generic([1.0]), True), (lambda: Generic([1.0], dtype=F32), True),
    (lambda: CPU(1, dtype=I32), False), (lambda: CPU(1, dtype=DType.Bool), False),
    (lambda: Generic([1], dtype=DType.Any), False)])
def test_is_differentiable_and_grad_access(make, diff):
    t = Tensor(make(), 0, lay(1))
    assert t.is_differentiable() is diff
    assert t.autograd_ctx is None
    if diff:
        assert t.grad is None
    else:
        with pytest.raises(RuntimeError):
            t.grad


def test_tensor_carrier_offset_layout_read_only():
    t = Tensor(CPU(2), 0, lay(2))
    for name, value in (("carrier", CPU(2)), ("offset", 1), ("layout", lay(2)), ("version", 3)):
        with pytest.raises(AttributeError):
            setattr(t, name, value)


def test_tensor_repr():
    r = repr(Tensor(CPU(8), 1, Layout(Shape(2, 3), Stride(1, 2))))
    assert r.startswith("Tensor(") and "CPU" in r and "offset=1" in r
    assert "Layout<Shape<(2, 3)>, Stride<(1, 2)>>" in r and "DType.Float32" in r


def test_tensor_weakref_and_cycle_collection():
    g = Generic([None], dtype=DType.Any)
    t = Tensor(g, 0, lay(1))
    t[0] = t  # tensor -> carrier -> tensor
    ref = weakref.ref(t)
    assert ref() is t
    del t, g
    gc.collect()
    assert ref() is None


def test_graph_collected_after_backward():
    x = Tensor(CPU(2), 0, lay(2))
    y = sw.reduce_sum(sw.mul(x, x))
    refs = [weakref.ref(y), weakref.ref(y.autograd_ctx), weakref.ref(y.autograd_ctx.inputs()[0].autograd_ctx)]
    y.backward()
    del y
    gc.collect()
    assert [r() for r in refs] == [None, None, None]
    assert x.grad is not None


# ------------------------------------------------- 5. multi-subtensor tensors


def planar():
    from strideweave.core import Subtensor, TensorRepresentation

    a, b = CPU(4), CPU(4, dtype=I32)
    layout = lay(4)
    rep = TensorRepresentation(Planar(), [Subtensor(F32, a, 0, layout), Subtensor(I32, b, 0, layout)], [layout])
    return Tensor._from_representation(rep), (a, b)


def _setitem(t, key, value):
    t[key] = value


MULTI_CALLS = {
    "DLPack export": [lambda t: t.__dlpack__(), lambda t: t.__dlpack__(max_version=(1, 0)),
                      lambda t: t.__dlpack__(copy=True, dl_device="bad", max_version=-1),
                      lambda t: t.__dlpack_device__()],
    "move": [lambda t: sw.move(t, CPU(4)), lambda t: sw.move(t, "not a carrier")],
    "move_async": [lambda t: sw.move_async(t, CPU(4)), lambda t: sw.move_async(t, None)],
    "indexing": [lambda t: t[0], lambda t: t[99], lambda t: t["bad"], lambda t: _setitem(t, 0, 1.0),
                 lambda t: _setitem(t, 99, "bad")],
    "backward": [lambda t: t.backward(), lambda t: t.backward("bad", retain_graph=True)],
}


@pytest.mark.parametrize("reason", sorted(MULTI_CALLS))
def test_multi_subtensor_rejected_first_without_touching_carriers(reason):
    t, carriers = planar()
    state = [(c.version, c.is_released(), c.is_owned(), c[0]) for c in carriers]
    for call in MULTI_CALLS[reason]:
        with pytest.raises(NotImplementedError) as e:
            call(t)
        msg = str(e.value)
        assert msg.startswith("Multi-subtensor Tensor ") and "is not implemented" in msg
        # move_async is the move path: its reason may read "move" or "move_async".
        expected = ("move",) if reason == "move_async" else (reason,)
        assert any(f"Multi-subtensor Tensor {r}" in msg for r in expected), msg
    assert [(c.version, c.is_released(), c.is_owned(), c[0]) for c in carriers] == state


def test_multi_subtensor_pure_views_still_work():
    t, _ = planar()
    assert t.size() == 4 and isinstance(t.dtype(), Planar)
    assert t.layout == lay(4)
    assert not t.is_mutable()  # single subtensor is part of the predicate


def test_single_subtensor_representation_builds_a_plain_tensor():
    from strideweave.core import Subtensor, TensorRepresentation

    c = CPU(2)
    t = Tensor._from_representation(TensorRepresentation(F32, [Subtensor(F32, c, 0, lay(2))], []))
    assert t.carrier is c and t.is_mutable()
    t[1] = 3.0
    assert c[1] == 3.0


def _rep(subs, adjacent, dtype=None):
    from strideweave.core import TensorRepresentation

    return TensorRepresentation(dtype or Planar(), subs, adjacent)


def _bad_representations():
    from strideweave.core import Subtensor as S

    f, i, l4 = CPU(4), CPU(4, dtype=I32), lay(4)
    return [
        ("plane count", lambda: _rep([S(F32, f, 0, l4)], []), "planes"),
        ("plane dtype", lambda: _rep([S(F32, f, 0, l4), S(F32, f, 0, l4)], [l4]), "plane"),
        ("carrier dtype", lambda: _rep([S(F32, f, 0, l4), S(I32, f, 0, l4)], [l4]), "carrier"),
        ("span", lambda: _rep([S(F32, f, 1, l4), S(I32, i, 0, l4)], [l4]), "exceeds"),
        ("carrier class", lambda: _rep([S(F32, f, 0, l4), S(I32, Generic([0] * 4, dtype=I32), 0, l4)], [l4]),
         "exact class"),
        ("adjacent domain", lambda: _rep([S(F32, f, 0, l4), S(I32, i, 0, l4)], [lay(2)]), "domain"),
        ("adjacent count", lambda: _rep([S(F32, f, 0, l4), S(I32, i, 0, l4)], []), "adjacent"),
    ]


@pytest.mark.parametrize("case", range(7))
def test_representation_validation(case):
    name, build, fragment = _bad_representations()[case]
    with pytest.raises(ValueError, match=fragment):
        Tensor._from_representation(build())


def test_from_representation_requires_a_representation():
    with pytest.raises(TypeError):
        Tensor._from_representation(5)


# ------------------------------------------------------------------- 7. DLPack


def test_dlpack_signatures_are_introspectable():
    sig = inspect.signature(Tensor.__dlpack__)
    params = list(sig.parameters.values())
    assert [p.name for p in params] == ["self", "stream", "max_version", "dl_device", "copy"]
    assert params[1].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[2:])
    assert all(p.default is None for p in params[1:])
    assert list(inspect.signature(Tensor.__dlpack_device__).parameters) == ["self"]
    assert list(inspect.signature(Tensor(CPU(1), 0, lay(1)).__dlpack__).parameters) == [
        "stream", "max_version", "dl_device", "copy"]


def test_type_stub_declares_every_public_name():
    import ast
    import pathlib

    # The stub sits beside the extension (strideweave/_core.pyi); the package
    # re-exports it. read_text(): no file handle left for the collector.
    stub = pathlib.Path(sw.__file__).resolve().parent / "_core.pyi"
    if not stub.exists():
        pytest.skip("no type stub beside the imported package")
    declared = set()
    for node in ast.parse(stub.read_text()).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            declared.add(node.name)
        elif isinstance(node, ast.ImportFrom):
            declared.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            declared.add(node.target.id)  # module constants (float32: DType)
    public = {n for n in dir(sw._core) if not n.startswith("_")}
    assert sorted(public - declared) == []
    # Every public name of the package is one of _core's or a Python shim.
    shims = {"Profiler", "ProfilerAverage", "ProfilerEvent", "profile", "core", "carriers",
             "TiledEvictable", "TileSelection", "TileSet", "ResidencyPlan", "ResidencyPolicy", "TileState"}
    assert sorted(n for n in dir(sw) if not n.startswith("_") and n not in public | shims) == []


# ---------- a one-plane compound dtype: one subtensor, so not multi-subtensor


class OnePlane(sw.CompoundDType):
    simple_types = (F32,)


def one_plane(values=(1.0, 2.0)):
    from strideweave.core import Subtensor, TensorRepresentation

    c = CPU(len(values))
    for i, v in enumerate(values):
        c[i] = v
    layout = lay(len(values))
    return Tensor._from_representation(TensorRepresentation(OnePlane(), [Subtensor(F32, c, 0, layout)], [])), c


def test_one_plane_compound_is_a_single_subtensor_tensor():
    t, c = one_plane()
    assert isinstance(t.dtype(), OnePlane) and t.carrier is c
    assert t.is_mutable()  # single subtensor AND a publicly mutable carrier
    assert not t.is_differentiable()
    assert t[1] == 2.0
    t[0] = 5.0
    assert c[0] == 5.0 and c.version == 3
    rep = t._representation
    assert isinstance(rep.logical_dtype, OnePlane) and [s.dtype for s in rep.subtensors] == [F32]


def test_one_plane_compound_dlpack_fails_on_its_dtype():
    # Spec: every compound logical dtype fails export with BufferError; the
    # device query depends only on the carrier and the one-subtensor rule.
    t, c = one_plane()
    assert t.__dlpack_device__() == (1, 0)
    for kwargs in ({}, {"max_version": (1, 0)}):
        with pytest.raises(BufferError, match="supports only Float32 and Int32"):
            t.__dlpack__(**kwargs)
    assert c.version == 2


def test_one_plane_compound_broadcast_view_keeps_the_logical_dtype():
    t, c = one_plane((3.0,))
    b = sw.broadcast_to(t, Shape(4))
    assert b.carrier is c and isinstance(b.dtype(), OnePlane)
    assert [b[i] for i in range(4)] == [3.0] * 4
