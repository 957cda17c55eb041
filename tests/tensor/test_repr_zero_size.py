"""repr()/str() of zero-size tensors (an extent-0 mode): "[]" at the
nesting tolist() gives, read without touching a slot. A crash here kills the
interpreter, so the first check runs in a child process."""
import numpy as np
import pytest

import strideweave as sw
from support.process import run_python

SHAPES = [(0,), (0, 3), (3, 0), (2, 0, 4)]


def test_repr_of_zero_size_tensors_does_not_crash():
    r = run_python(f"""
        import numpy as np, strideweave as sw
        for shape in {SHAPES!r}:
            t = sw.from_dlpack(np.zeros(shape, np.float32))
            repr(t); str(t)
            repr(sw.from_dlpack(np.zeros(shape, np.int32), copy=True))
        print("ok")
    """, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])


@pytest.mark.parametrize("shape, body", [
    ((0,), "[]"),
    ((0, 3), "[]"),
    ((3, 0), "[[],\n        [],\n        []]"),
    ((2, 0, 4), "[[],\n\n        []]"),
])
def test_empty_brackets_follow_the_nesting_of_tolist(shape, body):
    t = sw.from_dlpack(np.zeros(shape, np.float32))
    # The layout's strides are the producer's (NumPy 2.4 passes zeros, 2.2
    # none, i.e. row-major); only the extents are fixed.
    extents = ", ".join(str(e) for e in shape) + ("," if len(shape) == 1 else "")
    assert repr(t.layout).startswith(f"Layout<Shape<({extents})>, Stride<(")
    assert repr(t) == f"Tensor({body}, dtype=DType.Float32, carrier=CPU, layout={t.layout!r})"
    assert str(t) == repr(t)
    assert eval(body.replace("\n", "")) == t.tolist()


def test_many_empty_rows_are_summarised():
    t = sw.from_dlpack(np.zeros((5000, 0), np.float32))
    lines = repr(t).splitlines()
    assert len(lines) == 7 and lines[3].strip() == "...,", lines


def test_copies_and_moves_of_zero_size_tensors_print():
    a = np.zeros((3, 0), np.float32)
    copied = sw.from_dlpack(a, copy=True)
    assert repr(copied).startswith("Tensor([[],")
    moved = sw.move(copied, sw.FileBacked(dtype=sw.DType.Float32))
    assert repr(moved).startswith("Tensor([[],") and "carrier=FileBacked" in repr(moved)
    assert "<released" in repr(copied)
    back = sw.move(moved, sw.CPU(1))
    assert repr(back).startswith("Tensor([[],") and "carrier=CPU" in repr(back)
