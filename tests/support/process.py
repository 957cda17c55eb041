"""Child interpreters that import the same strideweave as the test process,
and the paths of the checkout the tests run from."""
import os
import pathlib
import subprocess
import sys
import textwrap

import strideweave as sw

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The checkout (or unpacked sdist) the tests belong to: docs/, tools/,
# benchmarks/, meson.build.
REPO = pathlib.Path(TESTS_DIR).parent
# The folder holding the strideweave package this process imported (the
# source tree with STRIDEWEAVE_BUILD, site-packages for an installed wheel).
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(sw.__file__)))

# -P (Python 3.11+): a child's working directory is not put on sys.path, so a
# checkout's strideweave/ cannot shadow the imported package. Python 3.10 has
# no -P; children there run from directories without a strideweave/ anyway.
SAFE_PATH = ("-P",) if sys.version_info >= (3, 11) else ()


def child_env(extra=None, pythonpath=()):
    """The environment of a child that must import the same strideweave as
    this process: PACKAGE_ROOT (and any extra folders) first on PYTHONPATH,
    STRIDEWEAVE_BUILD made absolute (the child may run elsewhere)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*pythonpath, PACKAGE_ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
    if env.get("STRIDEWEAVE_BUILD"):
        env["STRIDEWEAVE_BUILD"] = os.path.abspath(env["STRIDEWEAVE_BUILD"])
    env.update(extra or {})
    return env


def run_python(code, *, flags=(), cwd=None, env=None, pythonpath=(), timeout=120):
    """Run ``python *flags -c code`` (code dedented) in a fresh interpreter
    importing this process's strideweave; returns the CompletedProcess
    (text stdout/stderr captured). env adds to child_env()."""
    return subprocess.run([sys.executable, *flags, "-c", textwrap.dedent(code)], cwd=cwd,
                          env=child_env(env, pythonpath), capture_output=True, text=True, timeout=timeout)


def child_output(proc):
    """A finished child's status, stdout and stderr, for an assertion message."""
    return (f"child exited with status {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}")


def assert_child_ok(proc):
    """Asserts the child exited with status 0; the message holds its output
    (a failed assertion inside the child shows as its traceback)."""
    assert proc.returncode == 0, child_output(proc)
    return proc


def run_python_ok(code, **kwargs):
    """run_python, asserting the child succeeded (see assert_child_ok)."""
    return assert_child_ok(run_python(code, **kwargs))


def run_snippet(code, *, dev=False, timeout=120, env=None):
    """Runs code (dedented) in a child interpreter started in the imported
    package's folder, under ``python -X dev`` (the runtime's extra checks)
    when dev; returns the CompletedProcess. env adds to child_env()."""
    return run_python(code, flags=("-X", "dev") if dev else (), cwd=PACKAGE_ROOT, env=env, timeout=timeout)


def snippet_stdout(code, *, dev=False, timeout=120, env=None):
    """run_snippet, asserting the child succeeded (its output in the
    message); returns its stdout."""
    return assert_child_ok(run_snippet(code, dev=dev, timeout=timeout, env=env)).stdout


def interrupt_until_exit(proc, within=20.0, every=0.5):
    """Ctrl-C (SIGINT) the child every `every` seconds until it exits, and
    return its (stdout, stderr). A SIGINT that lands before the child's exit
    wait began is spent on its ending main module (a slow or stalled machine
    makes that window long); the first one during the wait ends it. Fails
    when the child is still running after `within` seconds."""
    import signal
    import time

    start = time.monotonic()
    while True:
        proc.send_signal(signal.SIGINT)
        try:
            return proc.communicate(timeout=every)
        except subprocess.TimeoutExpired:
            assert time.monotonic() - start < within, "Ctrl-C did not end the exit wait"


# Ctrl-C raises KeyboardInterrupt in the child whatever the parent left: an
# ignored SIGINT survives exec (and Python then installs no handler of its
# own), and so does a thread's blocked-signal mask. A suite started as a
# background job of a non-interactive shell (`cmd &` without job control)
# runs with SIGINT ignored, which made the Ctrl-C tests time out.
RESTORE_CTRL_C = ("import signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
                  "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})\n")


def popen_python(code, *, env=None, cwd=None):
    """A child Python running code (dedented) with piped text stdout and
    stderr and Ctrl-C restored (RESTORE_CTRL_C), for tests that signal it."""
    return subprocess.Popen([sys.executable, "-c", RESTORE_CTRL_C + textwrap.dedent(code)], cwd=cwd,
                            env=child_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
