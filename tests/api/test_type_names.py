"""The names native classes report: every public native type is named where
users import it from (its top-level strideweave name), private ones under
strideweave._core, and the route operation classes the extension makes
beside the extension's records.
"""
import pytest

import strideweave as sw
from strideweave.carriers import extension as ext
from strideweave.carriers import tiled_evictable


@pytest.mark.parametrize("name", ["TiledEvictable", "AwaitProjection", "AwaitResidency"])
def test_tiled_types_are_named_at_the_top_level(name):
    cls = getattr(sw, name)
    assert cls.__module__ == "strideweave" and cls.__qualname__ == name
    assert repr(cls) == f"<class 'strideweave.{name}'>"
    # The carriers module re-exports the very same objects.
    assert getattr(tiled_evictable, name) is cls is getattr(sw._core, name)


def test_the_route_operation_base_is_named_where_it_lives():
    base = sw._core._TransferRouteMoveOperation
    assert (base.__module__, base.__qualname__) == ("strideweave._core", "_TransferRouteMoveOperation")
    assert issubclass(base, sw.MoveOperation)


def test_route_operation_classes_live_beside_the_extension_records():
    Slots = type("NamedRouteSlots", (sw.Carrier,), {})
    storage = ext.StorageProvider(
        supports_dtype=lambda c, dtype: True, physical_size=lambda c: 0, allocate=lambda c, n: None,
        release=lambda c: None, read=lambda c, i: 0.0, write=lambda c, i, v: None)
    provider = ext.TransferProvider(prepare=lambda request: ext.Unsupported("not used"))
    ext.register_carrier_definition(
        Slots, ext.CarrierDefinition(storage, (ext.TransferRoute(Slots, sw.CPU, "named-route-to-cpu", provider),)))
    [cls] = [c for c in sw._core._TransferRouteMoveOperation.__subclasses__() if c.route_id == "named-route-to-cpu"]
    assert cls.__module__ == ext.TransferRoute.__module__ == "strideweave.carriers.extension"
    assert cls.__qualname__ == "TransferRoute[named-route-to-cpu]"
    assert cls.source_class is Slots and cls.destination_class is sw.CPU
