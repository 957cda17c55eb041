"""Tensor builders: one builder, one fill rule, and small value helpers."""
import struct

import strideweave as sw

F32 = sw.DType.Float32
I32 = sw.DType.Int32
BOOL = sw.DType.Bool

# The one fill rule: every slot of a built carrier that no given value lands
# in holds FILL (False for Bool), so a read of an unaddressed slot shows up.
FILL = 77


def fill_for(dtype):
    return False if dtype is sw.DType.Bool else FILL


def layout(shape, stride):
    return sw.Layout(sw.Shape(shape), sw.Stride(stride))


def canonical(shape):
    return sw.Layout.canonical(sw.Shape(shape))


def tensor(values, lay=None, *, offset=0, dtype=F32, kind="cpu", placement="logical", size=None):
    """A tensor over a fresh carrier (kind "cpu": CPU, else Generic) of
    ``size`` slots (default offset + lay.cosize), every slot FILL first.

    placement "logical": values are the tensor's logical values (flat,
    first-mode-fastest): values[i] lands in slot offset + lay.index(i), and
    there must be exactly lay.size of them. placement "slots": values[i]
    lands in slot offset + i, whatever the layout addresses.
    """
    values = list(values)
    lay = lay if lay is not None else canonical([len(values)])
    if placement == "logical":
        assert lay.size == len(values), (lay, len(values))
        targets = [offset + lay.index(i) for i in range(len(values))]
    else:
        assert placement == "slots", placement
        targets = [offset + i for i in range(len(values))]
    n = size if size is not None else offset + lay.cosize
    fill = fill_for(dtype)
    if kind == "cpu":
        c = sw.CPU(n, dtype=dtype)
        for i in range(n):
            c[i] = fill
    else:
        c = sw.Generic([fill] * n, dtype=dtype)
    for k, v in zip(targets, values):
        c[k] = v
    return sw.Tensor(c, offset, lay)


def cpu_tensor(vals, lay=None, offset=0, dtype=F32, size=None):
    """The movement tests' shorthand: tensor(placement="slots") on a CPU
    carrier, so vals are the slots from offset on."""
    return tensor(vals, lay, offset=offset, dtype=dtype, placement="slots", size=size)


def values(t):
    """Logical values in flat (first-mode-fastest) order."""
    return [t[i] for i in range(t.size())]


def slots(c):
    return [c[i] for i in range(c.size())]


def f32(x):
    """x rounded to binary32."""
    return struct.unpack("f", struct.pack("f", x))[0]


def ramp_cpu(n):
    """A CPU Float32 carrier holding 0.0, 1.0, ..., n-1."""
    c = sw.CPU(n)
    for i in range(n):
        c[i] = float(i)
    return c


def two_plane_tensor():
    """A multi-subtensor tensor of shape (2,): a Float32 and an Int32 plane."""
    from strideweave.core import Subtensor, TensorRepresentation

    class Planar(sw.CompoundDType):
        simple_types = (F32, sw.DType.Int32)

    lay = sw.Layout.canonical(sw.Shape(2))
    return sw.Tensor._from_representation(TensorRepresentation(
        Planar(), [Subtensor(F32, sw.CPU(2), 0, lay), Subtensor(sw.DType.Int32, sw.CPU(2, dtype=sw.DType.Int32), 0, lay)],
        [lay]))


def carrier_of(vals, dtype=F32, cls=sw.CPU):
    """A carrier of class cls holding exactly vals (no fill)."""
    c = cls(len(vals), dtype=dtype)
    for i, v in enumerate(vals):
        c[i] = v
    return c


def flat_layout(n):
    """Layout(Shape(n), Stride(1)): n contiguous elements."""
    return sw.Layout(sw.Shape(n), sw.Stride(1))


def whole(c):
    """The rank-1 tensor over every slot of c."""
    return sw.Tensor(c, 0, flat_layout(c.size()))
