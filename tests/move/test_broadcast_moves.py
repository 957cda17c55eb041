"""A move of a broadcast tensor (stride-0 modes) costs its cosize, not its
logical size: the native route, the value-by-value fallback and a direct
elementwise _copy."""
import time

import strideweave as sw


F32 = sw.DType.Float32


def lay(shape, stride):
    return sw.Layout(sw.Shape(shape), sw.Stride(stride))


def test_broadcast_move_costs_cosize_not_logical_size():
    # 2^36 logical elements over one slot: every mode has stride 0.
    src = sw.CPU(1, dtype=F32)
    src[0] = 7.0
    t = sw.Tensor(src, 0, lay([1 << 18, 1 << 18], [0, 0]))
    start = time.perf_counter()
    r = sw.move(t, sw.CPU(1, dtype=F32))
    assert time.perf_counter() - start < 2.0
    assert r.carrier[0] == 7.0 and r.size() == 1 << 36


def test_broadcast_move_through_value_by_value_fallback_costs_cosize():
    class Boxed(sw.Carrier):
        """A Python carrier copied through its slot hooks (no native plan)."""
        calls = 0

        def __init__(self, vals):
            super().__init__()
            self.vals = list(vals)

        def size(self):
            return len(self.vals)

        def dtype(self):
            return sw.DType.Floating

        def get_value(self, i):
            Boxed.calls += 1
            return self.vals[i]

        def set_value(self, i, v):
            self.vals[i] = v

        def _release(self):
            self.vals = []

    src = Boxed([3.0, 4.0])
    t = sw.Tensor(src, 0, lay([2, 1 << 16, 1 << 16], [1, 0, 0]))
    start = time.perf_counter()
    r = sw.move(t, sw.Generic([0.0, 0.0]))
    assert time.perf_counter() - start < 2.0
    assert Boxed.calls <= 4
    assert [r.carrier[0], r.carrier[1]] == [3.0, 4.0]


def test_broadcast_direct_elementwise_copy_costs_cosize():
    src = sw.CPU(3, dtype=F32)
    for i in range(3):
        src[i] = float(i + 1)
    t = sw.Tensor(src, 0, lay([3, 1 << 17, 1 << 17], [1, 0, 0]))
    dst = sw.CPU(3, dtype=F32)
    out = sw.Tensor(dst, 0, t.layout)
    start = time.perf_counter()
    sw.ElementwiseMoveOperation()._copy(t, dst, out, 3)
    assert time.perf_counter() - start < 2.0
    assert [dst[i] for i in range(3)] == [1.0, 2.0, 3.0]
