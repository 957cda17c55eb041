"""Carrier extension after the TensorStore work (API.md 8 and 14): records as
frozen dataclasses, ProviderCompletion as a structural protocol, incoming
routes from definition-free classes, and framework-owned (Evictable) tier
transfers through routes."""
import dataclasses
import threading

import pytest

import strideweave as sw
from strideweave.carriers import extension as ext
from support.builders import F32, slots, values
from support.extension import (
    HeldCompletion, RouteLog, define, fresh, list_storage, packed_storage, route, tensor_of,
)
from support.moves import WAIT


def canonical(n):
    return sw.Layout.canonical(sw.Shape([n]))


def cpu_tensor(vals, offset=0, layout=None):
    c = sw.CPU(len(vals))
    for i, v in enumerate(vals):
        c[i] = v
    return sw.Tensor(c, offset, layout if layout is not None else canonical(len(vals)))


# ------------------------------------------------------------ records

RECORDS = ["StorageProvider", "TransferProvider", "TransferRoute", "CarrierDefinition", "TransferRequest",
           "PreparedTransfer", "Unsupported"]


@pytest.mark.parametrize("name", RECORDS)
def test_records_are_frozen_dataclasses_under_every_path(name):
    cls = getattr(ext, name)
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
    assert cls is getattr(sw, name) is getattr(sw._core, name)
    assert cls.__module__ == "strideweave.carriers.extension"


def test_record_fields_are_immutable_and_compare_by_identity():
    u = ext.Unsupported("no")
    with pytest.raises(AttributeError):
        u.reason = "yes"
    assert u != ext.Unsupported("no") and u == u
    assert repr(u) == "Unsupported(reason='no')"
    d = ext.CarrierDefinition(list_storage(), [])  # any iterable, normalised to a tuple
    assert d.transfers == () and isinstance(d.transfers, tuple)
    with pytest.raises(TypeError, match="elementwise_fallback must be a bool"):
        ext.StorageProvider(*([print] * 6), elementwise_fallback=1)
    with pytest.raises(TypeError, match="physical_span must be an int"):
        t = cpu_tensor([1.0])
        ext.TransferRequest(t, sw.CPU(1), sw.CPU, sw.CPU, F32, t.layout, True)


# ------------------------------------------------------------ ProviderCompletion

class Plain:
    """Not a subclass: conforms by structure alone."""
    done = False

    def wait(self):
        return None


class NotBool:
    done = 0

    def wait(self):
        return None


class NoWait:
    done = True


class Awaits(Plain):
    def __await__(self):
        yield


def test_provider_completion_is_a_structural_protocol():
    assert isinstance(Plain(), ext.ProviderCompletion)
    assert isinstance(HeldCompletion(), ext.ProviderCompletion)
    for bad in (NotBool(), NoWait(), Awaits(), 3, None):
        assert not isinstance(bad, ext.ProviderCompletion)
    import typing
    assert getattr(ext.ProviderCompletion, "_is_protocol", False) and issubclass(type(ext.ProviderCompletion),
                                                                                type(typing.Protocol))


def test_a_plain_conforming_completion_is_accepted_by_move():
    gate = threading.Event()

    class Gated:
        @property
        def done(self):
            return gate.is_set()

        def wait(self):
            assert gate.wait(WAIT)

    log = RouteLog()
    Dest = fresh("GatedDest")
    define(Dest, list_storage(), route(sw.CPU, Dest, "cpu-to-gated", log, result=lambda r: Gated()))
    with sw.no_grad():
        h = sw.move_async(cpu_tensor([1.0, 2.0]), Dest(2, dtype=F32))
    assert not h.done
    gate.set()
    assert values(h.wait(timeout=WAIT)) == [1.0, 2.0]


# ------------------------------------------------------------ incoming routes

def test_an_incoming_route_from_cpu_performs_the_pair():
    log = RouteLog()
    Dest = fresh("IncomingDest")
    define(Dest, list_storage(), route(sw.CPU, Dest, "cpu-in", log))
    lay = sw.Layout(sw.Shape([2, 2]), sw.Stride([1, 3]))
    x = cpu_tensor([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], offset=1, layout=lay)
    d = Dest(0, dtype=F32)
    with sw.no_grad():
        y = sw.move(x, d)
    (rid, request), = log.prepared
    assert rid == "cpu-in" and request.source_class is sw.CPU and request.destination_class is Dest
    assert request.physical_span == lay.cosize == 5 and slots(d) == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert values(y) == [1.0, 2.0, 4.0, 5.0] and x.carrier.is_released()
    # Nothing is installed on the built-in class.
    assert "cpu-in" not in repr(vars(sw.CPU)) and sw.dispatch_move(sw.CPU, sw.CPU) is sw.ElementwiseMoveOperation


def test_an_incoming_route_from_a_plain_python_carrier_seals_it():
    log = RouteLog()
    Plainly = fresh("PlainSource")  # definition-free, never observed yet
    Dest = fresh("FromPlainDest")
    define(Dest, list_storage(), route(Plainly, Dest, "plain-in", log))
    with pytest.raises(TypeError, match="observed"):
        define(Plainly, list_storage())


def test_route_ownership_rules():
    log = RouteLog()
    Defined = define(fresh("DefinedSource"), list_storage())
    Dest, Other = fresh("OwnerDest"), fresh("OwnerOther")
    with pytest.raises(TypeError, match="definition-free"):
        define(Dest, list_storage(), route(Defined, Dest, "from-defined", log))
    with pytest.raises(TypeError, match="source_class"):
        define(Dest, list_storage(), route(sw.CPU, Other, "neither", log))
    # Nothing was registered by the refused attempts.
    define(Dest, list_storage(), route(sw.CPU, Dest, "fine", log))


@pytest.mark.parametrize("fallback", [False, True])
def test_a_pair_without_an_incoming_route_follows_the_fallback_rule(fallback):
    log = RouteLog()
    Dest = define(fresh("NoIncomingDest"), list_storage(fallback=fallback))
    x = cpu_tensor([1.0, 2.0])
    with sw.no_grad():
        if fallback:
            y = sw.move(x, Dest(2, dtype=F32))
            assert values(y) == [1.0, 2.0] and type(y.carrier) is Dest
        else:
            with pytest.raises(NotImplementedError) as info:
                sw.move_async(x, Dest(2, dtype=F32))
            assert "CPU" in str(info.value) and "NoIncomingDest" in str(info.value)
            assert not x.carrier.is_owned() and not x.carrier.is_released()
    assert log.prepared == []


def test_the_legacy_registry_refuses_pairs_naming_a_class_with_incoming_routes():
    log = RouteLog()
    Dest = fresh("LegacyDest")
    define(Dest, list_storage(), route(sw.CPU, Dest, "cpu-in", log))
    with pytest.raises(RuntimeError, match="TransferRoute"):
        sw.register_move_operation(sw.CPU, Dest, sw.ElementwiseMoveOperation)
    with pytest.raises(RuntimeError, match="TransferRoute"):
        sw.dispatch_move(sw.CPU, Dest)


def test_moves_through_incoming_and_outgoing_routes_are_differentiable():
    log = RouteLog()
    Dest = fresh("GradDest")
    define(Dest, list_storage(), route(sw.CPU, Dest, "cpu-in", log), route(Dest, sw.CPU, "cpu-out", log))
    x = cpu_tensor([1.0, 2.0, 3.0])
    y = sw.move(x, Dest(3, dtype=F32))
    assert isinstance(y.autograd_ctx, sw.MoveOperation)
    g = tensor_of(Dest, [0.5, 1.5, 2.5])
    y.backward(g)
    assert type(x.grad.carrier) is sw.CPU and values(x.grad) == [0.5, 1.5, 2.5]
    assert [rid for rid, _ in log.prepared] == ["cpu-in", "cpu-out"]


# ------------------------------------------------------------ Evictable tiers

def test_evictable_tiers_resolve_incoming_and_outgoing_routes():
    log = RouteLog()
    Tier = fresh("RouteTier")
    define(Tier, packed_storage(), route(sw.CPU, Tier, "evict-in", log, result=lambda r: done_completion()),
           route(Tier, sw.CPU, "promote-out", log))
    vals = [1.0, 2.5, -3.0, 4.0]
    primary = cpu_tensor(vals).carrier
    secondary = Tier(4, dtype=F32)
    ev = sw.Evictable(primary, secondary)
    ev.evict()
    assert ev.is_evicted() and slots(secondary) == vals
    ev.promote()
    assert slots(ev) == vals
    assert [rid for rid, _ in log.prepared] == ["evict-in", "promote-out"]
    assert log.submitted == ["evict-in", "promote-out"]


def done_completion():
    c = HeldCompletion()
    c.event.set()
    return c


def test_a_declining_tier_route_falls_back_only_when_permitted():
    for fallback in (True, False):
        log = RouteLog()
        Tier = fresh("DecliningTier")
        define(Tier, list_storage(fallback=fallback), route(sw.CPU, Tier, "declines", log, unsupported="not today"),
               route(Tier, sw.CPU, "back", log))  # Evictable resolves both directions up front
        ev = sw.Evictable(cpu_tensor([1.0, 2.0]).carrier, Tier(2, dtype=F32))
        if fallback:
            ev.evict()
            assert ev.is_evicted() and slots(ev.secondary) == [1.0, 2.0]
        else:
            with pytest.raises(NotImplementedError, match="not today"):
                ev.evict()
            assert not ev.is_evicted() and slots(ev) == [1.0, 2.0]
        assert [rid for rid, _ in log.prepared] == ["declines"]
