"""The first five minutes: the source package finds the installed compiled
core when run from a clone's root, and the demo runs."""
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys

import pytest

import strideweave as sw
from support.process import REPO, assert_child_ok

SOURCE_PKG = os.path.join(REPO, "strideweave")


def _fake_package(root, with_core):
    pkg = os.path.join(root, "strideweave")
    os.makedirs(pkg)
    open(os.path.join(pkg, "__init__.py"), "w").close()
    if with_core:
        open(os.path.join(pkg, "_core" + importlib.machinery.EXTENSION_SUFFIXES[0]), "w").close()
    return pkg


def test_installed_package_dir_skips_the_source_tree_and_finds_a_core(tmp_path):
    src = _fake_package(str(tmp_path / "clone"), with_core=False)
    site = _fake_package(str(tmp_path / "site"), with_core=True)
    other = _fake_package(str(tmp_path / "other"), with_core=True)
    path = [str(tmp_path / "clone"), 42, str(tmp_path / "nowhere"), str(tmp_path / "site"), str(tmp_path / "other")]
    assert sw._installed_package_dir(src, path) == site
    assert sw._installed_package_dir(src, [str(tmp_path / "clone")]) is None
    assert sw._has_core(site) and not sw._has_core(src) and not sw._has_core(str(tmp_path / "nowhere"))
    assert sw._installed_package_dir(site, path[3:]) == other  # never itself


def test_installed_package_dir_reads_an_empty_entry_as_the_working_directory(tmp_path, monkeypatch):
    src = _fake_package(str(tmp_path / "clone"), with_core=False)
    site = _fake_package(str(tmp_path / "site"), with_core=True)
    monkeypatch.chdir(tmp_path / "site")
    assert sw._installed_package_dir(src, [""]) == site
    monkeypatch.chdir(tmp_path / "clone")
    assert sw._installed_package_dir(src, ["", str(tmp_path / "clone")]) is None


def test_a_source_tree_without_core_says_how_to_install(tmp_path):
    # A copy of the source package with no compiled core anywhere on the path.
    clone = tmp_path / "clone"
    pkg = _fake_package(str(clone), with_core=False)
    with open(os.path.join(SOURCE_PKG, "__init__.py")) as f:
        init = f.read()
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write(init)
    env = {k: v for k, v in os.environ.items() if k not in ("STRIDEWEAVE_BUILD", "PYTHONPATH")}
    out = subprocess.run([sys.executable, "-S", "-c", "import strideweave"], cwd=str(clone), env=env,
                         capture_output=True, text=True)
    assert out.returncode != 0
    assert "pip install ." in out.stderr and "STRIDEWEAVE_BUILD" in out.stderr


def _run_demo(env, *args):
    return subprocess.run([sys.executable, "-m", "strideweave", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)


def _demo_env(**extra):
    env = dict(os.environ, **extra)
    if env.get("STRIDEWEAVE_BUILD"):
        env["STRIDEWEAVE_BUILD"] = os.path.abspath(env["STRIDEWEAVE_BUILD"])
    return env


def _check_demo_output(out):
    assert_child_ok(out)
    text = out.stdout
    assert "NumPy  np.from_dlpack(x):    same memory=True" in text
    assert "NumPy  sw.from_dlpack(b[:, 1:]): same memory=True" in text  # the way back
    assert "equal to a: True" in text and "values intact: True" in text
    assert "backward through both moves" in text and "move.complete" in text
    assert len(text.splitlines()) <= 25


def test_the_demo_leaves_nothing_in_the_temporary_directory(tmp_path):
    # Without --trace the trace goes to a temporary directory the demo
    # removes; TMPDIR points the demo's temporary files (trace and FileBacked
    # storage) at an empty folder, which must be empty again afterwards.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = _run_demo(_demo_env(TMPDIR=str(scratch)))
    _check_demo_output(out)
    assert "written to a temporary directory and removed" in out.stdout
    assert sorted(os.listdir(scratch)) == []


def test_the_demo_writes_the_trace_to_the_path_given(tmp_path):
    trace = tmp_path / "demo-trace.json"
    out = _run_demo(_demo_env(), "--trace", str(trace))
    _check_demo_output(out)
    assert f"trace written: {trace}" in out.stdout
    names = {e.get("name") for e in json.loads(trace.read_text())["traceEvents"]}
    assert {"move.submit", "move.complete"} <= names


def test_version_flag_prints_the_package_version():
    out = _run_demo(_demo_env(), "--version")
    assert_child_ok(out)
    assert out.stdout.strip() == f"strideweave {sw.__version__}"


def test_an_unknown_demo_argument_is_a_usage_error():
    out = _run_demo(_demo_env(), "--no-such-flag")
    assert out.returncode == 2
    assert "usage: python -m strideweave" in out.stderr and "--no-such-flag" in out.stderr


def test_the_demo_runs_from_the_clone_root():
    # python -m strideweave from the repository root, as the README says;
    # with STRIDEWEAVE_BUILD set (development) the build directory's core is
    # used, else the installed one.
    out = _run_demo(_demo_env())
    _check_demo_output(out)
    if importlib.util.find_spec("torch") is not None:
        assert "PyTorch sw.from_dlpack(t[4:]): same memory=True" in out.stdout
    if importlib.util.find_spec("jax") is not None:
        assert "JAX    sw.from_dlpack(j):      same memory=True, read-only=True" in out.stdout


def test_the_readme_command_uses_the_installed_core_from_the_clone_root():
    installed = sw._installed_package_dir(SOURCE_PKG, sys.path)
    if installed is None:
        pytest.skip("no installed strideweave beside the source tree (development run); "
                    "tools/test.sh installs the wheel and runs this")
    env = {k: v for k, v in os.environ.items() if k != "STRIDEWEAVE_BUILD"}
    out = _run_demo(env)
    _check_demo_output(out)
    probe = subprocess.run([sys.executable, "-c", "import strideweave as s; print(s.__file__); print(s._core.__file__)"],
                           cwd=REPO, env=env, capture_output=True, text=True, check=True)
    init_file, core_file = probe.stdout.split()
    assert os.path.dirname(init_file) == SOURCE_PKG
    assert os.path.dirname(core_file) == installed


def test_the_demo_skips_missing_torch_and_jax_cleanly():
    code = ("import sys, runpy; sys.modules['torch'] = None; sys.modules['jax'] = None; "
            "sys.argv = ['strideweave']; runpy.run_module('strideweave', run_name='__main__')")
    env = dict(os.environ)
    if env.get("STRIDEWEAVE_BUILD"):
        env["STRIDEWEAVE_BUILD"] = os.path.abspath(env["STRIDEWEAVE_BUILD"])
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=300)
    assert "PyTorch: not installed, skipped (pip install torch)" in out.stdout
    assert "JAX: not installed, skipped (pip install jax)" in out.stdout
    _check_demo_output(out)
