"""Helpers shared by the tests/test_move*.py files."""
import threading

import strideweave as sw

F32 = sw.DType.Float32
I32 = sw.DType.Int32
WAIT = 10.0  # seconds: the bound on every wait in the movement tests


def layout(shape, stride):
    return sw.Layout(sw.Shape(shape), sw.Stride(stride))


def canonical(shape):
    return sw.Layout.canonical(sw.Shape(shape))


def cpu_tensor(vals, lay=None, offset=0, dtype=F32, size=None):
    """A CPU tensor whose slots offset.. hold vals (other slots hold -1)."""
    lay = lay if lay is not None else canonical([len(vals)])
    n = size if size is not None else offset + lay.cosize
    c = sw.CPU(n, dtype=dtype)
    for i in range(n):
        c[i] = -1
    for i, v in enumerate(vals):
        c[offset + i] = v
    return sw.Tensor(c, offset, lay)


def values(t):
    """Logical values in flat (first-mode-fastest) order."""
    return [t[i] for i in range(t.size())]


def slots(c):
    return [c[i] for i in range(c.size())]


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


class SrcCPU(sw.CPU):
    """An exact CPU subclass: its pairs are unregistered unless a test
    registers them, so tests never collide with built-in entries."""


class DstCPU(sw.CPU):
    pass
