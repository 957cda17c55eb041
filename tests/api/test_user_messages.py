"""Messages a new user meets, each naming the call they made, the class
involved and the fix."""
import numpy as np
import pytest

import strideweave as sw


def test_move_of_data_names_move_and_points_to_tensor():
    with pytest.raises(TypeError, match=r"^move\(\) tensor must be a Tensor, not list \(make one from data with "
                                        r"strideweave.tensor\(data\)\)"):
        sw.move([1.0, 2.0], sw.CPU(2))
    with pytest.raises(TypeError, match=r"^move_async\(\) tensor must be a Tensor, not list"):
        sw.move_async([1.0, 2.0], sw.CPU(2))
    with pytest.raises(TypeError, match=r"^move\(\) destination must be a Carrier instance, not int"):
        sw.move(sw.tensor([1.0]), 3)


def test_numpy_view_of_a_moved_tensor_says_the_carrier_is_released():
    x = sw.tensor([1.0, 2.0])
    sw.move(x, sw.CPU(2))
    with pytest.raises(RuntimeError, match=r"^CPU carrier is released: .*use the tensor the move returned"):
        np.asarray(x)
    with pytest.raises(RuntimeError, match="CPU carrier is released"):
        x.numpy()


def test_an_operation_on_a_file_backed_tensor_says_how_to_move_it():
    f = sw.move(sw.tensor([1.0, -2.0]), sw.FileBacked(dtype=sw.float32))
    with pytest.raises(TypeError, match=r"^relu\(\) supports CPU and Generic tensors, not a FileBacked carrier: "
                                        r"move the tensor to CPU first \(t = strideweave.move\(t, "
                                        r"strideweave.CPU\(t.layout.cosize, dtype=t.dtype\(\)\)\)\)"):
        sw.relu(f)
    # The suggested move works and the operation then runs.
    assert sw.relu(sw.move(f, sw.CPU(f.layout.cosize, dtype=f.dtype()))).tolist() == [1.0, 0.0]
    g = sw.move(sw.Tensor(sw.Generic([1.0, 2.0]), 0, sw.Layout.canonical(sw.Shape(2))), sw.FileBacked())
    with pytest.raises(TypeError, match=r"move the tensor to Generic first \(t = strideweave.move\(t, "
                                        r"strideweave.Generic\(\[\], dtype=t.dtype\(\)\)\)\)"):
        sw.reduce_sum(g)  # Floating: CPU cannot hold it
    assert sw.reduce_sum(sw.move(g, sw.Generic([], dtype=g.dtype()))).item() == 3.0


def test_an_evictable_is_named_with_an():
    e = sw.Evictable(sw.CPU(2), sw.FileBacked(dtype=sw.float32))
    with pytest.raises(TypeError, match="not an Evictable carrier"):
        sw.relu(sw.Tensor(e, 0, sw.Layout.canonical(sw.Shape(2))))
    with pytest.raises(RuntimeError, match="^an Int32 tensor is not differentiable"):
        sw.tensor([1]).grad


def test_carrier_sizes_that_are_values_point_to_tensor():
    for values, name in ((np.arange(6), "numpy.ndarray"), ([1.0, 2.0], "list")):
        with pytest.raises(TypeError, match=rf"^CPU\(\) size must be an int \(the number of slots\), not {name}; "
                                            r"to make a tensor from values use strideweave.tensor\(data\)"):
            sw.CPU(values)
    with pytest.raises(TypeError, match="size must be an int, not bool"):
        sw.CPU(True)
    assert sw.CPU(np.int64(3)).size() == 3


def test_repr_of_a_moved_from_tensor_says_released():
    x = sw.tensor([1.0])
    sw.move(x, sw.FileBacked(dtype=sw.float32))
    assert repr(x).startswith("Tensor(<released: the CPU carrier's storage was given up")
