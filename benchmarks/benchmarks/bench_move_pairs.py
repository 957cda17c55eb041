"""Every built-in move pair at 4 KiB and 256 MiB, for contiguous, strided,
hierarchical and broadcast layouts (complements bench_move.py).

    CPU -> CPU          ElementwiseMoveOperation, native strided copy
    CPU -> FileBacked   CpuToFileBackedMoveOperation, bulk span write
    FileBacked -> CPU   FileBackedToCpuMoveOperation, bulk span read
    CPU -> Generic      elementwise fallback through Python objects (4 KiB only)
    Generic -> CPU      elementwise fallback through Python objects (4 KiB only)

A move consumes its source (the source carrier is released), so every timed
call needs a fresh source: ``setup`` builds it and asv times one call per
sample (``number = 1``; no warm-up call, which would find the source
released). CPU destinations are touched at setup, so the timed copy does
not also fault in fresh pages; FileBacked destinations start empty and grow,
as a user would create them. The layouts are those of bench_export_import
(``layout_for``), sized by their physical span; the broadcast case moves only
its 1024-slot span whatever its logical size.
"""
import numpy as np

import strideweave as sw

try:  # asv imports benchmark files as modules of the benchmarks package
    from .bench_export_import import LAYOUTS, SIZES, layout_for
except ImportError:  # run as a plain script / module
    from bench_export_import import LAYOUTS, SIZES, layout_for

F32 = sw.DType.Float32
PAIRS = ("CPU->CPU", "CPU->FileBacked", "FileBacked->CPU", "CPU->Generic", "Generic->CPU")
GENERIC_PAIRS = ("CPU->Generic", "Generic->CPU")


def cpu_source(lay):
    """A CPU tensor over a filled carrier of exactly cosize slots."""
    c = sw.CPU(lay.cosize, empty=True)
    # Fill through a DLPack alias: fast, and a foreign write is not a
    # version bump, so the source is as a user would hand it over.
    flat = sw.Tensor(c, 0, sw.Layout(sw.Shape(lay.cosize), sw.Stride(1)))
    np.from_dlpack(flat)[:] = np.arange(lay.cosize, dtype=np.float32)
    return sw.Tensor(c, 0, lay)


def source_for(pair, lay):
    src = pair.split("->")[0]
    t = cpu_source(lay)
    if src == "CPU":
        return t
    if src == "FileBacked":
        return sw.move(t, sw.FileBacked(dtype=F32))
    if src == "Generic":
        return sw.move(t, sw.Generic([], dtype=F32))
    raise ValueError(pair)


def destination_for(pair, lay):
    dst = pair.split("->")[1]
    if dst == "CPU":
        # Touch every page now (large CPU storage is mapped lazily), so the
        # timed copy does not also fault the destination in.
        c = sw.CPU(lay.cosize, empty=True)
        np.from_dlpack(sw.Tensor(c, 0, sw.Layout(sw.Shape(lay.cosize), sw.Stride(1))))[:] = 0
        return c
    if dst == "FileBacked":
        return sw.FileBacked(dtype=F32)
    if dst == "Generic":
        return sw.Generic([], dtype=F32)
    raise ValueError(pair)


class MovePairs:
    """move(t, destination): blocking, submission through terminal commit."""

    params = (list(PAIRS), list(SIZES), list(LAYOUTS))
    param_names = ["pair", "size", "layout"]
    number = 1
    repeat = (1, 5, 20.0)
    warmup_time = 0
    timeout = 300

    def setup(self, pair, size, kind):
        if pair in GENERIC_PAIRS and size != "4KiB":
            raise NotImplementedError("Generic pairs are measured at 4 KiB only (Python objects)")
        lay = layout_for(kind, SIZES[size])
        self.t = source_for(pair, lay)
        self.d = destination_for(pair, lay)
        self.result = None

    def teardown(self, pair, size, kind):
        # Drop the big carriers now (a FileBacked removes its file on GC).
        self.t = self.d = self.result = None

    def time_move(self, pair, size, kind):
        self.result = sw.move(self.t, self.d)


class MoveAsyncLatency:
    """move_async return latency (validation, claim, allocation, submission;
    not the copy), and the full async round trip including wait()."""

    params = (["CPU->CPU", "CPU->FileBacked", "FileBacked->CPU"], list(SIZES))
    param_names = ["pair", "size"]
    number = 1
    repeat = (1, 10, 20.0)
    warmup_time = 0
    timeout = 300

    def setup(self, pair, size):
        lay = layout_for("contiguous", SIZES[size])
        self.t = source_for(pair, lay)
        self.d = destination_for(pair, lay)
        self.h = None

    def teardown(self, pair, size):
        if self.h is not None:
            self.h.wait(timeout=120)  # never leave a pending move behind
        self.t = self.d = self.h = None

    def time_move_async_return(self, pair, size):
        self.h = sw.move_async(self.t, self.d)

    def time_move_async_wait(self, pair, size):
        # Keep the result: freeing it here would time the destination's free.
        self.h = sw.move_async(self.t, self.d)
        self.h.wait(timeout=120)


class NumPyBaselines:
    """The NumPy operations the moves are compared with in compare.py:
    np.copyto on the same views (contiguous, every other element) and
    ndarray.tofile + np.fromfile for the round trip through a file."""

    params = (list(SIZES),)
    param_names = ["size"]
    number = 1
    repeat = (1, 5, 20.0)
    warmup_time = 0
    timeout = 300

    def setup(self, size):
        import os
        import tempfile

        n = SIZES[size] // 4
        self.src = np.arange(n, dtype=np.float32)
        self.dst = np.empty(n, dtype=np.float32)
        self.dst.fill(0.0)  # fault the pages in, as the CPU destinations are
        fd, self.path = tempfile.mkstemp(suffix=".bin")
        os.close(fd)

    def teardown(self, size):
        import os

        os.unlink(self.path)
        self.src = self.dst = None

    def time_copyto_contiguous(self, size):
        np.copyto(self.dst, self.src)

    def time_copyto_strided(self, size):
        np.copyto(self.dst[::2], self.src[::2])

    def time_tofile_fromfile(self, size):
        self.src.tofile(self.path)
        np.fromfile(self.path, dtype=np.float32)
