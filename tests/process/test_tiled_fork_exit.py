"""Pending tiled work follows the move machinery's exit and fork policy:
STRIDEWEAVE_EXIT_TIMEOUT bounds the exit wait, Ctrl-C cuts it short, and in
a forked child every request pending at the fork fails with "pending at
fork" (whatever the window: even one completing on a worker as the fork
happens) and gives its tiles and carriers back. Each scenario runs in a
subprocess with a timeout."""
import time

import pytest

from support.process import assert_child_ok, interrupt_until_exit, popen_python, run_python

# A tiled request whose tile transfer never ends: its carriers' exact-pair
# route blocks.
STUCK = """
import threading, strideweave as sw
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSet
F32 = sw.DType.Float32
class P(sw.Generic): pass
class S(sw.Generic): pass
entered = threading.Event()
class Stuck(sw.MoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        entered.set()
        threading.Event().wait()  # never set
sw.register_move_operation(P, S, Stuck)
te = TiledEvictable(P([1.0, 2.0], dtype=F32), S([0.0, 0.0], dtype=F32), (1,), (2,))
h = te.evict_async(TileSet([(0,)]))
assert entered.wait(10)
print("main done", flush=True)
"""


def test_exit_waits_at_most_the_exit_timeout_for_a_stuck_request():
    start = time.monotonic()
    r = run_python(STUCK, env={"STRIDEWEAVE_EXIT_TIMEOUT": "1"}, timeout=60)
    assert_child_ok(r)
    assert "main done" in r.stdout
    assert "abandoning 1 move(s) still pending at interpreter exit (timed out" in r.stderr, r.stderr
    assert time.monotonic() - start < 30


def test_ctrl_c_interrupts_the_exit_wait_for_a_tiled_request():
    p = popen_python(STUCK, env={"STRIDEWEAVE_EXIT_TIMEOUT": "120"})
    try:
        assert p.stdout.readline().strip() == "main done"
        out, err = interrupt_until_exit(p)  # (the wait itself would last 120 s)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert "abandoning 1 move(s)" in err and "interrupted" in err, err


def test_a_request_after_shutdown_began_is_refused():
    r = run_python("""
        import atexit
        def late():
            import strideweave as sw
            from strideweave.carriers.tiled_evictable import TiledEvictable, TileSet
            te = TiledEvictable(sw.CPU(4), sw.CPU(0), (2,), (2,))
            try:
                te.evict_async(TileSet([(0,)]))
            except RuntimeError as e:
                print("refused:", e, flush=True)
        atexit.register(late)
        import strideweave as sw
    """, timeout=60)
    assert_child_ok(r)
    assert "refused:" in r.stdout and "shutdown" in r.stdout, r.stdout


FORK_WINDOW = """
import os, signal, time, strideweave as sw
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection, TileSet
F32 = sw.DType.Float32
n, T = 32, 4096
c = sw.CPU(n * T)
te = TiledEvictable(c, sw.FileBacked(dtype=F32), (n,), (T,))
w = sw.Tensor(te, 0, te.canonical_layout())
te.evict(TileSet([(k,) for k in range(n)]))
bad, hung, rounds = 0, [], 0
start = time.monotonic()
# 20 rounds, or as many as 90 s allow (at least 3): a sanitizer build on a
# loaded machine is slow, and slowness is not what this test is about; a
# child that does not exit within 60 s is hung and is reported as such.
while rounds < 20 and (rounds < 3 or time.monotonic() - start < 90):
    # requests completing on the workers while the fork happens
    hs = [te.project(w, TileSelection([[k, (k + 1) % n]])) for k in range(n)]
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            for h in hs:
                try:
                    h.wait(timeout=10)
                except RuntimeError as e:
                    if "pending at fork" not in str(e):
                        code = 3
                except TimeoutError:
                    code = 2  # the child's wait hung
            if te._request_counts()["pending"]:
                code = 4
            te.release()  # nothing is held any more
        except BaseException:
            code = 5
        os._exit(code)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            bad += os.WEXITSTATUS(status) != 0
            break
        if time.monotonic() > deadline:
            hung.append(rounds)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            break
        time.sleep(0.005)
    for h in hs:
        h.wait(timeout=60)  # the parent's requests all complete
    rounds += 1
print("rounds", rounds, "bad", bad, "hung", hung)
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_fork_while_requests_complete_never_leaves_a_childs_wait_hanging(tmp_path):
    r = run_python(FORK_WINDOW, cwd=tmp_path, timeout=400)
    assert_child_ok(r)
    words = r.stdout.split()
    assert words[0] == "rounds" and int(words[1]) >= 3, r.stdout
    assert words[2:] == ["bad", "0", "hung", "[]"], r.stdout + r.stderr


# Tiers whose transfers (an exact-pair route registered by each script)
# start, set `started`, and wait for `gate`.
GATED = """
import os, threading, strideweave as sw
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection, TileSet
F32 = sw.DType.Float32
class P(sw.Generic): pass
class S(sw.Generic): pass
gate, started = threading.Event(), threading.Event()
class Op(sw.MoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        started.set()
        assert gate.wait(30)
        for i in range(output.size()):
            output[i] = tensor[i]

def fork_and_check(h, check):
    # Forks while h is pending; the child exits 0 when h fails there with
    # "pending at fork" and check(error) holds. The child's exit status.
    assert started.wait(5)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            try:
                h.wait(timeout=5)
                code = 2
            except RuntimeError as e:
                code = 0 if "pending at fork" in str(e) and check() else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    gate.set()
    return os.WEXITSTATUS(status)
"""

FORK_PENDING = GATED + """
sw.register_move_operation(S, P, Op)
te = TiledEvictable(P([], dtype=F32), S([1.0, 2.0, 3.0, 4.0], dtype=F32), (2,), (2,))
w = sw.Tensor(te, 0, te.canonical_layout())
dest = P([0.0, 0.0], dtype=F32)
h = te.project(w, TileSelection([[1]]), dest)

def child():
    # the request gave its tiles and its destination back
    ok = not dest.is_owned() and te._request_counts()["pending"] == 0
    dest[0] = 9.0
    gate.set()  # (the child's own copy of the event: its transfers may run)
    te.promote(TileSet([(0,)]))
    return ok and te.tile_state((0,)).location == "primary"

status = fork_and_check(h, child)
r = h.wait()
print("child", status, [r[i] for i in range(2)])
"""

FORK_EVICT = GATED + """
sw.register_move_operation(P, S, Op)
te = TiledEvictable(P([1.0, 2.0, 3.0, 4.0], dtype=F32), S([0.0] * 4, dtype=F32), (2,), (2,))
h = te.evict_async(TileSet([(0,)]))

def child():
    if te._request_counts()["pending"]:
        return False
    te.release()
    return te.is_released()

status = fork_and_check(h, child)
assert h.wait() is None and te.tile_state((0,)).location == "secondary"
print("child", status)
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_an_eviction_pending_at_fork_fails_in_the_child_and_the_carrier_can_be_released(tmp_path):
    # In a fresh interpreter: forking this multi-threaded test process (JAX
    # threads) could deadlock the child.
    r = run_python(FORK_EVICT, cwd=tmp_path, timeout=60)
    assert_child_ok(r)
    assert r.stdout.strip() == "child 0"


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_projection_pending_at_fork_fails_in_the_child_and_gives_everything_back(tmp_path):
    r = run_python(FORK_PENDING, cwd=tmp_path, timeout=60)
    assert_child_ok(r)
    assert r.stdout.strip() == "child 0 [3.0, 4.0]", r.stdout + r.stderr
