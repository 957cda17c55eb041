"""FileBacked: where its files live (API.md 3.2 and 11): directory=, the
per-process directory under tempfile.gettempdir() (TMPDIR), its
re-creation after it vanished, the fork rule and cleanup in forked
multiprocessing workers, and the dtypes it refuses (Bool)."""
import gc
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from support import process

import strideweave
from strideweave import DType, FileBacked
from support.process import assert_child_ok

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(strideweave.__file__)))

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def run_python(code, tmpdir, timeout=120):
    """Runs code in a fresh interpreter with TMPDIR=tmpdir; returns stdout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, env.get("PYTHONPATH")]))
    if env.get("STRIDEWEAVE_BUILD"):
        env["STRIDEWEAVE_BUILD"] = os.path.abspath(env["STRIDEWEAVE_BUILD"])
    env["TMPDIR"] = str(tmpdir)
    r = subprocess.run([sys.executable, *process.SAFE_PATH, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       env=env, timeout=timeout)
    assert_child_ok(r)
    return r.stdout


def tree(path):
    return sorted(str(p.relative_to(path)) for p in pathlib.Path(path).rglob("*"))


# ------------------------------------------------------------ directory=


@pytest.mark.parametrize("as_type", [str, pathlib.Path], ids=["str", "pathlib"])
def test_files_go_into_the_given_directory(tmp_path, as_type):
    f = FileBacked(directory=as_type(tmp_path))
    assert f.path.parent == tmp_path and f.path.is_file()
    f._reserve(3)
    f[1] = 2.5
    assert f.path.stat().st_size == 24 and f[1] == 2.5
    p = f.path
    f.release()
    assert not p.exists() and f.path == p
    assert tmp_path.is_dir()  # the caller's directory itself stays


def test_a_named_file_in_the_given_directory(tmp_path):
    f = FileBacked("data.bin", directory=tmp_path, dtype=DType.Int32)
    assert f.path == tmp_path / "data.bin"
    with pytest.raises(FileExistsError):
        FileBacked("data.bin", directory=tmp_path)
    assert f.path.exists()  # the failed construction left it alone
    (tmp_path / "foreign.bin").write_bytes(b"x")
    with pytest.raises(FileExistsError):
        FileBacked("foreign.bin", directory=str(tmp_path))
    with pytest.raises(ValueError, match="directory parts"):
        FileBacked("sub/x.bin", directory=tmp_path)
    # The same name in the per-process directory is another file.
    g = FileBacked("data.bin")
    assert g.path.parent != tmp_path


def test_a_relative_directory_is_made_absolute(tmp_path, monkeypatch):
    (tmp_path / "rel").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    f = FileBacked("x.bin", directory="rel")
    assert f.path == tmp_path / "rel" / "x.bin" and f.path.is_absolute()
    monkeypatch.chdir(tmp_path / "elsewhere")
    (tmp_path / "elsewhere" / "rel").mkdir()
    decoy = tmp_path / "elsewhere" / "rel" / "x.bin"
    decoy.write_bytes(b"keep")
    f.release()
    assert not (tmp_path / "rel" / "x.bin").exists()
    assert decoy.read_bytes() == b"keep"  # release removed its own file, not the decoy


def test_collection_removes_a_file_in_the_given_directory(tmp_path):
    f = FileBacked(directory=tmp_path)
    p = f.path
    del f
    gc.collect()
    assert not p.exists()
    assert list(tmp_path.iterdir()) == []


def test_like_results_land_next_to_the_receiver(tmp_path):
    f = FileBacked(directory=tmp_path, dtype=DType.Float32)
    n = f.new_like([1.0, 2.0])
    a = f.allocate_like(3, dtype=DType.Int32)
    assert n.path.parent == tmp_path and a.path.parent == tmp_path
    assert [n[0], n[1]] == [1.0, 2.0] and a.size() == 3
    f.release()
    assert f.allocate_like(1).path.parent == tmp_path  # also from a released receiver
    # The per-process directory's carriers stay in it.
    d = FileBacked()
    assert d.new_like([1.0]).path.parent == d.path.parent


def test_a_move_destination_in_the_given_directory(tmp_path):
    src = strideweave.CPU(4, dtype=DType.Float32)
    for i in range(4):
        src[i] = float(i)
    lay = strideweave.Layout(strideweave.Shape(4), strideweave.Stride(1))
    dest = FileBacked(directory=tmp_path, dtype=DType.Float32)
    out = strideweave.move(strideweave.Tensor(src, 0, lay), dest)
    assert out.carrier is dest and dest.path.parent == tmp_path
    assert dest.path.stat().st_size == 16 and [dest[i] for i in range(4)] == [0.0, 1.0, 2.0, 3.0]


def test_a_missing_directory_is_file_not_found(tmp_path):
    missing = tmp_path / "missing"
    with pytest.raises(FileNotFoundError) as e:
        FileBacked(directory=missing)
    assert e.value.filename == str(missing)
    with pytest.raises(FileNotFoundError):
        FileBacked("x.bin", directory=str(missing))
    assert not missing.exists()  # never created on the caller's behalf


def test_a_file_is_not_a_directory(tmp_path):
    (tmp_path / "plain").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        FileBacked(directory=tmp_path / "plain")


@pytest.mark.parametrize("bad", [b"/tmp", 3, 1.5])
def test_directory_type(bad):
    with pytest.raises(TypeError, match="directory"):
        FileBacked(directory=bad)


@pytest.mark.parametrize("bad", ["", "a\0b"])
def test_directory_value(bad):
    with pytest.raises(ValueError, match="directory"):
        FileBacked(directory=bad)


def test_directory_is_keyword_only(tmp_path):
    with pytest.raises(TypeError):
        FileBacked("x.bin", DType.Floating, True, str(tmp_path))


def test_exit_removes_files_in_the_given_directory_but_not_the_directory(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    base = tmp_path / "base"
    base.mkdir()
    run_python(f"""
        from strideweave import FileBacked
        keep = [FileBacked(directory={str(user)!r}), FileBacked("n.bin", directory={str(user)!r})]
        keep[0]._reserve(2)
    """, base)
    assert user.is_dir() and list(user.iterdir()) == []
    assert list(base.iterdir()) == []


# ------------------------------------------------------------ TMPDIR, vanished directory


def test_tmpdir_is_honoured(tmp_path):
    out = run_python("""
        import json, tempfile
        from strideweave import FileBacked
        f = FileBacked()
        print(json.dumps([str(f.path.parent.parent), tempfile.gettempdir()]))
    """, tmp_path)
    parent, gettempdir = json.loads(out)
    assert parent == gettempdir == str(tmp_path)
    assert list(tmp_path.iterdir()) == []  # removed at exit


def test_tempfile_tempdir_is_honoured(tmp_path):
    # tempfile.gettempdir() is the rule, so tempfile.tempdir set in code counts too.
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    out = run_python(f"""
        import tempfile
        tempfile.tempdir = {str(chosen)!r}
        from strideweave import FileBacked
        print(FileBacked().path.parent.parent)
    """, tmp_path)
    assert out.strip() == str(chosen)
    assert list(chosen.iterdir()) == []


def test_a_vanished_directory_is_recreated(tmp_path):
    out = run_python("""
        import json, shutil
        from strideweave import FileBacked
        first = FileBacked()
        first._reserve(1)
        old = first.path.parent
        shutil.rmtree(old)
        second = FileBacked("named.bin")       # works again: a fresh directory
        second._reserve(2)
        second[1] = 4.0
        third = FileBacked()
        first.release()                        # its file went with the directory: no error
        print(json.dumps([str(old), str(second.path.parent), str(third.path.parent),
                          second.path.exists(), second[1]]))
    """, tmp_path)
    old, new, new3, exists, value = json.loads(out)
    assert new != old and new == new3 and exists and value == 4.0
    assert pathlib.Path(new).parent == tmp_path
    assert list(tmp_path.iterdir()) == []


def test_an_unusable_tmpdir_raises_oserror(tmp_path):
    out = run_python(f"""
        import tempfile
        tempfile.tempdir = {str(tmp_path / "missing")!r}
        from strideweave import FileBacked
        try:
            FileBacked()
        except FileNotFoundError as e:
            print("FileNotFoundError")
    """, tmp_path)
    assert out.strip() == "FileNotFoundError"


# ------------------------------------------------------------ fork


@needs_fork
def test_a_fork_started_worker_leaves_nothing_behind(tmp_path):
    # The parent never used FileBacked; the worker exits through os._exit.
    out = run_python("""
        import json, multiprocessing as mp
        from strideweave import FileBacked

        def work(q):
            kept = FileBacked("worker.bin")
            kept._reserve(4)
            other = FileBacked()
            q.put([str(kept.path), str(other.path)])

        if __name__ == "__main__":
            ctx = mp.get_context("fork")
            q = ctx.Queue()
            p = ctx.Process(target=work, args=(q,))
            p.start()
            paths = q.get(timeout=60)
            p.join(60)
            import pathlib
            print(json.dumps({"code": p.exitcode, "paths": paths,
                              "exist": [pathlib.Path(x).exists() for x in paths],
                              "dir_exists": pathlib.Path(paths[0]).parent.exists()}))
    """, tmp_path)
    info = json.loads(out)
    assert info["code"] == 0
    assert info["exist"] == [False, False] and not info["dir_exists"]  # gone at the worker's exit
    assert list(tmp_path.iterdir()) == []


@needs_fork
@pytest.mark.parametrize("shutdown", ["terminate", "close"])
def test_pool_workers_leave_nothing_behind(tmp_path, shutdown):
    # "terminate" (what `with Pool()` does) kills the workers before their
    # own cleanup: their directories nest in the parent's and go with it.
    out = run_python(f"""
        import json, multiprocessing as mp, pathlib
        from strideweave import FileBacked

        kept = []

        def work(i):
            f = FileBacked(f"task-{{i}}.bin")
            f._reserve(2)
            f[0] = float(i)
            kept.append(f)  # alive until the worker ends
            return str(f.path)

        if __name__ == "__main__":
            pool = mp.get_context("fork").Pool(2)
            paths = pool.map(work, range(4))
            pool.{shutdown}()
            pool.join()
            print(json.dumps(paths))
    """, tmp_path)
    assert len(json.loads(out)) == 4
    assert tree(tmp_path) == []


@needs_fork
def test_a_forked_child_uses_its_own_directory_and_keeps_the_parents(tmp_path):
    out = run_python("""
        import json, multiprocessing as mp, pathlib
        from strideweave import FileBacked

        parent_file = FileBacked("parent.bin")
        parent_file._reserve(1)
        parent_file[0] = 7.0

        def work(q):
            mine = FileBacked("child.bin")     # same name, own directory: no clash
            q.put(str(mine.path))

        if __name__ == "__main__":
            ctx = mp.get_context("fork")
            q = ctx.Queue()
            p = ctx.Process(target=work, args=(q,))
            p.start()
            child_path = pathlib.Path(q.get(timeout=60))
            p.join(60)
            print(json.dumps({"parent_dir": str(parent_file.path.parent), "child_path": str(child_path),
                              "child_exists": child_path.exists(), "parent_exists": parent_file.path.exists(),
                              "value": parent_file[0], "code": p.exitcode}))
    """, tmp_path)
    info = json.loads(out)
    assert info["code"] == 0
    assert pathlib.Path(info["child_path"]).parent != pathlib.Path(info["parent_dir"])
    assert not info["child_exists"]
    assert info["parent_exists"] and info["value"] == 7.0
    assert list(tmp_path.iterdir()) == []


@needs_fork
def test_a_child_killed_by_os_exit_is_swept_with_the_parent(tmp_path):
    out = run_python("""
        import os
        from strideweave import FileBacked
        FileBacked()  # the parent's directory
        pid = os.fork()
        if pid == 0:
            f = FileBacked("left.bin")
            f._reserve(8)
            os._exit(0)  # no cleanup at all in the child
        os.waitpid(pid, 0)
        print("ok")
    """, tmp_path)
    assert out.strip() == "ok"
    assert tree(tmp_path) == []


# ------------------------------------------------------------ dtypes


def test_bool_is_rejected_like_any_unsupported_dtype():
    with pytest.raises(ValueError, match="FileBacked does not support dtype"):
        FileBacked(dtype=DType.Bool)
    f = FileBacked()
    with pytest.raises(ValueError, match="FileBacked does not support dtype"):
        f.allocate_like(2, dtype=DType.Bool)
    with pytest.raises(ValueError, match="FileBacked does not support dtype"):
        f.new_like([True], dtype=DType.Bool)
    assert f.path.exists()


def test_a_bool_move_to_filebacked_is_refused():
    src = strideweave.CPU(2, dtype=DType.Bool)
    lay = strideweave.Layout(strideweave.Shape(2), strideweave.Stride(1))
    with pytest.raises((TypeError, ValueError)):
        strideweave.move(strideweave.Tensor(src, 0, lay), FileBacked())
    assert not src.is_released()
