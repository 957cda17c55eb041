"""Interpreter exit while daemon threads are inside StrideWeave calls that
released the GIL. CPython (before 3.14) ends a thread that takes the GIL back
during finalization by unwinding it; through a C++ destructor that was
std::terminate ("terminate called without an active exception", SIGABRT).
Each scenario runs 20 times in a fresh interpreter (the failure was a race:
4-20 of 20 runs before the fix) and every run must exit with status 0."""
import textwrap

import pytest

from support.process import assert_child_ok, run_python

RUNS = 20

# Each child starts its daemon thread(s), waits until one call has finished
# (so the loop is running), then lets the main thread exit at once.
PRELUDE = """
import threading
import strideweave as sw
F32 = sw.DType.Float32
started = threading.Event()
def loop(step):
    while True:
        step()
        started.set()
def start(step, threads=1):
    for _ in range(threads):
        threading.Thread(target=loop, args=(step,), daemon=True).start()
    assert started.wait(60), "the daemon never finished a call"
"""

SCENARIOS = {
    # tensor() of a large array converts with the GIL released.
    "tensor_of_large_array": """
        import numpy as np
        a = np.arange(8 << 20, dtype=np.float32)  # 32 MiB
        start(lambda: sw.tensor(a))
    """,
    # Several threads: one is often waiting for the GIL when exit begins.
    "tensor_in_three_threads": """
        import numpy as np
        a = np.arange(1 << 20, dtype=np.float32)
        start(lambda: sw.tensor(a), threads=3)
    """,
    # A blocking move of native carriers copies on the calling thread.
    "blocking_move_4_mib": """
        n = 1 << 20
        def step():
            src = sw.CPU(n, dtype=F32, empty=True)
            try:
                sw.move(sw.Tensor(src, 0, sw.Layout.canonical(sw.Shape([n]))), sw.CPU(n, dtype=F32, empty=True))
            except RuntimeError as e:  # no move starts once exit has begun
                assert "shutdown" in str(e), e
        start(step)
    """,
    # wait() blocks with the GIL released.
    "move_async_wait": """
        n = 1 << 20
        def step():
            src = sw.CPU(n, dtype=F32, empty=True)
            try:
                sw.move_async(sw.Tensor(src, 0, sw.Layout.canonical(sw.Shape([n]))),
                              sw.CPU(n, dtype=F32, empty=True)).wait()
            except RuntimeError as e:
                assert "shutdown" in str(e), e
        start(step)
    """,
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_exit_is_clean_while_a_daemon_thread_is_inside_a_gil_free_call(scenario):
    code = PRELUDE + textwrap.dedent(SCENARIOS[scenario]) + "print('main done', flush=True)\n"
    failures = []
    for run in range(RUNS):
        r = run_python(code, timeout=120)
        if r.returncode != 0 or "main done" not in r.stdout or "terminate called" in r.stderr:
            failures.append((run, r.returncode, r.stderr[-600:]))
    assert not failures, f"{len(failures)} of {RUNS} runs failed; first: {failures[0]}"


def test_a_daemon_thread_coming_back_after_exit_began_never_resumes():
    # An exit handler registered before strideweave was imported runs after
    # strideweave's own and sleeps (GIL released) long enough for the daemon
    # to finish several calls: no call it starts once the gate has closed
    # may come back (taking the GIL then would be fatal a moment later), and
    # the process still exits with status 0. A call already on its way back
    # when the gate closes is let through by design (close() waits for it),
    # so only calls that began after the gate closed count.
    r = run_python("""
import atexit, os, time
atexit.register(lambda: (time.sleep(0.5), print("late handler ran", flush=True)))
""" + PRELUDE + """
import numpy as np
a = np.arange(1 << 20, dtype=np.float32)
def step():
    began_after_close = sw._core._gil_gate_closed()
    sw.tensor(a)
    if began_after_close:
        os.write(1, b"resumed after exit began\\n")
start(step)
print("main done", flush=True)
""", timeout=120)
    assert_child_ok(r)
    assert "main done" in r.stdout and "late handler ran" in r.stdout
    assert "resumed after exit began" not in r.stdout


def test_the_exiting_thread_itself_keeps_working_after_the_gate_closed():
    # Exit handlers registered before strideweave was imported run after
    # its own: the exiting thread still releases and retakes the GIL there.
    r = run_python("""
import atexit
def late():
    import numpy as np
    import strideweave as sw
    assert sw._core._gil_gate_closed()
    t = sw.tensor(np.ones(1 << 20, dtype=np.float32))
    print("late handler sum", float(np.asarray(t).sum()), flush=True)
atexit.register(late)
import strideweave as sw
""", timeout=120)
    assert_child_ok(r)
    assert "late handler sum 1048576.0" in r.stdout
