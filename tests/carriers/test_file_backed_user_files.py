"""Files at a user's path: FileBacked.open over a region of an existing file
(no copy, never removed, read-only unless asked) and FileBacked.create (a
persistent new file), their errors, and what release, garbage collection,
exit, moves and fork do to them."""
import gc
import os
import stat
import sys
import textwrap

import numpy as np
import pytest

import strideweave as sw
from support.process import assert_child_ok, run_python

F32 = sw.DType.Float32
I32 = sw.DType.Int32
F64 = sw.DType.Floating
needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def flat(n):
    return sw.Layout(sw.Shape(n), sw.Stride(1))


def slots(c):
    return [c[i] for i in range(c.size())]


def with_header(path, header, values):
    """Writes header bytes followed by values' bytes; returns the data offset."""
    path.write_bytes(header + values.tobytes())
    return len(header)


def region_of(path, offset, dtype, n):
    """n values of dtype at byte offset of the file, read with NumPy."""
    return np.fromfile(path, dtype=dtype, count=n, offset=offset).tolist()


# ------------------------------------------------------------ open


def test_open_reads_the_data_region_of_an_npy_file_in_place(tmp_path):
    p = tmp_path / "a.npy"
    np.save(p, np.arange(10, dtype=np.float32))
    offset = np.load(p, mmap_mode="r").offset  # the header's length
    f = sw.FileBacked.open(p, dtype=F32, offset=offset)
    assert f.size() == 10 and f.dtype() is F32
    assert slots(f) == list(range(10))
    assert f.path == p and f.path.is_absolute()
    # No copy: a change to the file shows through the carrier at once.
    m = np.load(p, mmap_mode="r+")
    m[3] = 33.0
    m.flush()
    assert f[3] == 33.0
    assert sw.Tensor(f, 2, sw.Layout(sw.Shape(3), sw.Stride(1))).tolist() == [2.0, 33.0, 4.0]


def test_an_opened_file_is_read_only_unless_asked(tmp_path):
    p = tmp_path / "d.bin"
    off = with_header(p, b"HDR!" * 4, np.arange(4, dtype=np.int32))
    f = sw.FileBacked.open(p, dtype=I32, offset=off)
    assert not f.is_mutable()
    with pytest.raises(RuntimeError, match="not mutable"):
        f[0] = 5
    with pytest.raises(RuntimeError, match="not publicly mutable"):
        sw.move(sw.tensor([1, 2, 3, 4]), f)
    assert region_of(p, off, np.int32, 4) == [0, 1, 2, 3]
    g = sw.FileBacked.open(p, dtype=I32, offset=off, mutable=True)
    assert g.is_mutable()
    g[2] = -7
    assert g.version == 1
    assert region_of(p, off, np.int32, 4) == [0, 1, -7, 3]
    assert p.read_bytes()[:16] == b"HDR!" * 4  # the header is untouched


def test_moves_into_and_out_of_an_opened_region_use_its_offset(tmp_path):
    p = tmp_path / "m.bin"
    off = with_header(p, b"\0" * 12, np.zeros(6, dtype=np.int32))
    dest = sw.FileBacked.open(p, dtype=I32, offset=off, mutable=True)
    out = sw.move(sw.tensor([10, 11, 12, 13, 14, 15]), dest)
    assert out.carrier is dest
    assert region_of(p, off, np.int32, 6) == [10, 11, 12, 13, 14, 15]
    # An opened file is a fine move source; the move releases the carrier,
    # which only closes the file.
    back = sw.move(sw.Tensor(dest, 1, flat(4)), sw.CPU(5, dtype=I32))
    assert back.tolist() == [11, 12, 13, 14]
    assert dest.is_released() and p.exists()
    assert region_of(p, off, np.int32, 6) == [10, 11, 12, 13, 14, 15]
    assert p.read_bytes()[:12] == b"\0" * 12


def test_a_read_only_region_is_a_bulk_move_source(tmp_path):
    p = tmp_path / "big.bin"
    values = np.arange(1 << 18, dtype=np.float32)
    off = with_header(p, b"H" * 64, values)
    f = sw.FileBacked.open(p, dtype=F32, offset=off)
    h = sw.move_async(sw.Tensor(f, 0, flat(values.size)), sw.CPU(values.size, empty=True))
    t = h.wait(timeout=60)
    assert np.array_equal(np.from_dlpack(t), values)
    assert p.stat().st_size == 64 + values.nbytes


def test_an_opened_region_never_grows(tmp_path):
    p = tmp_path / "empty-region.bin"
    p.write_bytes(b"\0" * 16)
    f = sw.FileBacked.open(p, dtype=F32, offset=16, mutable=True)
    assert f.size() == 0
    with pytest.raises(ValueError, match="too small"):
        sw.move(sw.tensor([1.0, 2.0]), f)
    assert p.stat().st_size == 16


def test_slots_selects_part_of_the_file(tmp_path):
    p = tmp_path / "s.bin"
    np.arange(10, dtype=np.float32).tofile(p)
    assert slots(sw.FileBacked.open(p, dtype=F32, offset=8, slots=3)) == [2.0, 3.0, 4.0]
    assert sw.FileBacked.open(p, dtype=F32, offset=40, slots=0).size() == 0
    assert sw.FileBacked.open(p, dtype=F32, offset=40).size() == 0
    assert sw.FileBacked.open(str(p), dtype=F32, slots=10).size() == 10


def test_a_user_file_survives_release_collection_and_exit(tmp_path):
    p = tmp_path / "keep.bin"
    np.arange(4, dtype=np.float32).tofile(p)
    f = sw.FileBacked.open(p, dtype=F32)
    f.release()
    assert f.is_released() and f.path == p and p.exists()
    g = sw.FileBacked.create(tmp_path / "made.bin", 2, dtype=F32)
    del g
    gc.collect()
    assert (tmp_path / "made.bin").exists()
    out = run_python(f"""
        import strideweave as sw
        keep = [sw.FileBacked.open({str(p)!r}, dtype=sw.DType.Float32, mutable=True),
                sw.FileBacked.create({str(tmp_path / 'exit.bin')!r}, 3, dtype=sw.DType.Int32)]
        keep[0][0] = 9.0
        keep[1][2] = 7
        print("ok")
    """, env={"TMPDIR": str(tmp_path)})
    assert_child_ok(out)
    assert region_of(p, 0, np.float32, 4) == [9.0, 1.0, 2.0, 3.0]
    assert region_of(tmp_path / "exit.bin", 0, np.int32, 3) == [0, 0, 7]
    # The process's own temporary directory went; the user's files stayed.
    assert sorted(x.name for x in tmp_path.iterdir()) == ["exit.bin", "keep.bin", "made.bin"]


def test_like_results_of_a_user_file_are_temporary(tmp_path):
    p = tmp_path / "u.bin"
    np.zeros(2, dtype=np.float32).tofile(p)
    f = sw.FileBacked.open(p, dtype=F32)
    n = f.new_like([1.0, 2.0])
    a = f.allocate_like(3)
    assert n.path.parent != tmp_path and a.path.parent == n.path.parent
    assert n.is_mutable() and slots(n) == [1.0, 2.0]
    paths = [n.path, a.path]
    n.release()
    a.release()
    assert not any(x.exists() for x in paths)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["u.bin"]


def test_open_and_create_make_the_receivers_class(tmp_path):
    class Mine(sw.FileBacked):
        pass

    p = tmp_path / "c.bin"
    assert type(Mine.create(p, 2, dtype=F32)) is Mine
    assert type(Mine.open(p, dtype=F32)) is Mine


@pytest.mark.parametrize("dtype, numpy_dtype", [(F32, np.float32), (I32, np.int32), (F64, np.float64)])
def test_every_dtype_reads_native_values(tmp_path, dtype, numpy_dtype):
    p = tmp_path / "v.bin"
    values = np.array([1, -2, 3], dtype=numpy_dtype)
    off = with_header(p, b"\1" * 8, values)
    f = sw.FileBacked.open(p, dtype=dtype, offset=off)
    assert slots(f) == values.tolist()


# ------------------------------------------------------------ create


def test_create_makes_a_zeroed_file_of_the_given_size(tmp_path):
    p = tmp_path / "new.bin"
    f = sw.FileBacked.create(p, 5, dtype=I32)
    assert f.size() == 5 and f.is_mutable() and f.path == p
    assert p.stat().st_size == 20 and slots(f) == [0] * 5
    out = sw.move(sw.tensor([1, 2, 3, 4, 5]), f)
    assert out.carrier is f
    f.release()
    assert region_of(p, 0, np.int32, 5) == [1, 2, 3, 4, 5]
    assert sw.FileBacked.open(p, dtype=I32).size() == 5  # a later run opens it


def test_an_empty_created_file_grows_as_a_move_destination(tmp_path):
    p = tmp_path / "grow.bin"
    f = sw.FileBacked.create(p, 0, dtype=F32)
    sw.move(sw.tensor([1.5, 2.5]), f)
    assert f.size() == 2 and region_of(p, 0, np.float32, 2) == [1.5, 2.5]


def test_create_never_replaces_a_file(tmp_path):
    p = tmp_path / "taken.bin"
    p.write_bytes(b"precious")
    with pytest.raises(FileExistsError) as e:
        sw.FileBacked.create(p, 4, dtype=F32)
    assert e.value.filename == str(p)
    assert p.read_bytes() == b"precious"
    with pytest.raises(FileExistsError):
        sw.FileBacked.create(tmp_path, 1, dtype=F32)  # a directory is there


def test_create_errors(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        sw.FileBacked.create(tmp_path / "missing" / "x.bin", 1, dtype=F32)
    assert e.value.filename == str(tmp_path / "missing" / "x.bin")
    with pytest.raises(ValueError, match="slots must be non-negative"):
        sw.FileBacked.create(tmp_path / "n.bin", -1, dtype=F32)
    with pytest.raises(TypeError, match="slots must be an int, not bool"):
        sw.FileBacked.create(tmp_path / "n.bin", True, dtype=F32)
    with pytest.raises(TypeError, match="missing required keyword-only argument: 'dtype'"):
        sw.FileBacked.create(tmp_path / "n.bin", 1)
    with pytest.raises(TypeError):
        sw.FileBacked.create(tmp_path / "n.bin", 1, F32)  # dtype is keyword-only
    with pytest.raises(ValueError, match="FileBacked does not support dtype"):
        sw.FileBacked.create(tmp_path / "n.bin", 1, dtype=sw.DType.Bool)
    with pytest.raises(OverflowError, match="too large"):
        sw.FileBacked.create(tmp_path / "n.bin", sys.maxsize, dtype=F64)
    with pytest.raises(TypeError, match="path must be a str or a path-like object, not NoneType"):
        sw.FileBacked.create(None, 1, dtype=F32)
    assert not (tmp_path / "n.bin").exists()  # nothing made on failure


# ------------------------------------------------------------ open errors


def test_open_errors_before_the_file(tmp_path):
    p = tmp_path / "e.bin"
    np.zeros(4, dtype=np.float32).tofile(p)
    with pytest.raises(ValueError, match="offset 6 is misaligned: it must be a multiple of the item size"):
        sw.FileBacked.open(p, dtype=F32, offset=6)
    with pytest.raises(ValueError, match="misaligned"):
        sw.FileBacked.open(p, dtype=F64, offset=4)
    with pytest.raises(ValueError, match="offset must be non-negative"):
        sw.FileBacked.open(p, dtype=F32, offset=-4)
    with pytest.raises(ValueError, match="slots must be non-negative or None"):
        sw.FileBacked.open(p, dtype=F32, slots=-1)
    with pytest.raises(TypeError, match="offset must be an int, not bool"):
        sw.FileBacked.open(p, dtype=F32, offset=True)
    with pytest.raises(TypeError, match="missing required keyword-only argument: 'dtype'"):
        sw.FileBacked.open(p)
    with pytest.raises(TypeError, match="dtype must be a DType"):
        sw.FileBacked.open(p, dtype="float32")
    for bad in (b"/tmp/x", 3, None):
        with pytest.raises(TypeError, match="path must be a str or a path-like object"):
            sw.FileBacked.open(bad, dtype=F32)
    with pytest.raises(ValueError, match="must not be empty"):
        sw.FileBacked.open("", dtype=F32)
    # The misaligned offset is refused even for a missing file.
    with pytest.raises(ValueError, match="misaligned"):
        sw.FileBacked.open(tmp_path / "missing.bin", dtype=F32, offset=2)


def test_open_errors_about_the_file(tmp_path):
    missing = tmp_path / "missing.bin"
    with pytest.raises(FileNotFoundError) as e:
        sw.FileBacked.open(missing, dtype=F32)
    assert e.value.filename == str(missing)
    with pytest.raises(IsADirectoryError):
        sw.FileBacked.open(tmp_path, dtype=F32)
    with pytest.raises(IsADirectoryError):
        sw.FileBacked.open(tmp_path, dtype=F32, mutable=True)
    p = tmp_path / "short.bin"
    p.write_bytes(b"\0" * 40)
    with pytest.raises(ValueError, match=r"the file is too short: 10 slots of 4 bytes from offset 4 end past the end "
                                         r"of '.*short.bin' \(40 bytes\)"):
        sw.FileBacked.open(p, dtype=F32, offset=4, slots=10)
    with pytest.raises(ValueError, match=r"offset 44 is past the end of '.*short.bin' \(40 bytes\)"):
        sw.FileBacked.open(p, dtype=F32, offset=44)
    ragged = tmp_path / "ragged.bin"
    ragged.write_bytes(b"\0" * 12)
    with pytest.raises(ValueError, match="the 12 bytes of .* after offset 0 are not a whole number of 8-byte slots; "
                                         "pass slots="):
        sw.FileBacked.open(ragged, dtype=F64)
    assert sw.FileBacked.open(ragged, dtype=F64, slots=1).size() == 1


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("needs mkfifo")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    # In a child with a timeout: a regression would block in open().
    out = run_python(f"""
        import strideweave as sw
        try:
            sw.FileBacked.open({str(fifo)!r}, dtype=sw.DType.Float32)
        except ValueError as e:
            print("ValueError", e)
    """, timeout=60)
    assert_child_ok(out)
    assert out.stdout.startswith("ValueError FileBacked needs a regular file"), out.stdout


# Dropped by a root child so that file permissions bind it as they bind
# anyone (capset(2) with every capability set empty).
DROP_CAPABILITIES = """
import ctypes, os
if os.geteuid() == 0:
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)()) != 0:
        print("SKIP")
        raise SystemExit(0)
"""


def test_permission_errors(tmp_path):
    p = tmp_path / "locked.bin"
    np.zeros(2, dtype=np.float32).tofile(p)
    p.chmod(stat.S_IRUSR)
    (tmp_path / "ro").mkdir(mode=0o500)
    out = run_python(DROP_CAPABILITIES + textwrap.dedent(f"""
        import strideweave as sw
        f = sw.FileBacked.open({str(p)!r}, dtype=sw.DType.Float32)   # reading is allowed
        assert f.size() == 2
        try:
            sw.FileBacked.open({str(p)!r}, dtype=sw.DType.Float32, mutable=True)
        except PermissionError as e:
            assert e.filename == {str(p)!r}, e.filename
            print("PermissionError")
        try:
            sw.FileBacked.create({str(tmp_path / "ro" / "x.bin")!r}, 1, dtype=sw.DType.Float32)
        except PermissionError:
            print("PermissionError")
    """))
    assert_child_ok(out)
    if out.stdout.strip() == "SKIP":
        pytest.skip("cannot drop root's capabilities here")
    assert out.stdout.split() == ["PermissionError", "PermissionError"]


# ------------------------------------------------------------ fork


@needs_fork
def test_a_users_file_is_shared_across_fork(tmp_path):
    p = tmp_path / "shared.bin"
    out = run_python(f"""
        import os, strideweave as sw
        f = sw.FileBacked.create({str(p)!r}, 2, dtype=sw.DType.Float32)
        pid = os.fork()
        if pid == 0:
            f[0] = 5.0          # the same file in both processes
            os._exit(0)
        os.waitpid(pid, 0)
        f[1] = 6.0
        print(f[0], f.path)
    """, env={"TMPDIR": str(tmp_path)})
    assert_child_ok(out)
    assert out.stdout.split() == ["5.0", str(p)]
    assert region_of(p, 0, np.float32, 2) == [5.0, 6.0]
