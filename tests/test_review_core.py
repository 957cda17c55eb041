"""Regression tests from the C-API review of the core binding files
(dtype, shape, layout, carrier, cpu, generic, file_backed, tensor,
representation, dlpack). Crashes run in a subprocess."""
import gc
import os
import pathlib
import textwrap

import pytest

import strideweave as sw

from strideweave import CPU, DType, Layout, Shape, Stride, Tensor, CompoundDType
from strideweave.core import Subtensor, TensorRepresentation

from support.process import run_python

# The folder holding the strideweave package this process imported (the source
# tree with STRIDEWEAVE_BUILD, site-packages for an installed wheel): snippets
# run there so they import the same package.
PACKAGE_PARENT = pathlib.Path(sw.__file__).resolve().parent.parent


def run_snippet(code):
    # -X dev, from the package's folder: the snippet imports the same package.
    return run_python(code, flags=["-X", "dev"], cwd=PACKAGE_PARENT)


def assert_runs(code):
    r = run_snippet(code)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


# ---- tensor.cpp: Python subclasses of Tensor


def test_tensor_subclass_dealloc_keeps_type_refcount():
    # Tensor_dealloc dropped the heap subclass's type reference a second time
    # (subtype_dealloc already does it), so the class soon died under live code.
    assert_runs("""
        import sys
        from strideweave import CPU, Layout, Shape, Stride, Tensor
        class T(Tensor): pass
        c = CPU(4)
        l = Layout(Shape(2), Stride(1))
        before = sys.getrefcount(T)
        for _ in range(50):
            t = T(c, 0, l)
            del t
        assert sys.getrefcount(T) == before, (before, sys.getrefcount(T))
    """)


def test_tensor_subclass_traverse_visits_type_once():
    # subtype_traverse visits the heap type already; a second visit from the
    # static base's tp_traverse under-counts the type's references in the GC.
    class T(Tensor):
        pass

    t = T(CPU(2), 0, Layout(Shape(2), Stride(1)))
    assert [r for r in gc.get_referents(t) if r is T] == [T]


# ---- cpu.cpp, generic.cpp, file_backed.cpp: values lists mutated by conversion

MUTATING_VALUES = """
    from strideweave import CPU, DType, FileBacked, Generic
    values = []
    class Clearing:
        # Conversion runs this while the carrier walks the list's items.
        def __float__(self):
            values.clear()
            return 1.0
    def fresh():
        values[:] = [Clearing()] + [float(i) + 0.5 for i in range(2000)]
        return values
"""


@pytest.mark.parametrize("build", [
    "Generic(fresh(), dtype=DType.Float32)",
    "CPU(1).new_like(fresh())",
    "Generic([1.0]).new_like(fresh())",
    "FileBacked(dtype=DType.Float32).new_like(fresh())",
])
def test_values_list_cleared_during_conversion(build):
    out = assert_runs(textwrap.dedent(MUTATING_VALUES) + f"c = {build}\nprint(c.size(), c[0], c[2000])\n")
    assert out.split() == ["2001", "1.0", "1999.5"]


# ---- carrier.cpp: a Python size() override never widens native storage access


@pytest.mark.parametrize("base, make", [("CPU", "C(4)"), ("Generic", "C([1.0, 2.0, 3.0, 4.0])")])
def test_size_override_cannot_reach_past_native_storage(base, make):
    out = assert_runs(f"""
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
    """)
    assert out.count("IndexError") == 2 and "for size 4" in out


def test_size_override_that_releases_reports_released():
    out = assert_runs("""
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
    """)
    assert out.count("carrier is released") == 2


def test_size_override_keeps_kernels_off_native_memory():
    # Tensor validation trusts the hook; kernels must not then read the
    # native buffer over the hook's span.
    assert_runs("""
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
    """)


def test_cpu_write_whose_conversion_releases_the_carrier():
    out = assert_runs("""
        from strideweave import CPU
        c = CPU(4)
        class Releasing:
            def __float__(self):
                c.release()
                return 1.0
        try:
            c[0] = Releasing()
        except RuntimeError as e:
            print("RuntimeError", e)
        assert c.is_released()
    """)
    assert "RuntimeError" in out and "changed during the write" in out


# ---- representation.cpp: span check without int64 overflow


def test_representation_span_check_does_not_overflow():
    class OnePlane(CompoundDType):
        simple_types = (DType.Float32,)

    # offset + cosize wraps past INT64_MAX: must still be "exceeds".
    sub = Subtensor(DType.Float32, CPU(4), 2**62, Layout(Shape(2), Stride(2**62 - 1)))
    with pytest.raises(ValueError, match="span exceeds carrier size"):
        Tensor._from_representation(TensorRepresentation(OnePlane(), [sub], []))


# ---- dtype.cpp / tensor.cpp: a compound dtype's name follows its class


def test_compound_dtype_name_survives_class_rename():
    # The compound's name pointer borrowed the class's tp_name, freed when
    # the class is renamed; the grad error message then read freed memory.
    out = assert_runs("""
        import gc, sys
        from strideweave import CPU, DType, Layout, Shape, Stride, Tensor, CompoundDType
        from strideweave.core import Subtensor, TensorRepresentation
        C = type("".join(["Cmp", "q" * 40]), (CompoundDType,), {"simple_types": (DType.Float32,)})
        rep = TensorRepresentation(C(), [Subtensor(DType.Float32, CPU(2), 0, Layout(Shape(2), Stride(1)))], [])
        t = Tensor._from_representation(rep)
        C.__name__ = "".join(["Renamed", "z" * 40])
        C.__qualname__ = "Q"
        gc.collect()
        filler = ["".join(["y", str(i)]) * 20 for i in range(1000)]
        try:
            t.grad
        except RuntimeError as e:
            print(str(e).encode("ascii", "backslashreplace").decode())
    """)
    assert "Renamed" + "z" * 40 in out and "not differentiable" in out


# ---- shape.cpp: nesting limit also holds for nested Shape objects


def test_nested_shape_objects_respect_depth_limit():
    # Nested lists stop at 64 levels; wrapping Shape objects used to stack
    # them without limit until the recursive tree code overflowed the C stack.
    x = 1
    for _ in range(63):
        x = [x]
    deepest = Shape([x])
    assert deepest.depth == 64
    assert Shape(deepest) == deepest and Shape([x, 2]).depth == 64
    for wrap in (lambda s: Shape([s]), lambda s: Shape(2, s), lambda s: Stride([s])):
        with pytest.raises(ValueError, match="deeper than 64 levels"):
            wrap(deepest)


def test_nested_shape_objects_cannot_overflow_the_stack():
    assert_runs("""
        from strideweave import Shape
        s = Shape(1)
        try:
            for _ in range(1000):
                x = s
                for _ in range(60):
                    x = [x]
                s = Shape(x)
        except ValueError as e:
            print(e)
    """)


# ---- dlpack.cpp: a carrier released while __dlpack__ runs is not exported


@pytest.mark.parametrize("kwargs", ["copy=Releasing()", "copy=Releasing(), max_version=(1, 0)"])
def test_dlpack_refuses_carrier_released_during_export(kwargs):
    c = CPU(8)
    t = Tensor(c, 0, Layout(Shape(8), Stride(1)))

    class Releasing:
        def __bool__(self):
            c.release()
            return False

    with pytest.raises(BufferError, match="non-null"):
        eval(f"t.__dlpack__({kwargs})")
    assert c.is_released()


def test_dlpack_refuses_carrier_released_by_is_mutable_hook():
    class C(CPU):
        def _is_mutable(self):
            self.release()
            return True

    t = Tensor(C(8), 0, Layout(Shape(8), Stride(1)))
    with pytest.raises(BufferError, match="non-null"):
        t.__dlpack__(max_version=(1, 0))


# ---- file_backed.cpp: a forked child leaves its parent's files alone


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("child_exit", ["del fb; gc.collect(); os._exit(0)", "sys.exit(0)", "fb.release(); os._exit(0)"])
def test_forked_child_does_not_remove_parent_files(child_exit):
    out = assert_runs(f"""
        import gc, os, sys
        from strideweave import CPU, DType, FileBacked, Layout, Shape, Stride, Tensor, move
        fb = FileBacked(dtype=DType.Float32)
        src = CPU(2)
        src[0] = 1.5
        move(Tensor(src, 0, Layout(Shape(2), Stride(1))), fb)
        path = fb.path
        pid = os.fork()
        if pid == 0:
            {child_exit}
        os.waitpid(pid, 0)
        print(path.exists(), fb[0])
        fb.release()
        print(path.exists())
    """)
    assert out.split() == ["True", "1.5", "False"]


# ---- tensor.cpp: deallocating a long .grad chain


def test_long_grad_chain_deallocates_without_recursion():
    assert_runs("""
        from strideweave import CPU, Layout, Shape, Stride, Tensor
        layout = Layout(Shape(1), Stride(1))
        head = tail = Tensor(CPU(1), 0, layout)
        for _ in range(300000):
            nxt = Tensor(CPU(1), 0, layout)
            tail.grad = nxt
            tail = nxt
        del tail, nxt
        del head
    """)


# ---- dlpack.cpp: dlpack_info values stay owned while converted


def test_dlpack_info_mutated_by_value_conversion():
    # Converting device_type runs __index__, which empties the hook's dict:
    # the borrowed device_id value must not be read after it is freed.
    out = assert_runs("""
        from strideweave import Carrier, DType, Layout, Shape, Stride, Tensor
        info = {}
        class DeviceType:
            def __index__(self):
                info.clear()
                return 1
        class C(Carrier):
            def size(self): return 4
            def dtype(self): return DType.Float32
            def dlpack_info(self): return info
        def fill():
            info.update(pointer=4096, device_type=DeviceType(), device_id=int("".join(["12", "345"])))
        fill()
        t = Tensor(C(), 0, Layout(Shape(4), Stride(1)))
        print(t.__dlpack_device__())
    """)
    assert out.strip() == "(1, 12345)"
