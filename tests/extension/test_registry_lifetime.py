"""Carrier extension registry lifetimes (issue #10: the registry's rules and
tables moved to the engine, sw::ext::Registry, keyed by class address).

Observing a class seals it but must not keep it alive, and a class that
died must be forgotten, so a new class (possibly at the same address) starts
unobserved and can still get a definition.
"""
import gc
import weakref

import strideweave as sw

from support.extension import define, fresh, list_storage

F32 = sw.DType.Float32


def test_observing_does_not_keep_a_class_alive():
    Tmp = fresh("ShortLivedSlots")
    Tmp()  # observed: sealed definition-free
    Child = fresh("ShortLivedChild", Tmp)
    Child()  # observes its base too
    refs = [weakref.ref(Tmp), weakref.ref(Child)]
    del Tmp, Child
    gc.collect()
    assert [r() for r in refs] == [None, None]


def test_dead_classes_are_forgotten():
    # Many observed classes die; fresh ones created afterwards (some reuse
    # the dead ones' addresses) are unobserved and can be registered.
    for i in range(50):
        fresh(f"Churn{i}")()
    gc.collect()
    for i in range(50):
        cls = define(fresh(f"Fresh{i}"), list_storage())
        c = cls(2, dtype=F32)
        c[1] = 1.5
        assert [c[0], c[1]] == [0.0, 1.5]

