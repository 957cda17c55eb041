"""Peak memory of a CPU -> FileBacked -> CPU round trip, and of DLPack export.

    python benchmarks/memory_roundtrip.py [--mib 1024] [--exports 10000] [--json]
    STRIDEWEAVE_BUILD=build-x python benchmarks/memory_roundtrip.py

Each measurement runs in a fresh subprocess (so earlier allocations of this
process do not blur its peak) and reads /proc/self/status: VmRSS, and VmHWM,
the peak resident set, reset just before the measured step by writing "5" to
/proc/self/clear_refs (falling back to a 1 ms RSS sampler where that is not
allowed). ru_maxrss (the process lifetime peak) is reported alongside.

Round trip: a --mib tensor is created in a CPU carrier and filled (this is
the baseline: the data the caller already holds), moved into a FileBacked
carrier (the CPU carrier is released when the move commits) and moved back
into a fresh CPU carrier. Bound (issue 7): peak <= baseline + size. Also
reported: the RSS after the trip (one copy resident: the source was freed).

Export: a 256 MiB tensor is exported --exports times with the capsule
dropped each time (legacy and versioned), then --exports times with all
capsules alive at once, and imported by np.from_dlpack --exports times.
Export must not allocate storage: RSS growth and tracemalloc's peak stay far
below one copy of the tensor (a few hundred bytes per live capsule).

Exit status 0 when every bound holds.
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

MIB = 1024 * 1024


def _status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return -1


class PeakMeter:
    """Peak RSS (bytes) over a block: VmHWM after a clear_refs reset, or a
    sampling thread when the reset is not permitted."""

    def __enter__(self):
        self.samples = []
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.method = "VmHWM"
        except OSError:
            self.method = "sampled"
            self._stop = threading.Event()
            self._peak = _status("VmRSS")

            def sample():
                while not self._stop.is_set():
                    self._peak = max(self._peak, _status("VmRSS"))
                    time.sleep(0.001)

            self._th = threading.Thread(target=sample, daemon=True)
            self._th.start()
        self.start_rss = _status("VmRSS")
        return self

    def __exit__(self, *exc):
        if self.method == "VmHWM":
            self.peak = _status("VmHWM")
        else:
            self._stop.set()
            self._th.join()
            self.peak = max(self._peak, _status("VmRSS"))
        return False


def _import_sw():
    if os.environ.get("STRIDEWEAVE_BUILD"):
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import strideweave as sw

    return sw


def child_roundtrip(mib):
    import resource

    import numpy as np

    sw = _import_sw()
    n = mib * MIB // 4
    lay = sw.Layout(sw.Shape(n), sw.Stride(1))
    process_baseline = _status("VmRSS")
    t = sw.Tensor(sw.CPU(n, empty=True), 0, lay)
    alias = np.from_dlpack(t)
    alias[:] = np.arange(n, dtype=np.float32)
    del alias
    baseline = _status("VmRSS")
    with PeakMeter() as meter:
        start = time.perf_counter()
        f = sw.move(t, sw.FileBacked(dtype=sw.DType.Float32))
        after_first = _status("VmRSS")
        back = sw.move(f, sw.CPU(n, empty=True))
        elapsed = time.perf_counter() - start
    end = _status("VmRSS")
    ok_values = all(back[i] == float(np.float32(i)) for i in (0, 1, n // 2, n - 1))
    return {
        "size_bytes": mib * MIB,
        "process_baseline": process_baseline,
        "baseline": baseline,
        "rss_after_cpu_to_filebacked": after_first,
        "peak": meter.peak,
        "rss_after": end,
        "peak_over_baseline": meter.peak - baseline,
        "peak_over_process_baseline": meter.peak - process_baseline,
        "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "peak_method": meter.method,
        "seconds": elapsed,
        "values_ok": ok_values,
        "source_released": t.carrier.is_released(),
        "file_released": f.carrier.is_released(),
    }


def child_export(count, mib=256):
    import gc
    import tracemalloc

    import numpy as np

    sw = _import_sw()
    n = mib * MIB // 4
    t = sw.Tensor(sw.CPU(n, empty=True), 0, sw.Layout(sw.Shape([1024, n // 1024]), sw.Stride([1, 1024])))
    np.from_dlpack(t)[:] = 1.0  # resident, so a copy would show up as growth
    pointer = t.carrier.pointer()
    for _ in range(1000):  # warm free lists
        t.__dlpack__()
        t.__dlpack__(max_version=(1, 0))
        np.from_dlpack(t)
    gc.collect()
    out = {"tensor_bytes": mib * MIB, "exports": count}

    def measure(name, body):
        gc.collect()
        tracemalloc.start()
        with PeakMeter() as meter:
            keep = body()
        cur, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out[name] = {
            "rss_growth": _status("VmRSS") - meter.start_rss,
            "peak_rss_growth": meter.peak - meter.start_rss,
            "tracemalloc_peak": peak,
            "tracemalloc_current": cur,
        }
        del keep
        gc.collect()

    def dropped():
        for _ in range(count):
            t.__dlpack__()
            t.__dlpack__(max_version=(1, 0))

    def held():
        caps = [t.__dlpack__(max_version=(1, 0)) for _ in range(count)]
        return caps

    def imported():
        same = 0
        for _ in range(count):
            same += np.from_dlpack(t).ctypes.data == pointer
        out["numpy_aliases"] = same
        return None

    measure("dropped", dropped)
    measure("held", held)
    measure("numpy", imported)
    out["refcount_after"] = sys.getrefcount(t)
    return out


def run(mib=1024, exports=10000, export_mib=256):
    """Runs both measurements in subprocesses; returns their dicts."""
    res = {}
    for mode, arg in (("roundtrip", mib), ("export", exports)):
        cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, "--arg", str(arg),
               "--export-mib", str(export_mib)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"{mode} child failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        res[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
    return res


def check(res):
    """The bounds; returns a list of (description, ok)."""
    rt, ex = res["roundtrip"], res["export"]
    size = rt["size_bytes"]
    one_copy = ex["tensor_bytes"]
    n = ex["exports"]
    return [
        ("round trip values correct, source and file released",
         rt["values_ok"] and rt["source_released"] and rt["file_released"]),
        ("round trip peak <= baseline + size", rt["peak_over_baseline"] <= size),
        ("after the trip one copy is resident (RSS within 5% of size of baseline)",
         abs(rt["rss_after"] - rt["baseline"]) <= 0.05 * size),
        ("export (dropped): peak RSS growth < 4 MiB", ex["dropped"]["peak_rss_growth"] < 4 * MIB),
        ("export (dropped): tracemalloc peak < 64 KiB", ex["dropped"]["tracemalloc_peak"] < 64 * 1024),
        (f"export (held x{n}): RSS growth < 1 KiB per capsule and << one copy",
         ex["held"]["peak_rss_growth"] < min(n * 1024, one_copy // 16)),
        ("np.from_dlpack: every array aliases the carrier", ex["numpy_aliases"] == n),
        ("np.from_dlpack: peak RSS growth < 4 MiB", ex["numpy"]["peak_rss_growth"] < 4 * MIB),
    ]


def report(res):
    rt, ex = res["roundtrip"], res["export"]

    def m(b):
        return f"{b / MIB:9.1f} MiB"

    lines = [f"CPU -> FileBacked -> CPU round trip of {m(rt['size_bytes']).strip()} "
             f"({rt['seconds']:.2f} s, peak by {rt['peak_method']})",
             f"  process baseline (before the source)   {m(rt['process_baseline'])}",
             f"  baseline (source resident)             {m(rt['baseline'])}",
             f"  after CPU->FileBacked (source freed)   {m(rt['rss_after_cpu_to_filebacked'])}",
             f"  peak during the round trip (VmHWM)     {m(rt['peak'])}",
             f"  after the round trip                   {m(rt['rss_after'])}",
             f"  peak - baseline                        {m(rt['peak_over_baseline'])}  (bound {m(rt['size_bytes'])})",
             f"  ru_maxrss (process lifetime)           {m(rt['ru_maxrss'])}",
             f"DLPack export of a {m(ex['tensor_bytes']).strip()} tensor, {ex['exports']} times"]
    for key, label in (("dropped", "legacy+versioned, capsule dropped"), ("held", "versioned, all capsules held"),
                       ("numpy", "np.from_dlpack, array dropped")):
        d = ex[key]
        lines.append(f"  {label:36s} peak RSS +{d['peak_rss_growth'] / 1024:8.0f} KiB, RSS after "
                     f"+{d['rss_growth'] / 1024:6.0f} KiB, tracemalloc peak {d['tracemalloc_peak'] / 1024:7.1f} KiB")
    for desc, ok in check(res):
        lines.append(f"  [{'ok' if ok else 'FAIL'}] {desc}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=1024, help="round-trip size in MiB (default 1024)")
    ap.add_argument("--exports", type=int, default=10000)
    ap.add_argument("--export-mib", type=int, default=256)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", choices=["roundtrip", "export"], help=argparse.SUPPRESS)
    ap.add_argument("--arg", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child == "roundtrip":
        print(json.dumps(child_roundtrip(args.arg)))
        return 0
    if args.child == "export":
        print(json.dumps(child_export(args.arg, args.export_mib)))
        return 0
    res = run(args.mib, args.exports, args.export_mib)
    print(json.dumps(res, indent=1) if args.json else report(res))
    return 0 if all(ok for _, ok in check(res)) else 1


if __name__ == "__main__":
    sys.exit(main())
