"""_core._tiled_gather: the private native call a TiledEvictable request uses
to run its tile span copies with the GIL released (engine:
csrc/engine/tiled_gather, GoogleTest tests/cpp/test_tiled_gather.cpp)."""
import numpy as np
import pytest

import strideweave as sw
from strideweave import _core

F32 = sw.DType.Float32


def cpu(vals):
    c = sw.CPU(len(vals))
    for i, v in enumerate(vals):
        c[i] = float(v)
    return c


def file_of(vals):
    n = len(vals)
    flat = sw.Layout(sw.Shape(n), sw.Stride(1))
    return sw.move(sw.Tensor(cpu(vals), 0, flat), sw.FileBacked(dtype=F32)).carrier


@pytest.mark.parametrize("ways", [0, 1, 2, 3])
def test_gathers_file_spans_into_a_compact_cpu_buffer(ways):
    f = file_of(range(40))
    d = sw.CPU(30)
    _core._tiled_gather([(f, 30, d, 0, 10), (f, 0, d, 10, 10), (f, 20, d, 20, 10)], ways)
    assert [d[i] for i in range(30)] == [float(x) for x in list(range(30, 40)) + list(range(10)) + list(range(20, 30))]
    assert not f.is_owned() and not d.is_owned()  # the claims were given back


def test_cpu_to_file_and_cpu_to_cpu_spans():
    f = file_of([0.0] * 8)
    a = cpu(range(1, 9))
    b = sw.CPU(8)
    _core._tiled_gather([(a, 4, f, 0, 4), (a, 0, b, 4, 4)])
    assert [f[i] for i in range(4)] == [5.0, 6.0, 7.0, 8.0]
    assert [b[i] for i in range(4, 8)] == [1.0, 2.0, 3.0, 4.0]


def test_an_empty_request_does_nothing():
    assert _core._tiled_gather([]) is None


@pytest.mark.parametrize("copies, exc, fragment", [
    (3, TypeError, "sequence"),
    ([(1, 2)], TypeError, "tuple"),
    ([("x", 0, sw.CPU(2), 0, 1)], TypeError, "src must be a Carrier"),
    ([(sw.CPU(2), 0, None, 0, 1)], TypeError, "dst must be a Carrier"),
    ([(sw.CPU(2), 0, sw.CPU(2), 0, 3)], ValueError, "exceeds"),
    ([(sw.CPU(2), -1, sw.CPU(2), 0, 1)], ValueError, "exceeds"),
    ([(sw.CPU(2), 0, sw.CPU(2), 1, 2)], ValueError, "exceeds"),
    ([(sw.CPU(2), 0, sw.Generic([0.0, 0.0], dtype=F32), 0, 2)], TypeError, "no native span copy"),
    ([(sw.CPU(2), 0, sw.CPU(2, dtype=sw.DType.Int32), 0, 2)], TypeError, "no native span copy"),
])
def test_bad_copies_raise_before_anything_is_copied(copies, exc, fragment):
    with pytest.raises(exc, match=fragment):
        _core._tiled_gather(copies)


def test_a_released_carrier_is_refused():
    a, b = cpu([1, 2]), sw.CPU(2)
    b.release()
    with pytest.raises(RuntimeError, match="released"):
        _core._tiled_gather([(a, 0, b, 0, 2)])
    assert not a.is_owned()


def test_an_owned_carrier_needs_owner_access():
    a, b = cpu([1, 2]), sw.CPU(2)
    token = b._claim_ownership()
    try:
        with pytest.raises(RuntimeError, match="owner access"):
            _core._tiled_gather([(a, 0, b, 0, 2)])
        assert not a.is_owned()  # the claim taken on a was given back
        b._begin_owner_access(token)
        try:
            _core._tiled_gather([(a, 0, b, 0, 2)])
        finally:
            b._end_owner_access(token)
        assert [b[0], b[1]] == [1.0, 2.0]
    finally:
        b._relinquish_ownership(token)


def test_a_short_file_read_raises_and_claims_are_given_back():
    f = file_of(range(4))
    d = sw.CPU(8)
    # the span fits the carrier's size but the file is shorter: shrink it behind its back
    import os
    os.truncate(str(f.path), 8)
    with pytest.raises(OSError):
        _core._tiled_gather([(f, 0, d, 0, 4)])
    assert not f.is_owned() and not d.is_owned()


def test_large_spans_match_numpy():
    n = 1 << 20
    flat = sw.Layout(sw.Shape(4 * n), sw.Stride(1))
    c = sw.CPU(4 * n, empty=True)
    np.from_dlpack(sw.Tensor(c, 0, flat))[:] = np.arange(4 * n, dtype=np.float32)
    f = sw.move(sw.Tensor(c, 0, flat), sw.FileBacked(dtype=F32)).carrier
    d = sw.CPU(2 * n, empty=True)
    _core._tiled_gather([(f, 3 * n, d, 0, n), (f, n, d, n, n)], 2)
    got = np.from_dlpack(sw.Tensor(d, 0, sw.Layout(sw.Shape(2 * n), sw.Stride(1))))
    want = np.concatenate([np.arange(3 * n, 4 * n), np.arange(n, 2 * n)]).astype(np.float32)
    assert np.array_equal(got, want)
