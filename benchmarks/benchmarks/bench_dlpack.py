"""DLPack export against NumPy's own ndarray export, same shape and dtype.

asv benchmarks (plain classes). Run as a script for the side-by-side ratios:
    STRIDEWEAVE_BUILD=build-x python benchmarks/benchmarks/bench_dlpack.py
Targets (issue 4): t.__dlpack__() and t.__dlpack__(max_version=(1, 0)) at
most 1.0x of ndarray.__dlpack__; np.from_dlpack(t) at most 1.1x of
np.from_dlpack(ndarray).
"""
import numpy as np

import strideweave as sw

SHAPE = (32, 32)


def _pair():
    rows, cols = SHAPE
    carrier = sw.CPU(rows * cols)
    # Row-major, like the ndarray it is compared with.
    layout = sw.Layout(sw.Shape([rows, cols]), sw.Stride([cols, 1]))
    return sw.Tensor(carrier, 0, layout), np.zeros(SHAPE, dtype=np.float32)


class DLPackExport:
    """Producing (and dropping) an unconsumed capsule."""

    def setup(self):
        self.t, self.a = _pair()

    def time_strideweave_dlpack_legacy(self):
        self.t.__dlpack__()

    def time_numpy_dlpack_legacy(self):
        self.a.__dlpack__()

    def time_strideweave_dlpack_versioned(self):
        self.t.__dlpack__(max_version=(1, 0))

    def time_numpy_dlpack_versioned(self):
        self.a.__dlpack__(max_version=(1, 0))


class DLPackImport:
    """A full round trip through NumPy as the consumer."""

    def setup(self):
        self.t, self.a = _pair()

    def time_numpy_from_dlpack_strideweave(self):
        np.from_dlpack(self.t)

    def time_numpy_from_dlpack_ndarray(self):
        np.from_dlpack(self.a)


def _ratios(repeat=31, number=20000):
    import timeit

    t, a = _pair()
    env = {"t": t, "a": a, "np": np, "mv": (1, 0)}
    cases = [
        ("__dlpack__()", "t.__dlpack__()", "a.__dlpack__()", 1.0),
        ("__dlpack__(max_version=(1, 0))", "t.__dlpack__(max_version=mv)", "a.__dlpack__(max_version=mv)", 1.0),
        ("np.from_dlpack(x)", "np.from_dlpack(t)", "np.from_dlpack(a)", 1.1),
    ]
    print(f"{'case':34s} {'strideweave':>12s} {'numpy':>12s} {'ratio':>7s} target")
    for name, ours, theirs, target in cases:
        to, tt = timeit.Timer(ours, globals=env), timeit.Timer(theirs, globals=env)
        # Interleaved, so machine noise hits both alike; medians of `repeat`.
        so, st = [], []
        for _ in range(repeat):
            so.append(to.timeit(number) / number)
            st.append(tt.timeit(number) / number)
        mo, mt = sorted(so)[repeat // 2], sorted(st)[repeat // 2]
        print(f"{name:34s} {mo * 1e9:10.1f}ns {mt * 1e9:10.1f}ns {mo / mt:7.3f} <= {target}")


if __name__ == "__main__":
    _ratios()
