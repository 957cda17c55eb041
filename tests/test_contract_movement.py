"""Movement contract points found untested or wrong by the movement audit
(spec interop-movement, "move relocates values ..." onwards; API.md 0, 8,
9, 10)."""
import pytest

import strideweave as sw
from _move_support import F32, WAIT, canonical, cpu_tensor, values
from test_extension import RouteLog, define, fresh, list_storage, route, tensor_of


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
