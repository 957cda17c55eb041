"""How from_dlpack finds a producer's __dlpack__: what a type has is
remembered between imports (an import loop over one producer's arrays looks
nothing up), so changes to the type after an import must be seen by the
next one, and an instance's own __dlpack__ still counts."""
import numpy as np
import pytest

import strideweave as sw


def capsule_of(values):
    return np.asarray(values, dtype=np.float32).__dlpack__(max_version=(1, 3))


def make_producer_class(slots):
    # With __slots__ = () instances have no dict, so nothing can shadow the
    # class's method and from_dlpack calls the function it found directly.
    namespace = {"__dlpack__": lambda self, **kw: capsule_of([1.0])}
    if slots:
        namespace["__slots__"] = ()
    return type("Producer", (), namespace)


@pytest.mark.parametrize("slots", [False, True], ids=["instance dict", "slots"])
def test_a_method_replaced_on_the_class_is_the_one_called(slots):
    Producer = make_producer_class(slots)
    assert sw.from_dlpack(Producer()).tolist() == [1.0]
    # The replaced function is freed here: the next import must not call it.
    Producer.__dlpack__ = lambda self, **kw: capsule_of([2.0, 3.0])
    assert sw.from_dlpack(Producer()).tolist() == [2.0, 3.0]


def test_a_method_deleted_from_the_class_is_gone():
    class Producer:
        def __dlpack__(self, **kw):
            return capsule_of([1.0])

    p = Producer()
    assert sw.from_dlpack(p).tolist() == [1.0]
    del Producer.__dlpack__
    with pytest.raises(TypeError, match="needs an object with __dlpack__"):
        sw.from_dlpack(p)


def test_a_method_added_to_a_class_after_a_refusal():
    class Producer:
        pass

    with pytest.raises(TypeError, match="needs an object with __dlpack__"):
        sw.from_dlpack(Producer())
    Producer.__dlpack__ = lambda self, **kw: capsule_of([4.0])
    assert sw.from_dlpack(Producer()).tolist() == [4.0]


def test_an_instance_attribute_counts_when_the_class_has_none():
    class Producer:
        pass

    p = Producer()
    p.__dlpack__ = lambda **kw: capsule_of([5.0])
    assert sw.from_dlpack(p).tolist() == [5.0]
    # The class's answer ("none") is remembered; the next instance without
    # one is still refused, and the next with one still works.
    with pytest.raises(TypeError, match="needs an object with __dlpack__"):
        sw.from_dlpack(Producer())
    q = Producer()
    q.__dlpack__ = lambda **kw: capsule_of([6.0])
    assert sw.from_dlpack(q).tolist() == [6.0]


def test_alternating_producer_types():
    class Producer:
        def __dlpack__(self, **kw):
            return capsule_of([7.0])

    a = np.array([8.0], dtype=np.float32)
    for _ in range(3):
        assert sw.from_dlpack(a).tolist() == [8.0]
        assert sw.from_dlpack(Producer()).tolist() == [7.0]
        assert sw.from_dlpack(sw.from_dlpack(a)).tolist() == [8.0]


def test_a_subclass_overriding_the_method_of_a_seen_class():
    class Producer:
        def __dlpack__(self, **kw):
            return capsule_of([1.0])

    class Child(Producer):
        def __dlpack__(self, **kw):
            return capsule_of([9.0])

    assert sw.from_dlpack(Producer()).tolist() == [1.0]
    assert sw.from_dlpack(Child()).tolist() == [9.0]
    assert sw.from_dlpack(Producer()).tolist() == [1.0]


def test_a_custom_getattribute_decides_what_dlpack_is():
    # Attribute access that is not the generic one is asked every time, as
    # np.from_dlpack asks it, even when the class has a plain method and its
    # instances have no dict.
    class Producer:
        __slots__ = ()

        def __dlpack__(self, **kw):
            return capsule_of([1.0])

        def __getattribute__(self, name):
            if name == "__dlpack__":
                return lambda **kw: capsule_of([2.0])
            return object.__getattribute__(self, name)

    assert sw.from_dlpack(Producer()).tolist() == [2.0]
    assert np.from_dlpack(Producer()).tolist() == [2.0]


def test_an_instance_attribute_of_a_native_type_with_a_dict_shadows_its_method():
    # jax.Array is a native type whose instances have a plain dict slot: its
    # method is called without a lookup unless an instance's own dict has a
    # __dlpack__, which wins as it does for np.from_dlpack.
    jnp = pytest.importorskip("jax.numpy")
    j = jnp.arange(3.0, dtype=jnp.float32)
    assert type(j).__dictoffset__ > 0
    assert sw.from_dlpack(j).tolist() == [0.0, 1.0, 2.0]
    j.__dlpack__ = lambda **kw: capsule_of([7.0])
    assert sw.from_dlpack(j).tolist() == [7.0]
    assert np.from_dlpack(j).tolist() == [7.0]
    del j.__dlpack__
    # An instance dict without __dlpack__ (now materialised, empty) leaves
    # the class's method in charge.
    assert j.__dict__ == {}
    assert sw.from_dlpack(j).tolist() == [0.0, 1.0, 2.0]
    other = jnp.arange(2.0, dtype=jnp.float32)
    assert sw.from_dlpack(other).tolist() == [0.0, 1.0]
