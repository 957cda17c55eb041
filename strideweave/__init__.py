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
from ._core import *  # noqa: E402,F401,F403

try:
    # Generated from meson.build's project(version:), installed beside _core
    # (and found in the build directory in the STRIDEWEAVE_BUILD dev mode).
    from ._version import version as __version__  # noqa: E402
except ImportError:  # a source tree without a build: ask the installed metadata
    from importlib import metadata as _metadata

    try:
        __version__ = _metadata.version("strideweave")
    except _metadata.PackageNotFoundError:
        __version__ = "0+unknown"
    del _metadata

from ._profiler import Profiler, ProfilerAverage, ProfilerEvent, profile  # noqa: E402,F401
