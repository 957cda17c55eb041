"""Small Python test carriers."""
import strideweave as sw

from support.builders import F32


class ListCarrier(sw.Carrier):
    """A pure Python carrier over a list: neither CPU nor Generic, so values
    reach it only through its hooks; it keeps the base dlpack_info hook
    (which refuses export). ``cast`` converts each written value."""

    def __init__(self, vals, dtype=F32, *, cast=None):
        super().__init__()
        self.vals = list(vals)
        self._dtype = dtype
        self._cast = cast

    def size(self):
        return len(self.vals)

    def dtype(self):
        return self._dtype

    def get_value(self, i):
        return self.vals[i]

    def set_value(self, i, v):
        self.vals[i] = self._cast(v) if self._cast else v


class ReleasingListCarrier(ListCarrier):
    """A ListCarrier whose _release hook counts its calls and empties the list."""

    def __init__(self, vals, dtype=F32, *, cast=None):
        super().__init__(vals, dtype, cast=cast)
        self.released = 0

    def _release(self):
        self.released += 1
        self.vals = []


class ConstCarrier(sw.Carrier):
    """n read-only slots that all read ``value``, of a chosen dtype; writes
    are dropped. The base dlpack_info hook (refuses) is kept."""

    def __init__(self, n, dtype=F32, value=0.0):
        super().__init__()
        self._n, self._dtype, self._value = n, dtype, value

    def size(self):
        return self._n

    def dtype(self):
        return self._dtype

    def get_value(self, i):
        return self._value

    def set_value(self, i, v):
        pass


class SrcCPU(sw.CPU):
    """An exact CPU subclass: its pairs are unregistered unless a test
    registers them, so tests never collide with built-in entries."""


class DstCPU(sw.CPU):
    pass


# Tile-tier carriers for injected transfer failures: a test registers
# FailingOp (or its own operation) between them and unregisters it after.
class FailPrimary(sw.Generic):
    pass


class FailSecondary(sw.Generic):
    pass


class FailingOp(sw.MoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        raise OSError("injected tile failure")
