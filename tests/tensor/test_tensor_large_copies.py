"""strideweave.tensor() of large buffers: above a quarter million elements
the copy or conversion is cut into pieces that the calling thread and the
engine's piece helpers share. Every element must land once, in row-major
order, for odd sizes, strided and reversed sources and every conversion;
a range failure names the first offending element of the whole data;
threads and a forked child each get correct results."""
import threading

import numpy as np
import pytest

import strideweave as sw
from support.process import run_python_ok

# Above the engine's parallel threshold (2**18 elements), odd so the pieces
# do not divide evenly.
N = (1 << 18) * 3 + 7


def source(dtype, n=N):
    rng = np.random.default_rng(7)
    if np.dtype(dtype).kind == "b":
        return rng.random(n) < 0.5
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = max(int(info.min), -(2**31)), min(int(info.max), 2**31 - 1)
        return rng.integers(lo, hi, n, endpoint=True).astype(dtype)
    return (rng.standard_normal(n) * 1e3).astype(dtype)


def expected(a):
    kind = a.dtype.kind
    return np.asarray(a, dtype=np.bool_ if kind == "b" else np.int32 if kind in "iu" else np.float32)


def values(t):
    return np.from_dlpack(t) if t.dtype() != sw.DType.Bool else np.array(t.tolist(), dtype=np.bool_)


@pytest.mark.parametrize("dtype", ["<f4", "<f8", ">f8", "<f2", "<i8", "<u2", ">i4", "?"])
def test_large_contiguous_sources_convert_every_element(dtype):
    a = source(dtype)
    t = sw.tensor(a)
    assert t.layout.size == N
    np.testing.assert_array_equal(values(t), expected(a))


@pytest.mark.parametrize("view", ["every third", "reversed", "transposed", "fortran order", "column pair"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_large_strided_sources_land_in_row_major_order(view, dtype):
    base = source(dtype, 1021 * 3 * 1031)
    a = {
        "every third": lambda: base[::3],
        "reversed": lambda: base[::-1][: N],
        "transposed": lambda: base[: 1021 * 1031].reshape(1021, 1031).T,
        "fortran order": lambda: np.asfortranarray(base[: 1021 * 1031].reshape(1021, 1031)),
        "column pair": lambda: base.reshape(-1, 3)[:, 1:],  # rows of 2 out of 3, 1e6+ rows
    }[view]()
    assert a.size >= 1 << 18
    t = sw.tensor(a)
    out = values(t).reshape(a.shape)
    np.testing.assert_array_equal(out, expected(a))


def test_large_float64_overflow_names_the_first_offender_across_pieces():
    a = source(np.float64)
    a[N - 5] = 1e40   # in the last piece
    a[N // 2 + 1] = -1e39  # the first offender, in a middle piece
    with pytest.raises(OverflowError, match=rf"Float32 at index \({N // 2 + 1},\) of data with shape \({N},\)"):
        sw.tensor(a)
    a[N // 2 + 1] = np.inf  # infinities and NaN are kept, not offenders
    a[7] = np.nan
    with pytest.raises(OverflowError, match=rf"at index \({N - 5},\)"):
        sw.tensor(a)


def test_large_int64_overflow_names_the_first_offender_across_pieces():
    a = source(np.int64).reshape(-1, 1)[: (N // 2) * 2].reshape(2, -1)
    a[1, 3] = 2**31
    a[1, 10] = -(2**31) - 1
    with pytest.raises(OverflowError, match=rf"Int32 at index \(1, 3\) of data with shape \(2, {a.shape[1]}\)"):
        sw.tensor(a)


def test_large_copies_from_several_threads_at_once_are_each_correct():
    # The GIL is released during the copy, so these calls overlap and share
    # the piece helpers.
    arrays = [source(np.float32) + k for k in range(4)] + [source(np.float64) - k for k in range(4)]
    failures = []

    def convert(a):
        try:
            for _ in range(5):
                np.testing.assert_array_equal(np.from_dlpack(sw.tensor(a)), a.astype(np.float32))
        except BaseException as e:  # reported on the main thread
            failures.append(e)

    threads = [threading.Thread(target=convert, args=(a,)) for a in arrays]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in threads), "a conversion did not finish"
    assert not failures, failures[0]


def test_a_forked_child_converts_large_data_with_fresh_helpers():
    # The parent's helper threads do not exist in a forked child; the
    # child's first large conversion must start its own and not hang.
    run_python_ok("""
        import os, sys
        import numpy as np
        import strideweave as sw
        a = np.arange(1 << 20, dtype=np.float64)
        assert np.array_equal(np.from_dlpack(sw.tensor(a)), a.astype(np.float32))
        pid = os.fork()
        if pid == 0:
            ok = np.array_equal(np.from_dlpack(sw.tensor(a[::-1])), a[::-1].astype(np.float32))
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
    """, timeout=120)


def test_small_sources_are_unchanged_by_the_split():
    # Just below and at the parallel threshold: one thread, then pieces.
    for n in ((1 << 18) - 1, 1 << 18, (1 << 18) + 1):
        a = source(np.float64, n)
        np.testing.assert_array_equal(np.from_dlpack(sw.tensor(a)), a.astype(np.float32))
