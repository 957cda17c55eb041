"""Tensor builders shared by the ops and autograd tests (not a test module)."""
import struct

from strideweave import CPU, DType, Generic, Layout, Shape, Tensor

SENTINEL = 77  # fills the slots a layout does not address


def f32(x):
    """x rounded to binary32."""
    return struct.unpack("f", struct.pack("f", x))[0]


def make(values, layout=None, *, kind="cpu", dtype=DType.Float32, offset=0):
    """A tensor holding values (flat, colexicographic) under layout."""
    layout = layout or Layout.canonical(Shape([len(values)]))
    assert layout.size == len(values)
    n = offset + layout.cosize
    fill = False if dtype is DType.Bool else SENTINEL
    if kind == "cpu":
        c = CPU(n, dtype=dtype)
        for i in range(n):
            c[i] = fill
    else:
        c = Generic([fill] * n, dtype=dtype)
    for i, v in enumerate(values):
        c[offset + layout.index(i)] = v
    return Tensor(c, offset, layout)


def vals(t):
    return [t[i] for i in range(t.size())]
