"""Hardening of interpreter exit, fork() and class lifetime (issue 15 items
8, 9, 13; API.md section 12). Every scenario that could hang runs in a
subprocess with a timeout."""
import os
import time

import pytest

from support.process import PACKAGE_ROOT, assert_child_ok, interrupt_until_exit, popen_python, run_snippet


# A move whose _copy blocks until the process dies.
STUCK_MOVE = """
import threading, sys
import strideweave as sw
F32 = sw.DType.Float32
class Src(sw.CPU): pass
entered = threading.Event()
class Stuck(sw.ElementwiseMoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        entered.set()
        threading.Event().wait()  # never set
sw.register_move_operation(Src, sw.CPU, Stuck)
c = Src(1, dtype=F32)
h = sw.move_async(sw.Tensor(c, 0, sw.Layout.canonical(sw.Shape([1]))), sw.CPU(1, dtype=F32))
assert entered.wait(10)
"""


# ------------------------------------------------------------ item 8

def test_exit_abandons_a_stuck_move_after_the_timeout_with_a_warning():
    start = time.monotonic()
    r = run_snippet(STUCK_MOVE + "print('main done', flush=True)\n", timeout=60,
                    env={"STRIDEWEAVE_EXIT_TIMEOUT": "1"})
    elapsed = time.monotonic() - start
    assert "main done" in r.stdout, r.stderr
    assert "abandoning 1 move(s) still pending at interpreter exit" in r.stderr, r.stderr
    assert "timed out" in r.stderr
    assert_child_ok(r)
    assert elapsed < 30


def test_exit_timeout_waits_for_a_slow_move_that_finishes_in_time():
    r = run_snippet("""
        import threading, time
        import strideweave as sw
        F32 = sw.DType.Float32
        class Src(sw.CPU): pass
        class Slow(sw.ElementwiseMoveOperation):
            def _copy(self, tensor, destination, output, element_count):
                time.sleep(0.5)
                super()._copy(tensor, destination, output, element_count)
                print("copied", flush=True)
        sw.register_move_operation(Src, sw.CPU, Slow)
        c = Src(1, dtype=F32)
        sw.move_async(sw.Tensor(c, 0, sw.Layout.canonical(sw.Shape([1]))), sw.CPU(1, dtype=F32))
    """, env={"STRIDEWEAVE_EXIT_TIMEOUT": "20"})
    assert_child_ok(r)
    assert "copied" in r.stdout
    assert "abandoning" not in r.stderr


def test_ctrl_c_interrupts_the_exit_wait():
    code = STUCK_MOVE + "print('main done', flush=True)\n"
    p = popen_python(code, cwd=PACKAGE_ROOT, env={"STRIDEWEAVE_EXIT_TIMEOUT": "120"})
    try:
        assert p.stdout.readline().strip() == "main done"
        out, err = interrupt_until_exit(p)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert "abandoning 1 move(s)" in err and "interrupted" in err, err


def test_move_async_after_shutdown_began_raises_runtime_error():
    r = run_snippet("""
        import atexit
        def late():
            # Registered before strideweave is imported, so it runs after
            # the exit drain (atexit is last-in, first-out).
            import strideweave as sw
            t = sw.Tensor(sw.CPU(1), 0, sw.Layout.canonical(sw.Shape([1])))
            try:
                sw.move_async(t, sw.CPU(1))
            except RuntimeError as e:
                print("refused:", e, flush=True)
            else:
                print("accepted", flush=True)
        atexit.register(late)
        import strideweave as sw
        t = sw.Tensor(sw.CPU(1), 0, sw.Layout.canonical(sw.Shape([1])))
        sw.move(t, sw.CPU(1))  # moves work before shutdown
    """)
    assert_child_ok(r)
    assert "refused:" in r.stdout and "shutdown" in r.stdout, r.stdout + r.stderr


def test_daemon_thread_submitting_forever_does_not_block_exit():
    r = run_snippet("""
        import threading
        import strideweave as sw
        F32 = sw.DType.Float32
        started = threading.Event()
        def spam():
            while True:
                t = sw.Tensor(sw.CPU(1, dtype=F32), 0, sw.Layout.canonical(sw.Shape([1])))
                try:
                    sw.move_async(t, sw.CPU(1, dtype=F32))
                except RuntimeError:
                    pass
                started.set()
        threading.Thread(target=spam, daemon=True).start()
        assert started.wait(10)
        print("main done", flush=True)
    """, env={"STRIDEWEAVE_EXIT_TIMEOUT": "2"}, timeout=60)
    assert "main done" in r.stdout, r.stderr


# ------------------------------------------------------------ item 9

@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_fork_fails_pending_moves_in_the_child_and_gives_carriers_back():
    r = run_snippet("""
        import os, threading, warnings
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads
        import strideweave as sw
        F32 = sw.DType.Float32
        class Src(sw.CPU): pass
        entered, go = threading.Event(), threading.Event()
        class Held(sw.ElementwiseMoveOperation):
            def _copy(self, tensor, destination, output, element_count):
                entered.set()
                assert go.wait(30)
                super()._copy(tensor, destination, output, element_count)
        sw.register_move_operation(Src, sw.CPU, Held)
        c = Src(2, dtype=F32)
        c[0], c[1] = 1.0, 2.0
        d = sw.CPU(2, dtype=F32)
        h = sw.move_async(sw.Tensor(c, 0, sw.Layout.canonical(sw.Shape([2]))), d)
        assert entered.wait(10)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                try:
                    h.wait(timeout=10)
                except RuntimeError as e:
                    assert "pending at fork" in str(e), e
                    assert h.done
                    assert not c.is_owned() and not d.is_owned()
                    assert not c.is_released()
                    c[0] = 5.0  # the child can use both carriers
                    d[1] = 6.0
                    go.set()  # this process's own Held moves may run
                    t = sw.move(sw.Tensor(c, 0, sw.Layout.canonical(sw.Shape([2]))), sw.CPU(2, dtype=F32))
                    assert [t[0], t[1]] == [5.0, 2.0]
                    c2 = sw.CPU(1, dtype=F32)
                    assert sw.move(sw.Tensor(c2, 0, sw.Layout.canonical(sw.Shape([1]))), sw.CPU(1, dtype=F32))[0] == 0.0
                    code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status), flush=True)
        go.set()
        r = h.wait(timeout=10)
        print("parent", [r[0], r[1]], c.is_released(), flush=True)
    """, timeout=60)
    assert "child 0" in r.stdout, r.stdout + r.stderr
    assert "parent [1.0, 2.0] True" in r.stdout, r.stdout + r.stderr


# ------------------------------------------------------------ item 13

