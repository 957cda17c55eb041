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

__version__ = "0.1.0"
from ._profiler import Profiler, ProfilerAverage, ProfilerEvent, profile  # noqa: E402,F401
from .carriers.tiled_evictable import (  # noqa: E402,F401
    ResidencyPlan, ResidencyPolicy, TiledEvictable, TileSelection, TileSet, TileState)
