"""API.md as a checklist: every name it lists, importable from every path it
gives, as one object; every member it lists, present. (Behaviour is tested
elsewhere; this file only guards the surface a caller types.)"""
import dataclasses
import importlib

import pytest

import strideweave as sw

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
