"""new_like(values) on CPU and FileBacked stores a hole (None) as zero, in
every dtype each one holds; a write of None through c[i] = v stays a
TypeError (None is a hole in a values list, not a value)."""
import textwrap

import pytest

import strideweave as sw

from support.process import snippet_stdout

F32, I32, BOOL, FLOATING = sw.DType.Float32, sw.DType.Int32, sw.DType.Bool, sw.DType.Floating

CASES = [
    (lambda: sw.CPU(1, dtype=F32), [1.5, None, -3.0], [1.5, 0.0, -3.0]),
    (lambda: sw.CPU(1, dtype=I32), [7, None, None], [7, 0, 0]),
    (lambda: sw.CPU(1, dtype=BOOL), [None, True, None], [False, True, False]),
    (lambda: sw.FileBacked(dtype=F32), [None, 2.0], [0.0, 2.0]),
    (lambda: sw.FileBacked(dtype=FLOATING), [0.1, None], [0.1, 0.0]),
    (lambda: sw.FileBacked(dtype=I32), [None, None, 5], [0, 0, 5]),
]


@pytest.mark.parametrize("make,values,expected", CASES)
def test_new_like_stores_a_hole_as_zero(make, values, expected):
    c = make()
    fresh = c.new_like(values)
    assert type(fresh) is type(c) and fresh.dtype() is c.dtype()
    assert fresh.size() == len(values)
    assert [fresh[i] for i in range(fresh.size())] == expected
    assert fresh.version == 0


def test_holes_work_on_a_released_receiver_and_with_a_dtype_override():
    c = sw.CPU(2)
    c.release()
    fresh = c.new_like([None, 4], dtype=I32)
    assert fresh.dtype() is I32 and [fresh[0], fresh[1]] == [0, 4]


def test_an_all_hole_list_on_reused_memory_is_zero():
    # A freed buffer of the same size may come back from the reuse pool
    # holding old values: holes must still read zero.
    n = 1 << 16
    old = sw.CPU(n)
    for i in (0, n // 2, n - 1):
        old[i] = 9.0
    old.release()
    fresh = sw.CPU(1).new_like([None] * n)
    assert fresh[0] == 0.0 and fresh[n // 2] == 0.0 and fresh[n - 1] == 0.0


@pytest.mark.parametrize("make", [lambda: sw.CPU(1), lambda: sw.FileBacked(dtype=F32)])
def test_writing_none_into_a_slot_is_still_refused(make):
    c = make().new_like([1.0])
    with pytest.raises(TypeError, match="NoneType"):
        c[0] = None
    assert c[0] == 1.0


# ------------------------------------------------------------ a values list mutated by its own conversion


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
    out = snippet_stdout(textwrap.dedent(MUTATING_VALUES) + f"c = {build}\nprint(c.size(), c[0], c[2000])\n", dev=True)
    assert out.split() == ["2001", "1.0", "1999.5"]
