"""Expert projection from a safetensors file wrapped in place: python
benchmarks/tiled_safetensors.py [--repeat N] [--experts E].

64 experts of 1024 x 1024 Float32 (256 MiB) written by
``safetensors.numpy.save_file`` as one tensor "experts" of shape (64, 1024,
1024). StrideWeave wraps the tensor's bytes where they are:
``FileBacked.open(path, offset=<data start>, mutable=True)`` under a
``TiledEvictable`` with ``geometry="row-major"`` and one expert per tile
(grid (64, 1, 1), tile (1, 1024, 1024)); nothing is staged or copied at
construction. Each request projects 4 random experts (16 MiB) from the page
cache into a fresh (4, 1024, 1024) tensor, against:

* safetensors: ``safe_open(path, "np").get_slice("experts")[e]`` for each
  expert, then ``np.stack`` (target: StrideWeave <= 0.5x);
* ``np.take`` on an ``np.memmap`` of the tensor opened for the request
  (target <= 1.0x);
* ``np.take`` on one ``np.memmap`` kept open across requests (reported).

The sides run interleaved, each sample on its own random experts (disjoint
from the other sides' in that round), taking turns going first; medians of
wall time. Every result is checked against the kept memmap.
"""
import argparse
import json
import os
import statistics
import struct
import sys
import tempfile
import time

if __name__ == "__main__" and os.environ.get("STRIDEWEAVE_BUILD"):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import strideweave as sw  # noqa: E402
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection  # noqa: E402

K = 4
ns = time.perf_counter_ns


def write_file(path, experts, rows, cols):
    from safetensors.numpy import save_file

    # One expert at a time into a preallocated array (no second full copy).
    a = np.empty((experts, rows, cols), dtype=np.float32)
    for e in range(experts):
        a[e] = np.float32(e) + np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) / (rows * cols)
    save_file({"experts": a}, path)


def data_region(path, name):
    """(byte offset, slots, shape) of one tensor of a safetensors file."""
    with open(path, "rb") as f:
        (header_bytes,) = struct.unpack("<Q", f.read(8))
        entry = json.loads(f.read(header_bytes))[name]
    begin, end = entry["data_offsets"]
    return 8 + header_bytes + begin, (end - begin) // 4, tuple(entry["shape"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=60)
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--size", type=int, default=1024, help="rows = cols of an expert")
    args = ap.parse_args()
    from safetensors import safe_open

    experts, rows, cols = args.experts, args.size, args.size
    tmp = tempfile.mkdtemp()
    path = os.path.join(tmp, "experts.safetensors")
    write_file(path, experts, rows, cols)
    offset, slots, shape = data_region(path, "experts")
    assert shape == (experts, rows, cols)

    fb = sw.FileBacked.open(path, dtype=sw.DType.Float32, offset=offset, slots=slots, mutable=True)
    te = TiledEvictable(sw.CPU(0), fb, (experts, 1, 1), (1, rows, cols), geometry="row-major")
    w = sw.Tensor(te, 0, te.canonical_layout())
    kept = np.memmap(path, dtype=np.float32, mode="r", offset=offset, shape=shape)
    with open(path, "rb") as f:  # the page cache holds the file
        while f.read(64 << 20):
            pass

    def ours(ids):
        r = te.project(w, TileSelection([ids, [0], [0]])).wait()
        return np.from_dlpack(r)

    def safetensors_stack(ids):
        with safe_open(path, "np") as f:
            s = f.get_slice("experts")
            return np.stack([s[e] for e in ids])

    def memmap_fresh(ids):
        m = np.memmap(path, dtype=np.float32, mode="r", offset=offset, shape=shape)
        out = np.take(m, ids, axis=0)
        del m
        return out

    def memmap_kept(ids):
        return np.take(kept, ids, axis=0)

    sides = {"strideweave project()": ours, "safe_open get_slice + np.stack": safetensors_stack,
             "np.take(np.memmap opened per request)": memmap_fresh, "np.take(kept np.memmap)": memmap_kept}
    times = {k: [] for k in sides}
    rng = np.random.default_rng(0)
    names = list(sides)
    for i in range(args.repeat):
        picks = [int(x) for x in rng.choice(experts, K * len(names), replace=False)] \
            if experts >= K * len(names) else None
        order = names[i % len(names):] + names[:i % len(names)]  # take turns going first
        for j, name in enumerate(order):
            ids = picks[K * j:K * (j + 1)] if picks else [int(x) for x in rng.choice(experts, K, replace=False)]
            t = ns()
            out = sides[name](ids)
            times[name].append(ns() - t)
            assert out.shape == (K, rows, cols) and np.array_equal(out, kept[ids]), name
            del out
    te.release()
    del kept
    os.remove(path)
    os.rmdir(tmp)

    med = {k: statistics.median(v) / 1e6 for k, v in times.items()}
    ourt = med["strideweave project()"]
    print(f"# {experts} experts of {rows} x {cols} Float32 ({experts * rows * cols * 4 >> 20} MiB), "
          f"{K} per request ({K * rows * cols * 4 >> 20} MiB), page cache, {args.repeat} samples, "
          f"{os.cpu_count()} CPUs")
    targets = {"safe_open get_slice + np.stack": "<= 0.5", "np.take(np.memmap opened per request)": "<= 1.0",
               "np.take(kept np.memmap)": "(reported)"}
    print(f"{'reference':42s} {'ref ms':>8s} {'ours ms':>8s} {'ratio':>7s}  target")
    for k in names[1:]:
        print(f"{k:42s} {med[k]:8.2f} {ourt:8.2f} {ourt / med[k]:7.3f}  {targets[k]}")


if __name__ == "__main__":
    main()
