"""Movement against NumPy on the same data (issue 5).

asv benchmarks (plain classes). Run as a script for the side-by-side medians
and ratios:
    STRIDEWEAVE_BUILD=build-x python benchmarks/benchmarks/bench_move.py
Cases: CPU->CPU move of 256 MiB, contiguous and strided (every other slot of
a 256 MiB span), against np.copyto on the same views; CPU->FileBacked->CPU
round trip against ndarray.tofile + np.fromfile; move_async return latency
for 4 KiB and 256 MiB; Python-thread progress during a 256 MiB async move.
"""
import os
import tempfile
import time

import numpy as np

import strideweave as sw

F32 = sw.DType.Float32
BIG = (256 << 20) // 4  # float32 slots in 256 MiB
SMALL = 4096 // 4  # 4 KiB


def _contiguous(n):
    return sw.Layout(sw.Shape([n]), sw.Stride([1]))


def _strided(n):
    # Every other slot: n // 2 logical elements over a span of n - 1 slots.
    return sw.Layout(sw.Shape([n // 2]), sw.Stride([2]))


def _source(n, layout):
    """A filled CPU tensor and a NumPy view of the same storage."""
    c = sw.CPU(n, empty=True)
    a = np.from_dlpack(sw.Tensor(c, 0, _contiguous(n)))
    a[:] = np.arange(n, dtype=np.float32)
    return sw.Tensor(c, 0, layout)


def _touched_cpu(n):
    """A CPU destination whose pages are resident, like NumPy's below (large
    CPU buffers are lazily zeroed mappings, so construction touches nothing)."""
    c = sw.CPU(n)
    np.from_dlpack(sw.Tensor(c, 0, _contiguous(n)))[:] = 1.0
    return c


def _views(n, step):
    src = np.arange(n, dtype=np.float32)
    dst = np.ones(n, dtype=np.float32)  # touched, like _touched_cpu
    return src[::step], dst[::step]


class MoveCpuToCpu:
    """256 MiB CPU -> CPU, and np.copyto on the same views."""

    params = ["contiguous", "strided"]
    param_names = ["layout"]
    number = 1
    repeat = 7
    timeout = 600

    def setup(self, kind):
        layout = _contiguous(BIG) if kind == "contiguous" else _strided(BIG)
        self.t = _source(BIG, layout)
        self.d = _touched_cpu(layout.cosize)
        self.src, self.dst = _views(BIG, 1 if kind == "contiguous" else 2)

    def time_strideweave_move(self, kind):
        sw.move(self.t, self.d)

    def time_numpy_copyto(self, kind):
        np.copyto(self.dst, self.src)


class MoveThroughFile:
    """256 MiB CPU -> FileBacked -> CPU, and ndarray.tofile + np.fromfile."""

    number = 1
    repeat = 5
    timeout = 600

    def setup(self):
        self.t = _source(BIG, _contiguous(BIG))
        self.a = np.arange(BIG, dtype=np.float32)
        self.dir = tempfile.mkdtemp(prefix="sw-bench-")
        self.path = os.path.join(self.dir, "a.bin")

    def teardown(self):
        if os.path.exists(self.path):
            os.remove(self.path)
        os.rmdir(self.dir)

    def time_strideweave_round_trip(self):
        mid = sw.move(self.t, sw.FileBacked(dtype=F32))
        sw.move(mid, sw.CPU(BIG, empty=True))

    def time_numpy_tofile_fromfile(self):
        self.a.tofile(self.path)
        np.fromfile(self.path, dtype=np.float32)


def _return_latency_ns(n, runs):
    """Median time for move_async to return (the transfer is waited for
    outside the timed region)."""
    samples = []
    for _ in range(runs):
        t = _source(n, _contiguous(n))
        d = sw.CPU(n, empty=True)
        start = time.perf_counter_ns()
        h = sw.move_async(t, d)
        samples.append(time.perf_counter_ns() - start)
        h.wait()
        # Drop the result now: freeing its 256 MiB must not land in the next
        # timed call (the assignment to h would free it there).
        del h, t, d
    samples.sort()
    return samples[len(samples) // 2]


def _progress_ratio():
    """Python work done on the calling thread while a 256 MiB move runs,
    relative to the same time with no move (1.0: no slowdown)."""
    t = _source(BIG, _contiguous(BIG))
    d = sw.CPU(BIG, empty=True)
    count = 0
    start = time.perf_counter()
    h = sw.move_async(t, d)
    while not h.done:
        count += _work()
    elapsed = time.perf_counter() - start
    h.wait()
    del h, t, d
    base = 0
    start = time.perf_counter()
    while time.perf_counter() - start < elapsed:
        base += _work()
    return count / base if base else float("nan"), elapsed


def _work():
    # A slice of pure-Python work much longer than the loop's own check.
    return sum(range(2000)) and 1


class MoveAsyncLatency:
    unit = "ns"
    timeout = 600

    def track_return_latency_4KiB(self):
        return _return_latency_ns(SMALL, 201)

    def track_return_latency_256MiB(self):
        return _return_latency_ns(BIG, 5)


class MoveAsyncProgress:
    unit = "ratio"
    timeout = 600

    def track_python_progress_during_256MiB_move(self):
        return _progress_ratio()[0]


def _median(fn, setup, repeat):
    samples = []
    for _ in range(repeat):
        state = setup()
        start = time.perf_counter()
        fn(state)
        samples.append(time.perf_counter() - start)
        del state
    samples.sort()
    return samples[len(samples) // 2]


def _ratios(repeat=7):
    def cpu_case(kind):
        layout = _contiguous(BIG) if kind == "contiguous" else _strided(BIG)

        def ours_setup():
            return _source(BIG, layout), _touched_cpu(layout.cosize)

        def theirs_setup():
            return _views(BIG, 1 if kind == "contiguous" else 2)

        return (f"CPU->CPU {kind} 256 MiB", lambda s: sw.move(*s), ours_setup,
                lambda s: np.copyto(s[1], s[0]), theirs_setup, "np.copyto")

    tmp = tempfile.mkdtemp(prefix="sw-bench-")
    path = os.path.join(tmp, "a.bin")

    def file_ours(s):
        mid = sw.move(s, sw.FileBacked(dtype=F32))
        sw.move(mid, sw.CPU(BIG, empty=True))

    def file_theirs(a):
        a.tofile(path)
        np.fromfile(path, dtype=np.float32)
        os.remove(path)

    cases = [
        cpu_case("contiguous"),
        cpu_case("strided"),
        ("CPU->FileBacked->CPU 256 MiB", file_ours, lambda: _source(BIG, _contiguous(BIG)), file_theirs,
         lambda: np.arange(BIG, dtype=np.float32), "tofile+fromfile"),
    ]
    print(f"{'case':32s} {'strideweave':>12s} {'numpy':>12s} {'ratio':>7s}  baseline")
    for name, ours, oset, theirs, tset, label in cases:
        mo = _median(ours, oset, repeat)
        mt = _median(theirs, tset, repeat)
        print(f"{name:32s} {mo * 1e3:10.2f}ms {mt * 1e3:10.2f}ms {mo / mt:7.3f}  {label}")
    os.rmdir(tmp)
    print(f"move_async return latency 4 KiB:   {_return_latency_ns(SMALL, 201) / 1e3:8.1f} us (median of 201)")
    print(f"move_async return latency 256 MiB: {_return_latency_ns(BIG, repeat) / 1e3:8.1f} us (median of {repeat})")
    ratios = sorted(_progress_ratio() for _ in range(5))
    r, elapsed = ratios[len(ratios) // 2]
    print(f"Python progress during a 256 MiB move_async: {r:.2f} of an idle loop (move took {elapsed * 1e3:.1f} ms)")


if __name__ == "__main__":
    _ratios()
