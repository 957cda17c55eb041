"""Interleaved A/B of the issue 13 cold projection, for a shared machine:
``te.project(w, 4 tiles).wait()`` against ``np.take`` on a persistent
``np.memmap`` of the same file (page cache), N samples, the two sides
reading disjoint tiles and taking turns going first (see tiled_compare.py's
cold_rows), medians of wall time and of process CPU time (every thread;
the CPU time survives a loaded machine, the wall time mostly measures its
scheduler there).

--fresh-map: NumPy maps the file afresh inside each timed sample
(``np.memmap`` then ``np.take``), the like-for-like "cold" comparison; by
default one ``np.memmap`` serves every sample, so its page-table entries
stay populated and np.take is a fault-free memcpy.

    STRIDEWEAVE_BUILD=build-dev python benchmarks/tiled_ab.py [N] [--fresh-map]
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("STRIDEWEAVE_BUILD"):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import tiled_compare as tc  # noqa: E402


def main(n=150, fresh_map=False):
    te, w, mm = tc.build()
    path = str(te.secondary.path)
    rng = np.random.default_rng(0)
    cpu, wall = time.process_time_ns, time.perf_counter_ns
    ours_w, ours_c, np_w, np_c = [], [], [], []
    try:
        for i in range(n):
            idx, idx_np = tc.two_picks(rng)
            sel = tc.selection(idx)

            def ours():
                c0, w0 = cpu(), wall()
                r = te.project(w, sel).wait()
                ours_c.append(cpu() - c0)
                ours_w.append(wall() - w0)
                return r

            def theirs():
                c0, w0 = cpu(), wall()
                if fresh_map:
                    m = np.memmap(path, dtype=np.float32, mode="r", shape=(tc.EXPERTS, tc.TILE))
                    a = np.take(m, idx_np, axis=0)
                    del m
                else:
                    a = np.take(mm, idx_np, axis=0)
                np_c.append(cpu() - c0)
                np_w.append(wall() - w0)
                return a
            if i % 2:
                a = theirs()
                r = ours()
            else:
                r = ours()
                a = theirs()
            del r, a
    finally:
        del mm
        te.release()
    m = lambda v: statistics.median(v) / 1e6  # noqa: E731
    p90 = lambda v: sorted(v)[int(0.9 * (len(v) - 1))] / 1e6  # noqa: E731
    print(f"wall: project {m(ours_w):.3f} ms  np.take {m(np_w):.3f} ms  ratio {m(ours_w) / m(np_w):.3f}  "
          f"(p90 {p90(ours_w):.3f} vs {p90(np_w):.3f})")
    print(f"CPU:  project {m(ours_c):.3f} ms  np.take {m(np_c):.3f} ms  ratio {m(ours_c) / m(np_c):.3f}")
    print(f"N={n}, numpy {'fresh np.memmap per sample' if fresh_map else 'one persistent np.memmap'}, "
          f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--fresh-map"]
    main(int(args[0]) if args else 150, fresh_map="--fresh-map" in sys.argv[1:])
