"""Hardening against lying carrier hooks (issue 15 items 1, 2, 15, 20 and the
bool rule): native paths take item size, size and pointer from the native
storage, results of allocate_like/new_like are checked before anything is
written into them, Tensor.grad is validated when set, Evictable tiers come
back usable, and bool is never a size/offset/count/timeout. Anything that
could crash runs in a subprocess with a timeout."""

import pytest

import strideweave as sw

from support.builders import F32, I32, carrier_of, flat_layout, whole
from support.process import assert_child_ok, run_python, snippet_stdout


def run_ok(code, timeout=120):
    r = run_python(code, timeout=timeout)
    assert_child_ok(r)
    return r.stdout


# ------------------------------------------------------------ item 1: dtype() hooks on native storage


def test_dtype_hook_mismatch_never_drives_moves_with_the_hook_item_size():
    # Float32 storage claiming Bool, and Bool storage claiming Float32, moved
    # both ways: the raw buffer is never described with the hook's item size
    # (carrier_host_data hides it), so the move goes value by value through
    # the native slot hooks and refuses values the slots cannot hold.
    out = run_ok("""
        import strideweave as sw
        F32, BOOL = sw.DType.Float32, sw.DType.Bool
        n = 1 << 16
        class Narrow(sw.CPU):
            def dtype(self): return BOOL
        class Wide(sw.CPU):
            def dtype(self): return F32
        lay = sw.Layout(sw.Shape(n), sw.Stride(1))
        cases = [
            (Narrow(n, dtype=F32), lambda: sw.CPU(n, dtype=BOOL)),
            (Wide(n, dtype=BOOL), lambda: sw.CPU(n, dtype=F32)),
            (sw.CPU(n, dtype=F32), lambda: Wide(n, dtype=BOOL)),
            (sw.CPU(n, dtype=BOOL), lambda: Narrow(n, dtype=F32)),
        ]
        for src, dst in cases:
            t = sw.Tensor(src, 0, lay)
            try:
                sw.move(t, dst())
            except TypeError as e:
                print("refused:", type(e).__name__)
            else:
                print("moved")
        print("alive")
    """)
    assert out.strip().splitlines()[-1] == "alive"
    assert out.count("refused") == 4, out


def test_dtype_hook_that_agrees_still_moves_and_computes_on_native_truth():
    class Same(sw.CPU):
        def dtype(self):
            return F32

    a = whole(carrier_of([1.0, -2.0, 3.0], cls=Same))
    out = sw.move(a, sw.CPU(3, dtype=F32))
    assert out.tolist() == [1.0, -2.0, 3.0]
    back = sw.move(whole(carrier_of([4.0, 5.0, 6.0])), Same(3, dtype=F32))
    assert back.tolist() == [4.0, 5.0, 6.0]
    a = whole(carrier_of([1.0, -2.0, 3.0], cls=Same))
    b = whole(carrier_of([1.0, 1.0, 1.0], cls=Same))
    assert sw.add(a, b).tolist() == [2.0, -1.0, 4.0]
    assert sw.relu(a).tolist() == [1.0, 0.0, 3.0]


def test_ops_refuse_a_dtype_hook_that_disagrees_with_the_native_storage():
    out = run_ok("""
        import strideweave as sw
        class Narrow(sw.CPU):
            def dtype(self): return sw.DType.Int32
        n = 1 << 16
        t = sw.Tensor(Narrow(n, dtype=sw.DType.Float32), 0, sw.Layout(sw.Shape(n), sw.Stride(1)))
        for f in (lambda: sw.add(t, t), lambda: sw.mul(t, 2), lambda: sw.relu(t), lambda: sw.reduce_sum(t)):
            try:
                f()
            except TypeError as e:
                assert "native storage" in str(e) and "dtype() hook" in str(e), e
            else:
                raise AssertionError("computed with the hook's dtype")
        print("ok")
    """)
    assert out.strip() == "ok"


# ------------------------------------------------------------ item 2: like-results are checked before writes


def _lying_cpu(size_of, dtype_of):
    class Lying(sw.CPU):
        def allocate_like(self, n, *, mutable=True, dtype=None, empty=False):
            return Lying(size_of(n), dtype=dtype_of(dtype or F32))
    return Lying


def test_undersized_allocate_like_result_is_refused_before_the_op_writes():
    out = run_ok("""
        import strideweave as sw
        F32 = sw.DType.Float32
        class Small(sw.CPU):
            def allocate_like(self, n, *, mutable=True, dtype=None, empty=False):
                return Small(1, dtype=dtype or F32)
        n = 1 << 16
        a = Small(n, dtype=F32)
        t = sw.Tensor(a, 0, sw.Layout(sw.Shape(n), sw.Stride(1)))
        for f in (lambda: sw.add(t, t), lambda: sw.mul(t, 3.0), lambda: sw.relu(t)):
            try:
                f()
            except RuntimeError as e:
                assert "allocate_like()" in str(e) and "at least" in str(e), e
            else:
                raise AssertionError("wrote past an undersized result")
        print("ok")
    """)
    assert out.strip() == "ok"


def test_wrong_dtype_allocate_like_result_is_refused():
    Lying = _lying_cpu(lambda n: n, lambda d: I32)
    t = whole(carrier_of([1.0, 2.0], cls=Lying))
    with pytest.raises(TypeError, match=r"allocate_like\(\) returned a carrier of dtype"):
        sw.add(t, t)


def test_wrong_class_allocate_like_result_is_refused():
    class Other(sw.CPU):
        def allocate_like(self, n, *, mutable=True, dtype=None, empty=False):
            return sw.CPU(n, dtype=dtype or F32)
    t = whole(carrier_of([1.0, 2.0], cls=Other))
    with pytest.raises(TypeError, match=r"allocate_like\(\) must return a Other"):
        sw.add(t, t)


def test_gradient_accumulation_checks_the_allocated_gradient():
    out = run_ok("""
        import strideweave as sw
        F32 = sw.DType.Float32
        class Small(sw.CPU):
            armed = False
            def allocate_like(self, n, *, mutable=True, dtype=None, empty=False):
                return Small(1 if Small.armed else n, dtype=dtype or F32)
        n = 1 << 12
        x = Small(n, dtype=F32)
        t = sw.Tensor(x, 0, sw.Layout(sw.Shape(n), sw.Stride(1)))
        y = sw.reduce_sum(sw.add(sw.mul(t, 2.0), t))
        Small.armed = True
        try:
            y.backward()
        except RuntimeError as e:
            assert "at least" in str(e), e
        else:
            raise AssertionError("gradient written past an undersized carrier")
        print("ok")
    """)
    assert out.strip() == "ok"


def test_new_like_result_is_checked_for_value_carriers():
    F = sw.DType.Floating

    class Short(sw.Generic):
        def new_like(self, values, *, mutable=True, dtype=None):
            return Short([0.0], dtype=F)

    class Retyped(sw.Generic):
        def new_like(self, values, *, mutable=True, dtype=None):
            return Retyped([int(v) for v in values], dtype=sw.DType.Int32)

    t = sw.Tensor(Short([1.0, 2.0, 3.0], dtype=F), 0, flat_layout(3))
    with pytest.raises(RuntimeError, match=r"new_like\(\) returned a carrier of 1 slots, expected at least 3"):
        sw.add(t, t)
    u = sw.Tensor(Retyped([1.0, 2.0, 3.0], dtype=F), 0, flat_layout(3))
    with pytest.raises(TypeError, match=r"new_like\(\) returned a carrier of dtype"):
        sw.add(u, u)


def test_move_backward_staging_checks_the_allocated_stage():
    out = run_ok("""
        import strideweave as sw
        F32 = sw.DType.Float32
        class Small(sw.CPU):
            armed = False
            def allocate_like(self, n, *, mutable=True, dtype=None, empty=False):
                return Small(1 if Small.armed else n, dtype=dtype or F32)
        n = 1 << 12
        x = sw.Tensor(sw.CPU(n, dtype=F32), 0, sw.Layout(sw.Shape(n), sw.Stride(1)))
        y = sw.move(x, Small(n, dtype=F32))
        Small.armed = True
        try:
            sw.reduce_sum(y).backward()
        except RuntimeError as e:
            assert "at least" in str(e), e
        else:
            raise AssertionError("staged past an undersized carrier")
        print("ok")
    """)
    assert out.strip() == "ok"


# ------------------------------------------------------------ item 15: Tensor.grad setter


# ------------------------------------------------------------ item 20: Evictable tiers


# ------------------------------------------------------------ bool is never a size, offset, count or timeout


# ------------------------------------------------------------ a Python size() override never widens native storage access


@pytest.mark.parametrize("base, make", [("CPU", "C(4)"), ("Generic", "C([1.0, 2.0, 3.0, 4.0])")])
def test_size_override_cannot_reach_past_native_storage(base, make):
    out = snippet_stdout(f"""
        from strideweave import CPU, Generic
        class C({base}):
            def size(self):
                return 1 << 40
        c = {make}
        for op in (lambda: c[1 << 30], lambda: c.__setitem__(1 << 30, 1.0)):
            try:
                op()
            except IndexError as e:
                print("IndexError", e)
    """, dev=True)
    assert out.count("IndexError") == 2 and "for size 4" in out


def test_size_override_that_releases_reports_released():
    out = snippet_stdout("""
        from strideweave import CPU
        class C(CPU):
            def size(self):
                self.release()
                return 4
        for op in (lambda c: c[0], lambda c: c.__setitem__(0, 1.0)):
            try:
                op(C(4))
            except RuntimeError as e:
                print("RuntimeError", e)
    """, dev=True)
    assert out.count("carrier is released") == 2


def test_size_override_keeps_kernels_off_native_memory():
    # Tensor validation trusts the hook; kernels must not then read the
    # native buffer over the hook's span.
    snippet_stdout("""
        from strideweave import CPU, Layout, Shape, Stride, Tensor
        class C(CPU):
            def size(self):
                return 1 << 40
        t = Tensor(C(4), 0, Layout(Shape(1 << 24), Stride(1)))
        try:
            r = t + t
            r[(1 << 24) - 1]
        except (TypeError, IndexError) as e:
            print(type(e).__name__, e)
    """, dev=True)
