"""Held transfers: a registered MoveOperation whose _copy waits on an Event,
so asynchronous moves are tested deterministically."""
import contextlib
import threading

import strideweave as sw
from strideweave.carriers.move import register_move_operation, unregister_move_operation

WAIT = 10.0  # seconds: the bound on every wait in the movement tests


class Gate:
    """Holds a registered MoveOperation's _copy open until released."""

    def __init__(self):
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = []
        self.thread_ids = []

    def hold(self, op, tensor, destination, output, element_count):
        self.calls.append((op, tensor, destination, output, element_count))
        self.thread_ids.append(threading.get_ident())
        self.entered.set()
        assert self.release.wait(WAIT), "test never released the held transfer"


def held_operation(gate, base=sw.ElementwiseMoveOperation, fail=None):
    """A MoveOperation subclass whose _copy waits on gate, then copies
    through the base (or raises fail)."""

    class HeldMove(base):
        def _copy(self, tensor, destination, output, element_count):
            gate.hold(self, tensor, destination, output, element_count)
            if fail is not None:
                raise fail
            return super()._copy(tensor, destination, output, element_count)

    return HeldMove


@contextlib.contextmanager
def routes_both_ways(a, b, op):
    """op registered for the class pairs (a, b) and (b, a) while the block
    runs (a test may replace either entry meanwhile)."""
    register_move_operation(a, b, op)
    register_move_operation(b, a, op)
    try:
        yield
    finally:
        unregister_move_operation(a, b)
        unregister_move_operation(b, a)


class OpA(sw.MoveOperation):
    """A legacy registry entry that copies value by value (its class name
    shows in the registry's messages)."""

    def _copy(self, tensor, destination, output, element_count):
        for i in range(output.size()):
            output[i] = tensor[i]


class OpB(OpA):
    """A second, distinct entry."""
