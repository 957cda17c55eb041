"""Exporting a tensor whose CPU carrier was moved away or released: the
BufferError keeps "data pointer must be non-null" and says the carrier is
released, as np.asarray does ("CPU carrier is released"), for every way a
consumer asks."""
import numpy as np
import pytest

import strideweave as sw

MESSAGE = r"DLPack data pointer must be non-null: the CPU carrier is released \(moved or released\)"


def moved():
    x = sw.tensor([1.0, 2.0, 3.0])
    sw.move(x, sw.FileBacked(dtype=sw.DType.Float32))
    return x


def released():
    x = sw.tensor([[1, 2], [3, 4]])
    x.carrier.release()
    return x


CONSUMERS = {
    "np.from_dlpack": np.from_dlpack,
    "__dlpack__": lambda x: x.__dlpack__(),
    "__dlpack__ versioned": lambda x: x.__dlpack__(max_version=(1, 0)),
    "sw.from_dlpack": sw.from_dlpack,
}


@pytest.mark.parametrize("make", [moved, released], ids=["moved", "released"])
@pytest.mark.parametrize("consumer", list(CONSUMERS), ids=list(CONSUMERS))
def test_export_of_a_released_cpu_carrier_says_it_is_released(make, consumer):
    x = make()
    with pytest.raises(BufferError, match=MESSAGE):
        CONSUMERS[consumer](x)


def test_torch_from_dlpack_sees_the_same_message():
    torch = pytest.importorskip("torch")
    with pytest.raises(BufferError, match=MESSAGE):
        torch.from_dlpack(moved())


def test_np_asarray_and_the_export_agree():
    x = moved()
    with pytest.raises(RuntimeError, match="CPU carrier is released"):
        np.asarray(x)


def test_a_released_subclass_is_named_by_its_class():
    class Host(sw.CPU):
        pass

    c = Host(2)
    t = sw.Tensor(c, 0, sw.Layout.canonical(sw.Shape(2)))
    c.release()
    with pytest.raises(BufferError, match="non-null: the Host carrier is released"):
        np.from_dlpack(t)
