"""A/B of FileBacked->CPU moves between two builds, processes alternating.

    python benchmarks/ab_file_release.py ROOT_A:BUILD_A ROOT_B:BUILD_B [--rounds 3] [--sizes 65536,262144]

ROOT is a source tree (its strideweave/ package), BUILD a meson build dir
(STRIDEWEAVE_BUILD). Each process moves `number` distinct FileBacked sources
(written just before, untimed) into fresh CPU carriers, dropping each result,
and times np.fromfile + os.remove of as many fresh files the same way (the
same work); it prints medians per size. Rounds alternate A and B so drift on
a shared machine hits both; compare the absolute `sw` times across builds.
"""
import argparse
import os
import subprocess
import sys

CHILD = r"""
import os, statistics, sys, tempfile, time
import numpy as np
import strideweave as sw
ns = time.perf_counter_ns
tmp = tempfile.mkdtemp(prefix="sw-ab-")
for nb in [int(x) for x in sys.argv[1].split(",")]:
    n = nb // 4
    number = max(1, min(256, (2 << 20) // nb))
    a = np.ones(n, np.float32)
    r = {"sw": [], "np_rm": []}
    for s in range(int(sys.argv[2]) + 1):
        fs = []
        for _ in range(number):
            c = sw.CPU(n, empty=True)
            t = sw.Tensor(c, 0, sw.Layout(sw.Shape(n), sw.Stride(1)))
            np.from_dlpack(t)[:] = 1.0
            fs.append(sw.move(t, sw.FileBacked(dtype=sw.DType.Float32)))
        t0 = ns()
        for k, f in enumerate(fs):
            fs[k] = None
            sw.move(f, sw.CPU(n, empty=True))
            del f
        if s:
            r["sw"].append((ns() - t0) / number)
        time.sleep(0.002)  # the background closes are not timed below
        ps = [os.path.join(tmp, f"r{i}") for i in range(number)]
        for p in ps:
            a.tofile(p)
        t0 = ns()
        for p in ps:
            np.fromfile(p, np.float32)
            os.remove(p)
        if s:
            r["np_rm"].append((ns() - t0) / number)
    m = {k: statistics.median(v) / 1e3 for k, v in r.items()}
    print(f"{nb:>10d} sw {m['sw']:8.1f} us  fromfile+remove {m['np_rm']:8.1f} us  ratio {m['sw'] / m['np_rm']:.3f}",
          flush=True)
os.rmdir(tmp)
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("builds", nargs=2, help="ROOT:BUILD")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--samples", type=int, default=11)
    ap.add_argument("--sizes", default="65536,262144,1048576,4194304")
    args = ap.parse_args()
    for rnd in range(args.rounds):
        for label, spec in zip("AB", args.builds):
            root, build = spec.split(":", 1)
            env = dict(os.environ, PYTHONPATH=os.path.abspath(root),
                       STRIDEWEAVE_BUILD=os.path.abspath(os.path.join(root, build)))
            out = subprocess.run([sys.executable, "-c", CHILD, args.sizes, str(args.samples)], env=env,
                                 cwd=os.path.abspath(root), capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                print(f"round {rnd + 1} {label} {line}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
