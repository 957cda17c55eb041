"""The public surface as a checklist: every documented name, importable
from every path that names it, as one object; every documented member
present; the compiled core's names and its type stub agree; import does
not import NumPy; the __dlpack__ signature is introspectable. (Behaviour is
tested elsewhere; this file only guards the surface a caller types.)"""
import dataclasses
import importlib
import inspect

import pytest

import strideweave as sw
from strideweave import CPU, Layout, Shape, Tensor

from support.process import assert_child_ok, run_python

# API.md section 0: import path -> the names it holds.
PATHS = {
    "strideweave.carriers.move": [
        "move", "move_async", "AwaitResult", "AwaitMove", "MoveOperation", "ElementwiseMoveOperation",
        "CpuToFileBackedMoveOperation", "FileBackedToCpuMoveOperation", "CpuToMetalMoveOperation",
        "MetalToCpuMoveOperation", "MetalToMetalMoveOperation", "dispatch_move", "register_move_operation",
        "unregister_move_operation", "registered_move_operation"],
    "strideweave.carriers.extension": [
        "CarrierDefinition", "StorageProvider", "TransferProvider", "TransferRoute", "TransferRequest",
        "PreparedTransfer", "Unsupported", "ProviderCompletion", "register_carrier_definition"],
    "strideweave.carriers.tiled_evictable": [
        "TiledEvictable", "TileSelection", "TileSet", "ResidencyPlan", "ResidencyPolicy", "TileState",
        "AwaitProjection", "AwaitResidency"],
    "strideweave.core": ["Subtensor", "TensorRepresentation"],
}

# Sections 1-11: names the top-level package holds besides the ones above.
TOP_LEVEL = [
    "DType", "CompoundDType", "Shape", "Stride", "Layout", "Carrier", "CPU", "Generic", "FileBacked", "Evictable",
    "Metal", "Tensor", "Operation", "no_grad", "is_grad_enabled", "set_grad_enabled", "broadcast_to", "add", "mul",
    "relu", "reduce_sum", "profile", "Profiler", "ProfilerEvent", "tensor",
]

MEMBERS = {
    "DType": ["Any", "Floating", "Integer", "Float32", "Float64", "Int32", "Bool", "name", "bits", "is_simple",
              "is_category", "is_compound", "supertype", "is_subtype_of", "from_name"],
    "Shape": ["top_level", "depth", "size", "encode", "decode"],
    "Stride": ["top_level", "depth"],
    "Layout": ["shape", "stride", "size", "cosize", "leaves", "index", "is_injective", "broadcast_to", "canonical"],
    "Carrier": ["size", "dtype", "version", "is_mutable", "is_owned", "release", "is_released", "new_like",
                "allocate_like", "dlpack_info", "_claim_ownership", "_relinquish_ownership", "_begin_owner_access",
                "_end_owner_access"],
    "CPU": ["pointer", "dlpack_info"],
    "FileBacked": ["path"],
    "Evictable": ["evict", "promote", "is_evicted", "primary", "secondary"],
    "Tensor": ["carrier", "offset", "layout", "size", "dtype", "is_mutable", "version", "is_differentiable",
               "autograd_ctx", "grad", "retain_grad", "backward", "__dlpack__", "__dlpack_device__", "tolist",
               "item", "__array__", "_from_representation", "__dlpack_c_exchange_api__"],
    "Operation": ["forward", "backward", "inputs", "input_versions"],
    "MoveOperation": ["_copy", "source_class", "destination_class"],
    "AwaitResult": ["done", "wait"],
    "TiledEvictable": ["tile_state", "grid_shape", "tile_shape", "primary", "secondary", "canonical_layout",
                       "project", "scatter", "evict_async", "promote_async"],
}

PROFILER_EVENT_FIELDS = ["id", "parent_id", "name", "carrier_type", "implementation_type", "input_shapes",
                         "start_time_ns", "duration_ns", "self_time_ns", "thread_id", "succeeded"]


@pytest.mark.parametrize("path", sorted(PATHS))
def test_every_listed_name_is_importable_from_its_path_and_top_level(path):
    module = importlib.import_module(path)
    for name in PATHS[path]:
        obj = getattr(module, name)  # AttributeError names the gap
        assert getattr(sw, name) is obj, (path, name)
        exec(f"from {path} import {name}", {})  # the `from ... import` spelling too


def test_every_top_level_name_exists():
    missing = [n for n in TOP_LEVEL if not hasattr(sw, n)]
    assert missing == []
    assert sw.Profiler is sw.profile
    assert sw.move is importlib.import_module("strideweave.carriers.move").move


@pytest.mark.parametrize("cls", sorted(MEMBERS))
def test_every_listed_member_exists(cls):
    owner = getattr(sw, cls)
    assert [m for m in MEMBERS[cls] if not hasattr(owner, m)] == []


def test_profiler_event_is_a_frozen_dataclass_with_the_listed_fields():
    assert dataclasses.is_dataclass(sw.ProfilerEvent)
    assert [f.name for f in dataclasses.fields(sw.ProfilerEvent)] == PROFILER_EVENT_FIELDS
    assert sw.ProfilerEvent.__dataclass_params__.frozen
    with sw.profile() as p:
        pass
    for member in ("events", "key_averages", "table", "to_chrome_trace"):
        assert callable(getattr(p, member))


def test_the_tensorstore_module_names():
    pytest.importorskip("tensorstore")
    ts = importlib.import_module("strideweave.carriers.tensorstore")
    assert issubclass(ts.TensorStoreCarrier, sw.Carrier)
    assert callable(ts.open_tensor)
    for member in ("create", "open", "spec"):
        assert hasattr(ts.TensorStoreCarrier, member)


def test_dlpack_import_is_the_top_level_from_dlpack_only():
    assert callable(sw.from_dlpack)
    for module in [importlib.import_module(p) for p in PATHS]:
        assert not hasattr(module, "from_dlpack"), module
    for cls in (sw.Tensor, sw.Carrier, sw.CPU, sw.Generic, sw.FileBacked, sw.Evictable, sw.Metal):
        assert not any("from_dlpack" in n for n in dir(cls)), cls


# ------------------------------------------------------------ re-export identity, where the core names live, the stub and the __dlpack__ signature


def lay(*extents):
    return Layout.canonical(Shape(*extents))


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
    assert_child_ok(r)
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


def test_every_name_is_one_object_under_every_path_that_names_it():
    import strideweave.carriers.extension as ext
    import strideweave.carriers.move as mv
    import strideweave.carriers.tiled_evictable as te

    assert sw.move is mv.move
    for module, names in [(mv, MOVE_NAMES), (ext, EXTENSION_NAMES), (te, ["AwaitProjection", "AwaitResidency"])]:
        if module is not te:
            assert sorted(module.__all__) == sorted(names)
        for name in names:
            obj = getattr(module, name)
            assert obj is getattr(sw, name) is getattr(sw._core, name), name
    # The tiled module also holds its Python value types and carrier (API.md 0).
    tiled = ["TiledEvictable", "TileSelection", "TileSet", "ResidencyPlan", "ResidencyPolicy", "TileState",
             "AwaitProjection", "AwaitResidency"]
    assert sorted(te.__all__) == sorted(tiled)
    for name in tiled:
        assert getattr(te, name) is getattr(sw, name), name
    for name in ["AwaitProjection", "AwaitResidency"]:
        assert issubclass(getattr(te, name), sw.AwaitResult)
    for name in ["profile", "Profiler", "ProfilerEvent"]:
        assert getattr(sw, name) is getattr(sw._profiler, name)
