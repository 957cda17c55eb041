"""TiledEvictable rows of compare.py (python benchmarks/compare.py
--only-tiled), or standalone: python benchmarks/tiled_compare.py [--quick].

The issue 13 use case: 64 expert matrices of 1024 x 1024 Float32 (256 MiB)
as 64 tiles on a FileBacked secondary; a router picks 4 experts per step.

* cold projection: ``te.project(w, 4 tiles).wait()`` from the secondary vs
  the NumPy gather of the same 4 tiles, ``np.take`` on an ``np.memmap`` of
  the same file (copied into memory), interleaved, medians. Target <= 1.0.
  Two rows split it (page cache): the engine gather alone into a touched
  buffer, and the first touch of a fresh 16 MiB CPU carrier (np.take's
  result reuses heap pages freed by the previous sample, and so does a
  projection's result or a fresh CPU carrier: the storage layer keeps
  freed heap buffers below 32 MiB for reuse; a cold process pays the
  faults once);
  and one row projects into a reused destination (the loop's steady state).
  Twice: through the page cache (the file was just written), which
  compares the copy paths and per-request overhead (a second pair of rows
  maps the file afresh for NumPy inside each timed sample, the like-for-
  like cold comparison; the first keeps one np.memmap whose page-table
  entries stay populated), and from disk, the
  file's pages dropped from the cache before every sample
  (posix_fadvise DONTNEED after fsync; no root needed).
* prefetch: S steps of (project the step's 4 experts, run a compute loop
  of elementwise passes over them). "cold" projects on demand; "prefetch" issues ``promote_async`` of
  the next step's experts before computing this step (one step ahead) and
  evicts the finished step's experts (clean: no write back). Hidden share =
  1 - (prefetch - compute) / (cold - compute); the projection copy out of
  the primary (in memory) is never hidden, so the share stays below 100%.
  Also twice, page cache and disk. A third variant issues the next step's
  ``project()`` itself one step ahead (an AwaitProjection is the prefetch):
  one copy per tile, straight from the file, overlapping the compute.
* memory: peak RSS of one cold projection of 4 tiles, in a child process
  (VmHWM reset through /proc/self/clear_refs after building the 256 MiB
  file), against the selected bytes (16 MiB); np.take for reference.
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

import numpy as np  # noqa: E402

import strideweave as sw  # noqa: E402
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection, TileSet  # noqa: E402

F32 = sw.DType.Float32
EXPERTS, ROWS, COLS = 64, 1024, 1024
TILE = ROWS * COLS
K = 4  # experts per step
ns = time.perf_counter_ns
cpu_ns = time.process_time_ns


def build(experts=EXPERTS):
    """(te, weights, memmap of the same file): every tile secondary-resident
    on a FileBacked holding expert e's matrix at tile e."""
    n = experts * TILE
    flat = sw.Layout(sw.Shape(n), sw.Stride(1))
    c = sw.CPU(n, empty=True)
    np.from_dlpack(sw.Tensor(c, 0, flat))[:] = np.arange(n, dtype=np.float32)
    fb = sw.move(sw.Tensor(c, 0, flat), sw.FileBacked(dtype=F32)).carrier  # releases c
    te = TiledEvictable(sw.CPU(0), fb, (experts, 1, 1), (1, ROWS, COLS))
    weights = sw.Tensor(te, 0, te.canonical_layout())
    mm = np.memmap(te.secondary.path, dtype=np.float32, mode="r", shape=(experts, TILE))
    return te, weights, mm


def selection(experts):
    return TileSelection([list(experts), [0], [0]])


def compact_array(t, k=K):
    """The compact projection as a (k, TILE) ndarray over its storage (tile
    j holds expert j's slots in the file's order)."""
    n = k * TILE
    return np.from_dlpack(sw.Tensor(t.carrier, t.offset, sw.Layout(sw.Shape(n), sw.Stride(1)))).reshape(k, TILE)


def drop_cache(path):
    """Evicts the file's clean pages from the page cache (no root needed;
    pages still mapped by a process stay), so the next read goes to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def two_picks(rng):
    """Two disjoint random sets of K experts: one per side of a sample, so
    neither side reads tiles the other just pulled into the CPU cache (this
    VM's L3 holds hundreds of MiB: reading the same 16 MiB again right after
    costs about 40% less, which favoured whichever side ran second)."""
    e = [int(x) for x in rng.choice(EXPERTS, 2 * K, replace=False)]
    return e[:K], e[K:]


def same_tiles(got, mm, experts):
    """got[j] == mm[experts[j]] for every j, tile by tile over views (no
    16 MiB temporaries: they would change which heap chunks the timed
    allocations of either side get)."""
    return all(np.array_equal(got[j], mm[e]) for j, e in enumerate(experts))


def cold_rows(add, te, w, rep, from_disk=False, cpu_row=False, fresh_map=False):
    """Cold 4-tile projection vs np.take on an np.memmap of the same file;
    from_disk drops the file from the page cache before each sample (and
    maps it afresh for NumPy: a live mapping keeps its pages cached). The
    two sides gather disjoint tile sets (two_picks) and take turns going
    first. cpu_row adds the same samples in process CPU time.

    In the page-cache case NumPy by default keeps one np.memmap for every
    sample: its page-table entries stay populated, so np.take is a plain
    memcpy with no page faults, while the projection opens nothing new but
    reads through the kernel. fresh_map (page cache only) is the like-for-
    like "cold" comparison: NumPy maps the file afresh inside the timed
    region each sample (as the from-disk variant does), paying the mmap and
    the minor faults of the 4 tiles it touches; the default row stays."""
    path = str(te.secondary.path)
    remap = from_disk or fresh_map
    mm = None if remap else np.memmap(path, dtype=np.float32, mode="r", shape=(EXPERTS, TILE))
    rng = np.random.default_rng(0)
    ours, theirs = [], []
    ours_cpu, theirs_cpu = [], []
    for i in range(rep):
        idx, idx_np = two_picks(rng)
        sel = selection(idx)

        def run_ours():
            if from_disk:
                drop_cache(path)
            c0, t0 = cpu_ns(), ns()
            r = te.project(w, sel).wait()
            ours.append(ns() - t0)
            ours_cpu.append(cpu_ns() - c0)
            return r

        def run_numpy():
            nonlocal mm
            if from_disk:
                drop_cache(path)
            c0, t0 = cpu_ns(), ns()
            if remap:  # a mapping keeps its pages cached / its PTEs populated: map afresh
                mm = np.memmap(path, dtype=np.float32, mode="r", shape=(EXPERTS, TILE))
            a = np.take(mm, idx_np, axis=0)
            if remap:
                mm = None
            theirs.append(ns() - t0)
            theirs_cpu.append(cpu_ns() - c0)
            return a
        if i % 2:
            a = run_numpy()
            r = run_ours()
        else:
            r = run_ours()
            a = run_numpy()
        check = np.memmap(path, dtype=np.float32, mode="r", shape=(EXPERTS, TILE))
        assert same_tiles(compact_array(r), check, idx) and same_tiles(a, check, idx_np)
        del r, a, check
    o, t = statistics.median(ours), statistics.median(theirs)
    where = "disk (page cache dropped)" if from_disk else "page cache"
    ref = "np.take(fresh np.memmap)" if fresh_map and not from_disk else "np.take(np.memmap)"
    add(f"project {K} cold tiles (16 MiB), {where}  vs {ref}", o, t, "<= 1.0")
    if cpu_row:
        # The same samples in process CPU time (every thread): on a shared,
        # loaded machine the wall times above mostly measure the scheduler
        # (a read() syscall is descheduled at its voluntary preemption
        # points far more often than NumPy's user-space memcpy).
        add("  same, process CPU time (all threads)  vs np.take's", statistics.median(ours_cpu),
            statistics.median(theirs_cpu))
    return o, t


def reused_destination_rows(add, te, w, rep):
    """The router loop's steady state: the same cold 4-tile projection into
    one destination CPU carrier reused every step (project(..., destination));
    its pages, and those of the staging carrier the TiledEvictable keeps for
    such requests, stay touched. Page cache, interleaved with np.take."""
    path = str(te.secondary.path)
    mm = np.memmap(path, dtype=np.float32, mode="r", shape=(EXPERTS, TILE))
    dest = sw.CPU(K * TILE)
    rng = np.random.default_rng(3)
    ours, theirs = [], []
    for i in range(rep):
        idx, idx_np = two_picks(rng)  # disjoint, turns going first: see cold_rows
        sel = selection(idx)
        t0 = ns()
        if i % 2:
            a = np.take(mm, idx_np, axis=0)
        t1 = ns()
        r = te.project(w, sel, dest).wait()
        t2 = ns()
        if not i % 2:
            a = np.take(mm, idx_np, axis=0)
        t3 = ns()
        ours.append(t2 - t1)
        theirs.append(t1 - t0 if i % 2 else t3 - t2)
        assert same_tiles(compact_array(r), mm, idx) and same_tiles(a, mm, idx_np)
        del r, a
    add(f"project {K} cold tiles into a reused destination, page cache  vs np.take(np.memmap)",
        statistics.median(ours), statistics.median(theirs), "<= 1.0")


def decomposition_rows(add, te, rep):
    """Where the cold projection's time goes, against the same np.take: the
    first touch of a fresh 16 MiB CPU carrier (page faults: zeroed pages
    from the kernel). NumPy's 16 MiB result comes from the malloc heap, which
    keeps the pages of the array freed in the previous sample, so it pays no
    faults (the reused-destination row shows the projection without them)."""
    n = 64 * TILE
    flat = sw.Layout(sw.Shape(n), sw.Stride(1))
    c = sw.CPU(n, empty=True)
    np.from_dlpack(sw.Tensor(c, 0, flat))[:] = 1.0
    f = sw.move(sw.Tensor(c, 0, flat), sw.FileBacked(dtype=F32)).carrier  # unowned: te owns its own
    mm = np.memmap(str(f.path), dtype=np.float32, mode="r", shape=(EXPERTS, TILE))
    rng = np.random.default_rng(2)
    touch, theirs = [], []
    dense = sw.Layout(sw.Shape(K * TILE), sw.Stride(1))
    for _ in range(rep):
        _, idx_np = two_picks(rng)  # disjoint: see cold_rows
        t1 = ns()
        fresh = sw.CPU(K * TILE, empty=True)
        np.from_dlpack(sw.Tensor(fresh, 0, dense))[::1024] = 0.0  # one write per 4 KiB page
        t2 = ns()
        a = np.take(mm, idx_np, axis=0)
        t3 = ns()
        touch.append(t2 - t1)
        theirs.append(t3 - t2)
        del fresh, a
    t = statistics.median(theirs)
    add("  of which: first touch of a fresh 16 MiB CPU carrier  vs np.take", statistics.median(touch), t)
    del mm
    f.release()


def schedule(steps, seed=1):
    """Expert sets per step, consecutive steps disjoint (every prefetch moves data)."""
    rng = np.random.default_rng(seed)
    out, prev = [], set()
    for _ in range(steps):
        pick = [int(e) for e in rng.permutation([e for e in range(EXPERTS) if e not in prev])[:K]]
        out.append(pick)
        prev = set(pick)
    return out


def compute(buf, r, work):
    """The step's work: `work` elementwise passes over the 4 selected experts
    (NumPy ufuncs release the GIL and use one core, so the time is
    predictable on a shared machine, unlike a threaded BLAS call)."""
    mats = compact_array(r)
    np.multiply(mats, 1.0001, out=buf)
    for _ in range(work - 1):
        np.multiply(buf, 1.0001, out=buf)
    return float(np.maximum(buf, 0).sum())


def run_steps(te, w, plan, buf, work, prefetch, from_disk=False):
    everything = TileSet([(e, 0, 0) for e in range(EXPERTS)])
    te.evict(everything)  # every tile cold (clean tiles: metadata only)
    if from_disk:
        drop_cache(str(te.secondary.path))
    t0 = ns()
    if prefetch == "project":
        # the projection itself one step ahead: the next step's compact
        # tensor is gathered (one copy, straight from the file) while this
        # step computes
        pending = te.project(w, selection(plan[0]))
        for i in range(len(plan)):
            r = pending.wait()
            pending = te.project(w, selection(plan[i + 1])) if i + 1 < len(plan) else None
            compute(buf, r, work)
        return ns() - t0
    pending = te.promote_async(selection(plan[0])) if prefetch else None
    for i, experts in enumerate(plan):
        nxt = None
        if prefetch:
            if i + 1 < len(plan):
                nxt = te.promote_async(selection(plan[i + 1]))
            pending.wait()
        r = te.project(w, selection(experts)).wait()
        compute(buf, r, work)
        if prefetch:
            te.evict(selection(experts))
            pending = nxt
    return ns() - t0


def prefetch_rows(add, te, w, steps, work, rep, from_disk=False):
    plan = schedule(steps)
    buf = np.empty((K, TILE), dtype=np.float32)
    r0 = te.project(w, selection(plan[0])).wait()
    cold, pre, ahead, comp = [], [], [], []
    for _ in range(rep):
        cold.append(run_steps(te, w, plan, buf, work, False, from_disk))
        pre.append(run_steps(te, w, plan, buf, work, True, from_disk))
        ahead.append(run_steps(te, w, plan, buf, work, "project", from_disk))
        t0 = ns()
        for _ in plan:
            compute(buf, r0, work)
        comp.append(ns() - t0)
    c, p, a, k = statistics.median(cold), statistics.median(pre), statistics.median(ahead), statistics.median(comp)
    transfer = c - k
    hidden = 1.0 - (p - k) / transfer if transfer > 0 else float("nan")
    hidden_a = 1.0 - (a - k) / transfer if transfer > 0 else float("nan")
    where = "disk" if from_disk else "page cache"
    add(f"{steps} steps x {K} experts, {work} compute passes, {where}: prefetch one step ahead  vs on demand", p, c)
    add(f"  compute alone ({steps} steps)  vs on-demand steps ({where})", k, c)
    add(f"  share of the on-demand transfer time hidden by prefetch ({where})", None, None, ratio=f"{hidden:.0%}")
    add(f"  project() one step ahead instead of promote_async  vs on demand ({where})", a, c)
    add(f"  share hidden by projecting one step ahead ({where})", None, None, ratio=f"{hidden_a:.0%}")
    return c, p, k, hidden


# ------------------------------------------------------------------ memory

def _status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    return 0


def rss_child(mode):
    """Runs in a child: builds the 256 MiB file, resets the peak, gathers 4
    tiles (ours or NumPy), prints JSON {base, peak, selected}."""
    te, w, mm = build()
    idx = [3, 17, 42, 60]
    import gc
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS
    base = _status("VmRSS")
    if mode == "ours":
        r = te.project(w, selection(idx)).wait()
    else:
        r = np.take(mm, idx, axis=0)
    peak = _status("VmHWM")
    print(json.dumps({"base": base, "peak": peak, "selected": K * TILE * 4}))
    del r


def memory_rows(add):
    out = {}
    for mode in ("ours", "numpy"):
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--rss-child", mode], env=env,
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            add(f"peak RSS child ({mode}) failed: {proc.stderr.strip().splitlines()[-1:]}", None, None)
            return None
        out[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
    ours, theirs = out["ours"], out["numpy"]
    grow_o, grow_t = ours["peak"] - ours["base"], theirs["peak"] - theirs["base"]
    sel = ours["selected"]
    add(f"peak RSS growth of a 4-tile projection (selected {sel >> 20} MiB)  vs np.take", None, None,
        ratio=f"{grow_o / 2**20:.1f} MiB vs {grow_t / 2**20:.1f} MiB (selected + {(grow_o - sel) / 2**20:.1f} MiB)",
        target="selected + const")
    return grow_o, grow_t, sel


def rows(add, rep, steps=8, work=4):
    te, w, _ = build()
    try:
        for from_disk in (False, True):
            cold_rows(add, te, w, rep, from_disk, cpu_row=not from_disk)
            if not from_disk:
                cold_rows(add, te, w, rep, cpu_row=True, fresh_map=True)  # like-for-like cold
                decomposition_rows(add, te, rep)
                reused_destination_rows(add, te, w, rep)
        for from_disk in (False, True):
            prefetch_rows(add, te, w, steps, work, max(1, rep // 3), from_disk)
    finally:
        te.release()
    memory_rows(add)


def _fmt(t_ns):
    if t_ns is None:
        return "-"
    return f"{t_ns / 1e6:.2f} ms"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9, help="samples of the cold projection (median taken)")
    ap.add_argument("--steps", type=int, default=8, help="router steps per prefetch sample")
    ap.add_argument("--work", type=int, default=4, help="elementwise compute passes per step")
    ap.add_argument("--quick", action="store_true", help="3 samples")
    ap.add_argument("--rss-child", choices=("ours", "numpy"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.rss_child:
        rss_child(args.rss_child)
        return 0
    out = []

    def add(case, ours, theirs, target=None, ratio=None):
        r = ratio if ratio is not None else (f"{ours / theirs:.3f}" if theirs else "-")
        out.append((case, _fmt(ours), _fmt(theirs), r, target or ""))

    rows(add, 3 if args.quick else args.repeat, args.steps, args.work)
    width = max(len(r[0]) for r in out)
    print(f"{'case':<{width}}  {'strideweave':>12}  {'reference':>12}  ratio  target")
    for case, o, t, r, target in out:
        print(f"{case:<{width}}  {o:>12}  {t:>12}  {r}  {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
