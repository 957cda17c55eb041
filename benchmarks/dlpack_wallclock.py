"""Interleaved wall-clock ratios of DLPack export and import, StrideWeave / NumPy.

The wall-clock counterpart of dlpack_instructions.py, focused on the two
issue 11 targets (``t.__dlpack__()`` no slower than ``ndarray.__dlpack__()``,
``np.from_dlpack(t)`` within 1.05x of ``np.from_dlpack(ndarray)``):

    STRIDEWEAVE_BUILD=build-dev python benchmarks/dlpack_wallclock.py [--samples 300] [--json]

Each sample times one batch of 1000 calls whose results are kept in a list
and dropped at once (inside the timed region), as benchmarks/sweep.py does;
"single" rows drop each result before the next call. The two libraries
alternate sample by sample (which goes first alternates too), so drift on a
shared machine hits both alike; the ratio is of the medians. About 10 s with
the default 300 samples.

To compare two builds, alternate whole runs, e.g.::

    for i in 1 2 3; do
      SW_SOURCE_ROOT=/path/to/old STRIDEWEAVE_BUILD=/path/to/old/build-dev python benchmarks/dlpack_wallclock.py
      STRIDEWEAVE_BUILD=build-dev python benchmarks/dlpack_wallclock.py
    done
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("SW_SOURCE_ROOT", os.path.dirname(HERE)))

import numpy as np  # noqa: E402

import strideweave as sw  # noqa: E402

BATCH = 1000


def _batch_bulk(f):
    r = range(BATCH)

    def run():
        t0 = time.perf_counter_ns()
        keep = [f() for _ in r]
        del keep
        return time.perf_counter_ns() - t0

    return run


def _batch_single(f):
    r = range(BATCH)

    def run():
        t0 = time.perf_counter_ns()
        for _ in r:
            f()
        return time.perf_counter_ns() - t0

    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = ap.parse_args()

    t = sw.Tensor(sw.CPU(1024), 0, sw.Layout(sw.Shape([32, 32]), sw.Stride([32, 1])))
    a = np.zeros((32, 32), dtype=np.float32)
    v = (1, 0)
    cases = {
        "__dlpack__()": (t.__dlpack__, a.__dlpack__),
        "__dlpack__(max_version=(1, 0))": (lambda: t.__dlpack__(max_version=v),
                                           lambda: a.__dlpack__(max_version=v)),
        "np.from_dlpack": (lambda: np.from_dlpack(t), lambda: np.from_dlpack(a)),
    }
    result = {}
    for mode, wrap in (("bulk", _batch_bulk), ("single", _batch_single)):
        for name, (ours, theirs) in cases.items():
            runs = (wrap(ours), wrap(theirs))
            times = ([], [])
            for s in range(args.samples + 20):  # 20 warm-up rounds
                order = (0, 1) if s % 2 else (1, 0)
                for k in order:
                    dt = runs[k]()
                    if s >= 20:
                        times[k].append(dt / BATCH)
            sw_ns, np_ns = statistics.median(times[0]), statistics.median(times[1])
            result[f"{name} [{mode}]"] = {"sw_ns": sw_ns, "np_ns": np_ns, "ratio": sw_ns / np_ns}
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{'case':40s}{'sw ns':>9s}{'np ns':>9s}{'sw/np':>8s}")
    for name, r in result.items():
        print(f"{name:40s}{r['sw_ns']:9.1f}{r['np_ns']:9.1f}{r['ratio']:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
