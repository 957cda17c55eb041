"""A temporary FileBacked behaves like memory across fork(): whatever a
forked child writes into an inherited one (slot writes, moves into it, a
growing move destination, an eviction) never reaches the parent, and what
the parent writes after the fork never reaches the child. The first write
in a process after a fork gives that process its own copy; the parent keeps
its file's path. Every scenario runs in a fresh interpreter with its own
TMPDIR, with a timeout."""
import json
import os
import pathlib
import textwrap

import pytest

from support.process import assert_child_ok, run_python, snippet_stdout

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

# Shared by the scenarios: fork(child) runs child(channel) in a forked child
# (the two processes take turns through the channel's pipes), and
# ramp_file(n) is a Float32 FileBacked of n slots holding 0, 1, 2, ...
PRELUDE = r"""
import json, os, sys, warnings
import numpy as np
import strideweave as sw
warnings.simplefilter("ignore", DeprecationWarning)  # fork() with the pool's threads alive
F32 = sw.DType.Float32

def flat(n):
    return sw.Layout(sw.Shape(n), sw.Stride(1))

def ramp_file(n, **kw):
    c = sw.CPU(n, empty=True)
    np.from_dlpack(sw.Tensor(c, 0, flat(n)))[:] = np.arange(n, dtype=np.float32)
    return sw.move(sw.Tensor(c, 0, flat(n)), sw.FileBacked(dtype=F32, **kw)).carrier

def values(c):
    return sw.Tensor(c, 0, flat(c.size())).tolist() if c.size() else []

def tell(fd, obj):
    data = json.dumps(obj).encode()
    os.write(fd, len(data).to_bytes(4, "little") + data)

def hear(fd):
    data = b""
    while len(data) < 4:
        data += os.read(fd, 4 - len(data))
    size = int.from_bytes(data, "little")
    data = b""
    while len(data) < size:
        data += os.read(fd, size - len(data))
    return json.loads(data)

class Channel:
    # Two pipes between one parent and one child.
    def __init__(self):
        self.down_r, self.down_w = os.pipe()
        self.up_r, self.up_w = os.pipe()
    def to_child(self, obj): tell(self.down_w, obj)
    def from_parent(self): return hear(self.down_r)
    def to_parent(self, obj): tell(self.up_w, obj)
    def from_child(self): return hear(self.up_r)

def fork(child):
    # child(channel) runs in the child; its return value is its last message.
    ch = Channel()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            ch.to_parent(child(ch))
        except BaseException as e:
            ch.to_parent({"error": repr(e)})
            code = 1
        os._exit(code)
    return pid, ch

def finish(pid):
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)
"""


def run(body, tmp_path, timeout=120):
    proc = run_python(PRELUDE + textwrap.dedent(body), env={"TMPDIR": str(tmp_path)}, timeout=timeout)
    assert_child_ok(proc)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_childs_slot_writes_stay_in_the_child_and_the_parents_in_the_parent(tmp_path):
    info = run("""
        f = ramp_file(8)
        parent_path = str(f.path)

        def child(ch):
            f[0] = 100.0                      # the child's first write: its own copy
            seen_first = values(f)
            ch.to_parent("wrote")
            ch.from_parent()                  # the parent has written meanwhile
            return {"first": seen_first, "after": values(f), "path": str(f.path)}

        pid, ch = fork(child)
        assert ch.from_child() == "wrote"
        parent_after_child = values(f)
        f[1] = 200.0                          # the parent's first write after the fork
        ch.to_child("go")
        child_info = ch.from_child()
        print(json.dumps({"code": finish(pid), "child": child_info, "parent_after_child": parent_after_child,
                          "parent": values(f), "parent_path": str(f.path), "before": parent_path}))
    """, tmp_path)
    ramp = [float(i) for i in range(8)]
    assert info["code"] == 0, info
    assert info["parent_after_child"] == ramp, "the child's write reached the parent"
    assert info["child"]["first"] == [100.0] + ramp[1:]
    assert info["child"]["after"] == [100.0] + ramp[1:], "the parent's write reached the child"
    assert info["parent"] == [0.0, 200.0] + ramp[2:]
    assert info["parent_path"] == info["before"]  # the parent keeps its file's path
    child_path = pathlib.Path(info["child"]["path"])
    assert child_path.name == pathlib.Path(info["before"]).name and child_path.parent != pathlib.Path(info["before"]).parent
    assert list(tmp_path.iterdir()) == []  # both cleaned up at exit


@pytest.mark.parametrize("size", [16, 1 << 18], ids=["small", "1MiB"])
def test_moves_into_an_inherited_file_stay_in_the_child(tmp_path, size):
    info = run(f"""
        n = {size}

        def filled(value):
            src = sw.CPU(n, empty=True)
            np.from_dlpack(sw.Tensor(src, 0, flat(n)))[:] = value
            return sw.Tensor(src, 0, flat(n))

        def value_range(c):
            a = np.from_dlpack(sw.move(sw.Tensor(c, 0, flat(n)), sw.CPU(n, empty=True)))
            return [float(a.min()), float(a.max())]

        f = ramp_file(n)

        def child(ch):
            sw.move(filled(-1.0), f)          # the bulk CPU->FileBacked route
            ch.to_parent("moved")
            return value_range(f)

        pid, ch = fork(child)
        ch.from_child()
        parent_sees = value_range(f)          # (moves f out: a read)
        child_range = ch.from_child()

        g = ramp_file(n)

        def second(ch):
            ch.from_parent()                  # after the parent's move into g
            return value_range(g)

        pid2, ch2 = fork(second)
        sw.move(filled(5.0), g)               # the parent moves into g after a fork
        ch2.to_child("go")
        second_child = ch2.from_child()
        print(json.dumps({{"parent_sees": parent_sees, "child": child_range, "second_child": second_child,
                          "parent_g": value_range(g), "codes": [finish(pid), finish(pid2)]}}))
    """, tmp_path)
    assert info["codes"] == [0, 0]
    assert info["parent_sees"] == [0.0, float(size - 1)], "the child's move reached the parent"
    assert info["child"] == [-1.0, -1.0]
    assert info["second_child"] == [0.0, float(size - 1)], "the parent's move reached the child"
    assert info["parent_g"] == [5.0, 5.0]
    assert list(tmp_path.iterdir()) == []


def test_an_empty_destination_grown_in_the_child_stays_empty_in_the_parent(tmp_path):
    info = run("""
        f = sw.FileBacked(dtype=F32)

        def child(ch):
            sw.move(sw.tensor([1.0, 2.0, 3.0]), f)
            return values(f)

        pid, ch = fork(child)
        child_values = ch.from_child()
        print(json.dumps({"code": finish(pid), "child": child_values, "parent_size": f.size(),
                          "parent_bytes": f.path.stat().st_size}))
    """, tmp_path)
    assert info == {"code": 0, "child": [1.0, 2.0, 3.0], "parent_size": 0, "parent_bytes": 0}


def test_an_eviction_into_an_inherited_secondary_stays_in_the_child(tmp_path):
    info = run("""
        secondary = ramp_file(4)
        primary = sw.CPU(4)
        for i in range(4):
            primary[i] = 50.0 + i
        ev = sw.Evictable(primary, secondary)

        def child(ch):
            ev.evict()                         # writes the primary's values into the secondary
            return [secondary[i] for i in range(4)]

        pid, ch = fork(child)
        child_values = ch.from_child()
        print(json.dumps({"code": finish(pid), "child": child_values, "parent_secondary": values(secondary),
                          "parent_evicted": ev.is_evicted()}))
    """, tmp_path)
    assert info["code"] == 0
    assert info["child"] == [50.0, 51.0, 52.0, 53.0]
    assert info["parent_secondary"] == [0.0, 1.0, 2.0, 3.0]
    assert info["parent_evicted"] is False


def test_a_pool_worker_writing_an_inherited_file_changes_nothing_in_the_parent(tmp_path):
    info = run("""
        import multiprocessing as mp
        f = ramp_file(4)

        def work(i):
            f[i] = -1.0
            return [f[k] for k in range(4)]

        if __name__ == "__main__":
            with mp.get_context("fork").Pool(2) as pool:
                seen = pool.map(work, range(4))
            print(json.dumps({"workers": seen, "parent": values(f)}))
    """, tmp_path)
    assert info["parent"] == [0.0, 1.0, 2.0, 3.0]
    for i, seen in enumerate(info["workers"]):
        assert seen[i] == -1.0
    assert list(tmp_path.iterdir()) == []  # workers' copies went with them


def test_a_file_in_a_callers_directory_is_private_too_and_its_copy_stays_there(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    info = run(f"""
        f = ramp_file(4, directory={str(user)!r})

        def child(ch):
            f[2] = 9.0
            path = str(f.path)
            f.release()                        # the child's copy is the child's to remove
            return path

        pid, ch = fork(child)
        child_path = ch.from_child()
        print(json.dumps({{"code": finish(pid), "child_path": child_path, "parent": values(f),
                          "parent_path": str(f.path), "listing": sorted(os.listdir({str(user)!r}))}}))
    """, tmp_path)
    assert info["code"] == 0
    assert pathlib.Path(info["child_path"]).parent == user and info["child_path"] != info["parent_path"]
    assert info["parent"] == [0.0, 1.0, 2.0, 3.0]
    assert info["listing"] == [pathlib.Path(info["parent_path"]).name]
    assert list(user.iterdir()) == []


def test_a_chain_of_forks_keeps_every_generation_apart(tmp_path):
    # Parent P writes after forking C; C forks G and writes after; G writes.
    info = run("""
        f = ramp_file(3)

        def grandchild(ch):
            f[2] = 30.0
            return values(f)

        def child(ch):
            pid_g, ch_g = fork(grandchild)
            g_values = ch_g.from_child()
            f[1] = 20.0
            return {"g": g_values, "c": values(f), "g_code": finish(pid_g)}

        pid, ch = fork(child)
        c_info = ch.from_child()
        f[0] = 10.0
        print(json.dumps({"code": finish(pid), "child": c_info, "parent": values(f)}))
    """, tmp_path)
    assert info["code"] == 0 and info["child"]["g_code"] == 0
    assert info["child"]["g"] == [0.0, 1.0, 30.0]
    assert info["child"]["c"] == [0.0, 20.0, 2.0]
    assert info["parent"] == [10.0, 1.0, 2.0]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("child_exit", ["del fb; gc.collect(); os._exit(0)", "sys.exit(0)", "fb.release(); os._exit(0)"])
def test_forked_child_does_not_remove_parent_files(child_exit):
    out = snippet_stdout(f"""
        import gc, os, sys
        from strideweave import CPU, DType, FileBacked, Layout, Shape, Stride, Tensor, move
        fb = FileBacked(dtype=DType.Float32)
        src = CPU(2)
        src[0] = 1.5
        move(Tensor(src, 0, Layout(Shape(2), Stride(1))), fb)
        path = fb.path
        pid = os.fork()
        if pid == 0:
            {child_exit}
        os.waitpid(pid, 0)
        print(path.exists(), fb[0])
        fb.release()
        print(path.exists())
    """, dev=True)
    assert out.split() == ["True", "1.5", "False"]
