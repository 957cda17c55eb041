"""Size sweep and DLPack exchange rows for compare.py (see its docstring).

Every row times StrideWeave, NumPy and torch alternately in one process and
reports medians; ratios are StrideWeave / NumPy and StrideWeave / torch.

    python benchmarks/compare.py --only-sweep [--gib] [--quick]
"""
import os
import statistics
import tempfile
import time

import numpy as np

import strideweave as sw

# torch's OpenMP threads otherwise spin for a while after every parallel
# clone and take the two cores from the next (StrideWeave or NumPy) sample;
# passive waiting keeps torch parallel without that. Only effective when
# torch is first imported here.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
try:
    import torch
except ImportError:  # pragma: no cover - torch is optional for the sweep
    torch = None

F32 = sw.DType.Float32
ns = time.perf_counter_ns
KIB = 1024
MIB = 1024 * KIB
SIZES = [4 * KIB, 64 * KIB, 256 * KIB, 4 * MIB, 64 * MIB, 256 * MIB]
GIB_SIZE = 1024 * MIB


def size_name(nbytes):
    return f"{nbytes // MIB} MiB" if nbytes >= MIB else f"{nbytes // KIB} KiB"


def filled_tensor(n):
    """A Float32 CPU tensor of n elements with resident, filled pages."""
    c = sw.CPU(n, empty=True)
    t = sw.Tensor(c, 0, sw.Layout(sw.Shape(n), sw.Stride(1)))
    np.from_dlpack(t)[:] = 1.0
    return t


def plan(nbytes, quick):
    """(calls per sample, samples): small sizes are timed in batches."""
    number = max(1, min(256, (2 * MIB) // nbytes))
    samples = (3 if quick else 7) if nbytes >= 64 * MIB else (5 if quick else 9)
    return number, samples


def interleaved(cases, number, samples, settle=0.0):
    """cases: {name: (prepare(number) -> state, run(state))}. Medians of the
    per-call time of each case, the cases alternating sample by sample;
    settle: seconds to pause after each sample (background work a case
    leaves behind is then not timed in the next one)."""
    times = {k: [] for k in cases}
    for sample in range(samples + 1):  # the first round only warms up
        for name, (prepare, run) in cases.items():
            state = prepare(number)
            t0 = ns()
            run(state)
            if sample:
                times[name].append((ns() - t0) / number)
            del state
            if settle:
                time.sleep(settle)
    return {k: statistics.median(v) for k, v in times.items()}


def sweep_rows(add, quick=False, gib=False):
    """Appends the sweep rows through add(case, ours, numpy, torch)."""
    sizes = SIZES + ([GIB_SIZE] if gib else [])
    tmpdir = tempfile.mkdtemp(prefix="sw-sweep-")
    path = os.path.join(tmpdir, "np.bin")
    clone_4k = None
    try:
        for nbytes in sizes:
            n = nbytes // 4
            number, samples = plan(nbytes, quick)
            label = size_name(nbytes)
            a = np.ones(n, dtype=np.float32)
            x = torch.ones(n, dtype=torch.float32) if torch is not None else None

            def move_run(ts):
                for k, t in enumerate(ts):
                    ts[k] = sw.move(t, sw.CPU(n, empty=True))  # results freed untimed, as clone()'s

            # NumPy and torch do the same work as a move: copy `number`
            # distinct sources into fresh arrays and drop each source right
            # after its copy (a move releases its source; freeing inside the
            # loop also lets the heap trim and re-fault, as a move's does).
            def np_prep(k):
                return [np.ones(n, dtype=np.float32) for _ in range(k)], []

            def np_run(state):
                srcs, keep = state
                for k, s in enumerate(srcs):  # in creation order, as move_run
                    srcs[k] = None
                    d = np.empty(n, dtype=np.float32)
                    np.copyto(d, s)
                    del s
                    keep.append(d)

            def torch_prep(k):
                return [torch.ones(n, dtype=torch.float32) for _ in range(k)], []

            def torch_run(state):
                srcs, keep = state
                for k, s in enumerate(srcs):
                    srcs[k] = None
                    keep.append(s.clone())
                    del s

            cases = {"sw": (lambda k: [filled_tensor(n) for _ in range(k)], move_run),
                     "np": (np_prep, np_run)}
            if x is not None:
                cases["torch"] = (torch_prep, torch_run)
            m = interleaved(cases, number, samples)
            add(f"move CPU->CPU {label}", m["sw"], m["np"], m.get("torch"))
            if nbytes == 4 * KIB:
                clone_4k = m.get("torch")

            # move_async return time (the copy itself is waited for untimed).
            # Filling the sources evicts the caches (and at 64 MiB up the
            # TLB) that the call's own code and objects live in, so it is
            # also compared with a 4 KiB clone timed right after the same
            # preparation: the second row shows what the size itself adds.
            ret, cold = [], []
            x4k = torch.ones(1024, dtype=torch.float32) if torch is not None else None
            for _ in range(max(samples, 9)):
                if x4k is not None:
                    ts = [filled_tensor(n) for _ in range(number)]
                    ds = [sw.CPU(n, empty=True) for _ in range(number)]
                    t0 = ns()
                    for _ in range(number):
                        x4k.clone()
                    cold.append((ns() - t0) / number)
                    del ts, ds
                ts = [filled_tensor(n) for _ in range(number)]
                ds = [sw.CPU(n, empty=True) for _ in range(number)]
                hs = []
                t0 = ns()
                for t, d in zip(ts, ds):
                    hs.append(sw.move_async(t, d))
                ret.append((ns() - t0) / number)
                for h in hs:
                    h.wait(timeout=120)
                del ts, ds, hs
            add(f"move_async return CPU->CPU {label} (vs 4 KiB clone)", statistics.median(ret), None, clone_4k)
            if cold:
                add(f"move_async return CPU->CPU {label} (vs 4 KiB clone, same prep)", statistics.median(ret), None,
                    statistics.median(cold))

            # CPU <-> FileBacked vs tofile / fromfile into the same directory.
            def write_ours(state):
                ts, keep = state  # results are dropped after the timing
                for t in ts:
                    keep.append(sw.move(t, sw.FileBacked(dtype=F32)))

            def write_np(_):
                for _ in range(number):
                    a.tofile(path)

            w = interleaved({"sw": (lambda k: ([filled_tensor(n) for _ in range(k)], []), write_ours),
                             "np": (lambda k: None, write_np)}, number, samples)
            add(f"move CPU->FileBacked {label} (vs tofile)", w["sw"], w["np"], None)

            def read_prep(k):
                return [sw.move(filled_tensor(n), sw.FileBacked(dtype=F32)) for _ in range(k)]

            def read_ours(fs):
                for k, f in enumerate(fs):
                    fs[k] = sw.move(f, sw.CPU(n, empty=True))  # the FileBacked source is freed untimed

            def read_ours_drop(fs):
                for k, f in enumerate(fs):
                    fs[k] = None
                    sw.move(f, sw.CPU(n, empty=True))
                    del f

            # Three NumPy baselines, so nothing is hidden:
            # - "one hot file": fromfile rereads one file `number` times,
            #   cache-hot, dropping each array (the row's old form; the move
            #   keeps its results and reads `number` distinct files);
            # - "distinct files": fromfile reads `number` distinct files
            #   written just before, as the move reads `number` distinct
            #   FileBacked sources; both sides drop each result at once, so
            #   neither pays fresh pages for it (kept arrays make NumPy's time
            #   swing 3x with glibc's heap state): like with like;
            # - "+ os.remove": the same, removing each file after its read,
            #   as a move releases its source and a released FileBacked's
            #   file is removed (API.md): the same work.
            # A released FileBacked's last close runs on a background thread
            # (from 64 KiB); the last two rows' cases pause 2 ms between
            # samples so that work is not timed in the next case. The first
            # row is timed as it always was.
            def read_np(_):
                for _ in range(number):
                    np.fromfile(path, dtype=np.float32)

            def np_files_prep(k):
                paths = [os.path.join(tmpdir, f"r{i}.bin") for i in range(k)]
                for p in paths:
                    # Created afresh, as a FileBacked's file is: rewriting a
                    # file in place (O_TRUNC) makes ext4 start its writeback
                    # at close, and a later remove waits for that.
                    if os.path.exists(p):
                        os.remove(p)
                    a.tofile(p)
                return paths

            def np_files_read(paths):
                for p in paths:
                    np.fromfile(p, dtype=np.float32)

            def np_files_read_remove(paths):
                for p in paths:
                    np.fromfile(p, dtype=np.float32)
                    os.remove(p)

            a.tofile(path)
            r = interleaved({"sw": (read_prep, read_ours), "np": (lambda k: None, read_np)}, number, samples)
            add(f"move FileBacked->CPU {label} (vs fromfile, one hot file)", r["sw"], r["np"], None)
            r = interleaved({"sw": (read_prep, read_ours_drop), "np_files": (np_files_prep, np_files_read),
                             "np_remove": (np_files_prep, np_files_read_remove)}, number, samples, settle=0.002)
            add(f"move FileBacked->CPU {label} (results dropped, vs fromfile of distinct files)", r["sw"],
                r["np_files"], None)
            add(f"move FileBacked->CPU {label} (results dropped, vs fromfile + os.remove)", r["sw"], r["np_remove"],
                None)
            del a, x
    finally:
        for name in os.listdir(tmpdir):
            os.unlink(os.path.join(tmpdir, name))
        os.rmdir(tmpdir)


def exchange_rows(add, quick=False):
    """DLPack export/import rows, the C exchange API through tvm_ffi."""
    # Short batches, many samples: drift on a shared machine hits every case
    # alike and the median drops the spikes.
    number, samples = (500, 21) if quick else (1000, 61)
    t = sw.Tensor(sw.CPU(1024), 0, sw.Layout(sw.Shape([32, 32]), sw.Stride([32, 1])))
    a = np.zeros((32, 32), dtype=np.float32)
    x = torch.zeros((32, 32)) if torch is not None else None

    def pair(ours, theirs, third=None):
        fs = {"sw": ours, "np": theirs}
        if third is not None:
            fs["torch"] = third
        cases = {k: (lambda k_: None, (lambda f: lambda _: [f() for _ in range(number)])(f)) for k, f in fs.items()}
        for f in fs.values():
            for _ in range(500):
                f()
        return interleaved(cases, number, samples)

    m = pair(lambda: t.__dlpack__(), lambda: a.__dlpack__(), (lambda: x.__dlpack__()) if x is not None else None)
    add("t.__dlpack__() (vs ndarray / torch)", m["sw"], m["np"], m.get("torch"))
    m = pair(lambda: np.from_dlpack(t), lambda: np.from_dlpack(a),
             (lambda: np.from_dlpack(x)) if x is not None else None)
    add("np.from_dlpack(t) (vs of ndarray / of torch)", m["sw"], m["np"], m.get("torch"))
    try:
        import tvm_ffi
    except ImportError:
        return
    m = pair(lambda: tvm_ffi.from_dlpack(t), lambda: np.from_dlpack(t),
             (lambda: tvm_ffi.from_dlpack(x)) if x is not None else None)
    add("tvm_ffi.from_dlpack(t) (vs np.from_dlpack(t) / tvm_ffi of torch)", m["sw"], m["np"], m.get("torch"))
