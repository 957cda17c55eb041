"""Headline comparisons against NumPy, side by side in one process.

    python benchmarks/compare.py [--repeat N] [--mib M] [--quick] [--only data]
    STRIDEWEAVE_BUILD=build-x python benchmarks/compare.py   # a meson build dir

Each case times StrideWeave and its NumPy counterpart alternately (so drift
hits both alike) with time.perf_counter_ns and prints the medians and the
ratio StrideWeave / NumPy (lower is better; "target" is the issue's bound).

Cases
  export      t.__dlpack__() and t.__dlpack__(max_version=(1, 0)) vs
              ndarray.__dlpack__ on a 32x32 float32 array (as bench_dlpack.py);
              per-call time of a batch of calls, capsule dropped each call
  import      np.from_dlpack(t) vs np.from_dlpack(ndarray)
  from        (also --only import; benchmarks/import_compare.py)
              strideweave.from_dlpack of an ndarray, a torch tensor (C
              exchange API) and a JAX array vs np.from_dlpack of the same,
              the exchange path vs the capsule path, the NumPy round trip,
              and RSS/refcounts after 1e6 import/drop cycles (1e5 --quick)
  move        CPU->CPU of a 256 MiB span, contiguous and strided (every other
              slot), vs np.copyto on the same views. Both destinations are
              already faulted in; each move gets a fresh filled source
              (built outside the timing: a move consumes its source), and
              releasing that source is part of the move; the next row
              shows what freeing 256 MiB costs each library
  file        CPU->FileBacked, FileBacked->CPU and the round trip vs
              ndarray.tofile, np.fromfile and both (fresh, unfaulted
              destination on both sides, as np.fromfile allocates)
  async       move_async return latency at 4 KiB and 256 MiB (the copy is not
              waited for), as a fraction of the blocking move
  data        strideweave.tensor(a) vs torch.tensor(a) (np.array(a) when
              PyTorch is missing) for a float32 and a float64 array of
              1024 elements ("4 KiB") and of 1e6 elements, and t.tolist()
              vs ndarray.tolist() (1e6 float32); the "baseline" column is
              the other library's time
  numpy       the NumPy-style surface: strideweave.zeros(n) and
              strideweave.arange(n) vs np.zeros(n, np.float32) and
              np.arange(n, dtype=np.int32) at 4 KiB and 64 MiB (allocation,
              fill and freeing of each result); a slice view t[1:3, :] and a
              row t[1, :] of a 64x64 Float32 tensor (grad mode on, so the
              view keeps what its SliceOperation node needs; and under
              no_grad) vs the same NumPy basic slice, and the row vs NumPy's
              a[1]
  progress    iterations/s a pure-Python loop in a second thread completes
              while the main thread waits on a 256 MiB async move, vs idle;
              np.copyto of the same size on the main thread for reference
  sweep       (--sweep, or --only-sweep; benchmarks/sweep.py) sizes 4 KiB,
              64 KiB, 256 KiB, 4 MiB, 64 MiB, 256 MiB (and 1 GiB with --gib):
              blocking move CPU->CPU vs np.copyto into a fresh np.empty and
              torch clone(); move_async return time vs a 4 KiB torch clone
              (hot, and timed right after the same preparation, which evicts
              the caches the call runs from);
              CPU->FileBacked vs ndarray.tofile and FileBacked->CPU vs
              np.fromfile three ways (one hot file reread; `number` distinct
              fresh files, both sides dropping each result; the same plus
              os.remove, the work a move releasing its source does); then
              the DLPack rows with torch as a third column
              and tvm_ffi.from_dlpack(t) (the C exchange API) vs
              np.from_dlpack(t) and vs tvm_ffi.from_dlpack on a torch tensor
  tensorstore (--tensorstore, or --only-tensorstore) CPU->TensorStoreCarrier
              and back at --mib on zarr v3 local files vs TensorStore's own
              store.write(ndarray) / store.read() on the same spec (fresh
              array per sample, same chunking), the round trip vs FileBacked,
              and the same at --s3-mib on a moto S3 server on 127.0.0.1
  tiled       (--only-tiled) TiledEvictable, 64 tiles of 1024x1024 Float32 on
              FileBacked: a cold 4-tile projection vs np.take on np.memmap
              (with its copy-path / first-touch decomposition, and into a
              reused destination), promote_async prefetch one step ahead vs
              on demand, peak RSS of a projection (see tiled_compare.py)
"""
import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # sweep.py, tensorstore_compare.py
if os.environ.get("STRIDEWEAVE_BUILD"):
    # Development build: the package sources live at the repository root.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import strideweave as sw  # noqa: E402

F32 = sw.DType.Float32
ns = time.perf_counter_ns


def fmt(t_ns):
    if t_ns is None:
        return "-"
    if t_ns < 1e3:
        return f"{t_ns:.0f} ns"
    if t_ns < 1e6:
        return f"{t_ns / 1e3:.2f} us"
    if t_ns < 1e9:
        return f"{t_ns / 1e6:.2f} ms"
    return f"{t_ns / 1e9:.3f} s"


def cpu_filled(n, lay=None):
    lay = lay or sw.Layout(sw.Shape(n), sw.Stride(1))
    c = sw.CPU(n, empty=True)
    flat = sw.Tensor(c, 0, sw.Layout(sw.Shape(n), sw.Stride(1)))
    np.from_dlpack(flat)[:] = np.arange(n, dtype=np.float32)  # faults the pages in
    return sw.Tensor(c, 0, lay)


def cpu_faulted(n):
    """A CPU carrier whose pages are resident (CPU(n) maps large storage
    lazily, so its first touch would otherwise be timed)."""
    c = sw.CPU(n, empty=True)
    np.from_dlpack(sw.Tensor(c, 0, sw.Layout(sw.Shape(n), sw.Stride(1))))[:] = 0
    return c


def batch_pair(ours, theirs, number, repeat, alternate=False):
    """Medians of per-call times over `repeat` interleaved batches. With
    alternate, every other round runs theirs first: the batch that runs
    first in a round pays a few percent more (measured on the JAX import
    rows), so fixed order favours the second."""
    so, st = [], []
    for r in range(repeat):
        first, second = (theirs, ours) if alternate and r % 2 else (ours, theirs)
        t0 = ns()
        for _ in range(number):
            first()
        t1 = ns()
        for _ in range(number):
            second()
        t2 = ns()
        a, b = (t1 - t0) / number, (t2 - t1) / number
        so.append(b if first is theirs else a)
        st.append(a if first is theirs else b)
    return statistics.median(so), statistics.median(st)


def single_pair(prepare_ours, ours, prepare_theirs, theirs, repeat):
    """Medians over `repeat` interleaved single calls, each after its own
    untimed preparation (the prepared state is passed to the call)."""
    so, st = [], []
    for _ in range(repeat):
        a = prepare_ours()
        t0 = ns()
        ours(a)
        so.append(ns() - t0)
        del a
        b = prepare_theirs()
        t0 = ns()
        theirs(b)
        st.append(ns() - t0)
        del b
    return statistics.median(so), statistics.median(st)


def live_progress(run, window_ns=None):
    """Iterations per second of a pure-Python counting loop in a second
    thread while `run()` executes on this thread (None: sleep window_ns).
    The spinner publishes its count every 1024 steps, so only iterations
    inside the measured window are counted."""
    cell = [0]
    stop = threading.Event()
    ready = threading.Event()

    def spin():
        n = 0
        ready.set()
        while not stop.is_set():
            n += 1
            if not n & 1023:
                cell[0] = n

    th = threading.Thread(target=spin)
    th.start()
    ready.wait()
    time.sleep(0.05)
    c0, t0 = cell[0], ns()
    if run is None:
        time.sleep(window_ns / 1e9)
    else:
        run()
    c1, t1 = cell[0], ns()
    stop.set()
    th.join()
    return (c1 - c0) / ((t1 - t0) / 1e9), t1 - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9, help="samples per large case (median taken)")
    ap.add_argument("--mib", type=int, default=256, help="size of the large cases in MiB")
    ap.add_argument("--quick", action="store_true", help="3 samples, fewer export calls")
    ap.add_argument("--sweep", action="store_true", help="add the size sweep and DLPack exchange rows")
    ap.add_argument("--only-sweep", action="store_true", help="run only the size sweep and exchange rows")
    ap.add_argument("--gib", action="store_true", help="add 1 GiB to the sweep (needs ~5 GiB of RAM)")
    ap.add_argument("--tensorstore", action="store_true", help="add the TensorStore carrier rows")
    ap.add_argument("--only-tensorstore", action="store_true", help="run only the TensorStore carrier rows")
    ap.add_argument("--s3-mib", type=int, default=64, help="size of the loopback S3 TensorStore case in MiB (0: skip)")
    ap.add_argument("--only-tiled", action="store_true", help="run only the TiledEvictable rows (tiled_compare.py)")
    ap.add_argument("--only", choices=["data", "import", "numpy"],
                    help="run only this case group (seconds instead of a minute)")
    args = ap.parse_args(argv)
    rep = 3 if args.quick else args.repeat
    small_number, small_repeat = (2000, 5) if args.quick else (20000, 15)
    n = args.mib * 1024 * 1024 // 4
    small_n = 1024  # 4 KiB
    label = f"{args.mib} MiB"
    rows = []  # (case, ours_ns, numpy_ns or None, ratio text, target text)

    def add(case, ours, theirs, target=None, ratio=None):
        r = ratio if ratio is not None else (f"{ours / theirs:.3f}" if theirs else "-")
        rows.append((case, fmt(ours), fmt(theirs), r, target or ""))

    progress = []
    if args.sweep or args.only_sweep:
        import sweep  # benchmarks/sweep.py

        swept = []

        def add_swept(case, ours, numpy_ns, torch_ns):
            swept.append((case, ours, numpy_ns, torch_ns))

        sweep.sweep_rows(add_swept, args.quick, args.gib)
        sweep.exchange_rows(add_swept, args.quick)
        report_sweep(swept)
        if args.only_sweep:
            return 0
    if args.only_tiled:
        import tiled_compare  # benchmarks/tiled_compare.py

        tiled_compare.rows(add, rep)
        report(rows, progress, rep, small_number, small_repeat)
        return 0
    if args.tensorstore or args.only_tensorstore:
        import tensorstore_compare  # benchmarks/tensorstore_compare.py

        # --only-tensorstore --mib 0 runs only the S3 rows.
        tensorstore_compare.rows(add, rep, args.mib, args.s3_mib)
    if args.only_tensorstore:
        report(rows, progress, rep, small_number, small_repeat)
        return 0

    # ---------------------------------------------------------- export/import
    rows_, cols = 32, 32
    t = sw.Tensor(sw.CPU(rows_ * cols), 0, sw.Layout(sw.Shape([rows_, cols]), sw.Stride([cols, 1])))
    a = np.zeros((rows_, cols), dtype=np.float32)
    mv = (1, 0)
    for _ in range(2000):  # warm both paths
        t.__dlpack__(), a.__dlpack__(), np.from_dlpack(t), np.from_dlpack(a)
    o, p = batch_pair(lambda: t.__dlpack__(), lambda: a.__dlpack__(), small_number, small_repeat)
    add("t.__dlpack__()  vs ndarray.__dlpack__()", o, p, "<= 1.0")
    o, p = batch_pair(lambda: t.__dlpack__(max_version=mv), lambda: a.__dlpack__(max_version=mv),
                      small_number, small_repeat)
    add("t.__dlpack__(max_version=(1,0))  vs ndarray", o, p, "<= 1.0")
    o, p = batch_pair(lambda: np.from_dlpack(t), lambda: np.from_dlpack(a), small_number, small_repeat)
    add("np.from_dlpack(t)  vs np.from_dlpack(ndarray)", o, p, "<= 1.1")

    # ---------------------------------------------------------- import (from_dlpack)
    if args.only in (None, "import"):
        import import_compare  # benchmarks/import_compare.py

        import_compare.rows(add, args.quick)
    if args.only == "import":
        report(rows, [], rep, small_number, small_repeat)
        return 0

    # ---------------------------------------------------------- data in/out
    if args.only != "numpy":
        data_rows(add, rep)
    if args.only == "data":
        report(rows, [], rep, small_number, small_repeat)
        return 0

    # ---------------------------------------------------------- the NumPy-style surface
    numpy_rows(add, rep, small_number, small_repeat)
    if args.only == "numpy":
        report(rows, [], rep, small_number, small_repeat)
        return 0

    # ---------------------------------------------------------- CPU -> CPU
    contiguous = sw.Layout(sw.Shape(n), sw.Stride(1))
    strided = sw.Layout(sw.Shape(n // 2), sw.Stride(2))
    for name, lay, step in (("contiguous", contiguous, 1), ("strided", strided, 2)):
        src = np.arange(n, dtype=np.float32)
        dst = np.zeros(n, dtype=np.float32)
        sv, dv = src[: lay.cosize : step], dst[: lay.cosize : step]

        def prep_ours(lay=lay):
            return cpu_filled(lay.cosize, lay), cpu_faulted(lay.cosize)

        o, p = single_pair(prep_ours, lambda td: sw.move(td[0], td[1]),
                           lambda: None, lambda _: np.copyto(dv, sv), rep)
        add(f"move CPU->CPU {name} {label}  vs np.copyto", o, p)
        del src, dst, sv, dv

    # A move releases its source; freeing 256 MiB is part of its time.
    o, p = single_pair(lambda: cpu_faulted(n), lambda c: c.release(),
                       lambda: [np.ones(n, dtype=np.float32)], lambda box: box.clear(), rep)
    add(f"CPU({label}).release()  vs freeing an ndarray", o, p)

    # ---------------------------------------------------------- file round trip
    fd, path = tempfile.mkstemp(prefix="sw-compare-", suffix=".bin")
    os.close(fd)
    try:
        src = np.arange(n, dtype=np.float32)
        w_o, w_p, r_o, r_p, rt_o, rt_p = [], [], [], [], [], []
        for _ in range(rep):
            tt = cpu_filled(n)
            t0 = ns()
            f = sw.move(tt, sw.FileBacked(dtype=F32))
            t1 = ns()
            back = sw.move(f, sw.CPU(n, empty=True))
            t2 = ns()
            w_o.append(t1 - t0)
            r_o.append(t2 - t1)
            rt_o.append(t2 - t0)
            assert back[n - 1] == float(np.float32(n - 1))
            del tt, f, back
            t0 = ns()
            src.tofile(path)
            t1 = ns()
            arr = np.fromfile(path, dtype=np.float32)
            t2 = ns()
            w_p.append(t1 - t0)
            r_p.append(t2 - t1)
            rt_p.append(t2 - t0)
            del arr
        med = statistics.median
        add(f"move CPU->FileBacked {label}  vs ndarray.tofile", med(w_o), med(w_p))
        add(f"move FileBacked->CPU {label}  vs np.fromfile", med(r_o), med(r_p))
        add(f"CPU->FileBacked->CPU {label}  vs tofile+fromfile", med(rt_o), med(rt_p))
        del src
    finally:
        os.unlink(path)

    # ---------------------------------------------------------- move_async latency
    for size_name, m in (("4 KiB", small_n), (label, n)):
        ret, full = [], []
        samples = max(rep, 25) if m == small_n else rep
        for _ in range(samples):
            tt, d = cpu_filled(m), cpu_faulted(m)
            t0 = ns()
            h = sw.move_async(tt, d)  # (the previous handle was deleted: no free in the window)
            t1 = ns()
            h.wait(timeout=120)
            t2 = ns()
            ret.append(t1 - t0)
            full.append(t2 - t0)
            del h, tt, d
        r, fl = statistics.median(ret), statistics.median(full)
        rows.append((f"move_async return latency CPU->CPU {size_name}", fmt(r), "-",
                     f"{r / fl:.3f} of move", f"move: {fmt(fl)}"))
    for size_name, m in (("4 KiB", small_n), (label, n)):
        ret = []
        samples = max(rep, 25) if m == small_n else rep
        for _ in range(samples):
            tt = cpu_filled(m)
            d = sw.FileBacked(dtype=F32)
            t0 = ns()
            h = sw.move_async(tt, d)
            t1 = ns()
            h.wait(timeout=120)
            ret.append(t1 - t0)
            del h, tt, d
        rows.append((f"move_async return latency CPU->FileBacked {size_name}", fmt(statistics.median(ret)),
                     "-", "-", ""))

    # ---------------------------------------------------------- thread progress
    for kind in ("CPU->CPU", "CPU->FileBacked"):
        idle_r, busy_r = [], []
        for _ in range(rep):
            tt = cpu_filled(n)
            d = cpu_faulted(n) if kind == "CPU->CPU" else sw.FileBacked(dtype=F32)
            keep = []  # the result is freed after the window, not inside it
            busy, window = live_progress(lambda: keep.append(sw.move_async(tt, d).wait(timeout=120)))
            idle, _ = live_progress(None, window)
            busy_r.append(busy)
            idle_r.append(idle)
            del tt, d, keep
        b, i = statistics.median(busy_r), statistics.median(idle_r)
        progress.append((f"Python-thread progress during move_async {kind} {label}", b, i))
    src = np.arange(n, dtype=np.float32)
    dst = np.zeros(n, dtype=np.float32)
    idle_r, busy_r = [], []
    for _ in range(rep):
        busy, window = live_progress(lambda: np.copyto(dst, src))
        idle, _ = live_progress(None, window)
        busy_r.append(busy)
        idle_r.append(idle)
    progress.append((f"Python-thread progress during np.copyto {label} (ref)",
                     statistics.median(busy_r), statistics.median(idle_r)))
    del src, dst

    report(rows, progress, rep, small_number, small_repeat)
    return 0


def data_rows(add, rep):
    """strideweave.tensor and Tensor.tolist against their usual baselines."""
    try:
        import torch
    except ImportError:
        torch = None
    count = 1_000_000
    # (label, elements, calls per batch, batches): 4 KiB of float32 is a
    # sub-10-microsecond call, timed in many short batches.
    for label, n, number, repeat in (("4 KiB", 1024, 200, max(rep, 5) * 3), ("1e6", count, 5, max(rep, 5))):
        for np_dtype in (np.float32, np.float64):
            a = np.random.default_rng(0).random(n).astype(np_dtype)
            name = np.dtype(np_dtype).name
            if torch is not None:
                o, p = batch_pair(lambda: sw.tensor(a), lambda: torch.tensor(a), number, repeat)
                add(f"strideweave.tensor(a)  vs torch.tensor(a) {label} {name}", o, p, "<= 1.0")
            else:
                o, p = batch_pair(lambda: sw.tensor(a), lambda: np.array(a), number, repeat)
                add(f"strideweave.tensor(a)  vs np.array(a) {label} {name} (no torch)", o, p)
    a = np.random.default_rng(0).random(count).astype(np.float32)
    t = sw.tensor(a)
    o, p = batch_pair(lambda: t.tolist(), lambda: a.tolist(), 1, repeat)
    add("t.tolist()  vs ndarray.tolist() 1e6 float32", o, p, "<= 1.0")


def numpy_rows(add, rep, small_number, small_repeat):
    """Constructors and slice views against NumPy's own."""
    # Sub-microsecond calls are timed in many short interleaved batches, so a
    # burst of other work on this shared machine lands in few samples of
    # both sides.
    short_number, short_repeat = max(small_number // 10, 200), small_repeat * 5
    for label, count, number, repeat in (("4 KiB", 1024, short_number, short_repeat),
                                         ("64 MiB", 16 * 1024 * 1024, 10, max(rep, 5))):
        for _ in range(3):  # warm both (allocator caches, first-call paths)
            sw.zeros(count), np.zeros(count, np.float32), sw.arange(count), np.arange(count, dtype=np.int32)
        o, p = batch_pair(lambda: sw.zeros(count), lambda: np.zeros(count, np.float32), number, repeat)
        add(f"strideweave.zeros(n)  vs np.zeros(n, float32) {label}", o, p, "<= 1.0")
        o, p = batch_pair(lambda: sw.arange(count), lambda: np.arange(count, dtype=np.int32), number, repeat)
        add(f"strideweave.arange(n)  vs np.arange(n, int32) {label}", o, p, "<= 1.0")
    number, repeat = short_number, short_repeat
    a = np.zeros((64, 64), np.float32)
    t = sw.tensor(a)
    for _ in range(2000):
        t[1:3, :], a[1:3, :], t[1, :], a[1, :], a[1]
    o, p = batch_pair(lambda: t[1:3, :], lambda: a[1:3, :], number, repeat)
    add("t[1:3, :]  vs ndarray[1:3, :] (grad mode)", o, p, "<= 1.5")
    o, p = batch_pair(lambda: t[1, :], lambda: a[1, :], number, repeat)
    add("t[1, :]  vs ndarray[1, :] (grad mode)", o, p, "<= 1.5")
    # NumPy's a[1] (an int key, its fastest path) is the same row.
    o, p = batch_pair(lambda: t[1, :], lambda: a[1], number, repeat)
    add("t[1, :]  vs ndarray[1] (grad mode)", o, p)
    with sw.no_grad():
        o, p = batch_pair(lambda: t[1:3, :], lambda: a[1:3, :], number, repeat)
        add("t[1:3, :]  vs ndarray[1:3, :] (no_grad)", o, p, "<= 1.5")


def report_sweep(rows):
    print(f"StrideWeave compare.py sweep  {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(f"machine: {platform.machine()} {cpu_model()} ({os.cpu_count()} CPUs); medians, ratios lower is better")
    w = max(len(r[0]) for r in rows) + 2
    print(f"{'case':{w}s} {'strideweave':>12s} {'numpy':>12s} {'torch':>12s} {'sw/numpy':>9s} {'sw/torch':>9s}")
    for case, o, p, t in rows:
        rp = f"{o / p:.2f}" if p else "-"
        rt = f"{o / t:.2f}" if t else "-"
        print(f"{case:{w}s} {fmt(o):>12s} {fmt(p):>12s} {fmt(t):>12s} {rp:>9s} {rt:>9s}")
    print()


def report(rows, progress, rep, small_number, small_repeat):
    print(f"StrideWeave compare.py  {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(f"machine: {platform.machine()} {cpu_model()} ({os.cpu_count()} CPUs), {platform.system()} "
          f"{platform.release()}")
    print(f"python {platform.python_version()}, numpy {np.__version__}, strideweave {sw.__version__}"
          f" ({os.environ.get('STRIDEWEAVE_BUILD') or 'installed'}), samples: {rep} large,"
          f" {small_repeat}x{small_number} small")
    w = max(len(r[0]) for r in rows) + 2
    print(f"{'case':{w}s} {'strideweave':>12s} {'baseline':>12s} {'ratio':>16s}  target")
    for case, o, p, r, tg in rows:
        print(f"{case:{w}s} {o:>12s} {p:>12s} {r:>16s}  {tg}")
    if not progress:
        return 0
    print()
    print(f"{'thread progress (iterations/s of a 2nd Python thread)':{w}s} {'busy':>12s} {'idle':>12s} "
          f"{'busy/idle':>16s}")
    for case, b, i in progress:
        print(f"{case:{w}s} {b / 1e6:10.2f} M {i / 1e6:10.2f} M {b / i:16.3f}")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


if __name__ == "__main__":
    sys.exit(main())
