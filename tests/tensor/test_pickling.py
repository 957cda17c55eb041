"""pickle and copy.deepcopy of CPU and Generic carriers and of tensors over
them: values, dtype, layout and mutability travel, and loading makes a
fresh carrier. Every other carrier refuses with a TypeError that names its
class and the fix."""
import copy
import pickle

import numpy as np
import pytest

import strideweave as sw
from strideweave.carriers import extension as ext
from support.builders import two_plane_tensor
from support.carriers import ListCarrier
from support.tiled import tiled_ramp

PROTOCOLS = range(2, pickle.HIGHEST_PROTOCOL + 1)


def roundtrip(obj, protocol=pickle.HIGHEST_PROTOCOL):
    return pickle.loads(pickle.dumps(obj, protocol=protocol))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_cpu_tensor_roundtrip(protocol):
    t = sw.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    t[0, 0] = 0.5  # version 1
    u = roundtrip(t, protocol)
    assert u.tolist() == t.tolist() and u.layout == t.layout and u.offset == t.offset
    assert u.dtype() is sw.DType.Float32 and type(u.carrier) is sw.CPU
    assert u.carrier is not t.carrier and u.carrier.pointer() != t.carrier.pointer()
    assert u.version == 0 and u.carrier.is_mutable() and not u.carrier.is_owned()


def test_int32_bool_and_immutable_carriers():
    for c in (sw.CPU(3, dtype=sw.int32, mutable=False), sw.CPU(2, dtype=sw.bool_)):
        d = roundtrip(c)
        assert d.dtype() is c.dtype() and d.size() == c.size()
        assert d.is_mutable() == c.is_mutable()
    i = sw.tensor([1, -2, 2**31 - 1])
    assert roundtrip(i).tolist() == [1, -2, 2**31 - 1]


def test_views_pickled_together_stay_views_of_one_carrier():
    t = sw.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    row = t[1, :]
    a, b = roundtrip((t, row))
    assert b.carrier is a.carrier and b.offset == 3 and b.tolist() == [3.0, 4.0, 5.0]
    b[0] = 30.0
    assert a[1, 0] == 30.0


def test_a_loaded_tensor_is_a_leaf():
    x = sw.tensor([1.0, 2.0])
    y = x * 2.0
    y.retain_grad()
    z = roundtrip(y)
    assert z.autograd_ctx is None and z.grad is None and z.tolist() == [2.0, 4.0]


def test_generic_roundtrip():
    g = sw.Generic([1, 2.5, 3], dtype=sw.DType.Floating, mutable=False)
    t = sw.Tensor(g, 1, sw.Layout.canonical(sw.Shape(2)))
    u = roundtrip(t)
    assert type(u.carrier) is sw.Generic and u.tolist() == [2.5, 3.0] and u.offset == 1
    assert u.dtype() is sw.DType.Floating and not u.carrier.is_mutable()
    anys = roundtrip(sw.Generic([{"k": 1}, None], dtype=sw.DType.Any))
    assert [anys[0], anys[1]] == [{"k": 1}, None]


def test_deepcopy_copies_the_values():
    t = sw.tensor([1.0, 2.0])
    d = copy.deepcopy(t)
    d[0] = 9.0
    assert t[0] == 1.0 and d.tolist() == [9.0, 2.0] and t.version == 0
    c = copy.deepcopy(sw.CPU(2, dtype=sw.int32))
    assert type(c) is sw.CPU and c.dtype() is sw.DType.Int32


class TaggedCPU(sw.CPU):
    pass


def test_a_python_subclass_keeps_its_class_and_state():
    c = TaggedCPU(2)
    c.tag = "weights"
    c[1] = 3.0
    d = roundtrip(c)
    assert type(d) is TaggedCPU and d.tag == "weights" and d[1] == 3.0


def file_tensor(dtype=sw.float32):
    return sw.move(sw.Tensor(sw.CPU(2), 0, sw.Layout.canonical(sw.Shape(2))), sw.FileBacked(dtype=dtype))


def definition_backed():
    cls = type("SlotList", (sw.Carrier,), {})

    def allocate(c, n):
        c._slots = [0.0] * n

    storage = ext.StorageProvider(
        supports_dtype=lambda c, dtype: dtype is sw.float32,
        physical_size=lambda c: len(c.__dict__.get("_slots", ())),
        allocate=allocate, release=lambda c: setattr(c, "_slots", []),
        read=lambda c, i: c._slots[i], write=lambda c, i, v: c._slots.__setitem__(i, v))
    ext.register_carrier_definition(cls, ext.CarrierDefinition(storage, ()))
    return cls(2, dtype=sw.float32)


@pytest.mark.parametrize("make, cls, fix", [
    (lambda: file_tensor().carrier, "a FileBacked carrier", r"strideweave.CPU\(t.layout.cosize"),
    (lambda: sw.FileBacked(), "a FileBacked carrier", r"strideweave.Generic\(\[\]"),  # Floating: CPU cannot hold it
    (lambda: sw.Evictable(sw.CPU(2), sw.FileBacked(dtype=sw.float32)), "an Evictable carrier", "move the tensor to CPU"),
    (lambda: tiled_ramp()[0], "a TiledEvictable carrier", "move the tensor to CPU"),
    (definition_backed, "a SlotList carrier", "move the tensor to CPU"),
    (lambda: ListCarrier([1.0]), "a ListCarrier carrier", "move the tensor to CPU"),
])
def test_other_carriers_refuse_naming_the_class_and_the_fix(make, cls, fix):
    c = make()
    for action in (pickle.dumps, copy.deepcopy):
        with pytest.raises(TypeError, match=rf"cannot pickle or deepcopy {cls}: .*{fix}"):
            action(c)


def test_tensors_over_other_carriers_refuse_too():
    t = file_tensor()
    with pytest.raises(TypeError, match="cannot pickle or deepcopy a FileBacked carrier"):
        pickle.dumps(t)
    with pytest.raises(TypeError, match="a TiledEvictable carrier"):
        copy.deepcopy(tiled_ramp()[1])


def test_a_tensor_of_a_compound_dtype_refuses():
    from strideweave.core import Subtensor, TensorRepresentation

    class OnePlane(sw.CompoundDType):
        simple_types = (sw.float32,)

    lay = sw.Layout.canonical(sw.Shape(2))
    t = sw.Tensor._from_representation(TensorRepresentation(OnePlane(), [Subtensor(sw.float32, sw.CPU(2), 0, lay)], []))
    with pytest.raises(TypeError, match="compound dtype OnePlane"):
        pickle.dumps(t)


def test_released_and_multi_subtensor_tensors_refuse():
    t = sw.tensor([1.0])
    sw.move(t, sw.CPU(1))
    with pytest.raises(RuntimeError, match="cannot pickle a released CPU carrier"):
        pickle.dumps(t)
    with pytest.raises(NotImplementedError, match="Multi-subtensor Tensor pickling"):
        pickle.dumps(two_plane_tensor())
