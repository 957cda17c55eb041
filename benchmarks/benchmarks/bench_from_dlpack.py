"""DLPack import: strideweave.from_dlpack against np.from_dlpack of the same
producer (32x32 float32), each result dropped at once.

asv benchmarks (plain classes); compare.py --only import prints the same
pairs side by side with ratios (benchmarks/import_compare.py). Targets:
from_dlpack of an ndarray, a torch tensor and a JAX array at most 1.0x
np.from_dlpack of it; torch through its C exchange API faster than through
a capsule; a NumPy -> StrideWeave -> NumPy round trip zero-copy; import/drop
cycles leave RSS flat.
"""
import numpy as np

import strideweave as sw

SHAPE = (32, 32)


def _producer(kind):
    if kind == "ndarray":
        return np.zeros(SHAPE, dtype=np.float32)
    if kind == "torch":
        import torch

        return torch.zeros(SHAPE)
    import jax.numpy as jnp

    return jnp.zeros(SHAPE, dtype=jnp.float32)


class FromDLPack:
    params = ["ndarray", "torch", "jax"]
    param_names = ["producer"]

    def setup(self, kind):
        try:
            self.x = _producer(kind)
        except ImportError:
            raise NotImplementedError(f"{kind} is not installed")  # asv skips the case

    def time_strideweave_from_dlpack(self, kind):
        sw.from_dlpack(self.x)

    def time_numpy_from_dlpack(self, kind):
        np.from_dlpack(self.x)


class FromDLPackPaths:
    """torch's C exchange API (no capsule) against its capsule."""

    def setup(self):
        try:
            import torch
        except ImportError:
            raise NotImplementedError("torch is not installed")
        self.x = torch.zeros(SHAPE)

    def time_exchange_api(self):
        sw.from_dlpack(self.x)

    def time_capsule(self):
        sw.from_dlpack(self.x.__dlpack__(max_version=(1, 3)))


class FromDLPackRoundTrip:
    def setup(self):
        self.a = np.zeros(SHAPE, dtype=np.float32)

    def time_numpy_strideweave_numpy(self):
        np.from_dlpack(sw.from_dlpack(self.a))

    def time_numpy_numpy_numpy(self):
        np.from_dlpack(np.from_dlpack(self.a))

    def track_round_trip_is_zero_copy(self):
        return int(np.from_dlpack(sw.from_dlpack(self.a)).ctypes.data == self.a.ctypes.data)


class FromDLPackCycles:
    """RSS growth over 1e6 import/drop cycles (KiB; flat means 0)."""

    timeout = 600

    def track_rss_growth_kib(self):
        a = np.zeros(SHAPE, dtype=np.float32)
        for _ in range(1000):
            sw.from_dlpack(a)
        before = _rss_kib()
        for _ in range(1_000_000):
            sw.from_dlpack(a)
        return _rss_kib() - before

    track_rss_growth_kib.unit = "KiB"


def _rss_kib():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0
