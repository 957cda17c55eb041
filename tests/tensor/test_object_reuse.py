"""Tensor and CPU objects freed by one operation are reused by the next
(StrideWeave keeps a few, as CPython keeps floats and tuples): a reused
object must be indistinguishable from a new one, and nothing that pointed
at the old object may reach the new one."""
import gc
import weakref

import numpy as np

import strideweave as sw


def test_a_weakref_to_a_freed_tensor_stays_dead_when_its_object_is_reused():
    a = np.arange(4, dtype=np.float32)
    t = sw.from_dlpack(a)
    ref = weakref.ref(t)
    address = id(t)
    del t
    assert ref() is None
    # The next import takes the freed object again (same address): the old
    # weakref must not see it.
    later = [sw.from_dlpack(a) for _ in range(4)]
    assert id(later[0]) == address
    assert ref() is None
    assert all(u.tolist() == [0.0, 1.0, 2.0, 3.0] for u in later)


def test_a_reused_tensor_is_a_fresh_leaf_tracked_by_the_collector():
    x = sw.tensor([1.0, 2.0])
    y = x * 3.0
    assert y.autograd_ctx is not None
    y.grad = sw.tensor([1.0, 1.0])
    del x, y
    gc.collect()
    t = sw.from_dlpack(np.ones(3, dtype=np.float32))
    assert gc.is_tracked(t)
    assert t.autograd_ctx is None
    assert t.grad is None
    assert t.offset == 0
    assert t.layout.leaves() == [(3, 1)]


def test_a_reused_cpu_carrier_is_a_fresh_carrier():
    c = sw.CPU(3)
    c[0] = 5.0
    c.release()
    del c
    for _ in range(3):
        d = sw.CPU(3)
        assert not d.is_released()
        assert d.is_mutable()
        assert d.version == 0
        assert [d[i] for i in range(3)] == [0.0, 0.0, 0.0]
        d.release()


def test_subclass_instances_are_freed_as_their_own():
    class MyTensor(sw.Tensor):
        pass

    class MyCPU(sw.CPU):
        pass

    c = MyCPU(2)
    t = MyTensor(c, 0, sw.Layout(sw.Shape(2), sw.Stride(1)))
    t.note = "instance dict"
    refs = weakref.ref(t), weakref.ref(c)
    del t, c
    gc.collect()
    assert all(r() is None for r in refs)
    # Built-in objects made right after are the built-in types, whole.
    u = sw.from_dlpack(np.zeros(2, dtype=np.float32))
    assert type(u) is sw.Tensor and type(u.carrier) is sw.CPU
    assert not hasattr(u, "note")


def test_many_live_objects_beyond_what_is_kept():
    a = np.arange(8, dtype=np.float32)
    batch = [sw.from_dlpack(a) for _ in range(200)]
    assert len({id(t) for t in batch}) == 200
    assert len({id(t.carrier) for t in batch}) == 200
    del batch
    again = [sw.from_dlpack(a) for _ in range(200)]
    assert all(t.tolist() == a.tolist() for t in again)
