"""The issue 11 size sweep as asv parameters: 4 KiB, 64 KiB, 256 KiB, 4 MiB,
64 MiB, 256 MiB (and 1 GiB when SW_BENCH_GIB=1; it needs ~5 GiB of RAM).

    CPU -> CPU          blocking move into a fresh CPU(n, empty=True), vs
                        np.copyto into a fresh np.empty and torch clone()
    move_async return   the return time alone (the copy is waited for after)
    CPU <-> FileBacked  vs ndarray.tofile / np.fromfile (and fromfile plus
                        removing the file, the work a move releasing a
                        FileBacked source does)
    DLPack exchange     tvm_ffi.from_dlpack(t) (the C exchange API) vs
                        np.from_dlpack(t) and tvm_ffi.from_dlpack(torch)

A move consumes its source, so ``setup`` builds it and asv times one call
per sample (``number = 1``, no warm-up call). compare.py --sweep prints the
same cases side by side with ratios.
"""
import os
import tempfile

import numpy as np

import strideweave as sw

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

F32 = sw.DType.Float32
KIB, MIB = 1024, 1024 * 1024
SIZES = [4 * KIB, 64 * KIB, 256 * KIB, 4 * MIB, 64 * MIB, 256 * MIB]
if os.environ.get("SW_BENCH_GIB") == "1":
    SIZES.append(1024 * MIB)


def filled(n):
    c = sw.CPU(n, empty=True)
    t = sw.Tensor(c, 0, sw.Layout(sw.Shape(n), sw.Stride(1)))
    np.from_dlpack(t)[:] = 1.0
    return t


class MoveSizes:
    params = (SIZES,)
    param_names = ["bytes"]
    number = 1
    repeat = 9
    warmup_time = 0
    timeout = 600

    def setup(self, nbytes):
        self.n = nbytes // 4
        self.t = filled(self.n)
        self.d = sw.CPU(self.n, empty=True)
        self.a = np.ones(self.n, dtype=np.float32)
        self.x = torch.ones(self.n) if torch is not None else None

    def time_move_cpu_to_cpu(self, nbytes):
        sw.move(self.t, sw.CPU(self.n, empty=True))

    def time_move_async_return(self, nbytes):
        self.h = sw.move_async(self.t, self.d)

    def teardown(self, nbytes):
        h = getattr(self, "h", None)
        if h is not None:
            h.wait(timeout=120)

    def time_numpy_copyto_fresh(self, nbytes):
        np.copyto(np.empty(self.n, dtype=np.float32), self.a)

    def time_torch_clone(self, nbytes):
        if self.x is None:
            raise NotImplementedError
        self.x.clone()


class FileSizes:
    params = (SIZES,)
    param_names = ["bytes"]
    number = 1
    repeat = 7
    warmup_time = 0
    timeout = 600

    def setup(self, nbytes):
        self.n = nbytes // 4
        self.t = filled(self.n)
        self.f = sw.move(filled(self.n), sw.FileBacked(dtype=F32))
        self.a = np.ones(self.n, dtype=np.float32)
        fd, self.path = tempfile.mkstemp(prefix="sw-asv-", suffix=".bin")
        os.close(fd)
        self.a.tofile(self.path)

    def teardown(self, nbytes):
        if os.path.exists(self.path):  # time_numpy_fromfile_remove removed it
            os.unlink(self.path)

    def time_move_cpu_to_filebacked(self, nbytes):
        self.out = sw.move(self.t, sw.FileBacked(dtype=F32))

    def time_move_filebacked_to_cpu(self, nbytes):
        self.out = sw.move(self.f, sw.CPU(self.n, empty=True))

    def time_numpy_tofile(self, nbytes):
        self.a.tofile(self.path)

    def time_numpy_fromfile(self, nbytes):
        self.out = np.fromfile(self.path, dtype=np.float32)

    def time_numpy_fromfile_remove(self, nbytes):
        # The work a FileBacked->CPU move does: a move releases its source,
        # and a released FileBacked's file is removed.
        self.out = np.fromfile(self.path, dtype=np.float32)
        os.unlink(self.path)


class ExchangeApi:
    def setup(self):
        try:
            import tvm_ffi
        except ImportError:
            raise NotImplementedError
        self.tvm_ffi = tvm_ffi
        self.t = sw.Tensor(sw.CPU(1024), 0, sw.Layout(sw.Shape([32, 32]), sw.Stride([32, 1])))
        self.x = torch.zeros((32, 32)) if torch is not None else None

    def time_tvm_ffi_from_dlpack_strideweave(self):
        self.tvm_ffi.from_dlpack(self.t)

    def time_np_from_dlpack_strideweave(self):
        np.from_dlpack(self.t)

    def time_tvm_ffi_from_dlpack_torch(self):
        if self.x is None:
            raise NotImplementedError
        self.tvm_ffi.from_dlpack(self.x)
