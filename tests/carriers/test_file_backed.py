"""FileBacked carrier (API.md 3.2)."""
import gc
import json
import pathlib
import struct
import weakref

import pytest

from support import process

from strideweave import DType, FileBacked, Generic

from support.process import assert_child_ok, run_python as shared_run_python


def run_python(code, env_extra=None):
    # -P: the child's own folder never shadows the imported package.
    return shared_run_python(code, flags=process.SAFE_PATH, env=env_extra)


def grown(n, **kw):
    f = FileBacked(**kw)
    assert f._reserve(n) is True
    return f


class TestConstruction:
    def test_new_is_empty_with_a_file(self):
        f = FileBacked()
        assert f.size() == 0
        assert f.dtype() is DType.Floating
        assert isinstance(f.path, pathlib.Path)
        assert f.path.is_file()
        assert f.path.stat().st_size == 0
        assert f.is_mutable() and f.version == 0

    def test_generated_names_are_unique_in_one_directory(self):
        fs = [FileBacked() for _ in range(5)]
        assert len({f.path for f in fs}) == 5
        assert len({f.path.parent for f in fs}) == 1
        assert "strideweave" in fs[0].path.parent.name

    def test_named_file(self):
        f = FileBacked("named-test.bin")
        assert f.path.name == "named-test.bin"
        assert f.path.parent == FileBacked().path.parent

    def test_path_like_filename(self):
        f = FileBacked(pathlib.PurePosixPath("pathlike-test.bin"))
        assert f.path.name == "pathlike-test.bin"

    def test_existing_name(self):
        f = FileBacked("exists-test.bin")
        with pytest.raises(FileExistsError):
            FileBacked("exists-test.bin")
        assert f.path.exists()  # the failed construction left it alone

    def test_existing_foreign_file(self):
        d = FileBacked().path.parent
        (d / "foreign.bin").write_bytes(b"x")
        try:
            with pytest.raises(FileExistsError):
                FileBacked("foreign.bin")
        finally:
            (d / "foreign.bin").unlink()

    @pytest.mark.parametrize("name", ["a/b.bin", "/tmp/x.bin", "../x.bin", "./x.bin"])
    def test_directory_parts(self, name):
        with pytest.raises(ValueError, match="directory parts"):
            FileBacked(name)

    @pytest.mark.parametrize("name", ["", ".", "..", "a\0b"])
    def test_invalid_names(self, name):
        with pytest.raises(ValueError):
            FileBacked(name)

    def test_filename_type(self):
        with pytest.raises(TypeError):
            FileBacked(3)
        with pytest.raises(TypeError):
            FileBacked(b"x.bin")

    @pytest.mark.parametrize("name", ["Any", "Integer", "Float64", "Bool"])
    def test_unsupported_dtype(self, name):
        with pytest.raises(ValueError, match="FileBacked"):
            FileBacked(dtype=DType.from_name(name))

    def test_non_dtype(self):
        with pytest.raises(TypeError, match="DType"):
            FileBacked(dtype="Floating")

    def test_immutable(self):
        f = grown(1, mutable=False)
        assert not f.is_mutable()
        with pytest.raises(RuntimeError, match="not mutable"):
            f[0] = 1.0

    def test_init_twice(self):
        f = FileBacked()
        with pytest.raises(RuntimeError, match="twice"):
            f.__init__()


class TestStorage:
    @pytest.mark.parametrize(
        "dtype,fmt,value,expected",
        [
            (DType.Floating, "d", 0.1, 0.1),
            (DType.Float32, "f", 0.1, struct.unpack("f", struct.pack("f", 0.1))[0]),
            (DType.Int32, "i", -5, -5),
        ],
    )
    def test_native_layout_in_file(self, dtype, fmt, value, expected):
        f = grown(3, dtype=dtype)
        size = struct.calcsize("=" + fmt)
        assert f.path.stat().st_size == 3 * size
        assert f.path.read_bytes() == b"\0" * (3 * size)  # zero-filled growth
        f[1] = value
        assert f[1] == expected and type(f[1]) is type(expected)
        raw = f.path.read_bytes()
        assert struct.unpack("=" + fmt * 3, raw) == (type(expected)(0), expected, type(expected)(0))
        assert f.version == 1

    def test_value_checks(self):
        f = grown(1, dtype=DType.Int32)
        with pytest.raises(OverflowError):
            f[0] = 2**31
        with pytest.raises(TypeError):
            f[0] = 1.5
        b = grown(1, dtype=DType.Float32)
        with pytest.raises(TypeError, match="bool"):
            b[0] = True
        g = grown(1)
        with pytest.raises(TypeError):
            g[0] = "x"
        assert f.version == b.version == g.version == 0

    def test_reserve_grows_only_empty(self):
        f = FileBacked()
        assert f._reserve(4) is True
        assert f.size() == 4
        assert f._reserve(8) is False
        assert f.size() == 4
        assert f.version == 0

    def test_out_of_range(self):
        f = grown(2)
        with pytest.raises(IndexError):
            f[2]
        with pytest.raises(IndexError):
            FileBacked()[0]

    def test_io_error_is_oserror_with_errno(self):
        # A file-size limit makes growth fail with EFBIG.
        r = run_python(
            """
            import errno, resource, signal
            from strideweave import FileBacked
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))
            f = FileBacked()
            try:
                f._reserve(1000)
            except OSError as e:
                print("errno", e.errno == errno.EFBIG, f.size())
            """
        )
        assert_child_ok(r)
        assert r.stdout.strip() == "errno True 0"


class TestRemoval:
    def test_release_removes_file(self):
        f = grown(2)
        f[0] = 1.0
        p = f.path
        f.release()
        assert not p.exists()
        assert f.size() == 0 and f.is_released()
        assert f.path == p  # still names where it was
        assert f.dtype() is DType.Floating
        with pytest.raises(RuntimeError, match="released"):
            f[0]
        f.release()

    def test_owned_release_keeps_file(self):
        f = FileBacked()
        t = f._claim_ownership()
        with pytest.raises(RuntimeError, match="owned"):
            f.release()
        assert f.path.exists()
        f._relinquish_ownership(t)

    def test_gc_removes_file(self):
        f = grown(1)
        p = f.path
        del f
        gc.collect()
        assert not p.exists()

    def test_cycle_gc_removes_file(self):
        f = FileBacked()
        p = f.path
        holder = Generic([f], dtype=DType.Any)
        holder[0] = [holder, f]
        r = weakref.ref(f)
        del f, holder
        gc.collect()
        assert r() is None
        assert not p.exists()

    def test_exit_removes_files_and_directory(self, tmp_path):
        r = run_python(
            """
            import gc, json
            from strideweave import DType, FileBacked, Generic
            kept = FileBacked("kept.bin"); kept._reserve(3); kept[1] = 2.0
            released = FileBacked(); released.release()
            cyc = Generic([None], dtype=DType.Any); cyc[0] = [cyc, FileBacked()]
            gc.disable()
            print(json.dumps({"dir": str(kept.path.parent), "files": [str(kept.path), str(cyc[0][1].path)]}))
            """,
            {"TMPDIR": str(tmp_path)},
        )
        assert_child_ok(r)
        info = json.loads(r.stdout)
        d = pathlib.Path(info["dir"])
        assert d.parent == tmp_path  # the directory lives under $TMPDIR
        for f in info["files"]:
            assert not pathlib.Path(f).exists()
        assert not d.exists()
        assert list(tmp_path.iterdir()) == []

    def test_exit_after_user_atexit_access(self, tmp_path):
        # An atexit handler registered after import runs before the cleanup
        # and may still use its carrier.
        r = run_python(
            """
            import atexit
            from strideweave import FileBacked
            f = FileBacked(); f._reserve(1)
            atexit.register(lambda: print(f[0]))
            """,
            {"TMPDIR": str(tmp_path)},
        )
        assert_child_ok(r)
        assert r.stdout.strip() == "0.0"
        assert list(tmp_path.iterdir()) == []


class TestLike:
    def test_new_like(self):
        f = FileBacked(dtype=DType.Int32)
        n = f.new_like([1, 2, 3])
        assert type(n) is FileBacked and n.dtype() is DType.Int32
        assert [n[i] for i in range(3)] == [1, 2, 3]
        assert n.path != f.path and n.path.stat().st_size == 12
        assert n.version == 0
        with pytest.raises(TypeError):
            f.new_like([1.5])

    def test_new_like_failure_leaves_no_file(self):
        f = FileBacked(dtype=DType.Int32)
        before = set(f.path.parent.iterdir())
        with pytest.raises(TypeError):
            f.new_like([1, 2.5])
        assert set(f.path.parent.iterdir()) == before

    def test_allocate_like_on_released_receiver(self):
        f = FileBacked(dtype=DType.Float32)
        f.release()
        a = f.allocate_like(2, mutable=False)
        assert type(a) is FileBacked and a.dtype() is DType.Float32
        assert a.size() == 2 and a[1] == 0.0 and not a.is_mutable()
        n = f.new_like([0.5], dtype=DType.Floating)
        assert n.dtype() is DType.Floating and n[0] == 0.5
        with pytest.raises(ValueError):
            f.allocate_like(1, dtype=DType.Any)

    def test_no_dlpack(self):
        with pytest.raises(BufferError, match="DLPack is not supported for this carrier"):
            FileBacked().dlpack_info()
