"""Per-call instruction counts of DLPack export and import: StrideWeave vs NumPy vs torch.

Wall-clock ratios on a small shared machine move by 5-15% between runs, more
than the differences issue 11 asks about (``__dlpack__`` no slower than
NumPy's, ``np.from_dlpack(t)`` within 1.05x). Instruction counts under
valgrind's callgrind do not depend on the machine's load, so this script
counts them:

    STRIDEWEAVE_BUILD=build-dev python benchmarks/dlpack_instructions.py [--no-torch] [--move-async]

It needs ``valgrind`` and a C compiler and takes about 1 minute without
torch (``--no-torch``) and several with it: torch's import under valgrind is
slow. ``--only NAME`` (repeatable) measures only the named cases.
``--import-jax`` counts ``sw.from_dlpack(j)`` against ``np.from_dlpack(j)`` on a
32x32 float32 JAX array (each result dropped before the next call, so JAX's
deleter is counted on both sides), with JAX's own ``j.__dlpack__`` called the
two ways the consumers call it, under several hash seeds: the interpreter's
method cache and dictionaries collide differently per seed, which moves
every count by a few hundred instructions.
``--move-async`` adds the calling thread's instructions for
``sw.move_async(src, CPU(n, empty=True))`` to return at 4 KiB and at 64 MiB,
which shows whether the return cost grows with the size, and (with torch) a
4 KiB ``clone()`` for scale. ``SW_SOURCE_ROOT=DIR``
makes the children import the package from another checkout (with
``STRIDEWEAVE_BUILD`` pointing at that checkout's build) to measure it
before and after a change.

Method: each case of each library runs in its own child process (with
``--import-jax``, one child per hash seed runs all the cases in turn) under
``valgrind --tool=callgrind --instr-atstart=no``. The child imports and
warms up without instrumentation, switches it on through a tiny C helper
(callgrind client requests, compiled into a temporary directory), then runs
the case N1 times, dumps the counters, runs it N2 times and dumps again,
three times over. Per call = (I(N2) - I(N1)) / (N2 - N1), the median of the
three: the constant parts (the helper call, starting the loop) cancel.

Two modes. "bulk": the results of 1000 calls are kept in a list and dropped
at once, as benchmarks/sweep.py does. "single": each result is dropped before
the next call. Both include the loop's own work (the list append, the range
iteration) and the result's destruction. The "baseline" row (the statement
``x``, no call) is that loop alone, the same for every library. The count
still moves by a few percent with the state of the allocators (NumPy's
dimension cache and glibc malloc behind it, in the np.from_dlpack rows), so
differences below about 2% mean nothing.

Counts are user-space instructions (callgrind ``Ir``) of the calling thread;
they say nothing about cache misses or atomic operations, so the
interleaved wall-clock rows of compare.py remain the final word.

Cases (a 32x32 float32 tensor ``sw.Tensor(sw.CPU(1024), 0,
Layout(Shape([32, 32]), Stride([32, 1])))``, ``np.zeros((32, 32),
np.float32)``, ``torch.zeros(32, 32)``): legacy ``x.__dlpack__()``;
versioned ``x.__dlpack__(max_version=(1, 0))``; ``x.__dlpack_device__()``;
``np.from_dlpack(x)`` (which calls ``x.__dlpack__`` with ``max_version``,
``dl_device`` and ``copy`` and, for a versioned capsule, the deleter when the
array dies).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# The checkout the children import strideweave from (with STRIDEWEAVE_BUILD).
SRC_ROOT = os.environ.get("SW_SOURCE_ROOT", ROOT)

N1, N2 = 1000, 3000
REPEATS = 3
BATCH = 1000

HELPER_C = r"""
#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_START_INSTRUMENTATION; CALLGRIND_ZERO_STATS; }
void cg_dump(void) { CALLGRIND_DUMP_STATS; }
"""

# name -> statement run once per call; `x` is the library's tensor.
CASES = {
    "__dlpack__()": "x.__dlpack__()",
    "__dlpack__(max_version=(1, 0))": "x.__dlpack__(max_version=V)",
    "__dlpack_device__()": "x.__dlpack_device__()",
    "np.from_dlpack(x)": "from_dlpack(x)",
}
BASELINE = ("baseline (loop only)", "x")
# --import-jax: name -> statement; `x` is a JAX array. from_dlpack passes only
# the arguments that are not None; NumPy passes dl_device and copy as None.
JAX_IMPORT_CASES = {
    "sw.from_dlpack(jax)": "sw.from_dlpack(x)",
    "np.from_dlpack(jax)": "np.from_dlpack(x)",
    "jax __dlpack__ as sw calls it": "x.__dlpack__(max_version=V13)",
    "jax __dlpack__ as NumPy calls it": "x.__dlpack__(dl_device=None, copy=None, max_version=V)",
}
JAX_SEEDS = ("0", "1", "2")
MODES = ("bulk", "single")
LIBS = ("strideweave", "numpy", "torch")


def _loop_source(stmt: str, mode: str) -> str:
    if mode == "bulk":
        return f"for _b in range(n // {BATCH}):\n    keep = [{stmt} for _ in r]\n    del keep\n"
    return f"for _ in range(n):\n    {stmt}\n"


def _make_tensor(lib: str):
    import numpy as np

    if lib == "strideweave":
        sys.path.insert(0, SRC_ROOT)
        import strideweave as sw

        return sw.Tensor(sw.CPU(1024), 0, sw.Layout(sw.Shape([32, 32]), sw.Stride([32, 1])))
    if lib == "numpy":
        return np.zeros((32, 32), dtype=np.float32)
    if lib == "jax":
        sys.path.insert(0, SRC_ROOT)
        import jax.numpy as jnp

        return jnp.zeros((32, 32), dtype=jnp.float32).block_until_ready()
    import torch

    return torch.zeros((32, 32))


def _child(lib: str, stmts: str, mode: str, helper: str) -> None:
    """Runs each statement of stmts (one per line) in turn, dumping the
    counters after each of its N1 and N2 loops, REPEATS times over."""
    import ctypes

    import numpy as np

    x = _make_tensor(lib)
    cg = ctypes.CDLL(helper)
    env = {"x": x, "V": (1, 0), "V13": (1, 3), "from_dlpack": np.from_dlpack, "np": np, "r": range(BATCH),
           "n": 2 * BATCH}
    if lib == "jax":
        import strideweave as sw

        env["sw"] = sw
    codes = [compile(_loop_source(stmt, mode), "<case>", "exec") for stmt in stmts.split("\n")]
    for code in codes:
        exec(code, env)  # warm-up: free lists, caches, the interpreter's specialisations
    cg.cg_start()
    for code in codes:
        for _ in range(REPEATS):
            for n in (N1, N2):
                env["n"] = n
                exec(code, env)
                cg.cg_dump()


def _totals(path: str) -> int:
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def _dumps(out: str, suffix: str = "") -> list[str]:
    paths = glob.glob(out + ".*" + suffix)
    return sorted(paths, key=lambda p: int(p[len(out) + 1:len(p) - len(suffix)]))


def _run(cmd: list[str], what: str, seed: str = "0") -> None:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode:
        raise RuntimeError(f"{what} failed:\n{r.stderr[-3000:]}")


def _measure_all(lib: str, stmts: list[str], mode: str, helper: str, tmp: str, tag: str,
                 seed: str = "0") -> list[float]:
    """Per-call counts of each statement, all measured in one child process."""
    out = os.path.join(tmp, f"cg.{tag}")
    _run(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}", sys.executable,
          os.path.abspath(__file__), "--child", lib, "\n".join(stmts), mode, helper], f"{lib} {stmts!r}", seed)
    totals = [_totals(p) for p in _dumps(out)]
    if len(totals) != 2 * REPEATS * len(stmts):
        raise RuntimeError(f"expected {2 * REPEATS * len(stmts)} dumps for {lib} {stmts!r}, got {len(totals)}")
    per = []
    for i in range(len(stmts)):
        t = totals[2 * REPEATS * i:2 * REPEATS * (i + 1)]
        per.append(statistics.median((t[2 * k + 1] - t[2 * k]) / (N2 - N1) for k in range(REPEATS)))
    return per


def _measure(lib: str, stmt: str, mode: str, helper: str, tmp: str, tag: str, seed: str = "0") -> float:
    return _measure_all(lib, [stmt], mode, helper, tmp, tag, seed)[0]


def _move_async_child(size: int, helper: str) -> None:
    """Calling-thread instructions of sw.move_async(src, CPU(n, empty=True)) returning."""
    import ctypes

    sys.path.insert(0, SRC_ROOT)
    import strideweave as sw

    n = size // 4
    cg = ctypes.CDLL(helper)
    layout = sw.Layout(sw.Shape([n]), sw.Stride([1]))

    def batch(k):
        return [sw.Tensor(sw.CPU(n), 0, layout) for _ in range(k)], [sw.CPU(n, empty=True) for _ in range(k)]

    for _ in range(2):  # warm-up: the worker pool grows to what a batch of 6 needs
        srcs, dsts = batch(6)
        for h in [sw.move_async(t, d) for t, d in zip(srcs, dsts)]:
            h.wait()
        del srcs, dsts
    cg.cg_start()
    for k in (2, 6) * REPEATS:
        srcs, dsts = batch(k)
        cg.cg_dump()  # the preparation: its own dump, ignored
        handles = [sw.move_async(t, d) for t, d in zip(srcs, dsts)]
        cg.cg_dump()
        for h in handles:
            h.wait()
        del handles, srcs, dsts


def _measure_move_async(size: int, helper: str, tmp: str) -> float:
    out = os.path.join(tmp, f"cg.move{size}")
    _run(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
          f"--callgrind-out-file={out}", sys.executable, os.path.abspath(__file__), "--move-child", str(size),
          helper], f"move_async {size}")
    # --separate-threads: <out>.<dump>-<thread>; thread 01 is the caller.
    calls = [_totals(p) for p in _dumps(out, "-01")]
    if len(calls) != 4 * REPEATS:
        raise RuntimeError(f"expected {4 * REPEATS} dumps, got {len(calls)}")
    # Per repeat: prep(2), calls(2), prep(6), calls(6).
    return statistics.median((calls[4 * k + 3] - calls[4 * k + 1]) / 4 for k in range(REPEATS))


def _report_import_jax(helper: str, tmp: str) -> None:
    print(f"instructions per call on a JAX array (callgrind Ir; median over {REPEATS} of "
          f"(I({N2}) - I({N1})) / {N2 - N1}), one column per PYTHONHASHSEED")
    print(f"{'case':36s}" + "".join(f"{'seed ' + s:>11s}" for s in JAX_SEEDS))
    # One child per seed (JAX's import under valgrind is the slow part).
    cases = [("baseline (loop only)", "x")] + list(JAX_IMPORT_CASES.items())
    by_seed = [_measure_all("jax", [stmt for _, stmt in cases], "single", helper, tmp, f"jax{seed}", seed)
               for seed in JAX_SEEDS]
    per = {}
    for i, (name, _) in enumerate(cases):
        per[name] = [counts[i] for counts in by_seed]
        print(f"{name:36s}" + "".join(f"{v:11.1f}" for v in per[name]), flush=True)
    sw_, np_ = per["sw.from_dlpack(jax)"], per["np.from_dlpack(jax)"]
    print(f"{'sw / np':36s}" + "".join(f"{a / b:11.4f}" for a, b in zip(sw_, np_)))
    # What each consumer adds to the producer's own call (its capsule's
    # destructor and deleter included on both sides).
    own_sw = [a - b for a, b in zip(sw_, per["jax __dlpack__ as sw calls it"])]
    own_np = [a - b for a, b in zip(np_, per["jax __dlpack__ as NumPy calls it"])]
    print(f"{'sw beyond its __dlpack__ call':36s}" + "".join(f"{v:11.1f}" for v in own_sw))
    print(f"{'np beyond its __dlpack__ call':36s}" + "".join(f"{v:11.1f}" for v in own_np))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-torch", action="store_true", help="skip the torch column (slow under valgrind)")
    ap.add_argument("--move-async", action="store_true", help="add move_async return counts at 4 KiB and 64 MiB")
    ap.add_argument("--only", choices=list(CASES), action="append", help="measure only these cases")
    ap.add_argument("--import-jax", action="store_true",
                    help="only sw.from_dlpack vs np.from_dlpack of a JAX array, per hash seed")
    args = ap.parse_args()
    for tool in ("valgrind", "cc"):
        if not shutil.which(tool):
            print(f"{tool} not found", file=sys.stderr)
            return 2
    tmp = tempfile.mkdtemp(prefix="sw_dlpack_ir_")
    try:
        helper = os.path.join(tmp, "cg_helper.so")
        src = os.path.join(tmp, "cg_helper.c")
        with open(src, "w") as f:
            f.write(HELPER_C)
        subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", helper, src], check=True)
        if args.import_jax:
            _report_import_jax(helper, tmp)
            return 0
        libs = [lib for lib in LIBS if not (lib == "torch" and args.no_torch)]
        cases = [(k, v) for k, v in CASES.items() if not args.only or k in args.only]
        print(f"instructions per call (callgrind Ir; median over {REPEATS} of (I({N2}) - I({N1})) / {N2 - N1})")
        print(f"{'case':40s}" + "".join(f"{lib:>13s}" for lib in libs) + f"{'sw/numpy':>10s}")
        tag = 0
        for mode in MODES:
            for name, stmt in [BASELINE] + cases:
                per = {}
                for lib in libs:
                    tag += 1
                    per[lib] = _measure(lib, stmt, mode, helper, tmp, str(tag))
                ratio = per["strideweave"] / per["numpy"] if "numpy" in per else float("nan")
                print(f"{name + ' [' + mode + ']':40s}" + "".join(f"{per[lib]:13.1f}" for lib in libs)
                      + f"{ratio:10.3f}", flush=True)
        if args.move_async:
            for size, label in ((4096, "4 KiB"), (64 << 20, "64 MiB")):
                v = _measure_move_async(size, helper, tmp)
                print(f"{'move_async return ' + label:40s}{v:13.1f}  (calling thread)", flush=True)
            if "torch" in libs:  # issue 11's yardstick for the return: a 4 KiB torch clone
                v = _measure("torch", "x.clone()", "single", helper, tmp, "clone")
                print(f"{'torch clone 4 KiB (with the loop)':40s}{v:13.1f}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    elif len(sys.argv) >= 2 and sys.argv[1] == "--move-child":
        _move_async_child(int(sys.argv[2]), sys.argv[3])
    else:
        sys.exit(main())
