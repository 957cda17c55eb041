"""TensorStore arrays whose domain does not start at 0 are seen from a zero
origin (every read failed with OUT_OF_RANGE before), and the size limits say
what the limit is (create(path, 2**62) used to report "domain must be
specified", a [2**40, 2**40] array an OverflowError about index-sized
integers)."""
import pytest

import strideweave as sw

ts = pytest.importorskip("tensorstore", reason="the optional tensorstore package (pip install strideweave[tensorstore])")
np = pytest.importorskip("numpy")

from strideweave.carriers.tensorstore import TensorStoreCarrier, open_tensor  # noqa: E402

F32, I32 = sw.DType.Float32, sw.DType.Int32


def array(path, values):
    a = np.asarray(values)
    dtype = ts.int32 if a.dtype.kind == "i" else ts.float32
    store = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}, create=True, dtype=dtype,
                    shape=list(a.shape)).result()
    store.write(a.astype(np.int32 if a.dtype.kind == "i" else np.float32)).result()
    return store


@pytest.mark.parametrize("origin", [5, -3, 2**40])
def test_a_1d_array_with_a_shifted_domain_opens_at_zero(tmp_path, origin):
    store = array(tmp_path / "a", np.arange(5, dtype=np.int32))
    spec = store[ts.d[:].translate_to[origin]].spec().to_json()
    assert spec["transform"]["input_inclusive_min"] == [origin]
    c = TensorStoreCarrier.open(spec)
    assert c.size() == 5 and c.dtype() is I32
    assert [c[i] for i in range(5)] == [0, 1, 2, 3, 4]
    t = sw.Tensor(c, 0, sw.Layout.canonical(sw.Shape([5])))
    assert sw.move(t, sw.CPU(5, dtype=I32)).tolist() == [0, 1, 2, 3, 4]
    # Writes land in the same elements: slot i is the array's i-th element.
    c = TensorStoreCarrier.open(spec)
    c[0] = 9
    sw.move(sw.tensor([10, 11, 12], dtype=I32), c)  # the bulk incoming route
    assert store.read().result().tolist() == [10, 11, 12, 3, 4]


def test_open_tensor_of_a_2d_array_with_a_shifted_domain(tmp_path):
    store = array(tmp_path / "b", np.arange(12, dtype=np.float32).reshape(4, 3))
    spec = store[ts.d[:].translate_to[5, -7]].spec().to_json()
    t = open_tensor(spec)
    assert t.tolist() == np.arange(12, dtype=np.float32).reshape(4, 3).tolist()
    back = sw.move(t, sw.CPU(12))
    assert np.asarray(back).tolist() == np.arange(12, dtype=np.float32).reshape(4, 3).tolist()


def test_create_beyond_tensorstores_largest_extent_names_the_limit(tmp_path):
    with pytest.raises(ValueError, match=r"at most 2\*\*62 - 1 \(4611686018427387903\).*not 4611686018427387904"):
        TensorStoreCarrier.create(str(tmp_path / "c"), 2**62)
    with pytest.raises(ValueError, match=r"chunk_slots must be at most 2\*\*62 - 1"):
        TensorStoreCarrier.create(str(tmp_path / "d"), 4, chunk_slots=2**62)
    assert not (tmp_path / "c").exists() and not (tmp_path / "d").exists()
    c = TensorStoreCarrier.create(str(tmp_path / "e"), 2**62 - 1)  # the limit itself (metadata only)
    assert c.size() == 2**62 - 1


def test_an_array_of_more_slots_than_a_carrier_holds_names_the_limit(tmp_path):
    path = tmp_path / "big"
    ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}, create=True, dtype=ts.float32,
            shape=[2**40, 2**40]).result()
    with pytest.raises(ValueError, match=r"open_tensor\(\): an array of shape \[1099511627776, 1099511627776\] has "
                                         r"\d+ elements; a carrier holds at most 2\*\*63 - 1"):
        open_tensor(str(path))
