"""An exception that user code raises inside tensor() (a leaf's __float__ or
__index__) or inside a native operation (a TiledEvictable's residency
policy) reaches the
caller as the very same object: its class, arguments (an OSError's errno, a
UnicodeDecodeError's five), attributes and traceback intact, with where it
happened added as a PEP 678 note. Rebuilding it as type(exc)(message) turned
a class with two required arguments into a TypeError and made sys.exit(3)
exit with status 1. SystemExit and KeyboardInterrupt pass through untouched.
The library's own errors keep the location in their message."""
import errno

import pytest

import strideweave as sw
from strideweave.carriers.tiled_evictable import TiledEvictable
from support.builders import F32, I32, ramp_cpu
from support.process import run_python


class TwoArgs(Exception):
    def __init__(self, code, detail):
        super().__init__(code, detail)
        self.code = code
        self.detail = detail


class Raises:
    """A number-like leaf whose conversion raises exc."""

    def __init__(self, exc):
        self.exc = exc

    def __float__(self):
        raise self.exc

    def __index__(self):
        raise self.exc


# Factories: each test gets fresh exceptions (notes would pile up on shared ones).
USER_EXCEPTIONS = {
    "two_args": lambda: TwoArgs(7, "detail"),
    "unicode_decode": lambda: UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
    "oserror_errno": lambda: OSError(errno.ENOENT, "gone", "some/file"),
    "plain_value_error": lambda: ValueError("a plain one"),
}


def check_kept(got, exc):
    assert got is exc
    assert type(got) is type(exc) and got.args == exc.args
    if isinstance(exc, TwoArgs):
        assert (got.code, got.detail) == (7, "detail")
    if isinstance(exc, OSError):
        assert isinstance(got, FileNotFoundError) and got.errno == errno.ENOENT and got.filename == "some/file"
    if isinstance(exc, UnicodeDecodeError):
        assert (got.encoding, got.object, got.start, got.end, got.reason) == (
            "utf-8", b"\xff", 0, 1, "invalid start byte")
    assert got.__traceback__ is not None


# ------------------------------------------------------------ tensor()

@pytest.mark.parametrize("kind", sorted(USER_EXCEPTIONS))
@pytest.mark.parametrize("dtype", [None, F32, I32])
def test_tensor_keeps_a_leaf_exception_and_notes_its_position(kind, dtype):
    exc = USER_EXCEPTIONS[kind]()
    with pytest.raises(type(exc)) as e:
        sw.tensor([[1, 2], [3, Raises(exc)]], dtype=dtype)
    check_kept(e.value, exc)
    assert e.value.__notes__ == ["at index (1, 1) of data with shape (2, 2)"]


@pytest.mark.parametrize("kind", sorted(USER_EXCEPTIONS))
def test_tensor_of_one_number_like_keeps_its_exception_without_a_note(kind):
    exc = USER_EXCEPTIONS[kind]()
    with pytest.raises(type(exc)) as e:
        sw.tensor(Raises(exc))
    check_kept(e.value, exc)
    assert not hasattr(e.value, "__notes__")


def test_keyboard_interrupt_from_a_leaf_passes_untouched():
    exc = KeyboardInterrupt("stop")
    with pytest.raises(KeyboardInterrupt) as e:
        sw.tensor([1.0, Raises(exc)])
    assert e.value is exc and e.value.args == ("stop",)
    assert not hasattr(e.value, "__notes__")


@pytest.mark.parametrize("data", ["[1.0, Exits()]", "Exits()", "[[Exits()]]"])
def test_sys_exit_in_float_exits_with_its_status(data):
    r = run_python(f"""
        import sys
        import strideweave as sw
        class Exits:
            def __float__(self):
                sys.exit(3)
        sw.tensor({data})
        print("not reached")
    """, timeout=120)
    assert r.returncode == 3, r.stderr
    assert "not reached" not in r.stdout and "Traceback" not in r.stderr


def test_own_errors_still_carry_the_position_in_their_message():
    with pytest.raises(OverflowError, match=r"^value out of range for Int32 \(at index \(0, 1\) of data with "
                                            r"shape \(1, 2\)\)$") as e:
        sw.tensor([[1, 2**40]])
    assert not hasattr(e.value, "__notes__")
    with pytest.raises(TypeError, match=r"^tensor\(\) data must hold numbers or bools, not str \(at index \(1,\)"):
        sw.tensor([1, "a"])


# ------------------------------------------------------------ native operations

class RaisingPolicy:
    """A residency policy (user code the native operations call) whose plan()
    raises the exception in box[0]."""

    def __init__(self, box):
        self.box = box

    def plan(self, required, purpose):
        raise self.box[0]


@pytest.fixture
def raising_tiled_hooks():
    """A TiledEvictable whose residency policy raises the exception in box[0]."""
    box = [None]
    te = TiledEvictable(ramp_cpu(6), sw.FileBacked(dtype=F32), (2,), (3,), residency_policy=RaisingPolicy(box))
    return box, sw.Tensor(te, 0, te.canonical_layout())


OPS = {
    "relu": sw.relu,
    "reduce_sum": sw.reduce_sum,
    "add": lambda t: sw.add(t, t),
    "mul": lambda t: sw.mul(t, 2.0),
}


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("make", [lambda: TwoArgs(1, "x"), lambda: OSError(errno.EACCES, "denied"),
                                  lambda: UnicodeDecodeError("ascii", b"\x80", 0, 1, "bad")],
                         ids=["two_args", "oserror", "unicode"])
def test_native_operations_keep_a_hook_exception_and_note_the_operation(raising_tiled_hooks, op, make):
    box, t = raising_tiled_hooks
    box[0] = exc = make()
    with pytest.raises(type(exc)) as e:
        OPS[op](t)
    assert e.value is exc and e.value.args == exc.args
    assert e.value.__notes__ == [f"in {op}()"]
    if isinstance(exc, OSError):
        assert e.value.errno == errno.EACCES


def test_native_operations_let_keyboard_interrupt_pass_untouched(raising_tiled_hooks):
    box, t = raising_tiled_hooks
    box[0] = exc = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt) as e:
        sw.relu(t)
    assert e.value is exc and not hasattr(e.value, "__notes__")


def test_sys_exit_in_a_native_operation_exits_with_its_status():
    r = run_python("""
        import sys
        import strideweave as sw
        from strideweave.carriers.tiled_evictable import TiledEvictable
        class Exits:
            def plan(self, required, purpose):
                sys.exit(3)
        c = sw.CPU(4)
        te = TiledEvictable(c, sw.FileBacked(dtype=sw.DType.Float32), (2,), (2,), residency_policy=Exits())
        sw.relu(sw.Tensor(te, 0, te.canonical_layout()))
        print("not reached")
    """, timeout=120)
    assert r.returncode == 3, r.stderr
    assert "not reached" not in r.stdout and "Traceback" not in r.stderr


def test_native_operations_own_errors_keep_their_prefix():
    with pytest.raises(ValueError, match=r"^add\(\): shapes .* are not broadcast-compatible") as e:
        sw.add(sw.tensor([1.0, 2.0]), sw.tensor([1.0, 2.0, 3.0]))
    assert not hasattr(e.value, "__notes__")
