"""strideweave.tensor(ndarray) against torch.tensor(ndarray) and np.array:
float32 (one copy) and float64 (converted to Float32 on the way) at 4 KiB
of float32 (1024 elements) and 1e6 elements, contiguous, and a strided
view (every other element) of the 1e6 case. The result is dropped each call,
as a loop that builds a tensor per step does. compare.py --only data prints
the contiguous cases side by side with ratios.
"""
import numpy as np

import strideweave as sw

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


class TensorFromArray:
    params = (["float32", "float64"], [1024, 1_000_000], ["contiguous", "strided"])
    param_names = ["dtype", "elements", "source"]

    def setup(self, dtype, elements, source):
        a = np.random.default_rng(0).random(elements * (2 if source == "strided" else 1)).astype(dtype)
        self.a = a[::2] if source == "strided" else a

    def time_strideweave_tensor(self, dtype, elements, source):
        sw.tensor(self.a)

    def time_torch_tensor(self, dtype, elements, source):
        if torch is None:
            raise NotImplementedError("torch is not installed")
        torch.tensor(self.a)

    def time_numpy_array(self, dtype, elements, source):
        np.array(self.a)
