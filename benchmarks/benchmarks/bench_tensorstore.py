"""TensorStore carrier (API.md 14): bulk moves CPU->TensorStoreCarrier and
back on zarr v3 local files (and in memory), against TensorStore's own
``store.write(ndarray)`` / ``store.read()`` on the same spec and chunking.

A move consumes its source, so ``setup`` builds a fresh source, and a fresh
destination array (new path) per sample; ``number = 1``. The S3 comparison
needs a server and lives in compare.py (--only-tensorstore). Skipped (asv
NotImplementedError) where the optional tensorstore package is missing.
"""
import os
import shutil
import tempfile

import numpy as np

import strideweave as sw

try:
    import tensorstore as ts

    from strideweave.carriers.tensorstore import TensorStoreCarrier
except ImportError:  # the optional extra: pip install strideweave[tensorstore]
    ts = None

F32 = sw.DType.Float32
SIZES = {"4KiB": 1024, "64MiB": 16 * 1024 * 1024, "256MiB": 64 * 1024 * 1024}
CHUNK = 4 * 1024 * 1024  # elements per chunk (16 MiB)


def cpu_source(n):
    c = sw.CPU(n, empty=True)
    flat = sw.Tensor(c, 0, sw.Layout(sw.Shape(n), sw.Stride(1)))
    np.from_dlpack(flat)[:] = np.arange(n, dtype=np.float32)
    return flat


def file_spec(root, name):
    return {"driver": "zarr3", "kvstore": {"driver": "file", "path": os.path.join(root, name)}}


class _Base:
    number = 1
    repeat = (1, 5, 30.0)
    warmup_time = 0
    timeout = 300
    params = (["memory", "zarr3-file"], list(SIZES))
    param_names = ["store", "size"]

    def setup(self, store, size):
        if ts is None:
            raise NotImplementedError("tensorstore is not installed")
        self.n = SIZES[size]
        self.root = tempfile.mkdtemp(prefix="sw-asv-ts-")
        self.count = 0

    def teardown(self, store, size):
        shutil.rmtree(self.root, ignore_errors=True)

    def fresh_carrier(self, store):
        self.count += 1
        if store == "memory":
            return TensorStoreCarrier(self.n, dtype=F32)
        return TensorStoreCarrier.create(file_spec(self.root, f"c{self.count}"), self.n,
                                         chunk_slots=min(CHUNK, self.n))

    def fresh_store(self, store):
        self.count += 1
        spec = ({"driver": "zarr3", "kvstore": {"driver": "memory"}} if store == "memory"
                else file_spec(self.root, f"s{self.count}"))
        return ts.open(spec, create=True, dtype=ts.float32, shape=[self.n],
                       chunk_layout=ts.ChunkLayout(chunk_shape=[min(CHUNK, self.n)])).result()


class MoveIntoTensorStore(_Base):
    """sw.move(cpu tensor, TensorStoreCarrier) vs store.write(ndarray)."""

    def setup(self, store, size):
        super().setup(store, size)
        self.t = cpu_source(self.n)
        self.d = self.fresh_carrier(store)
        self.a = np.arange(self.n, dtype=np.float32)
        self.s = self.fresh_store(store)

    def time_move(self, store, size):
        sw.move(self.t, self.d)

    def time_tensorstore_write(self, store, size):
        self.s.write(self.a).result()


class MoveOutOfTensorStore(_Base):
    """sw.move(TensorStore tensor, CPU) vs store.read()."""

    def setup(self, store, size):
        super().setup(store, size)
        with sw.no_grad():
            self.t = sw.move(cpu_source(self.n), self.fresh_carrier(store))
        self.d = sw.CPU(self.n, empty=True)
        self.s = self.fresh_store(store)
        self.s.write(np.arange(self.n, dtype=np.float32)).result()

    def time_move(self, store, size):
        sw.move(self.t, self.d)

    def time_tensorstore_read(self, store, size):
        self.s.read().result()
