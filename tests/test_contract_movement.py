"""Movement contract points found untested or wrong by the movement audit
(spec interop-movement, "move relocates values ..." onwards; API.md 0, 8,
9, 10)."""
import threading

import pytest

import strideweave as sw
from support.builders import F32, canonical, cpu_tensor, values
from support.carriers import ListCarrier
from support.moves import WAIT
from support.extension import RouteLog, define, fresh, list_storage, route, tensor_of


# ------------------------------------------------------------ validation: too small is validation

def test_an_empty_destination_that_cannot_allocate_fails_validation_before_any_route_work():
    """The last row of the validation table fails before a route is
    prepared (API.md 10: prepare runs after all validation) and before
    anything is submitted, so no move.submit is recorded either."""
    log = RouteLog()
    Host = fresh("TooSmallHost")
    define(Host, list_storage(), route(Host, sw.CPU, "host-to-cpu", log))
    t = tensor_of(Host, [1.0, 2.0])
    dest = sw.CPU(0)
    with sw.no_grad(), sw.profile() as p:
        with pytest.raises(ValueError, match="too small"):
            sw.move_async(t, dest)
    assert log.prepared == [] and log.submitted == []
    assert p.events() == []
    assert not t.carrier.is_released() and not t.carrier.is_owned()
    assert dest.size() == 0 and not dest.is_owned()
    # The same check for a built-in source: no failed submission event.
    with sw.profile() as p:
        with pytest.raises(ValueError, match="too small"):
            sw.move(cpu_tensor([1.0, 2.0]), sw.CPU(0))
    assert p.events() == []


def test_too_small_wins_over_a_missing_reverse_route():
    """Reverse-route capture is not a validation row: an empty fixed-size
    destination is reported as too small even when the differentiable move
    would have no reverse route."""
    log = RouteLog()
    Host = fresh("OneWayHost")
    define(Host, list_storage(), route(Host, sw.CPU, "one-way", log))  # no CPU -> Host route
    t = tensor_of(Host, [1.0])
    assert sw.is_grad_enabled()
    with pytest.raises(ValueError, match="too small"):
        sw.move_async(t, sw.CPU(0))
    with pytest.raises(NotImplementedError):
        sw.move_async(t, sw.CPU(1))
    assert log.prepared == []


# ------------------------------------------------------------ API.md 0: one object under every path

MOVE_NAMES = ["move", "move_async", "AwaitResult", "AwaitMove", "MoveOperation", "ElementwiseMoveOperation",
              "CpuToFileBackedMoveOperation", "FileBackedToCpuMoveOperation", "CpuToMetalMoveOperation",
              "MetalToCpuMoveOperation", "MetalToMetalMoveOperation", "dispatch_move",
              "register_move_operation", "unregister_move_operation", "registered_move_operation"]
EXTENSION_NAMES = ["CarrierDefinition", "StorageProvider", "TransferProvider", "TransferRoute",
                   "TransferRequest", "PreparedTransfer", "Unsupported", "ProviderCompletion",
                   "register_carrier_definition"]


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


# ------------------------------------------------------------ API.md 10: registry argument errors

@pytest.mark.parametrize("call", ["dispatch_move", "unregister_move_operation"])
def test_dispatch_and_unregister_name_the_offending_parameter(call):
    fn = getattr(sw, call)
    with pytest.raises(TypeError, match="source_class"):
        fn(sw.CPU(1), sw.CPU)
    with pytest.raises(TypeError, match="destination_class"):
        fn(sw.CPU, int)
    with pytest.raises(TypeError, match="source_class"):
        fn(None, None)  # the first offending parameter is named


def test_scoped_registration_names_the_destination_parameter():
    class Op(sw.ElementwiseMoveOperation):
        pass

    with pytest.raises(TypeError, match="destination_class"):
        sw.registered_move_operation(sw.CPU, "FileBacked", Op)
    assert sw.dispatch_move(sw.CPU, sw.FileBacked) is sw.CpuToFileBackedMoveOperation


# ------------------------------------------------------------ one terminal boundary

class ObservedRelease(ListCarrier):
    """A Python source carrier whose release hook records what the move has
    published at the moment the source is released."""

    def __init__(self, vals, fail=None):
        super().__init__(vals, F32, cast=float)
        self.fail = fail
        self.seen = None
        self.watch = None  # (handle box, destination) set by the test

    def _release(self):
        box, dest = self.watch
        self.seen = {"done": box[0].done, "dest_owned": dest.is_owned(),
                     "dest_values": [dest[i] for i in range(dest.size())]}
        if self.fail is not None:
            raise self.fail
        self.vals = []


def test_result_publishes_before_the_source_is_released_and_success_is_recorded_last():
    src = ObservedRelease([1.0, 2.0])
    dest = sw.CPU(2)
    box = [None]
    src.watch = (box, dest)
    gate = threading.Event()

    class Held(sw.ElementwiseMoveOperation):
        def _copy(self, *args):
            assert gate.wait(WAIT)
            super()._copy(*args)

    with sw.registered_move_operation(ObservedRelease, sw.CPU, Held):
        box[0] = sw.move_async(sw.Tensor(src, 0, canonical([2])), dest)
        gate.set()
        out = box[0].wait(timeout=WAIT)
    # At release time the destination held the values and was no longer
    # owned by the move, while the handle had not recorded success yet.
    assert src.seen == {"done": False, "dest_owned": False, "dest_values": [1.0, 2.0]}
    assert src.is_released() and box[0].done
    assert out.carrier is dest and values(out) == [1.0, 2.0]


def test_a_failing_source_release_fails_the_move_and_publishes_nothing():
    src = ObservedRelease([1.0, 2.0], fail=OSError("cannot let go"))
    dest = sw.CPU(2)
    box = [None]
    src.watch = (box, dest)
    t = sw.Tensor(src, 0, canonical([2]))
    box[0] = sw.move_async(t, dest)
    with pytest.raises(OSError, match="cannot let go") as first:
        box[0].wait(timeout=WAIT)
    with pytest.raises(OSError) as second:
        box[0].wait(timeout=WAIT)
    assert first.value is second.value
    assert not src.is_released() and not src.is_owned() and values(t) == [1.0, 2.0]
    assert not dest.is_owned() and dest.is_mutable() and dest.version == 0
