"""The release configuration: the licence and PEP 639 metadata, the wheel
without the test-only extension, the cibuildwheel matrix and its workflow,
and the test command every built wheel runs (tools/test_installed.sh)."""
import os
import re
import subprocess
import sys

import pytest

import strideweave as sw
from support.process import REPO as ROOT, assert_child_ok

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None

needs_tomllib = pytest.mark.skipif(tomllib is None, reason="tomllib is Python 3.11+")


def pyproject():
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def test_the_licence_is_mit_at_the_root():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "Permission is hereby granted, free of charge" in text
    assert "Apache License" in (ROOT / "subprojects" / "dlpack" / "LICENSE").read_text()


@needs_tomllib
def test_pep639_metadata_names_both_licences():
    data = pyproject()
    project = data["project"]
    assert re.fullmatch(r"MIT AND Apache-2\.0", project["license"])
    assert project["license-files"] == ["LICENSE", "subprojects/dlpack/LICENSE"]
    assert all((ROOT / f).is_file() for f in project["license-files"])
    # meson-python reads PEP 639 license and license-files from 0.18 on.
    assert "meson-python>=0.18" in data["build-system"]["requires"]


@needs_tomllib
def test_the_wheel_build_leaves_out_the_test_extension():
    setup = pyproject()["tool"]["meson-python"]["args"]["setup"]
    assert "-Dtesting=disabled" in setup
    assert re.search(r"option\('testing', type: 'feature'", (ROOT / "meson.options").read_text())
    build = (ROOT / "strideweave" / "meson.build").read_text()
    gated = build.split("if get_option('testing').enabled()", 1)
    assert len(gated) == 2, "the _testing extension is not behind the testing option"
    before, inside = gated[0], gated[1].split("endif", 1)[0]
    assert "'_testing'" not in before and "_testing.pyi" not in before
    assert "'_testing'" in inside and "_testing.pyi" in inside
    # The test command builds it back in (a later -D wins in meson).
    assert "-Csetup-args=-Dtesting=enabled" in (ROOT / "tools" / "test.sh").read_text()


@needs_tomllib
def test_cibuildwheel_builds_cp310_to_cp313_manylinux_2_28_on_both_arches():
    cibw = pyproject()["tool"]["cibuildwheel"]
    assert cibw["build"] == ["cp310-*", "cp311-*", "cp312-*", "cp313-*"]
    linux = cibw["linux"]
    assert linux["archs"] == ["x86_64", "aarch64"]
    assert linux["manylinux-x86_64-image"] == linux["manylinux-aarch64-image"] == "manylinux_2_28"
    # The same test command as tools/build_wheels.sh.
    assert cibw["test-command"] == "bash {project}/tools/test_installed.sh {project}"
    assert cibw["before-test"] == "bash {project}/tools/install_test_deps.sh"
    local = (ROOT / "tools" / "build_wheels.sh").read_text()
    assert "tools/test_installed.sh" in local and "tools/install_test_deps.sh" in local
    workflow = (ROOT / ".github" / "workflows" / "wheels.yml").read_text()
    assert "pypa/cibuildwheel@" in workflow and "aarch64" in workflow and "x86_64" in workflow


def test_the_release_scripts_are_executable_bash():
    for name in ("build_wheels.sh", "install_test_deps.sh", "test_installed.sh"):
        path = ROOT / "tools" / name
        assert os.access(path, os.X_OK), f"tools/{name} is not executable"
        assert path.read_text().startswith("#!/usr/bin/env bash\n")
        r = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert_child_ok(r)


def test_the_wheel_test_command_runs_outside_the_source_tree(tmp_path):
    # tools/test_installed.sh against a stand-in source tree whose one test
    # records where it ran and which strideweave it imported.
    if os.environ.get("STRIDEWEAVE_BUILD"):
        pytest.skip("dev mode (STRIDEWEAVE_BUILD): the script tests an installed wheel and unsets it")
    src = tmp_path / "src"
    (src / "tests").mkdir(parents=True)
    (src / "strideweave").mkdir()  # a source package without a compiled core
    (src / "strideweave" / "__init__.py").write_text("raise ImportError('the source tree was imported')\n")
    report = tmp_path / "report.txt"
    (src / "tests" / "test_where.py").write_text(
        "import os, strideweave\n"
        "def test_where():\n"
        f"    open({str(report)!r}, 'w').write(os.getcwd() + '\\n' + strideweave.__file__)\n")
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    r = subprocess.run(["bash", str(ROOT / "tools" / "test_installed.sh"), str(src)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert_child_ok(r)
    assert r.stdout.splitlines()[0] == f"strideweave {sw.__version__}"  # --version first
    assert "1 passed" in r.stdout
    cwd, imported = report.read_text().splitlines()
    assert not cwd.startswith(str(src)) and not imported.startswith(str(src))
    assert not os.path.exists(cwd), "the scratch directory is removed"
