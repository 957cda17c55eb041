"""Where a cold page-cache projection's time goes: the read paths of 4
tiles (16 MiB) of the issue 13 file, in process CPU time, interleaved in
random order (medians of N samples).

    python benchmarks/tiled_read_paths.py [N]

Rows: np.take on a kept np.memmap (tiled_compare.py's baseline: its
page-table entries stay populated across samples, which is also why it
grows RSS by the pages it touches), np.take on a freshly mapped np.memmap,
os.preadv of the same spans into a reused and into a fresh buffer (what
the engine gather does, without the engine), and te.project(...).wait().
"""
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiled_compare as tc  # noqa: E402

cpu_ns = time.process_time_ns


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    samples = int(argv[0]) if argv else 120
    te, w, mm = tc.build()
    path = str(te.secondary.path)
    tile_bytes = tc.TILE * 4
    fd = os.open(path, os.O_RDONLY)
    reused = np.empty((tc.K, tc.TILE), np.float32)
    rng = np.random.default_rng(1)

    def pread_into(buf, idx):
        for j, e in enumerate(idx):
            os.preadv(fd, [buf[j]], int(e) * tile_bytes)

    def fresh_take(idx):
        m = np.memmap(path, dtype=np.float32, mode="r", shape=(tc.EXPERTS, tc.TILE))
        return np.take(m, idx, axis=0)

    cases = {
        "np.take, kept np.memmap": lambda idx: np.take(mm, idx, axis=0),
        "np.take, fresh np.memmap": fresh_take,
        "os.preadv into a reused buffer": lambda idx: pread_into(reused, idx),
        "os.preadv into a fresh np.empty": lambda idx: pread_into(np.empty((tc.K, tc.TILE), np.float32), idx),
        "te.project(w, sel).wait()": lambda idx: te.project(w, tc.selection(list(idx))).wait(),
    }
    times = {k: [] for k in cases}
    try:
        for _ in range(samples):
            order = list(cases)
            rng.shuffle(order)
            for name in order:
                idx = rng.choice(tc.EXPERTS, tc.K, replace=False)
                t0 = cpu_ns()
                r = cases[name](idx)
                times[name].append(cpu_ns() - t0)
                del r
    finally:
        os.close(fd)
    base = statistics.median(times["np.take, kept np.memmap"])
    for name, v in times.items():
        m = statistics.median(v)
        print(f"{name:36s} {m / 1e6:7.3f} ms CPU   {m / base:5.2f}x the kept-memmap take")


if __name__ == "__main__":
    main()
