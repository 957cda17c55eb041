"""StrideWeave: hierarchical-layout tensors over pluggable storage carriers.

Every public name lives in the C extension ``strideweave._core``; this package
re-exports them, plus the few shims that are clearer in Python (profiler
records and the ``profile`` context manager).
"""
import importlib.machinery as _machinery
import os as _os
import sys as _sys


def _has_core(directory: str) -> bool:
    """True when directory holds a compiled ``_core`` extension module."""
    try:
        names = _os.listdir(directory)
    except OSError:
        return False
    suffixes = tuple(_machinery.EXTENSION_SUFFIXES)
    return any(n.startswith("_core.") and n.endswith(suffixes) for n in names)


def _installed_package_dir(here: str, search_path: "list[str]") -> "str | None":
    """The first other ``strideweave`` package directory on search_path that
    holds a compiled ``_core``, or None.

    Running from a clone's root (``pip install . && python -m strideweave``)
    puts the source tree's ``strideweave/`` first on ``sys.path``; it has no
    compiled ``_core``, so the package borrows the installed one.
    """
    try:
        here_real = _os.path.realpath(here)
    except OSError:
        here_real = here
    for entry in search_path:
        if not isinstance(entry, str):
            continue
        candidate = _os.path.join(_os.path.abspath(entry or _os.curdir), "strideweave")
        if _os.path.realpath(candidate) == here_real:
            continue
        if _has_core(candidate):
            return candidate
    return None


# Development hook: run the tests against a meson build directory without
# installing (STRIDEWEAVE_BUILD=build-dev pytest). Unset in normal use.
_build = _os.environ.get("STRIDEWEAVE_BUILD")
if _build:
    __path__.insert(0, _os.path.join(_os.path.abspath(_build), "strideweave"))
elif not _has_core(_os.path.dirname(_os.path.abspath(__file__))):
    # The source tree shadows the installed package: keep the source's Python
    # files and take the compiled core from the installed copy.
    _installed = _installed_package_dir(_os.path.dirname(_os.path.abspath(__file__)), _sys.path)
    if _installed is not None:
        __path__.append(_installed)

try:
    from . import _core  # noqa: E402
except ImportError as _e:
    if "_core" not in str(_e) or _build:
        raise
    raise ImportError(
        "strideweave's compiled core (strideweave._core) was not found: install the package with "
        "`pip install .`, or point STRIDEWEAVE_BUILD at a meson build directory") from _e
from .carriers import extension as _extension  # noqa: E402,F401  (installs the extension records into _core)
from ._core import *  # noqa: E402,F401,F403


def _read_version() -> str:
    try:
        # Generated from meson.build's project(version:), installed beside
        # _core (and found in the build directory in the STRIDEWEAVE_BUILD
        # dev mode).
        from ._version import version

        return version
    except ImportError:  # a source tree without a build: the installed metadata
        from importlib import metadata

        try:
            return metadata.version("strideweave")
        except metadata.PackageNotFoundError:
            return "0+unknown"


__version__ = _read_version()

# `X as X`: explicit re-exports for type checkers (no implicit re-export).
from ._profiler import Profiler as Profiler, ProfilerAverage as ProfilerAverage  # noqa: E402
from ._profiler import ProfilerEvent as ProfilerEvent, profile as profile  # noqa: E402
from .carriers.tiled_evictable import ResidencyPlan as ResidencyPlan, ResidencyPolicy as ResidencyPolicy  # noqa: E402
from .carriers.tiled_evictable import TiledEvictable as TiledEvictable, TileSelection as TileSelection  # noqa: E402
from .carriers.tiled_evictable import TileSet as TileSet, TileState as TileState  # noqa: E402

# The public names, one list (`from strideweave import *`, docs/reference.md
# documents each; tests/docs/test_reference.py keeps the three in step).
__all__ = [
    # dtypes and layouts
    "DType", "CompoundDType", "Shape", "Stride", "Layout", "float32", "int32", "bool_",
    # carriers
    "Carrier", "CPU", "Generic", "FileBacked", "Evictable", "Metal",
    "TiledEvictable", "TileSelection", "TileSet", "TileState", "ResidencyPlan", "ResidencyPolicy",
    # tensors
    "Tensor", "tensor", "from_dlpack", "Subtensor", "TensorRepresentation", "zeros", "ones", "full", "empty", "arange",
    # autograd and operations
    "Operation", "AddOperation", "MulOperation", "ReluOperation", "ReduceSumOperation", "BroadcastToOperation",
    "SliceOperation",
    "add", "mul", "relu", "reduce_sum", "broadcast_to", "no_grad", "is_grad_enabled", "set_grad_enabled",
    # movement
    "move", "move_async", "AwaitResult", "AwaitMove", "AwaitProjection", "AwaitResidency",
    "MoveOperation", "ElementwiseMoveOperation", "CpuToFileBackedMoveOperation", "FileBackedToCpuMoveOperation",
    "CpuToMetalMoveOperation", "MetalToCpuMoveOperation", "MetalToMetalMoveOperation",
    "dispatch_move", "register_move_operation", "unregister_move_operation", "registered_move_operation",
    # carrier extension
    "CarrierDefinition", "StorageProvider", "TransferProvider", "TransferRoute", "TransferRequest",
    "PreparedTransfer", "Unsupported", "ProviderCompletion", "register_carrier_definition",
    # profiling
    "profile", "Profiler", "ProfilerEvent", "ProfilerAverage",
]
