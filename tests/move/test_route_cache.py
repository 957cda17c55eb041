"""move remembers the resolved operation (and reverse route) of pairs of
built-in carrier classes (issue 11: per-move fixed cost); every change of the
legacy registry must take effect on the very next move, with the same errors
as an uncached resolution."""
import pytest

import strideweave as sw
from strideweave.carriers.move import register_move_operation, registered_move_operation, unregister_move_operation

from support.builders import cpu_tensor, values

F32 = sw.DType.Float32


class CountingOp(sw.MoveOperation):
    calls = 0

    def _copy(self, tensor, destination, output, element_count):
        type(self).calls += 1
        for i in range(output.size()):
            output[i] = tensor[i]


class PinnedToFile(CountingOp):
    source_class = sw.FileBacked


class ReversePinnedWrong(CountingOp):
    destination_class = sw.FileBacked  # the reverse pair's destination is CPU


def cpu_move():
    return sw.move(cpu_tensor([1.0, 2.0, 3.0]), sw.CPU(3, empty=True))


@pytest.fixture
def cpu_pair():
    """Leaves (CPU, CPU) unregistered whatever a test does."""
    CountingOp.calls = 0
    yield
    try:
        unregister_move_operation(sw.CPU, sw.CPU)
    except KeyError:
        pass


def test_register_after_a_cached_move_takes_effect(cpu_pair):
    for _ in range(3):  # resolved and remembered
        assert type(cpu_move().autograd_ctx) is sw.ElementwiseMoveOperation
    register_move_operation(sw.CPU, sw.CPU, CountingOp)
    out = cpu_move()
    assert type(out.autograd_ctx) is CountingOp and CountingOp.calls == 1
    assert values(out) == [1.0, 2.0, 3.0]
    assert unregister_move_operation(sw.CPU, sw.CPU) is CountingOp
    out = cpu_move()
    assert type(out.autograd_ctx) is sw.ElementwiseMoveOperation and CountingOp.calls == 1
    assert values(out) == [1.0, 2.0, 3.0]


def test_scoped_registration_after_a_cached_move_takes_effect(cpu_pair):
    cpu_move()
    with registered_move_operation(sw.CPU, sw.CPU, CountingOp):
        assert type(cpu_move().autograd_ctx) is CountingOp
        with sw.no_grad():  # no node: the copy itself shows the route
            cpu_move()
        assert CountingOp.calls == 2
    assert type(cpu_move().autograd_ctx) is sw.ElementwiseMoveOperation
    assert CountingOp.calls == 2


def test_a_registered_pin_violation_after_a_cached_move_raises(cpu_pair):
    cpu_move()
    register_move_operation(sw.CPU, sw.CPU, PinnedToFile)
    src = cpu_tensor([1.0, 2.0])
    with pytest.raises(TypeError, match="PinnedToFile requires source carrier class FileBacked, got CPU"):
        sw.move(src, sw.CPU(2))
    assert not src.carrier.is_released()
    unregister_move_operation(sw.CPU, sw.CPU)
    assert values(sw.move(src, sw.CPU(2))) == [1.0, 2.0]


def test_cached_reverse_route_follows_the_registry():
    def to_file():
        return sw.move(cpu_tensor([1.0, 2.0]), sw.FileBacked(dtype=F32))

    assert type(to_file().autograd_ctx) is sw.CpuToFileBackedMoveOperation  # reverse remembered
    saved = unregister_move_operation(sw.FileBacked, sw.CPU)
    try:
        register_move_operation(sw.FileBacked, sw.CPU, ReversePinnedWrong)
        with pytest.raises(NotImplementedError,
                           match="differentiable move from CPU to FileBacked needs a permitted reverse route "
                                 "from FileBacked to CPU"):
            to_file()
        with sw.no_grad():  # no reverse route needed
            assert values(to_file()) == [1.0, 2.0]
        unregister_move_operation(sw.FileBacked, sw.CPU)
        # No entry: the elementwise fallback is a permitted reverse route.
        assert type(to_file().autograd_ctx) is sw.CpuToFileBackedMoveOperation
    finally:
        try:
            unregister_move_operation(sw.FileBacked, sw.CPU)
        except KeyError:
            pass
        register_move_operation(sw.FileBacked, sw.CPU, saved)
    assert saved is sw.FileBackedToCpuMoveOperation
    assert type(to_file().autograd_ctx) is sw.CpuToFileBackedMoveOperation


def test_cpu_constructor_fast_path_matches_the_generic_one():
    c = sw.CPU(3, empty=True)
    assert c.size() == 3 and c.dtype() == F32 and c.is_mutable()
    c = sw.CPU(2, dtype=sw.DType.Int32, mutable=False)
    assert c.dtype() == sw.DType.Int32 and not c.is_mutable() and [c[0], c[1]] == [0, 0]
    assert sw.CPU(size=2).size() == 2  # size by keyword: the generic path
    with pytest.raises(TypeError, match="size must be an int, not bool"):
        sw.CPU(True)
    with pytest.raises(TypeError):
        sw.CPU(2, bogus=1)
    with pytest.raises(TypeError):
        sw.CPU(2, empty=True, **{"empty": False})
    with pytest.raises(TypeError):
        sw.CPU(2, F32)  # dtype is keyword-only

    class Boom:
        def __bool__(self):
            raise ZeroDivisionError("bool")

    with pytest.raises(ZeroDivisionError):
        sw.CPU(2, empty=Boom())
    with pytest.raises(TypeError, match="size must be an int, not bool"):
        sw.CPU(True, empty=Boom())  # size is converted first, as before

    class Sub(sw.CPU):
        def __init__(self, n, tag):
            super().__init__(n, empty=True)
            self.tag = tag

    s = Sub(4, "x")
    assert type(s) is Sub and s.tag == "x" and s.size() == 4
