"""Peak memory of the backward of direct operations on a full TiledEvictable
(issue 13, item 6 leftovers), measured in a child process (VmHWM growth over
the operation node's backward after resetting it): reading the tiled input
band by band, the backward of relu and mul holds its gradient results and
about a band, where the dense path (the private ``_options.dense_only`` knob,
in the same process) first makes a dense copy of the tiled input: a tensor
more. (A whole ``backward()`` also holds every node's cotangent and the
copies ``.grad`` commits, the same on both paths.) The forward on a primary
the kernels do not read in place (a CPU subclass) is measured alongside.

Run as a script for the report's table (peaks in MB, best-of-5 times in s):
    STRIDEWEAVE_BUILD=build-dev PYTHONPATH=.:tests python tests/tiled/test_backward_memory.py 64 1024 1024
"""
import json
import sys

from support.tiled import HWM_CHILD_PRELUDE, hwm_only, run_hwm_child

BACKWARD_CHILD = HWM_CHILD_PRELUDE + r"""

n_tiles, rows, cols, repeat = NTILES, ROWS, COLS, REPEAT
tile = rows * cols
n = n_tiles * tile
flat = sw.Layout(sw.Shape(n), sw.Stride(1))
c = sw.CPU(n, empty=True)
np.from_dlpack(sw.Tensor(c, 0, flat))[:] = np.arange(n, dtype=np.float32) % 7 - 3
fb = sw.move(sw.Tensor(c, 0, flat), sw.FileBacked(dtype=sw.DType.Float32)).carrier
c.release()
del c
te = TiledEvictable(sw.CPU(0), fb, (n_tiles, 1, 1), (1, rows, cols))  # every tile on the file
lay = te.canonical_layout()
yc = sw.CPU(n, empty=True)
np.from_dlpack(sw.Tensor(yc, 0, flat))[:] = 0.5
ylay = sw.Layout.canonical(lay.shape)
sc = sw.CPU(tile, empty=True)  # a scale shared by every tile (broadcast across them)
np.from_dlpack(sw.Tensor(sc, 0, sw.Layout(sw.Shape(tile), sw.Stride(1))))[:] = 0.25
slay = sw.Layout.canonical(sw.Shape([[1, 1], [rows, 1], [cols, 1]]))

class SubCPU(sw.CPU):  # a primary class the kernels do not read in place: every span is staged
    pass

c2 = sw.CPU(n, empty=True)
np.from_dlpack(sw.Tensor(c2, 0, flat))[:] = np.arange(n, dtype=np.float32) % 5 - 2
fb2 = sw.move(sw.Tensor(c2, 0, flat), sw.FileBacked(dtype=sw.DType.Float32)).carrier
c2.release()
del c2
te2 = TiledEvictable(SubCPU(0), fb2, (n_tiles, 1, 1), (1, rows, cols))
te2.promote(TileSet([(k, 0, 0) for k in range(0, n_tiles, 2)]))  # half the tiles in the primary
w2 = sw.Tensor(te2, 0, lay)

FORWARD = {
    "sub_add": lambda: sw.add(w2, w2),
    "sub_reduce_sum": lambda: sw.reduce_sum(w2),
}

def forward_once(name):
    with sw.no_grad():
        reset()
        base = hwm()
        t0 = time.perf_counter()
        r = FORWARD[name]()
        dt = time.perf_counter() - t0
        peak = hwm() - base
        check = float(r[0])
        assert type(r.carrier) is SubCPU
        r.carrier.release()
    return peak, dt, check

OPS = {
    "relu": lambda w, y: sw.relu(w),
    "mul": lambda w, y: sw.mul(w, y),  # y's gradient reads the tiles
    "mul_self": lambda w, y: sw.mul(w, w),  # each gradient reads the tiles
    "mul_shared": lambda w, y: sw.mul(w, sw.Tensor(sc, 0, slay)),  # the scale's gradient sums over the tiles
    "reduce_sum": lambda w, y: sw.reduce_sum(w),  # reads no tile
}
out = {}

def once(name):
    # The operation node's backward alone, on a cotangent made before the
    # measurement: what the operation holds at its peak (a whole backward()
    # adds the cotangents of every node and the copies .grad commits).
    w, y = sw.Tensor(te, 0, lay), sw.Tensor(yc, 0, ylay)
    r = OPS[name](w, y)
    gc = sw.CPU(r.size(), empty=True)
    np.from_dlpack(sw.Tensor(gc, 0, sw.Layout(sw.Shape(r.size()), sw.Stride(1))))[:] = 1.0
    g = sw.Tensor(gc, 0, r.layout)
    reset()
    base = hwm()
    t0 = time.perf_counter()
    grads = r.autograd_ctx.backward(g)
    dt = time.perf_counter() - t0
    peak = hwm() - base
    check = float(grads[0].carrier[0])
    for x in grads:
        if x is not None:
            x.carrier.release()
    del grads, r
    gc.release()
    return peak, dt, check

def run(mode):
    for name in OPS:
        peak, dt, check = once(name)
        out[f"{mode}_{name}"] = peak
        out[f"{mode}_{name}_grad0"] = check
        ts = [dt] + [once(name)[1] for _ in range(repeat)]
        out[f"{mode}_{name}_best_s"] = min(ts)
    for name in FORWARD:
        peak, dt, check = forward_once(name)
        out[f"{mode}_{name}"] = peak
        out[f"{mode}_{name}_grad0"] = check  # (the result's slot 0)
        ts = [dt] + [forward_once(name)[1] for _ in range(repeat)]
        out[f"{mode}_{name}_best_s"] = min(ts)

run("tiles")
import strideweave.carriers.tiled_evictable as tev
tev._options.dense_only = True  # the dense path: a dense copy of the tiled input first
run("dense")
print(json.dumps(out))
"""


def backward_child(n_tiles, rows, cols, repeat=0):
    return run_hwm_child(BACKWARD_CHILD, NTILES=n_tiles, ROWS=rows, COLS=cols, REPEAT=repeat)


@hwm_only
def test_backward_peaks_a_tensor_lower_than_the_dense_path():
    MiB = 1 << 20
    # 48 tiles of 256 x 1024 Float32: a 48 MiB tensor, above the storage
    # layer's 32 MiB reuse cap (freed buffers go back to the system, so one
    # measurement does not feed the next)
    n_tiles = 48
    total = n_tiles * MiB
    r = backward_child(n_tiles, 256, 1024)
    # values: slot 0 holds -3 (relu: 0; mul: 0.5; mul_self: the first gradient, -3; reduce_sum: 1), both paths
    for mode in ("tiles", "dense"):
        assert [r[f"{mode}_{k}_grad0"] for k in ("relu", "mul", "mul_self", "reduce_sum")] == [0.0, 0.5, -3.0, 1.0]
    # relu: its gradient (adopted as the tiled gradient's primary) plus about a band
    assert r["tiles_relu"] < total + 8 * MiB, r
    # mul: both gradients plus about a band
    assert r["tiles_mul"] < 2 * total + 8 * MiB, r
    assert r["tiles_mul_self"] < 2 * total + 8 * MiB, r
    # the dense path first copies the tiled input: a tensor more
    # mul by a scale shared by every tile: w's gradient plus a tile's products and sums
    assert r["tiles_mul_shared"] < total + 8 * MiB, r
    assert r["tiles_mul_shared_grad0"] == r["dense_mul_shared_grad0"] == 0.25
    for name in ("relu", "mul", "mul_self", "mul_shared"):
        assert r[f"dense_{name}"] > r[f"tiles_{name}"] + total - 4 * MiB, (name, r)
    # reduce_sum reads no tile: its gradient alone, on both paths
    assert r["tiles_reduce_sum"] < total + 8 * MiB and r["dense_reduce_sum"] < total + 8 * MiB, r
    # the forward on a CPU-subclass primary stages bands too: add holds its
    # result and a band, reduce_sum a band; the dense path a copy more
    assert r["tiles_sub_add_grad0"] == r["dense_sub_add_grad0"] == -4.0
    assert r["tiles_sub_reduce_sum_grad0"] == r["dense_sub_reduce_sum_grad0"]
    assert r["tiles_sub_add"] < total + 8 * MiB, r
    assert r["tiles_sub_reduce_sum"] < 8 * MiB, r
    assert r["dense_sub_add"] > r["tiles_sub_add"] + total - 4 * MiB, r
    assert r["dense_sub_reduce_sum"] > total - 4 * MiB, r


if __name__ == "__main__":
    res = backward_child(*map(int, sys.argv[1:4]), repeat=4)
    mb = {k: (round(v / 1e6, 1) if not k.endswith(("_s", "_grad0")) else v) for k, v in res.items()}
    print(json.dumps(mb, indent=1))
