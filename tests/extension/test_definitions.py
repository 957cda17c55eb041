"""Carrier extension: records, registration and sealing, definition-backed
storage (spec: "Move routes are exact and definition-owned"; API.md 8 and 10).

The definition-backed classes (fresh per test, since the registry is
process-global and sealed) come from support.extension, shared with the
other extension tests.
"""
import struct

import pytest

import strideweave as sw
from strideweave.carriers import extension as ext
from support.extension import (
    HeldCompletion, Log, RouteLog, define, family, filled, fresh, list_storage, packed_storage, route, tensor_of,
)
from support.builders import slots

F32 = sw.DType.Float32
I32 = sw.DType.Int32
WAIT = 10.0
# ------------------------------------------------------------ names

NAMES = ["CarrierDefinition", "StorageProvider", "TransferProvider", "TransferRoute", "TransferRequest",
         "PreparedTransfer", "Unsupported", "ProviderCompletion", "register_carrier_definition"]


@pytest.mark.parametrize("name", NAMES)
def test_extension_names_are_one_object_under_every_path(name):
    assert getattr(ext, name) is getattr(sw, name) is getattr(sw._core, name)
    assert name in ext.__all__


# ------------------------------------------------------------ records

def some_records():
    Host = fresh("RecordHost")
    tp = ext.TransferProvider(lambda r: None)
    t = sw.Tensor(sw.CPU(2), 0, sw.Layout.canonical(sw.Shape([2])))
    return {
        "storage": list_storage(),
        "provider": tp,
        "route": ext.TransferRoute(Host, sw.CPU, "r", tp),
        "definition": ext.CarrierDefinition(list_storage()),
        "request": ext.TransferRequest(t, sw.CPU(2), sw.CPU, sw.CPU, F32, t.layout, 2),
        "prepared": ext.PreparedTransfer(lambda: None),
        "unsupported": ext.Unsupported("why"),
    }


@pytest.mark.parametrize("kind,field", [
    ("storage", "read"), ("storage", "elementwise_fallback"), ("provider", "prepare"),
    ("route", "route_id"), ("route", "source_class"), ("definition", "transfers"), ("definition", "storage"),
    ("request", "physical_span"), ("request", "tensor"), ("prepared", "submit"), ("unsupported", "reason"),
])
def test_records_are_immutable(kind, field):
    rec = some_records()[kind]
    before = getattr(rec, field)
    with pytest.raises(AttributeError):
        setattr(rec, field, before)
    with pytest.raises(AttributeError):
        delattr(rec, field)
    with pytest.raises(AttributeError):
        rec.extra = 1
    assert getattr(rec, field) is before
    assert type(rec).__name__ in repr(rec)


def test_record_fields_and_defaults():
    r = some_records()
    assert r["storage"].elementwise_fallback is False
    assert r["definition"].transfers == ()
    assert r["route"].route_id == "r" and r["route"].destination_class is sw.CPU
    assert r["unsupported"].reason == "why"
    routes = [r["route"]]
    d = ext.CarrierDefinition(r["storage"], routes)  # any iterable, kept as a tuple
    assert d.transfers == (r["route"],) and d.storage is r["storage"]


def storage_kwargs(**over):
    kw = dict(supports_dtype=lambda c, d: True, physical_size=lambda c: 0, allocate=lambda c, n: None,
              release=lambda c: None, read=lambda c, i: 0.0, write=lambda c, i, v: None)
    kw.update(over)
    return kw


@pytest.mark.parametrize("build,fragment", [
    (lambda: ext.StorageProvider(**storage_kwargs(read=3)), "read must be callable"),
    (lambda: ext.StorageProvider(**storage_kwargs(supports_dtype=None)), "supports_dtype must be callable"),
    (lambda: ext.StorageProvider(**storage_kwargs(), elementwise_fallback=1), "elementwise_fallback must be a bool"),
    (lambda: ext.TransferProvider("prepare"), "prepare must be callable"),
    (lambda: ext.TransferRoute(object, sw.CPU, "r", ext.TransferProvider(print)), "source_class"),
    (lambda: ext.TransferRoute(sw.CPU, sw.CPU(1), "r", ext.TransferProvider(print)), "destination_class"),
    (lambda: ext.TransferRoute(sw.CPU, sw.CPU, 7, ext.TransferProvider(print)), "route_id must be a str"),
    (lambda: ext.TransferRoute(sw.CPU, sw.CPU, "r", print), "provider must be a TransferProvider"),
    (lambda: ext.CarrierDefinition(storage_kwargs()), "storage must be a StorageProvider"),
    (lambda: ext.CarrierDefinition(ext.StorageProvider(**storage_kwargs()), 5), "iterable of TransferRoute"),
    (lambda: ext.CarrierDefinition(ext.StorageProvider(**storage_kwargs()), ["r"]), "TransferRoute"),
    (lambda: ext.PreparedTransfer(None), "submit must be callable"),
    (lambda: ext.Unsupported(b"bytes"), "reason must be a str"),
    (lambda: ext.TransferRequest(1, sw.CPU(1), sw.CPU, sw.CPU, F32, sw.Layout.canonical(sw.Shape([1])), 1),
     "tensor must be a Tensor"),
])
def test_record_field_types_are_checked(build, fragment):
    with pytest.raises(TypeError, match=fragment):
        build()


def test_route_id_must_be_non_empty():
    with pytest.raises(ValueError, match="non-empty"):
        ext.TransferRoute(sw.CPU, sw.CPU, "", ext.TransferProvider(print))


def test_definition_allows_one_route_per_exact_pair():
    A, B = fresh("DupSource"), fresh("DupDest")
    log = RouteLog()
    with pytest.raises(ValueError) as info:
        ext.CarrierDefinition(list_storage(), [route(A, B, "one", log), route(A, B, "two", log)])
    assert "DupSource" in str(info.value) and "DupDest" in str(info.value)
    # Different exact destinations (a class and its subclass) are different pairs.
    SubB = fresh("SubDupDest", B)
    d = ext.CarrierDefinition(list_storage(), [route(A, B, "one", log), route(A, SubB, "two", log)])
    assert len(d.transfers) == 2


# ------------------------------------------------------------ registration and sealing

def test_register_returns_none_and_builds_instances():
    Host = fresh("HostSlots")
    assert ext.register_carrier_definition(Host, ext.CarrierDefinition(list_storage())) is None
    c = Host(3, dtype=F32)
    assert c.size() == 3 and c.dtype() is F32 and slots(c) == [0.0, 0.0, 0.0]


def test_register_argument_types():
    Host = fresh("HostSlots")
    with pytest.raises(TypeError, match="Carrier subclass"):
        ext.register_carrier_definition(object, ext.CarrierDefinition(list_storage()))
    with pytest.raises(TypeError, match="Carrier subclass"):
        ext.register_carrier_definition(3, ext.CarrierDefinition(list_storage()))
    with pytest.raises(TypeError, match="CarrierDefinition"):
        ext.register_carrier_definition(Host, list_storage())
    # Nothing was registered: the class is still open.
    define(Host, list_storage())


def test_every_route_must_leave_the_registered_class():
    Host, Other = fresh("HostSlots"), fresh("OtherSlots")
    log = RouteLog()
    with pytest.raises(TypeError, match="source_class"):
        define(Host, list_storage(), route(Other, sw.CPU, "wrong-source", log))
    # A subclass's definition cannot carry its parent's routes either.
    Sub = fresh("SubHostSlots", Host)
    with pytest.raises(TypeError, match="source_class"):
        define(Sub, list_storage(), route(Host, sw.CPU, "parent-route", log))


def test_a_class_is_registered_once():
    Host = fresh("HostSlots")
    define(Host, list_storage())
    with pytest.raises(TypeError, match="already has a CarrierDefinition"):
        define(Host, list_storage())


def observe_by_instance(cls):
    cls()  # a plain Carrier subclass: Carrier() takes no arguments


def observe_by_subclass_instance(cls):
    fresh("Child", cls)()


@pytest.mark.parametrize("observe", [
    observe_by_instance,
    observe_by_subclass_instance,
    lambda cls: sw.dispatch_move(cls, sw.CPU),
    lambda cls: sw.dispatch_move(sw.CPU, cls),
    lambda cls: sw.registered_move_operation(cls, sw.CPU, sw.ElementwiseMoveOperation).__enter__(),
], ids=["instance", "subclass-instance", "dispatch-source", "dispatch-destination", "scoped-registration"])
def test_register_only_before_observation(observe):
    Legacy = fresh("ObservedSlots")
    try:
        observe(Legacy)
        with pytest.raises(TypeError, match="observed"):
            define(Legacy, list_storage())
    finally:
        try:
            sw.unregister_move_operation(Legacy, sw.CPU)
        except KeyError:
            pass


def test_register_after_a_resolved_route_is_refused():
    Host = define(fresh("HostSlots"), list_storage())
    Target = fresh("TargetSlots")
    t = tensor_of(Host, [1.0])
    # Resolution of (HostSlots, TargetSlots) observes TargetSlots even
    # though the move then fails (TargetSlots() is a bare Python carrier).
    with pytest.raises(NotImplementedError, match="TargetSlots"):
        with sw.no_grad():
            sw.move_async(t, Target())
    with pytest.raises(TypeError, match="observed"):
        define(Target, list_storage())


@pytest.mark.parametrize("name", ["Carrier", "CPU", "Generic", "FileBacked", "Evictable", "Metal"])
def test_builtin_carriers_get_no_definition(name):
    cls = getattr(sw, name, None)
    if cls is None:
        pytest.skip(f"{name} is not built in this tree yet")
    with pytest.raises(TypeError, match="built-in"):
        define(cls, list_storage())


def test_subclasses_of_builtin_storage_get_no_definition():
    with pytest.raises(TypeError, match="built-in"):
        define(fresh("MyCPU", sw.CPU), list_storage())
    with pytest.raises(TypeError, match="built-in"):
        define(fresh("MyGeneric", sw.Generic), list_storage())


# ------------------------------------------------------------ definition-backed storage

def test_construction_contract():
    Host = define(fresh("HostSlots"), list_storage())
    c = Host(2, dtype=I32)
    assert c.dtype() is I32 and slots(c) == [0, 0] and c.version == 0
    assert c.is_mutable() and not c.is_owned() and not c.is_released()
    frozen = Host(2, dtype=F32, mutable=False)
    assert not frozen.is_mutable()
    with pytest.raises(RuntimeError, match="not mutable"):
        frozen[0] = 1.0
    assert Host(0, dtype=F32).size() == 0
    assert "HostSlots" in repr(c) and "size=2" in repr(c)


@pytest.mark.parametrize("call,exc,fragment", [
    (lambda H: H(2), TypeError, "dtype"),
    (lambda H: H(dtype=F32), TypeError, "slots"),
    (lambda H: H(2, F32), TypeError, "positional"),
    (lambda H: H(-1, dtype=F32), ValueError, "non-negative"),
    (lambda H: H(2.0, dtype=F32), TypeError, "slots must be an int"),
    (lambda H: H(True, dtype=F32), TypeError, "slots must be an int"),
    (lambda H: H(2, dtype="Float32"), TypeError, "dtype must be a DType"),
    (lambda H: H(2, dtype=sw.DType.Bool), ValueError, "does not support dtype"),
    (lambda H: H(2, dtype=sw.DType.Integer), ValueError, "storage dtype"),
])
def test_construction_argument_checks(call, exc, fragment):
    Host = define(fresh("HostSlots"), list_storage())
    with pytest.raises(exc, match=fragment):
        call(Host)


def test_init_runs_once():
    Host = define(fresh("HostSlots"), list_storage())
    c = Host(1, dtype=F32)
    with pytest.raises(RuntimeError, match="twice"):
        c.__init__(1, dtype=F32)


def test_provider_results_are_checked():
    Bad = define(fresh("BadSlots"), ext.StorageProvider(**storage_kwargs(supports_dtype=lambda c, d: 1)))
    with pytest.raises(TypeError, match="supports_dtype"):
        Bad(1, dtype=F32)
    Short = define(fresh("ShortSlots"), ext.StorageProvider(**storage_kwargs()))  # allocate provides nothing
    with pytest.raises(ValueError, match="provided 0 slots"):
        Short(2, dtype=F32)
    Weird = define(fresh("WeirdSize"), ext.StorageProvider(**storage_kwargs(physical_size=lambda c: "2")))
    with pytest.raises(TypeError, match="physical_size"):
        Weird(2, dtype=F32)


def test_slots_go_through_read_and_write():
    calls = []
    store = {}

    def write(c, i, v):
        calls.append(("write", i, v))
        store[i] = v

    def read(c, i):
        calls.append(("read", i))
        return store.get(i, 0)

    Host = define(fresh("HostSlots"), ext.StorageProvider(**storage_kwargs(
        physical_size=lambda c: 3, read=read, write=write)))
    c = Host(3, dtype=F32)
    c[1] = 0.1  # coerced to binary32 before the provider sees it
    rounded = struct.unpack("f", struct.pack("f", 0.1))[0]
    assert calls[-1] == ("write", 1, rounded) and rounded != 0.1
    assert c.version == 1
    assert c[1] == rounded and calls[-1] == ("read", 1)
    store[0] = 3  # a provider returning an int for a Float32 slot
    assert c[0] == 3.0 and isinstance(c[0], float)  # reads come back canonical
    with pytest.raises(TypeError):
        c[2] = "x"
    with pytest.raises(IndexError):
        c[3]
    with pytest.raises(IndexError):
        c[-1] = 1.0
    assert c.version == 1


def test_packed_storage_round_trips_int32():
    Packed = define(fresh("PackedSlots"), packed_storage())
    c = filled(Packed, [1, -2, 2 ** 31 - 1], dtype=I32)
    assert slots(c) == [1, -2, 2 ** 31 - 1]
    with pytest.raises(OverflowError):
        c[0] = 2 ** 31


def test_release_calls_the_provider_exactly_once():
    slog = Log()
    Host = define(fresh("HostSlots"), list_storage(slog))
    c = filled(Host, [1.0, 2.0])
    c.release()
    c.release()
    c._release()
    assert slog.releases == [c]
    assert c.is_released() and c.size() == 0
    with pytest.raises(RuntimeError, match="released"):
        c[0]
    # A hook-level _release() also counts as the one release.
    d = filled(Host, [1.0])
    d._release()
    d.release()
    assert slog.releases == [c, d] and d.is_released()


def test_a_raising_release_still_releases_once():
    calls = []

    def release(c):
        calls.append(c)
        raise OSError("device gone")

    base = list_storage()
    fields = ("supports_dtype", "physical_size", "allocate", "read", "write")
    Raising = define(fresh("RaisingRelease"),
                     ext.StorageProvider(**{f: getattr(base, f) for f in fields}, release=release))
    c = Raising(1, dtype=F32)
    with pytest.raises(OSError, match="device gone"):
        c.release()
    c.release()
    assert calls == [c] and c.is_released()


def test_new_like_and_allocate_like_build_the_exact_class():
    slog = Log()
    Host = define(fresh("HostSlots"), list_storage(slog))
    c = filled(Host, [1.0, 2.0])
    n = c.new_like([3.0, 4.5, 5.0])
    assert type(n) is Host and n.dtype() is F32 and slots(n) == [3.0, 4.5, 5.0] and n.is_mutable()
    i = c.new_like([7], dtype=I32, mutable=False)
    assert i.dtype() is I32 and slots(i) == [7] and not i.is_mutable()
    c.release()
    a = c.allocate_like(4)  # works on a released receiver
    assert type(a) is Host and a.dtype() is F32 and slots(a) == [0.0] * 4
    e = c.allocate_like(2, dtype=I32, mutable=False, empty=True)
    assert e.dtype() is I32 and e.size() == 2 and not e.is_mutable()
    with pytest.raises(ValueError, match="does not support"):
        c.allocate_like(1, dtype=sw.DType.Bool)


def test_subclass_without_a_definition_is_exact_class():
    """API.md 8: a subclass of a defined class that registers no definition
    of its own cannot be constructed, inherits no fallback permission and is
    definition-free to the legacy registry."""
    Host, Packed, log, _ = family(host_fallback=True, packed_fallback=False)
    Sub = fresh("SubHostSlots", Host)  # no definition of its own
    with pytest.raises(TypeError, match="SubHostSlots has no CarrierDefinition of its own"):
        Sub(2, dtype=F32)
    # Definition-free to the legacy registry: it can hold an entry, and a
    # definition cannot be registered for it any more (it was observed).
    sw.register_move_operation(Sub, sw.CPU, sw.ElementwiseMoveOperation)
    try:
        assert sw.dispatch_move(Sub, sw.CPU) is sw.ElementwiseMoveOperation
    finally:
        sw.unregister_move_operation(Sub, sw.CPU)
    with pytest.raises(TypeError, match="observed"):
        define(Sub, list_storage())
    # Paired with a defined class, the legacy registry names only that class
    # as definition-backed: SubHostSlots carries nothing of HostSlots.
    with pytest.raises(RuntimeError, match=r"\(SubHostSlots, PackedSlots\): PackedSlots is definition-backed"):
        sw.dispatch_move(Sub, Packed)
    assert log.prepared == []


def test_subclass_with_its_own_definition():
    Host = define(fresh("HostSlots"), list_storage())
    Sub = define(fresh("SubPacked", Host), packed_storage())
    s = filled(Sub, [1.5])
    assert "_buf" in s.__dict__ and "_slots" not in s.__dict__


def test_definition_backed_carriers_do_not_export_dlpack():
    Host = define(fresh("HostSlots"), list_storage())
    t = tensor_of(Host, [1.0])
    with pytest.raises(BufferError, match="DLPack is not supported"):
        t.__dlpack__()


# ------------------------------------------------------------ ProviderCompletion

def test_provider_completion_is_an_open_base():
    base = ext.ProviderCompletion()
    with pytest.raises(NotImplementedError, match="wait"):
        base.wait()
    assert not hasattr(base, "__await__")
    held = HeldCompletion()
    assert isinstance(held, ext.ProviderCompletion) and held.done is False
    held.event.set()
    assert held.done is True and held.wait() is None

    class Flagged(ext.ProviderCompletion):
        def __init__(self):
            self.done = True  # a plain attribute is a valid done

        def wait(self):
            return None

    assert Flagged().done is True
