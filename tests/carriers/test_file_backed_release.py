"""Releasing a FileBacked of 64 KiB and more: its file is removed when the
release returns (on a move, release(), gc and at exit) and its descriptor is
closed shortly after on the engine's background closer; a forked child
releasing its inherited copy still leaves the parent's file in place."""
import gc
import json
import os
import pathlib
import time

import numpy as np
import pytest

from support import process

import strideweave as sw
from support.process import assert_child_ok, run_python as shared_run_python

F32 = sw.DType.Float32
KIB = 1024
needs_proc_fd = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def run_python(code, env_extra=None):
    return shared_run_python(code, flags=process.SAFE_PATH, env=env_extra)


def file_of(nbytes):
    """A FileBacked holding nbytes of Float32 values 0, 1, 2, ..."""
    n = nbytes // 4
    c = sw.CPU(n, empty=True)
    t = sw.Tensor(c, 0, sw.Layout(sw.Shape(n), sw.Stride(1)))
    np.from_dlpack(t)[:] = np.arange(n, dtype=np.float32)
    return sw.move(t, sw.FileBacked(dtype=F32))


def open_on(path):
    """Descriptors of this process open on path (removed or not)."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # closed meanwhile (the listing's own descriptor)
        if target in (str(path), f"{path} (deleted)"):
            found.append(int(name))
    return found


def wait_closed(path, timeout=10.0):
    deadline = time.monotonic() + timeout
    while open_on(path) and time.monotonic() < deadline:
        time.sleep(0.005)
    return open_on(path)


SIZES = [4 * KIB, 64 * KIB - 4 * KIB, 64 * KIB, 1024 * KIB, 4096 * KIB]


@pytest.mark.parametrize("nbytes", SIZES)
def test_a_move_removes_its_file_source_at_once(nbytes):
    f = file_of(nbytes)
    p = f.carrier.path
    assert p.exists()
    out = sw.move(f, sw.CPU(nbytes // 4, empty=True))
    assert not p.exists(), "the moved-from file must be gone when move returns"
    assert np.array_equal(np.from_dlpack(out), np.arange(nbytes // 4, dtype=np.float32))


@needs_proc_fd
@pytest.mark.parametrize("nbytes", SIZES)
def test_the_descriptor_of_a_moved_from_file_is_closed_soon(nbytes):
    f = file_of(nbytes)
    p = f.carrier.path
    assert open_on(p)
    sw.move(f, sw.CPU(nbytes // 4, empty=True))
    assert wait_closed(p) == []


@needs_proc_fd
@pytest.mark.parametrize("nbytes", SIZES)
def test_release_and_gc_remove_at_once_and_close_soon(nbytes):
    a = file_of(nbytes).carrier
    pa = a.path
    a.release()
    assert not pa.exists() and a.is_released()
    b = file_of(nbytes).carrier
    pb = b.path
    del b
    gc.collect()
    assert not pb.exists()
    assert wait_closed(pa) == [] and wait_closed(pb) == []


def test_many_large_releases_in_a_row_leave_nothing_open():
    # More than the closer queues at once: the overflow is closed inline.
    paths = []
    for _ in range(3):
        fs = [file_of(256 * KIB) for _ in range(100)]
        paths += [f.carrier.path for f in fs]
        for f in fs:
            sw.move(f, sw.CPU(64 * KIB, empty=True))
        del fs
    assert not any(p.exists() for p in paths)
    if os.path.isdir("/proc/self/fd"):
        deadline = time.monotonic() + 10
        left = [p for p in paths if open_on(p)]
        while left and time.monotonic() < deadline:
            time.sleep(0.01)
            left = [p for p in left if open_on(p)]
        assert left == []


def test_exit_removes_large_files_and_the_directory(tmp_path):
    r = run_python(
        """
        import json, numpy as np, strideweave as sw
        n = 256 * 1024
        def file_of():
            c = sw.CPU(n, empty=True)
            t = sw.Tensor(c, 0, sw.Layout(sw.Shape(n), sw.Stride(1)))
            np.from_dlpack(t)[:] = 1.0
            return sw.move(t, sw.FileBacked(dtype=sw.DType.Float32))
        kept = file_of()
        moved = file_of()
        moved_path = str(moved.carrier.path)
        sw.move(moved, sw.CPU(n, empty=True))
        print(json.dumps({"dir": str(kept.carrier.path.parent), "files": [str(kept.carrier.path), moved_path]}))
        """,
        {"TMPDIR": str(tmp_path)},
    )
    assert_child_ok(r)
    info = json.loads(r.stdout)
    for f in info["files"]:
        assert not pathlib.Path(f).exists()
    assert not pathlib.Path(info["dir"]).exists()
    assert list(tmp_path.iterdir()) == []


@needs_fork
def test_a_forked_child_releasing_a_large_inherited_file_leaves_it(tmp_path):
    r = run_python(
        """
        import gc, json, os, numpy as np, strideweave as sw
        n = 256 * 1024
        c = sw.CPU(n, empty=True)
        t = sw.Tensor(c, 0, sw.Layout(sw.Shape(n), sw.Stride(1)))
        np.from_dlpack(t)[:] = 3.0
        f = sw.move(t, sw.FileBacked(dtype=sw.DType.Float32))
        # a released large file whose close may still be queued at the fork
        sw.move(sw.move(f, sw.CPU(n, empty=True)), sw.FileBacked(dtype=sw.DType.Float32))
        g = sw.move(sw.Tensor(sw.CPU(n), 0, sw.Layout(sw.Shape(n), sw.Stride(1))),
                    sw.FileBacked(dtype=sw.DType.Float32))
        g.carrier[0] = 5.0
        pid = os.fork()
        if pid == 0:
            g.carrier.release()   # the child's copy: the file stays
            gc.collect()
            os._exit(0 if g.carrier.is_released() else 3)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"code": os.waitstatus_to_exitcode(status), "exists": g.carrier.path.exists(),
                          "value": g.carrier[0]}))
        """,
        {"TMPDIR": str(tmp_path)},
    )
    assert_child_ok(r)
    info = json.loads(r.stdout)
    assert info == {"code": 0, "exists": True, "value": 5.0}
    assert list(tmp_path.iterdir()) == []
