"""TiledEvictable costs that do not depend on the data: python
benchmarks/tiled_scale.py [--quick].

* bookkeeping: one request that transfers nothing, on the calling thread
  (validate, plan, register, commit, the handle): promote_async of a tile
  already on the primary, evict_async of one already on the secondary,
  flush of a clean tile, each followed by wait(); for scale, project() of
  one primary tile of one slot into a reused destination (the smallest
  transfer) and a one-slot CPU->CPU sw.move; the promote and project again
  on a carrier holding 65,536 promoted tile buffers (the cost must not
  grow with tiles a request does not touch). Interleaved round by round,
  medians in microseconds. Target: <= 20 us.
* residency: evict() then promote() of n tiles of one slot (CPU primary,
  FileBacked secondary) in one request each, n = 4096 ... 65,536,
  interleaved across n, medians; the per-tile column shows it is linear.
  Target: 65,536 tiles <= 1 s each way.
* construction: TiledEvictable over empty tiers with 2^20 ... 2^24 tiles of
  one slot, in a child process per size: median construction time and the
  peak RSS growth of the first one (VmHWM reset through
  /proc/self/clear_refs, Linux). Target: 2^24 tiles <= 0.2 s and <= 64 MiB.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

if __name__ == "__main__" and os.environ.get("STRIDEWEAVE_BUILD"):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import strideweave as sw  # noqa: E402
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection, TileSet  # noqa: E402

F32 = sw.DType.Float32
ns = time.perf_counter_ns


def median_us(xs):
    return statistics.median(xs) / 1e3


def bookkeeping(rounds):
    n = 1024
    te = TiledEvictable(sw.CPU(n), sw.FileBacked(dtype=F32), (n,), (1,))
    full = sw.Tensor(te, 0, te.canonical_layout())
    te.evict(TileSet([(1,)]))          # tile 1 on the secondary, clean
    te.flush().wait()                  # every primary tile clean
    on_primary, on_secondary = TileSet([(0,)]), TileSet([(1,)])
    one = TileSelection([[0]])
    dest = sw.CPU(1)
    src = sw.CPU(1)
    flat1 = sw.Layout.canonical(sw.Shape([1]))

    def promote():
        te.promote_async(on_primary).wait()

    def evict():
        te.evict_async(on_secondary).wait()

    def flush():
        te.flush(on_primary).wait()

    def project():
        te.project(full, one, dest).wait()

    def move():
        sw.move(sw.Tensor(src, 0, flat1), dest)

    # The same requests on a carrier holding 65,536 promoted tile buffers:
    # a request's cost must not grow with the tiles it does not touch.
    big_n = 1 << 16
    ramp = sw.CPU(big_n)
    big = TiledEvictable(sw.CPU(0), sw.move(sw.Tensor(ramp, 0, sw.Layout.canonical(sw.Shape([big_n]))),
                                           sw.FileBacked(dtype=F32)).carrier, (big_n,), (1,))
    big.promote(TileSet._trusted(tuple((k,) for k in range(big_n)), 1))
    big_full = sw.Tensor(big, 0, big.canonical_layout())

    def big_promote():
        big.promote_async(on_primary).wait()

    def big_project():
        big.project(big_full, one, dest).wait()

    cases = {"promote_async(primary tile) + wait": promote, "evict_async(secondary tile) + wait": evict,
             "flush(clean tile) + wait": flush, "project(1 slot, reused dest) + wait": project,
             "  the same promote, 65,536 tile buffers": big_promote,
             "  the same project, 65,536 tile buffers": big_project,
             "sw.move 1 slot CPU->CPU": move}
    times = {k: [] for k in cases}
    with sw.no_grad():
        for _ in range(rounds):
            for k, f in cases.items():
                if k.startswith("sw.move"):
                    src = sw.CPU(1)  # a move consumes its source
                t = ns()
                f()
                times[k].append(ns() - t)
    te.release()
    big.release()
    return {k: median_us(v) for k, v in times.items()}


def residency(sizes, repeat):
    times = {n: {"evict": [], "promote": []} for n in sizes}
    for _ in range(repeat):
        for n in sizes:
            te = TiledEvictable(sw.CPU(n), sw.FileBacked(dtype=F32), (n,), (1,))
            every = TileSet._trusted(tuple((k,) for k in range(n)), 1)
            t = ns()
            te.evict(every)
            times[n]["evict"].append(ns() - t)
            t = ns()
            te.promote(every)
            times[n]["promote"].append(ns() - t)
            te.release()
    return {n: {k: statistics.median(v) / 1e9 for k, v in d.items()} for n, d in times.items()}


CONSTRUCT = r"""
import json, statistics, sys, time
import strideweave as sw
from strideweave.carriers.tiled_evictable import TiledEvictable

def hwm():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) * 1024

n, repeat = int(sys.argv[1]), int(sys.argv[2])
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
base = hwm()
times = []
for k in range(repeat):
    p, s = sw.CPU(0), sw.CPU(0)
    t = time.perf_counter_ns()
    te = TiledEvictable(p, s, (n,), (1,))
    times.append(time.perf_counter_ns() - t)
    if k == 0:
        grew = hwm() - base
    te.release()
print(json.dumps({"s": statistics.median(times) / 1e9, "bytes": grew}))
"""


def construction(exponents, repeat):
    env = dict(os.environ)
    if env.get("STRIDEWEAVE_BUILD"):
        env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(__file__)))] +
                                            [p for p in [env.get("PYTHONPATH")] if p])
        env["STRIDEWEAVE_BUILD"] = os.path.abspath(env["STRIDEWEAVE_BUILD"])
    out = {}
    for e in exponents:
        r = subprocess.run([sys.executable, "-c", CONSTRUCT, str(2 ** e), str(repeat)], capture_output=True,
                           text=True, env=env, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(r.stderr)
        out[e] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rounds, repeat = (300, 2) if args.quick else (3000, 5)
    print(f"# python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print("\n## bookkeeping per request (calling thread, median us; target <= 20)")
    for k, v in bookkeeping(rounds).items():
        print(f"{k:40s} {v:8.2f}")
    print("\n## one request over n tiles of one slot (median s; target 65,536 tiles <= 1 s)")
    print(f"{'n':>8s} {'evict s':>9s} {'promote s':>10s} {'evict us/tile':>14s} {'promote us/tile':>16s}")
    for n, d in residency([4096, 16384, 65536], repeat).items():
        print(f"{n:8d} {d['evict']:9.4f} {d['promote']:10.4f} {d['evict'] / n * 1e6:14.3f} "
              f"{d['promote'] / n * 1e6:16.3f}")
    print("\n## construction over empty tiers (child per size; target 2^24 tiles <= 0.2 s, <= 64 MiB)")
    print(f"{'tiles':>8s} {'median us':>10s} {'peak RSS growth MiB':>20s}")
    for e, d in construction([20, 22, 24], repeat).items():
        print(f"{'2^' + str(e):>8s} {d['s'] * 1e6:10.1f} {d['bytes'] / 2 ** 20:20.2f}")


if __name__ == "__main__":
    main()
