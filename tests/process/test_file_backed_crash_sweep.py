"""A process that dies without cleaning up (SIGKILL, SIGTERM) leaves its
temporary FileBacked files behind, and the next StrideWeave process that
creates a FileBacked (of any kind) removes them: every per-process directory
carries a lock its process holds for life, and only directories whose lock
nobody holds are swept. A live process's directory, files at a user's path
and anything else in the temporary directory stay."""
import json
import os
import pathlib
import select
import signal
import subprocess
import sys
import textwrap

import pytest

from support.process import assert_child_ok, child_env, run_python

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals and flock")

TIMEOUT = 60.0


def start(code, tmp_path):
    """A child interpreter running code with TMPDIR=tmp_path; it reports a
    JSON line, then waits until its stdin closes."""
    script = textwrap.dedent(code) + "\nimport sys\nsys.stdout.flush()\nsys.stdin.read()\n"
    return subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=child_env({"TMPDIR": str(tmp_path)}))


def report(proc):
    """The JSON line the child printed (within TIMEOUT)."""
    ready, _, _ = select.select([proc.stdout], [], [], TIMEOUT)
    if not ready:
        proc.kill()
        pytest.fail("the child never reported")
    line = proc.stdout.readline()
    if not line:
        pytest.fail(f"the child died: {proc.wait(TIMEOUT)} {proc.stderr.read()}")
    return json.loads(line)


def kill(proc, sig):
    proc.send_signal(sig)
    assert proc.wait(TIMEOUT) == -sig
    proc.stdin.close()
    proc.stdout.close()
    proc.stderr.close()


# A process with temporary files of every kind: generated and chosen names,
# a large file (its close goes to the background closer) and an empty one.
LEAVES_FILES = """
    import json
    import numpy as np
    import strideweave as sw
    big = sw.CPU(1 << 20, empty=True)
    np.from_dlpack(sw.Tensor(big, 0, sw.Layout(sw.Shape(1 << 20), sw.Stride(1))))[:] = 1.0
    keep = [sw.move(sw.Tensor(big, 0, sw.Layout(sw.Shape(1 << 20), sw.Stride(1))),
                    sw.FileBacked(dtype=sw.DType.Float32)).carrier,
            sw.FileBacked("named.bin"), sw.FileBacked()]
    keep[1]._reserve(3)
    print(json.dumps([str(f.path) for f in keep]))
"""


# How the next process makes its first FileBacked: every kind sweeps.
CREATIONS = {
    "temporary": "sw.FileBacked()",
    "directory": "sw.FileBacked(directory=os.path.join(tempfile.gettempdir(), 'mine'))",
    "create": "sw.FileBacked.create(os.path.join(tempfile.gettempdir(), 'made.bin'), 1, dtype=sw.DType.Int32)",
    "open": "sw.FileBacked.open(os.path.join(tempfile.gettempdir(), 'made.bin'), dtype=sw.DType.Int32)",
}


def create_a_file_backed(tmp_path, how="temporary"):
    """A fresh process that creates one FileBacked (CREATIONS[how]); returns
    the listing of tmp_path it saw right after."""
    out = run_python(f"""
        import json, os, tempfile
        import strideweave as sw
        if {how!r} == "directory":
            os.makedirs(os.path.join(tempfile.gettempdir(), 'mine'), exist_ok=True)
        if {how!r} == "open":
            with open(os.path.join(tempfile.gettempdir(), 'made.bin'), 'wb') as f:
                f.write(bytes(4))
        f = {CREATIONS[how]}
        print(json.dumps(sorted(os.listdir(tempfile.gettempdir()))))
    """, env={"TMPDIR": str(tmp_path)}, timeout=TIMEOUT)
    assert_child_ok(out)
    return json.loads(out.stdout)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_process_leaves_files_that_the_next_process_removes(tmp_path, sig):
    proc = start(LEAVES_FILES, tmp_path)
    paths = [pathlib.Path(p) for p in report(proc)]
    kill(proc, sig)
    directory = paths[0].parent
    assert all(p.exists() for p in paths), "the killed process cleaned up after all"
    assert directory.parent == tmp_path
    seen = create_a_file_backed(tmp_path)
    assert directory.name not in seen, "the dead process's directory was not swept"
    assert not directory.exists()
    assert list(tmp_path.iterdir()) == []  # and the new process removed its own at exit


@pytest.mark.parametrize("how", sorted(set(CREATIONS) - {"temporary"}))
def test_every_kind_of_file_backed_sweeps(tmp_path, how):
    proc = start(LEAVES_FILES, tmp_path)
    directory = pathlib.Path(report(proc)[0]).parent
    kill(proc, signal.SIGKILL)
    assert directory.exists()
    assert directory.name not in create_a_file_backed(tmp_path, how)
    assert [p.name for p in tmp_path.iterdir()] == ["mine" if how == "directory" else "made.bin"]


def test_a_live_processs_directory_survives_the_sweep(tmp_path):
    proc = start(LEAVES_FILES, tmp_path)
    paths = [pathlib.Path(p) for p in report(proc)]
    try:
        seen = create_a_file_backed(tmp_path)
        assert paths[0].parent.name in seen
        assert all(p.exists() for p in paths)
    finally:
        proc.stdin.close()  # the live process ends normally and cleans up
        assert proc.wait(TIMEOUT) == 0, proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
    assert list(tmp_path.iterdir()) == []


def test_the_sweep_never_touches_user_paths_or_foreign_directories(tmp_path):
    user_dir = tmp_path / "user"
    user_dir.mkdir()
    proc = start(f"""
        import json
        import strideweave as sw
        made = sw.FileBacked.create({str(tmp_path / "persistent.bin")!r}, 4, dtype=sw.DType.Float32)
        made[0] = 1.5
        in_user_dir = sw.FileBacked("chosen.bin", directory={str(user_dir)!r})
        temp = sw.FileBacked()
        print(json.dumps([str(temp.path), str(in_user_dir.path)]))
    """, tmp_path)
    temp_path, user_temp = (pathlib.Path(p) for p in report(proc))
    kill(proc, signal.SIGKILL)
    # Directories named like a per-process one but without its lock file.
    foreign = tmp_path / "strideweave-abc123"
    foreign.mkdir()
    (foreign / "data.bin").write_bytes(b"mine")
    other = tmp_path / "strideweave-notours"
    other.mkdir()
    create_a_file_backed(tmp_path)
    assert not temp_path.parent.exists()
    assert (tmp_path / "persistent.bin").stat().st_size == 16
    assert user_temp.exists(), "a file in a caller's directory was swept"
    assert (foreign / "data.bin").read_bytes() == b"mine"
    assert other.is_dir()


@pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(os, "pidfd_open"), reason="needs fork and pidfd_open")
def test_a_killed_parents_directory_stays_while_its_forked_child_lives(tmp_path):
    # The child's directory nests in the parent's; the child keeps the
    # parent's lock it inherited, so the pair counts as live until both died.
    proc = start("""
        import json, os, sys, time
        import strideweave as sw
        mine = sw.FileBacked()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            theirs = sw.FileBacked("child.bin")
            theirs._reserve(2)
            os.write(w, (str(theirs.path) + "\\n").encode())
            os.read(0, 1)          # lives until the test closes stdin (after the parent died)
            os._exit(0)
        child_path = os.read(r, 4096).decode().strip()
        print(json.dumps({"parent_file": str(mine.path), "child_file": child_path, "child": pid}))
    """, tmp_path)
    info = report(proc)
    parent_dir = pathlib.Path(info["parent_file"]).parent
    child_file = pathlib.Path(info["child_file"])
    assert child_file.parent.parent == parent_dir
    # A descriptor that becomes readable once the orphan (not our child: no
    # wait) has exited, which is after the kernel closed its files and so
    # dropped its locks.
    orphan = os.pidfd_open(info["child"])
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(TIMEOUT) == -signal.SIGKILL
    try:
        create_a_file_backed(tmp_path)
        assert child_file.exists(), "a live process's directory was swept"
        assert parent_dir.exists()
    finally:
        os.kill(info["child"], signal.SIGKILL)
        proc.stdin.close()
        proc.stdout.close()
        proc.stderr.close()
    gone, _, _ = select.select([orphan], [], [], TIMEOUT)
    os.close(orphan)
    assert gone, "the orphan did not exit"
    create_a_file_backed(tmp_path)
    assert not parent_dir.exists()
    assert list(tmp_path.iterdir()) == []
