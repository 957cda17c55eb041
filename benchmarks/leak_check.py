"""Leak check for DLPack export: many export / consume / drop cycles.

    STRIDEWEAVE_BUILD=build-x PYTHONPATH=. python benchmarks/leak_check.py [cycles]

For each path it runs a warm-up, then `cycles` (default one million) cycles,
and reports the resident set size growth and the exporting tensor's refcount
before and after. A leaked managed tensor, a leaked capsule or a missed
Py_DECREF shows up as RSS growth proportional to the cycle count or as a
refcount above its baseline; a double free as a refcount below it (or a
crash).
"""
import gc
import sys
import time

import numpy as np

import strideweave as sw


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def main():
    cycles = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    carrier = sw.CPU(1024)
    t = sw.Tensor(carrier, 0, sw.Layout(sw.Shape([32, [4, 8]]), sw.Stride([32, [8, 1]])))
    frozen = sw.Tensor(carrier.new_like([1.0] * 64, mutable=False), 0, sw.Layout.canonical(sw.Shape(64)))

    def numpy_versioned():
        np.from_dlpack(t)  # consumed: NumPy renames the capsule, calls the deleter on drop

    def numpy_readonly():
        np.from_dlpack(frozen)

    def legacy_unconsumed():
        t.__dlpack__()  # capsule destructor calls the deleter

    def versioned_unconsumed():
        t.__dlpack__(max_version=(1, 0))

    paths = [("np.from_dlpack(t) [consumed, versioned]", numpy_versioned, t),
             ("np.from_dlpack(read-only t)", numpy_readonly, frozen),
             ("t.__dlpack__() [unconsumed, legacy]", legacy_unconsumed, t),
             ("t.__dlpack__(max_version=(1,0)) [unconsumed]", versioned_unconsumed, t)]
    print(f"{cycles} cycles per path, Python {sys.version.split()[0]}, NumPy {np.__version__}")
    print(f"{'path':48s} {'RSS before':>11s} {'RSS after':>10s} {'growth':>8s} {'refcount':>10s} {'s':>6s}")
    ok = True
    for name, fn, owner in paths:
        for _ in range(20_000):  # warm allocator free lists
            fn()
        gc.collect()
        refs0, rss0 = sys.getrefcount(owner), rss_kib()
        start = time.perf_counter()
        for _ in range(cycles):
            fn()
        elapsed = time.perf_counter() - start
        gc.collect()
        refs1, rss1 = sys.getrefcount(owner), rss_kib()
        print(f"{name:48s} {rss0:8d}KiB {rss1:7d}KiB {rss1 - rss0:5d}KiB {refs0:4d}->{refs1:<4d} {elapsed:6.2f}")
        # One leaked 128-byte block per cycle would be >100 MiB at 1e6 cycles.
        ok = ok and refs1 == refs0 and (rss1 - rss0) < 1024
    print("OK" if ok else "LEAK SUSPECTED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
