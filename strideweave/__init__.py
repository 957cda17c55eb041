"""StrideWeave: hierarchical-layout tensors over pluggable storage carriers.

Every public name lives in the C extension ``strideweave._core``; this package
re-exports them, plus the few shims that are clearer in Python (profiler
records and the ``profile`` context manager).
"""
import os as _os

# Development hook: run the tests against a meson build directory without
# installing (STRIDEWEAVE_BUILD=build-dev pytest). Unset in normal use.
_build = _os.environ.get("STRIDEWEAVE_BUILD")
if _build:
    __path__.insert(0, _os.path.join(_os.path.abspath(_build), "strideweave"))

from . import _core  # noqa: E402
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
