"""strideweave.from_dlpack with real producers: PyTorch (through its DLPack C
exchange API, and through capsules), JAX CPU arrays, tvm-ffi tensors, and
round trips back out (NumPy -> StrideWeave -> NumPy stays zero-copy)."""
import gc

import numpy as np
import pytest

import strideweave as sw

from support.dlpack import capsule_name


def leaves(t):
    return t.layout.leaves()


# ------------------------------------------------------------ PyTorch


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def test_torch_exposes_the_exchange_api(torch):
    assert "__dlpack_c_exchange_api__" in dir(torch.Tensor)


def test_a_torch_tensor_is_imported_through_the_exchange_api(torch, monkeypatch):
    tt = torch.arange(12, dtype=torch.float32).reshape(3, 4)

    def no_capsules(*args, **kw):
        raise AssertionError("the C exchange API path makes no capsule")

    monkeypatch.setattr(torch.Tensor, "__dlpack__", no_capsules)
    t = sw.from_dlpack(tt)
    assert type(t.carrier) is sw.CPU
    assert t.carrier.pointer() == tt.data_ptr()
    assert leaves(t) == [(3, 4), (4, 1)]
    assert t.tolist() == tt.tolist()
    assert t.is_mutable()
    t[(2, 3)] = -1.0
    assert tt[2, 3].item() == -1.0


def test_a_torch_capsule_imports_the_same(torch):
    tt = torch.arange(6, dtype=torch.int32)
    for cap in (tt.__dlpack__(), tt.__dlpack__(max_version=(1, 0))):
        name = capsule_name(cap)
        t = sw.from_dlpack(cap)
        assert capsule_name(cap) == "used_" + name
        assert t.carrier.pointer() == tt.data_ptr() and t.tolist() == tt.tolist()


@pytest.mark.parametrize(
    "view",
    [lambda x: x[3:], lambda x: x.reshape(3, 4)[1:, ::2], lambda x: x.reshape(3, 4).T,
     lambda x: x.reshape(3, 4)[:, 1].unsqueeze(1)],
    ids=["storage-offset", "sliced", "transposed", "unsqueezed"],
)
def test_torch_views_keep_storage_offset_and_strides(torch, view):
    tt = view(torch.arange(12, dtype=torch.float32))
    t = sw.from_dlpack(tt)
    assert t.carrier.pointer() == tt.data_ptr()
    assert [e for e, _ in leaves(t)] == list(tt.shape)
    for (e, s), ts, te in zip(leaves(t), tt.stride(), tt.shape):
        assert s == ts or te == 1
    assert t.tolist() == tt.tolist()


def test_torch_dtypes(torch):
    assert sw.from_dlpack(torch.tensor([True, False])).tolist() == [True, False]
    assert sw.from_dlpack(torch.tensor([1, 2], dtype=torch.int32)).dtype() is sw.DType.Int32
    with pytest.raises(TypeError, match=r"float64.*np\.float32"):
        sw.from_dlpack(torch.zeros(2, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"int64.*np\.int32"):
        sw.from_dlpack(torch.zeros(2, dtype=torch.int64))


def test_a_refusal_of_the_exchange_api_is_asked_of_the_protocol(torch):
    # torch's C path reports a C++ RuntimeError; __dlpack__ says BufferError.
    with pytest.raises(BufferError, match="meta"):
        sw.from_dlpack(torch.zeros(2, device="meta"))
    with pytest.raises(BufferError, match="layout other than torch.strided"):
        sw.from_dlpack(torch.zeros(2).to_sparse())


def test_a_tensor_that_requires_grad_imports_as_the_c_api_allows(torch):
    # torch's exchange API exports it (as tvm_ffi.from_dlpack sees it); only
    # its Python __dlpack__ refuses.
    p = torch.arange(3.0, requires_grad=True)
    t = sw.from_dlpack(p)
    assert t.carrier.pointer() == p.data_ptr() and t.tolist() == [0.0, 1.0, 2.0]


def test_torch_copy_and_negative_strides(torch):
    tt = torch.arange(4, dtype=torch.float32)
    t = sw.from_dlpack(tt, copy=True)
    assert t.carrier.pointer() != tt.data_ptr()
    t[(0,)] = 9.0
    assert tt[0].item() == 0.0
    assert sw.from_dlpack(tt, copy=False).carrier.pointer() == tt.data_ptr()


def test_torch_memory_outlives_the_torch_tensor(torch):
    tt = torch.arange(1000, dtype=torch.float32)
    t = sw.from_dlpack(tt)
    del tt
    gc.collect()
    junk = [torch.full((1000,), 7.0) for _ in range(20)]  # would reuse freed memory
    assert t[(999,)] == 999.0 and t[(0,)] == 0.0
    del junk


def test_exchange_and_protocol_paths_agree(torch):
    tt = torch.arange(6, dtype=torch.float32).reshape(2, 3)[:, 1:]

    class Capsules:  # the same tensor without the exchange API
        def __dlpack__(self, **kw):
            return tt.__dlpack__(**kw)

    a, b = sw.from_dlpack(tt), sw.from_dlpack(Capsules())
    assert a.carrier.pointer() == b.carrier.pointer() == tt.data_ptr()
    assert a.layout == b.layout and a.tolist() == b.tolist()
    assert a.is_mutable() and b.is_mutable()


def test_torch_round_trip(torch):
    tt = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    back = torch.from_dlpack(sw.from_dlpack(tt))
    assert back.data_ptr() == tt.data_ptr() and torch.equal(back, tt)


# ------------------------------------------------------------ JAX


@pytest.fixture
def jnp():
    pytest.importorskip("jax")
    import jax.numpy

    return jax.numpy


def test_a_jax_array_is_viewed_read_only(jnp):
    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    t = sw.from_dlpack(x)
    assert type(t.carrier) is sw.CPU
    assert t.carrier.pointer() == x.unsafe_buffer_pointer()
    assert leaves(t) == [(3, 4), (4, 1)]
    assert t.tolist() == np.asarray(x).tolist()
    # JAX arrays are immutable and export legacy capsules: read-only.
    assert not t.is_mutable()
    with pytest.raises(RuntimeError, match="not mutable"):
        t[(0, 0)] = 1.0


def test_jax_dtypes_and_copies(jnp):
    assert sw.from_dlpack(jnp.array([1, 2], dtype=jnp.int32)).dtype() is sw.DType.Int32
    assert sw.from_dlpack(jnp.array([True, False])).tolist() == [True, False]
    x = jnp.arange(3, dtype=jnp.float32)
    c = sw.from_dlpack(x, copy=True)
    assert c.is_mutable() and c.carrier.pointer() != x.unsafe_buffer_pointer()
    with pytest.raises(TypeError, match="float16"):
        sw.from_dlpack(jnp.zeros(2, dtype=jnp.float16))


def test_jax_memory_outlives_the_array(jnp):
    x = jnp.arange(256, dtype=jnp.float32) * 2
    t = sw.from_dlpack(x)
    del x
    gc.collect()
    assert t[(255,)] == 510.0


# ------------------------------------------------------------ tvm-ffi


@pytest.fixture
def tvm_ffi():
    return pytest.importorskip("tvm_ffi")


def test_a_tvm_ffi_tensor_is_viewed(tvm_ffi):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = tvm_ffi.from_dlpack(a)
    t = sw.from_dlpack(x)
    assert t.carrier.pointer() == a.ctypes.data
    assert t.tolist() == a.tolist() and t.is_mutable()


def test_a_tvm_ffi_tensor_copies_although_tvm_cannot(tvm_ffi):
    a = np.arange(3, dtype=np.int32)
    x = tvm_ffi.from_dlpack(a)
    with pytest.raises(BufferError):
        x.__dlpack__(max_version=(1, 3), copy=True)  # what tvm-ffi says to copy=True
    t = sw.from_dlpack(x, copy=True)
    assert t.carrier.pointer() != a.ctypes.data and t.tolist() == [0, 1, 2]


def test_tvm_ffi_reads_an_import_back(tvm_ffi):
    a = np.arange(4, dtype=np.float32)
    y = tvm_ffi.from_dlpack(sw.from_dlpack(a))
    assert np.from_dlpack(y).ctypes.data == a.ctypes.data


# ------------------------------------------------------------ round trips


def test_numpy_round_trip_is_zero_copy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, 1::2]
    back = np.from_dlpack(sw.from_dlpack(a))
    assert back.ctypes.data == a.ctypes.data
    assert back.shape == a.shape and back.strides == a.strides
    assert np.shares_memory(back, a)
    back[0, 0] = 100.0
    assert a[0, 0] == 100.0
    assert np.asarray(sw.from_dlpack(a)).ctypes.data == a.ctypes.data


def test_a_round_trip_of_a_read_only_array_stays_read_only():
    a = np.arange(3, dtype=np.int32)
    a.flags.writeable = False
    back = np.from_dlpack(sw.from_dlpack(a))
    assert back.ctypes.data == a.ctypes.data and not back.flags.writeable


def test_a_strideweave_tensor_round_trip():
    t = sw.tensor([[1.0, 2.0], [3.0, 4.0]])
    u = sw.from_dlpack(sw.from_dlpack(t))
    assert u.carrier.pointer() == t.carrier.pointer() and u.tolist() == t.tolist()
