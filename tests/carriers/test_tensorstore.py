"""The TensorStore carrier (API.md section 14): storage, bulk routes in both
directions, asynchrony, autograd, Evictable tiers, zarr-python interop and
the optional-dependency contract. S3 lives in test_tensorstore_s3.py."""
import os
import shutil
import sys
import threading

import pytest

from support import process
import strideweave as sw

pytest.importorskip("tensorstore", reason="the optional tensorstore package (pip install tensorstore)")
np = pytest.importorskip("numpy")
# zarr-python 3 reads and writes zarr v3, the format these tests exchange; zarr
# 2 (the last for Python 3.10) does not.
ZARR3 = "zarr-python 3 (zarr v3 format; Python 3.11+)"

from strideweave.carriers import tensorstore as tsc  # noqa: E402
from strideweave.carriers.tensorstore import TensorStoreCarrier, open_tensor  # noqa: E402
from support.process import assert_child_ok

F32, I32 = sw.DType.Float32, sw.DType.Int32
WAIT = 30.0

LAYOUTS = {
    "compact": (0, sw.Layout.canonical(sw.Shape([12]))),
    "offset": (5, sw.Layout.canonical(sw.Shape([7]))),
    "strided": (3, sw.Layout(sw.Shape([3, 2]), sw.Stride([1, 5]))),            # holes inside the span
    "hierarchical": (2, sw.Layout(sw.Shape([2, [2, 3]]), sw.Stride([1, [3, 7]]))),
    "broadcast": (1, sw.Layout(sw.Shape([3, 4]), sw.Stride([1, 0]))),
}


def cpu_of(vals, dtype=F32):
    c = sw.CPU(len(vals), dtype=dtype)
    for i, v in enumerate(vals):
        c[i] = v
    return c


def values(t):
    return [t[i] for i in range(t.size())]


def slots(c):
    return [c[i] for i in range(c.size())]


def spans(t):
    """The physical span a bulk route transfers: [offset, offset + cosize)."""
    return slots(t.carrier)[t.offset:t.offset + t.layout.cosize]


# ------------------------------------------------------------ storage

def test_in_memory_constructor_is_the_definition_backed_contract():
    c = TensorStoreCarrier(4)
    assert c.dtype() is F32 and c.size() == 4 and slots(c) == [0.0] * 4 and c.version == 0
    c[2] = 1.25
    assert c[2] == 1.25 and c.version == 1
    i = TensorStoreCarrier(3, dtype=I32, mutable=False)
    assert i.dtype() is I32 and slots(i) == [0, 0, 0] and not i.is_mutable()
    with pytest.raises(RuntimeError, match="not mutable"):
        i[0] = 1
    with pytest.raises(ValueError, match="does not support"):
        TensorStoreCarrier(2, dtype=sw.DType.Bool)
    n = c.new_like([1.0, 2.0])
    assert type(n) is TensorStoreCarrier and slots(n) == [1.0, 2.0]
    spec = c.spec()
    assert spec["driver"] == "zarr3" and spec["kvstore"]["driver"] == "memory"
    c.release()
    assert c.is_released() and c.size() == 0
    with pytest.raises(RuntimeError, match="released"):
        c[0]


def test_create_open_and_release_keep_persistent_data(tmp_path):
    path = str(tmp_path / "a.zarr")
    c = TensorStoreCarrier.create(path, 6, dtype=I32, chunk_slots=4)
    assert c.size() == 6 and c.dtype() is I32 and slots(c) == [0] * 6
    c[5] = 7
    assert c.spec()["kvstore"]["path"].rstrip("/").endswith("a.zarr")
    c.release()
    assert os.path.exists(os.path.join(path, "zarr.json"))  # release never deletes
    again = TensorStoreCarrier.open(path)
    assert again.dtype() is I32 and slots(again) == [0, 0, 0, 0, 0, 7] and again.is_mutable()
    ro = TensorStoreCarrier.open(path, mutable=False)
    assert not ro.is_mutable()
    with pytest.raises(RuntimeError, match="not mutable"):
        ro[0] = 1
    # create refuses to overwrite an existing array.
    with pytest.raises(ValueError, match="ALREADY_EXISTS|already exists"):
        TensorStoreCarrier.create(path, 6)


def test_create_and_open_argument_errors(tmp_path):
    with pytest.raises(ValueError, match="Float32 and Int32"):
        TensorStoreCarrier.create(str(tmp_path / "b"), 2, dtype=sw.DType.Bool)
    with pytest.raises(TypeError, match="slots"):
        TensorStoreCarrier.create(str(tmp_path / "b"), True)
    with pytest.raises(ValueError, match="chunk_slots"):
        TensorStoreCarrier.create(str(tmp_path / "b"), 2, chunk_slots=0)
    with pytest.raises(TypeError, match="spec"):
        TensorStoreCarrier.open(42)
    with pytest.raises(ValueError, match="NOT_FOUND|not found"):
        TensorStoreCarrier.open(str(tmp_path / "missing"))
    import tensorstore as ts
    ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path / "i64")}}, create=True,
            dtype=ts.int64, shape=[3]).result()
    with pytest.raises(ValueError, match="Float32 and Int32"):
        TensorStoreCarrier.open(str(tmp_path / "i64"))
    ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path / "nd")}}, create=True,
            dtype=ts.float32, shape=[2, 3]).result()
    with pytest.raises(ValueError, match="open_tensor"):
        TensorStoreCarrier.open(str(tmp_path / "nd"))


# ------------------------------------------------------------ bulk routes

def destinations(tmp_path, n, dtype=F32):
    """In-memory (grown from empty), and zarr v3 files with chunks the span crosses."""
    return {
        "memory-empty": lambda: TensorStoreCarrier(0, dtype=dtype),
        "file-chunked": lambda: TensorStoreCarrier.create(str(tmp_path / "d.zarr"), n, dtype=dtype, chunk_slots=3),
    }


@pytest.mark.parametrize("where", ["memory-empty", "file-chunked"])
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_move_cpu_to_tensorstore_and_back(tmp_path, name, where, monkeypatch):
    offset, layout = LAYOUTS[name]
    src_vals = [float(k) * 1.5 + 0.25 for k in range(offset + layout.cosize + 2)]
    x = sw.Tensor(cpu_of(src_vals), offset, layout)
    expect, span = values(x), spans(x)
    calls = []
    for fn in ("_submit_write", "_submit_read"):
        real = getattr(tsc, fn)
        monkeypatch.setattr(tsc, fn, lambda r, real=real, fn=fn: calls.append(fn) or real(r))
    dst = destinations(tmp_path, layout.cosize)[where]()
    with sw.no_grad():
        y = sw.move(x, dst)
    assert x.carrier.is_released()
    assert type(y.carrier) is TensorStoreCarrier and y.offset == 0 and y.layout == layout
    assert slots(dst)[:layout.cosize] == span  # the whole span travelled, holes included
    assert values(y) == expect
    with sw.no_grad():
        z = sw.move(y, sw.CPU(layout.cosize))
    assert values(z) == expect and slots(z.carrier) == span
    assert calls == ["_submit_write", "_submit_read"]  # the bulk routes, not the elementwise fallback


def test_move_out_of_a_span_at_an_offset_crossing_chunks(tmp_path):
    c = TensorStoreCarrier.create(str(tmp_path / "s.zarr"), 20, dtype=I32, chunk_slots=4)
    for i in range(20):
        c[i] = i * 3
    layout = sw.Layout(sw.Shape([3, 2]), sw.Stride([2, 7]))  # cosize 12: slots 5..16 cross four chunks
    t = sw.Tensor(c, 5, layout)
    assert values(t) == [15, 21, 27, 36, 42, 48]
    with sw.no_grad():
        y = sw.move(t, sw.CPU(12, dtype=I32))
    assert slots(y.carrier) == [k * 3 for k in range(5, 17)]
    assert values(y) == [15, 21, 27, 36, 42, 48]


def test_int32_values_travel_exactly(tmp_path):
    vals = [2**31 - 1, -2**31, 0, 12345, -7]
    with sw.no_grad():
        y = sw.move(sw.Tensor(cpu_of(vals, I32), 0, sw.Layout.canonical(sw.Shape([5]))),
                    TensorStoreCarrier.create(str(tmp_path / "i.zarr"), 5, dtype=I32))
        z = sw.move(y, sw.CPU(5, dtype=I32))
    assert values(z) == vals


def test_an_empty_persistent_array_grows_as_a_destination(tmp_path):
    path = str(tmp_path / "grow.zarr")
    c = TensorStoreCarrier.create(path, 0)
    assert c.size() == 0
    with sw.no_grad():
        sw.move(sw.Tensor(cpu_of([1.0, 2.0, 3.0]), 0, sw.Layout.canonical(sw.Shape([3]))), c)
    assert c.size() == 3 and slots(c) == [1.0, 2.0, 3.0]
    assert slots(TensorStoreCarrier.open(path)) == [1.0, 2.0, 3.0]  # resized persistently


def test_other_pairs_use_the_elementwise_fallback():
    a = TensorStoreCarrier(3)
    for i, v in enumerate([1.0, 2.0, 3.0]):
        a[i] = v
    t = sw.Tensor(a, 0, sw.Layout.canonical(sw.Shape([3])))
    with sw.no_grad():
        b = sw.move(t, TensorStoreCarrier(3))                 # (TS, TS): no route, both permit
        assert type(b.carrier) is TensorStoreCarrier and slots(b.carrier) == [1.0, 2.0, 3.0]
        g = sw.move(b, sw.Generic([0.0] * 3, dtype=F32))      # (TS, Generic): definition-free side
    assert values(g) == [1.0, 2.0, 3.0]


def test_move_async_returns_before_the_store_completes(monkeypatch):
    """submit() only starts the write: move_async returns while the
    completion is pending and a move worker, not the caller, waits on it."""
    gate, waiters = threading.Event(), []
    real_wait = tsc._Completion.wait

    def held_wait(self):
        waiters.append(threading.get_ident())
        assert gate.wait(WAIT)
        real_wait(self)

    monkeypatch.setattr(tsc._Completion, "wait", held_wait)
    x = sw.Tensor(cpu_of([1.0, 2.0, 3.0]), 0, sw.Layout.canonical(sw.Shape([3])))
    dst = TensorStoreCarrier(3)
    with sw.no_grad():
        h = sw.move_async(x, dst)
    assert not h.done and dst.is_owned() and x.carrier.is_owned()
    gate.set()
    y = h.wait(timeout=WAIT)
    assert values(y) == [1.0, 2.0, 3.0] and waiters and waiters[0] != threading.get_ident()
    assert not dst.is_owned() and x.carrier.is_released()


def test_backward_through_a_move_into_tensorstore(tmp_path):
    x = sw.Tensor(cpu_of([1.0, 2.0, 3.0, 4.0, 5.0]), 1, sw.Layout(sw.Shape([2]), sw.Stride([2])))
    y = sw.move(x, TensorStoreCarrier.create(str(tmp_path / "g.zarr"), 3))
    assert isinstance(y.autograd_ctx, sw.MoveOperation) and y.autograd_ctx.inputs() == (x,)
    g = TensorStoreCarrier(3)
    g[0], g[2] = 10.0, 30.0
    y.backward(sw.Tensor(g, 0, y.layout))
    assert type(x.grad.carrier) is sw.CPU and values(x.grad) == [10.0, 30.0]
    # And the other way: a move out of the store back-propagates into the store's class.
    s = TensorStoreCarrier(2)
    s[0], s[1] = 1.0, 2.0
    a = sw.Tensor(s, 0, sw.Layout.canonical(sw.Shape([2])))
    b = sw.move(a, sw.CPU(2))
    b.backward(sw.Tensor(cpu_of([0.5, -1.0]), 0, b.layout))
    assert type(a.grad.carrier) is TensorStoreCarrier and values(a.grad) == [0.5, -1.0]


@pytest.mark.parametrize("where", ["memory", "file"])
def test_evictable_with_a_tensorstore_secondary(tmp_path, where, monkeypatch):
    calls = []
    for fn in ("_submit_write", "_submit_read"):
        real = getattr(tsc, fn)
        monkeypatch.setattr(tsc, fn, lambda r, real=real, fn=fn: calls.append(fn) or real(r))
    vals = [0.5 * k for k in range(10)]
    secondary = (TensorStoreCarrier(10) if where == "memory"
                 else TensorStoreCarrier.create(str(tmp_path / "tier.zarr"), 10, chunk_slots=4))
    ev = sw.Evictable(cpu_of(vals), secondary)
    ev.evict()
    assert ev.is_evicted() and slots(secondary) == vals
    with pytest.raises(RuntimeError, match="evicted"):
        ev[0]
    ev.promote()
    assert not ev.is_evicted() and slots(ev) == vals
    assert calls == ["_submit_write", "_submit_read"]


def test_store_errors_are_the_moves_recorded_exception(tmp_path):
    path = tmp_path / "gone.zarr"
    dst = TensorStoreCarrier.create(str(path), 4, chunk_slots=2)
    shutil.rmtree(path)
    path.write_text("not a directory")  # chunk writes now fail in the file system
    src = cpu_of([1.0, 2.0, 3.0, 4.0])
    with sw.no_grad():
        h = sw.move_async(sw.Tensor(src, 0, sw.Layout.canonical(sw.Shape([4]))), dst)
    with pytest.raises(Exception) as info:
        h.wait(timeout=WAIT)
    assert "gone.zarr" in str(info.value)
    with pytest.raises(type(info.value)):
        h.wait(timeout=WAIT)
    # The source stays live, unowned, writable and intact.
    assert not src.is_released() and not src.is_owned() and src.is_mutable()
    assert slots(src) == [1.0, 2.0, 3.0, 4.0]


# ------------------------------------------------------------ zarr-python interop

def test_zarr_reads_what_strideweave_wrote(tmp_path):
    zarr = pytest.importorskip("zarr", minversion="3", reason=ZARR3)
    path = str(tmp_path / "w.zarr")
    vals = [float(k) - 3.5 for k in range(17)]
    with sw.no_grad():
        sw.move(sw.Tensor(cpu_of(vals), 0, sw.Layout.canonical(sw.Shape([17]))),
                TensorStoreCarrier.create(path, 17, chunk_slots=5))
    arr = zarr.open_array(path, mode="r")
    assert arr.shape == (17,) and arr.dtype == np.float32 and arr.metadata.zarr_format == 3
    assert arr[:].tolist() == vals


@pytest.mark.parametrize("zarr_format", [3, 2])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_open_tensor_on_an_array_zarr_wrote(tmp_path, zarr_format, dtype):
    zarr = pytest.importorskip("zarr", minversion="3", reason=ZARR3)
    path = str(tmp_path / "z.zarr")
    data = (np.arange(2 * 3 * 4) * 3 - 7).astype(dtype).reshape(2, 3, 4)
    arr = zarr.create_array(store=path, shape=data.shape, dtype=dtype, chunks=(1, 2, 3), zarr_format=zarr_format)
    arr[:] = data
    spec = path if zarr_format == 3 else {"driver": "zarr", "kvstore": {"driver": "file", "path": path}}
    t = open_tensor(spec)
    assert type(t.carrier) is TensorStoreCarrier and t.carrier.size() == 24 and t.offset == 0
    assert t.layout == sw.Layout(sw.Shape([2, 3, 4]), sw.Stride([12, 4, 1]))
    assert t.dtype() is (F32 if dtype == "float32" else I32)
    assert t[(1, 2, 3)] == data[1, 2, 3].item()
    with sw.no_grad():
        y = sw.move(t, sw.CPU(24, dtype=t.dtype()))
    assert slots(y.carrier) == data.ravel().tolist()
    assert all(y[(i, j, k)] == data[i, j, k].item() for i in range(2) for j in range(3) for k in range(4))
    ro = open_tensor(spec, mutable=False)
    assert not ro.carrier.is_mutable()


def test_open_tensor_moves_back_into_the_nd_array(tmp_path):
    zarr = pytest.importorskip("zarr", minversion="3", reason=ZARR3)
    path = str(tmp_path / "nd.zarr")
    zarr.create_array(store=path, shape=(3, 5), dtype="float32", chunks=(2, 2))
    t = open_tensor(path)
    vals = [float(k) for k in range(15)]
    with sw.no_grad():
        y = sw.move(sw.Tensor(cpu_of(vals), 0, t.layout), t.carrier)
    assert y.carrier is t.carrier
    assert zarr.open_array(path, mode="r")[:].ravel().tolist() == vals


# ------------------------------------------------------------ optional dependency

def run_python(code):
    """The child also sees this process's whole sys.path: tensorstore and
    moto may live outside the default site-packages (a test venv)."""
    return process.run_python(code, pythonpath=[process.PACKAGE_ROOT] + [p for p in sys.path if p])


def test_without_tensorstore_the_module_names_the_extra():
    code = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "tensorstore" or name.startswith("tensorstore."):
            raise ImportError("No module named 'tensorstore' (blocked by the test)")
        return None
sys.meta_path.insert(0, Block())
import strideweave, strideweave.carriers.move, strideweave.carriers.extension
assert "tensorstore" not in sys.modules
try:
    import strideweave.carriers.tensorstore
except ImportError as e:
    print("IMPORTERROR", e)
"""
    r = run_python(code)
    assert_child_ok(r)
    # Names the extra and an install line that works: the public index's
    # `strideweave` is another project, so never `pip install strideweave[...]`.
    assert "IMPORTERROR" in r.stdout and "tensorstore extra" in r.stdout
    assert "pip install tensorstore" in r.stdout and 'pip install ".[tensorstore]"' in r.stdout
    assert "pip install strideweave" not in r.stdout


def test_nothing_else_imports_tensorstore():
    r = run_python("import sys, strideweave, strideweave.carriers.extension, strideweave.carriers.move\n"
                   "print('tensorstore' in sys.modules)")
    assert_child_ok(r)
    assert r.stdout.strip() == "False"
