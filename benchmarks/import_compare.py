"""DLPack import rows for compare.py: strideweave.from_dlpack against
np.from_dlpack on the same producer, side by side in one process.

    python benchmarks/compare.py --only import [--quick]
    python benchmarks/import_compare.py [--quick] [--cycles N]

Rows (32x32 float32 producers; interleaved batches, the side that goes
first alternating by round, medians of per-call times, each result dropped
at once so its deleter runs inside the timing):
  sw.from_dlpack(ndarray)    vs np.from_dlpack(ndarray)
  sw.from_dlpack(torch)      vs np.from_dlpack(torch)  (sw takes torch's C
                             exchange API, NumPy calls torch's __dlpack__)
  C exchange path            vs the capsule path: sw.from_dlpack(tensor) vs
                             sw.from_dlpack(tensor.__dlpack__(max_version=(1, 3)))
  sw.from_dlpack(jax)        vs np.from_dlpack(jax)
  round trip                 np.from_dlpack(sw.from_dlpack(a)) vs
                             np.from_dlpack(np.from_dlpack(a)); "zero-copy"
                             when the result's address is a's
  import/drop cycles         RSS and sys.getrefcount(a) before and after N
                             cycles of sw.from_dlpack(a) (N = 1e6 unless
                             --quick or --cycles)
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # compare.py
if os.environ.get("STRIDEWEAVE_BUILD"):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import strideweave as sw  # noqa: E402

ns = time.perf_counter_ns
SHAPE = (32, 32)


def interleaved(ours, theirs, number, samples):
    """compare.batch_pair (medians of per-call times of interleaved batches,
    which side goes first alternating by round) after warming both paths
    (caches, the layout cache, lazy imports)."""
    from compare import batch_pair  # benchmarks/compare.py

    for _ in range(500):
        ours()
        theirs()
    return batch_pair(ours, theirs, number, samples, alternate=True)


def rss_kib():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def rows(add, quick=False, cycles=None):
    """add(case, ours_ns, theirs_ns, target=None, ratio=None) per row."""
    number, samples = (500, 11) if quick else (2000, 31)
    a = np.zeros(SHAPE, dtype=np.float32)
    o, p = interleaved(lambda: sw.from_dlpack(a), lambda: np.from_dlpack(a), number, samples)
    add("sw.from_dlpack(ndarray)  vs np.from_dlpack(ndarray)", o, p, "<= 1.0")

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        x = torch.zeros(SHAPE)
        o, p = interleaved(lambda: sw.from_dlpack(x), lambda: np.from_dlpack(x), number, samples)
        add("sw.from_dlpack(torch)  vs np.from_dlpack(torch)", o, p, "<= 1.0")
        mv = (1, 3)
        o, p = interleaved(lambda: sw.from_dlpack(x), lambda: sw.from_dlpack(x.__dlpack__(max_version=mv)),
                           number, samples)
        add("sw.from_dlpack(torch): C exchange API  vs capsule", o, p, "< 1.0")

    try:
        import jax.numpy as jnp
    except ImportError:
        jnp = None
    if jnp is not None:
        j = jnp.zeros(SHAPE, dtype=jnp.float32)
        o, p = interleaved(lambda: sw.from_dlpack(j), lambda: np.from_dlpack(j), number, samples)
        add("sw.from_dlpack(jax)  vs np.from_dlpack(jax)", o, p, "<= 1.0")

    zero_copy = np.from_dlpack(sw.from_dlpack(a)).ctypes.data == a.ctypes.data
    o, p = interleaved(lambda: np.from_dlpack(sw.from_dlpack(a)), lambda: np.from_dlpack(np.from_dlpack(a)),
                       number, samples)
    add("NumPy -> StrideWeave -> NumPy  vs NumPy -> NumPy -> NumPy", o, p,
        "zero-copy: " + ("yes" if zero_copy else "NO"))

    n = cycles if cycles is not None else (100_000 if quick else 1_000_000)
    b = np.zeros(SHAPE, dtype=np.float32)
    for _ in range(1000):
        sw.from_dlpack(b)
    refs0, rss0 = sys.getrefcount(b), rss_kib()
    t0 = ns()
    for _ in range(n):
        sw.from_dlpack(b)
    per = (ns() - t0) / n
    refs1, rss1 = sys.getrefcount(b), rss_kib()
    add(f"{n:.0e} sw.from_dlpack(a) import/drop cycles", per, None,
        ratio=f"RSS {rss1 - rss0:+d} KiB", target=f"refcount(a) {refs0} -> {refs1}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer samples, 1e5 cycles")
    ap.add_argument("--cycles", type=int, default=None, help="import/drop cycles of the last row")
    args = ap.parse_args(argv)
    import compare  # the report format

    out = []

    def add(case, ours, theirs, target=None, ratio=None):
        r = ratio if ratio is not None else (f"{ours / theirs:.3f}" if theirs else "-")
        out.append((case, compare.fmt(ours), compare.fmt(theirs), r, target or ""))

    rows(add, args.quick, args.cycles)
    compare.report(out, [], 0, 0, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
