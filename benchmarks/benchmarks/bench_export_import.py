"""DLPack export and import by NumPy, PyTorch and JAX, at 4 KiB and 256 MiB,
for contiguous, strided, hierarchical and broadcast layouts.

Complements bench_dlpack.py (which pins the 32x32 headline comparison): here
the layout and the size vary, and every consumer imports. Export is
zero-copy, so the size should not change the time; the layout changes only
the number of dimensions written into the managed tensor.

The tensors are built once per process at first use (no asv ``setup``):
exporting does not change them, and without setup hooks asv calibrates
``number`` so a sample is many calls, not one call timed with two clock
reads. The 256 MiB carriers are allocated ``empty`` and never touched, so
they cost address space, not memory.
"""
import importlib.util

import numpy as np

import strideweave as sw

KIB4 = 4 * 1024
MIB256 = 256 * 1024 * 1024
SIZES = {"4KiB": KIB4, "256MiB": MIB256}
LAYOUTS = ("contiguous", "strided", "hierarchical", "broadcast")


def layout_for(kind, nbytes, itemsize=4):
    """A layout whose physical span (cosize) is about nbytes of storage.

    contiguous   Shape(n) Stride(1)
    strided      every other slot: Shape(n/2) Stride(2)
    hierarchical 8x8 tiles of a 128 x (n/128) matrix: leaves
                 (8,1) (16,64) | (8,8) (n/1024,1024); compact, injective
    broadcast    1024 values seen n/1024 times: Shape([1024, n/1024])
                 Stride([1, 0]) (logical size n, cosize 1024)
    """
    n = nbytes // itemsize
    if kind == "contiguous":
        return sw.Layout(sw.Shape(n), sw.Stride(1))
    if kind == "strided":
        return sw.Layout(sw.Shape(n // 2), sw.Stride(2))
    if kind == "hierarchical":
        return sw.Layout(sw.Shape([[8, 16], [8, n // 1024]]), sw.Stride([[1, 64], [8, 1024]]))
    if kind == "broadcast":
        return sw.Layout(sw.Shape([1024, n // 1024]), sw.Stride([1, 0]))
    raise ValueError(kind)


def numpy_view(kind, nbytes, base):
    """The NumPy view of a flat float32 array with the same element order
    (NumPy dims are listed slowest first, so leaf modes are reversed)."""
    n = nbytes // 4
    if kind == "contiguous":
        return base[:n]
    if kind == "strided":
        return base[: n : 2]
    if kind == "hierarchical":
        s = np.lib.stride_tricks.as_strided
        return s(base, shape=(n // 1024, 8, 16, 8), strides=(1024 * 4, 8 * 4, 64 * 4, 4))
    if kind == "broadcast":
        # as_strided, not broadcast_to: NumPy refuses a legacy export of the
        # read-only view broadcast_to returns.
        s = np.lib.stride_tricks.as_strided
        return s(base, shape=(n // 1024, 1024), strides=(0, 4))
    raise ValueError(kind)


_cache = {}


def tensor(kind, size):
    key = ("sw", kind, size)
    if key not in _cache:
        lay = layout_for(kind, SIZES[size])
        _cache[key] = sw.Tensor(sw.CPU(lay.cosize, empty=True), 0, lay)
    return _cache[key]


def ndarray(kind, size):
    key = ("np", kind, size)
    if key not in _cache:
        nbytes = SIZES[size]
        _cache[key] = numpy_view(kind, nbytes, np.empty(nbytes // 4, dtype=np.float32))
    return _cache[key]


class Export:
    """Producing and dropping an unconsumed capsule, legacy and versioned,
    with NumPy's own ndarray.__dlpack__ on the same element order alongside."""

    params = (list(SIZES), list(LAYOUTS))
    param_names = ["size", "layout"]

    def time_strideweave_legacy(self, size, kind):
        tensor(kind, size).__dlpack__()

    def time_strideweave_versioned(self, size, kind):
        tensor(kind, size).__dlpack__(max_version=(1, 0))

    def time_strideweave_versioned_with_args(self, size, kind):
        tensor(kind, size).__dlpack__(stream=None, max_version=(1, 3), dl_device=(1, 0), copy=False)

    def time_strideweave_dlpack_device(self, size, kind):
        tensor(kind, size).__dlpack_device__()

    def time_numpy_legacy(self, size, kind):
        ndarray(kind, size).__dlpack__()

    def time_numpy_versioned(self, size, kind):
        ndarray(kind, size).__dlpack__(max_version=(1, 0))


class ImportNumPy:
    """np.from_dlpack of a StrideWeave tensor vs of the equivalent ndarray."""

    params = (list(SIZES), list(LAYOUTS))
    param_names = ["size", "layout"]

    def time_numpy_from_strideweave(self, size, kind):
        np.from_dlpack(tensor(kind, size))

    def time_numpy_from_ndarray(self, size, kind):
        np.from_dlpack(ndarray(kind, size))


# torch and jax are imported lazily in the timed process (asv forks its
# benchmark processes; JAX must not be imported before a fork). The first
# call pays the import, which asv's warm-up absorbs. A missing library
# leaves its class undefined, so asv simply does not list it.
_HAVE_TORCH = importlib.util.find_spec("torch") is not None
_HAVE_JAX = importlib.util.find_spec("jax") is not None


if _HAVE_TORCH:

    class ImportTorch:
        """torch.from_dlpack (versioned capsule when torch asks for one)."""

        params = (list(SIZES), list(LAYOUTS))
        param_names = ["size", "layout"]
        timeout = 120

        def time_torch_from_strideweave(self, size, kind):
            import torch

            torch.from_dlpack(tensor(kind, size))

        def time_torch_from_ndarray(self, size, kind):
            import torch

            torch.from_dlpack(ndarray(kind, size))


if _HAVE_JAX:

    class ImportJAX:
        """jax.dlpack.from_dlpack: zero-copy only from 64-byte aligned
        storage, which the CPU carrier guarantees. JAX refuses non-compact
        strides (UNIMPLEMENTED), so only the compact layouts are imported."""

        params = (list(SIZES), ["contiguous", "hierarchical"])
        param_names = ["size", "layout"]
        timeout = 120

        def time_jax_from_strideweave(self, size, kind):
            import jax.dlpack

            jax.dlpack.from_dlpack(tensor(kind, size)).block_until_ready()

        def time_jax_from_ndarray(self, size, kind):
            import jax.dlpack

            jax.dlpack.from_dlpack(ndarray(kind, size)).block_until_ready()
