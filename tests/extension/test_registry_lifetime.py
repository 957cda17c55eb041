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
from support.process import assert_child_ok, run_snippet

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


def test_carrier_classes_are_not_kept_alive_by_observation_or_moves():
    r = run_snippet("""
        import gc, weakref
        import strideweave as sw
        F32 = sw.DType.Float32
        refs = []
        class PyCarrier(sw.Carrier):
            def __init__(self, n):
                super().__init__()
                self.vals = [0.0] * n
            def size(self): return len(self.vals)
            def dtype(self): return sw.DType.Floating
            def get_value(self, i): return self.vals[i]
            def set_value(self, i, v): self.vals[i] = v
            def _release(self): self.vals = []
        for k in range(50):
            C = type(f"C{k}", (sw.CPU,), {})
            D = type(f"D{k}", (sw.CPU,), {})
            P = type(f"P{k}", (PyCarrier,), {})
            t = sw.Tensor(C(2, dtype=F32), 0, sw.Layout.canonical(sw.Shape([2])))
            r = sw.move(t, D(2, dtype=F32))
            p = sw.move(sw.Tensor(P(2), 0, sw.Layout.canonical(sw.Shape([2]))), sw.Generic([0.0, 0.0]))
            refs += [weakref.ref(C), weakref.ref(D), weakref.ref(P)]
            del C, D, P, t, r, p
        gc.collect()
        alive = sum(1 for ref in refs if ref() is not None)
        print("alive", alive)
        # A class created later at a reused address is observed afresh.
        E = type("E", (sw.CPU,), {})
        assert sw.move(sw.Tensor(E(1), 0, sw.Layout.canonical(sw.Shape([1]))), sw.CPU(1))[0] == 0.0
    """)
    assert_child_ok(r)
    assert "alive 0" in r.stdout, r.stdout
