"""The version is written once, in meson.build's project(); the package and
its installed metadata both report it."""
import re
from importlib import metadata

import pytest

import strideweave as sw
from support.process import REPO

MESON_BUILD = REPO / "meson.build"


def project_version():
    m = re.search(r"project\(\s*'strideweave'.*?version:\s*'([^']+)'", MESON_BUILD.read_text(), re.S)
    assert m, "meson.build has no project(version:)"
    return m.group(1)


def test_version_matches_meson_project():
    assert sw.__version__ == project_version()


def test_pyproject_takes_the_version_from_meson():
    text = (MESON_BUILD.parent / "pyproject.toml").read_text()
    assert re.search(r'^dynamic\s*=\s*\["version"\]', text, re.M)
    assert not re.search(r"^version\s*=", text, re.M)


def test_installed_metadata_agrees_when_installed():
    try:
        installed = metadata.version("strideweave")
    except metadata.PackageNotFoundError:
        pytest.skip("dev mode (STRIDEWEAVE_BUILD): no installed metadata to compare")
    assert installed == sw.__version__
