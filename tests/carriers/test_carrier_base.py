"""Carrier base surface, Python subclass hooks and ownership (API.md 3.1, 10)."""
import gc
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import pytest

from strideweave import CPU, Carrier, DType, FileBacked, Generic


class ListCarrier(Carrier):
    """A Python carrier driven entirely by hooks; counts hook calls."""

    def __init__(self, values, *, mutable=True, dtype=DType.Floating):
        super().__init__()
        self.values = list(values)
        self.mutable = mutable
        self._dtype = dtype
        self.calls = []
        self.released_hook = 0

    def size(self):
        return len(self.values)

    def dtype(self):
        return self._dtype

    def get_value(self, i):
        self.calls.append(("get", i))
        return self.values[i]

    def set_value(self, i, v):
        self.calls.append(("set", i, v))
        self.values[i] = v

    def _is_mutable(self):
        return self.mutable

    def _release(self):
        self.released_hook += 1
        self.values = []

    def new_like(self, values, *, mutable=True, dtype=None):
        return ListCarrier(values, mutable=mutable, dtype=dtype or self._dtype)

    def allocate_like(self, size, *, mutable=True, dtype=None, empty=False):
        return ListCarrier([0.0] * size, mutable=mutable, dtype=dtype or self._dtype)

    def dlpack_info(self):
        return {"pointer": 1234, "device_type": 2, "device_id": 3}


def on_other_thread(fn):
    out = []

    def run():
        try:
            out.append(fn())
        except BaseException as e:  # noqa: BLE001 - reported to the caller
            out.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out[0]


BUILTINS = [
    lambda: CPU(3),
    lambda: Generic([0.0, 0.0, 0.0]),
    lambda: (lambda f: (f._reserve(3), f)[1])(FileBacked()),
    lambda: ListCarrier([0.0, 0.0, 0.0]),
]
IDS = ["CPU", "Generic", "FileBacked", "python-subclass"]


# ------------------------------------------------------------ common surface


@pytest.mark.parametrize("make", BUILTINS, ids=IDS)
class TestCommonSurface:
    def test_read_write_and_version(self, make):
        c = make()
        assert c.version == 0
        c[1] = 2
        assert c[1] == 2
        assert c.version == 1
        c[1] = 3
        assert c.version == 2

    def test_version_is_read_only(self, make):
        c = make()
        with pytest.raises(AttributeError):
            c.version = 5

    def test_out_of_range_and_negative_index(self, make):
        c = make()
        with pytest.raises(IndexError):
            c[3]
        with pytest.raises(IndexError):
            c[3] = 1.0
        # Negative indices are storage offsets, never wrapped.
        with pytest.raises(IndexError):
            c[-1]
        with pytest.raises(IndexError):
            c[-1] = 1.0
        with pytest.raises(IndexError):
            c[2**80]
        assert c.version == 0

    def test_non_integer_index(self, make):
        c = make()
        with pytest.raises(TypeError, match="integers"):
            c["0"]
        with pytest.raises(TypeError, match="integers"):
            c[0:1]
        with pytest.raises(TypeError):
            del c[0]

    def test_released_read_and_write(self, make):
        c = make()
        c.release()
        assert c.is_released()
        with pytest.raises(RuntimeError, match="released"):
            c[0]
        with pytest.raises(RuntimeError, match="released"):
            c[0] = 1.0
        assert c.version == 0  # release does not change the version

    def test_release_is_idempotent_and_size_zero(self, make):
        c = make()
        c.release()
        c.release()
        assert c.is_released()
        assert c.size() == 0

    def test_immutable_write(self, make):
        c = make().allocate_like(2, mutable=False)
        assert not c.is_mutable()
        with pytest.raises(RuntimeError, match="not mutable"):
            c[0] = 1.0
        assert c.version == 0
        assert c[0] == 0

    def test_new_like_and_allocate_like_same_exact_class(self, make):
        c = make()
        n = c.new_like([1, 2])
        assert type(n) is type(c)
        assert n.size() == 2 and n[1] == 2
        a = c.allocate_like(4)
        assert type(a) is type(c)
        assert a.size() == 4 and a[3] == 0
        assert a.version == 0 and n.version == 0  # allocation is not a write

    def test_new_like_on_released_receiver(self, make):
        c = make()
        c.release()
        n = c.new_like([5])
        assert type(n) is type(c) and n[0] == 5 and not n.is_released()
        a = c.allocate_like(2, mutable=False)
        assert type(a) is type(c) and a.size() == 2 and not a.is_mutable()

    def test_weakref(self, make):
        c = make()
        r = weakref.ref(c)
        assert r() is c
        del c
        gc.collect()
        assert r() is None

    def test_ownership_blocks_release_and_writes(self, make):
        c = make()
        t = c._claim_ownership()
        assert isinstance(t, int)
        assert c.is_owned()
        assert not c.is_mutable()
        with pytest.raises(RuntimeError, match="owned"):
            c.release()
        assert not c.is_released()
        with pytest.raises(RuntimeError, match="not mutable"):
            c[0] = 1.0
        c[0]  # reads stay allowed
        c._relinquish_ownership(t)
        assert not c.is_owned() and c.is_mutable()
        c.release()
        assert c.is_released()


# ------------------------------------------------------------- bare Carrier


class TestBareCarrier:
    def test_hooks_raise_not_implemented_naming_the_hook(self):
        c = Carrier()
        with pytest.raises(NotImplementedError, match="size"):
            c.size()
        with pytest.raises(NotImplementedError, match="dtype"):
            c.dtype()
        with pytest.raises(NotImplementedError, match="size"):
            c[0]
        with pytest.raises(NotImplementedError, match="new_like"):
            c.new_like([1])
        with pytest.raises(NotImplementedError, match="allocate_like"):
            c.allocate_like(1)

    def test_missing_get_value_hook(self):
        class OnlySize(Carrier):
            def size(self):
                return 2

        c = OnlySize()
        with pytest.raises(NotImplementedError, match="get_value"):
            c[0]
        with pytest.raises(NotImplementedError, match="set_value"):
            c[0] = 1
        assert c.version == 0

    def test_default_dlpack_info(self):
        with pytest.raises(BufferError, match="DLPack is not supported for this carrier"):
            Carrier().dlpack_info()

    def test_init_takes_no_arguments(self):
        with pytest.raises(TypeError):
            Carrier(1)

        class Sub(Carrier):
            pass

        with pytest.raises(TypeError):
            Sub(3)

    def test_subclass_without_super_init_is_still_valid(self):
        class NoInit(Carrier):
            def __init__(self):
                pass  # forgets super().__init__()

        c = NoInit()
        assert c.version == 0 and not c.is_owned() and c.is_mutable()

    def test_release_of_bare_carrier(self):
        c = Carrier()
        c.release()
        assert c.is_released()
        with pytest.raises(RuntimeError, match="released"):
            c._claim_ownership()

    def test_reserve_default_cannot_allocate(self):
        assert ListCarrier([])._reserve(3) is False


# --------------------------------------------------------- hook dispatch


class TestHookDispatch:
    def test_reads_and_writes_go_through_hooks(self):
        c = ListCarrier([1.0, 2.0])
        assert c[1] == 2.0
        c[0] = 7.0
        assert c.calls == [("get", 1), ("set", 0, 7.0)]
        assert c.values == [7.0, 2.0]
        assert c.version == 1

    def test_range_checked_with_size_hook_before_get_value(self):
        c = ListCarrier([1.0])
        with pytest.raises(IndexError):
            c[1]
        with pytest.raises(IndexError):
            c[1] = 0.0
        assert c.calls == []

    def test_failed_set_value_does_not_bump_version(self):
        class Picky(ListCarrier):
            def set_value(self, i, v):
                raise ValueError("picky")

        c = Picky([0.0])
        with pytest.raises(ValueError, match="picky"):
            c[0] = 1.0
        assert c.version == 0

    def test_is_mutable_hook(self):
        c = ListCarrier([1.0], mutable=False)
        assert not c.is_mutable()
        with pytest.raises(RuntimeError, match="not mutable"):
            c[0] = 2.0
        assert c.values == [1.0] and c.version == 0
        c.mutable = True
        c[0] = 2.0
        assert c.version == 1

    def test_release_calls_hook_once(self):
        c = ListCarrier([1.0])
        c.release()
        c.release()
        assert c.released_hook == 1
        assert c.is_released()
        with pytest.raises(RuntimeError, match="released"):
            c[0]

    def test_failing_release_hook_leaves_carrier_live(self):
        class Stuck(ListCarrier):
            def _release(self):
                raise OSError("cannot free")

        c = Stuck([1.0])
        with pytest.raises(OSError, match="cannot free"):
            c.release()
        assert not c.is_released()
        assert c[0] == 1.0

    def test_dlpack_info_hook_is_used(self):
        assert ListCarrier([]).dlpack_info()["device_type"] == 2

    def test_override_may_call_super_without_recursion(self):
        class Sized(Carrier):
            def size(self):
                try:
                    return super().size()
                except NotImplementedError:
                    return 1

            def get_value(self, i):
                return "x"

        c = Sized()
        assert c.size() == 1
        assert c[0] == "x"

    def test_mixin_before_native_class_counts_as_override(self):
        class Mixin:
            def get_value(self, i):
                return "mixin"

        class Sub(Mixin, Generic):
            pass

        g = Sub([1.0])
        assert g[0] == "mixin"

    def test_python_subclass_of_builtin_inherits_native_behaviour(self):
        class MyCPU(CPU):
            pass

        c = MyCPU(2, dtype=DType.Int32)
        c[1] = 5
        assert c[1] == 5 and c.version == 1
        assert type(c.allocate_like(3)) is MyCPU
        assert type(c.new_like([1])) is MyCPU

    def test_hook_result_type_checks(self):
        class BadSize(ListCarrier):
            def size(self):
                return "two"

        with pytest.raises(TypeError, match="size"):
            BadSize([])[0]

        class NegSize(ListCarrier):
            def size(self):
                return -1

        with pytest.raises(ValueError, match="negative"):
            NegSize([])[0]

    def test_bad_dtype_argument(self):
        with pytest.raises(TypeError, match="dtype"):
            CPU(1).new_like([1], dtype="Float32")
        with pytest.raises(TypeError, match="dtype"):
            CPU(1).allocate_like(1, dtype=3)
        with pytest.raises(ValueError):
            CPU(1).allocate_like(-1)

    def test_gc_of_python_subclass_cycle(self):
        c = ListCarrier([])
        c.values.append(c)
        r = weakref.ref(c)
        del c
        gc.collect()
        assert r() is None


# ---------------------------------------------------------------- ownership


class TestOwnership:
    def test_claim_twice_and_after_release(self):
        c = ListCarrier([1.0])
        t = c._claim_ownership()
        with pytest.raises(RuntimeError, match="owned"):
            c._claim_ownership()
        c._relinquish_ownership(t)
        t2 = c._claim_ownership()
        assert t2 != t
        c._relinquish_ownership(t2)
        c.release()
        with pytest.raises(RuntimeError, match="released"):
            c._claim_ownership()

    def test_wrong_token(self):
        c = ListCarrier([1.0])
        t = c._claim_ownership()
        for fn in (c._relinquish_ownership, c._begin_owner_access, c._end_owner_access):
            with pytest.raises(RuntimeError, match="token"):
                fn(t + 1)
        with pytest.raises(TypeError):
            c._relinquish_ownership("t")
        with pytest.raises(RuntimeError, match="token"):
            c._relinquish_ownership(2**100)
        assert c.is_owned()

    def test_unowned_access_and_relinquish_fail(self):
        c = ListCarrier([1.0])
        with pytest.raises(RuntimeError):
            c._relinquish_ownership(1)
        with pytest.raises(RuntimeError):
            c._begin_owner_access(1)

    def test_owner_access_is_reentrant_and_thread_bound(self):
        c = ListCarrier([1.0])
        t = c._claim_ownership()
        assert not c.is_mutable()
        c._begin_owner_access(t)
        c._begin_owner_access(t)
        assert c.is_mutable()
        assert on_other_thread(c.is_mutable) is False
        c[0] = 5.0  # allowed on this thread
        assert c.version == 1
        err = on_other_thread(lambda: c.__setitem__(0, 6.0))
        assert isinstance(err, RuntimeError) and "not mutable" in str(err)
        assert c.values == [5.0]
        c._end_owner_access(t)
        assert c.is_mutable()  # one scope still open
        c._end_owner_access(t)
        assert not c.is_mutable()
        with pytest.raises(RuntimeError):
            c._end_owner_access(t)  # nothing open on this thread
        with pytest.raises(RuntimeError, match="not mutable"):
            c[0] = 7.0

    def test_owner_access_does_not_allow_release(self):
        c = CPU(1)
        t = c._claim_ownership()
        c._begin_owner_access(t)
        with pytest.raises(RuntimeError, match="owned"):
            c.release()
        c._end_owner_access(t)
        c._relinquish_ownership(t)

    def test_owner_access_on_another_thread(self):
        c = CPU(1)
        t = c._claim_ownership()
        with ThreadPoolExecutor(max_workers=1) as worker:  # one persistent thread
            worker.submit(c._begin_owner_access, t).result()
            assert not c.is_mutable()  # this thread has no access
            assert worker.submit(c.is_mutable).result() is True
            worker.submit(c.__setitem__, 0, 4.0).result()
            assert c[0] == 4.0 and c.version == 1
            with pytest.raises(RuntimeError):
                c._end_owner_access(t)  # the scope belongs to the worker
            worker.submit(c._end_owner_access, t).result()
            assert worker.submit(c.is_mutable).result() is False
        c._relinquish_ownership(t)

    def test_access_of_constructed_immutable_stays_immutable(self):
        c = CPU(1, mutable=False)
        t = c._claim_ownership()
        c._begin_owner_access(t)
        assert not c.is_mutable()
        c._end_owner_access(t)

    def test_relinquish_drops_open_access(self):
        c = CPU(1)
        t = c._claim_ownership()
        c._begin_owner_access(t)
        c._relinquish_ownership(t)
        t2 = c._claim_ownership()
        assert not c.is_mutable()
        c._relinquish_ownership(t2)


def test_a_carrier_being_released_refuses_writes_claims_and_moves():
    import strideweave as sw

    """While a Python _release hook runs (also during a move's terminal
    commit) the carrier is neither owned nor released yet: nothing may start
    writing it or moving it."""
    seen = {}

    class Flushing(sw.CPU):
        def _release(self):
            with pytest.raises(RuntimeError, match="not mutable"):
                self[0] = 9.0
            seen["read"] = self[0]  # reads still work: a hook may flush
            assert self.is_mutable() is False
            with pytest.raises(RuntimeError, match="being released"):
                self._claim_ownership()
            layout = sw.Layout(sw.Shape(2), sw.Stride(1))
            with pytest.raises(RuntimeError):
                sw.move(sw.Tensor(self, 0, layout), sw.CPU(2))
            seen["done"] = True

    c = Flushing(2)
    c[0] = 1.5
    c.release()
    assert seen == {"read": 1.5, "done": True}
    assert c.is_released()
