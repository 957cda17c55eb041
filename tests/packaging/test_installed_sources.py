"""Every source file of the package is installed: the wheel is built from the
lists in strideweave/meson.build, and a module missing there imports from a
source checkout but not from the installed package."""
import re
from support.process import REPO as ROOT

PACKAGE = ROOT / "strideweave"


def _installed_sources() -> set:
    """The files py.install_sources() installs, relative to the repository
    root (meson names them relative to strideweave/)."""
    text = (PACKAGE / "meson.build").read_text()
    names = set()
    for block in re.findall(r"py\.install_sources\((.*?)\)", text, re.S):
        files = block.split("subdir:")[0]
        for name in re.findall(r"'([^']+)'", files):
            names.add("strideweave/" + name)
    return names


def test_every_python_module_and_stub_is_installed():
    on_disk = {str(p.relative_to(ROOT).as_posix()) for p in PACKAGE.rglob("*")
               if p.suffix in (".py", ".pyi") and "__pycache__" not in p.parts}
    missing = sorted(on_disk - _installed_sources())
    assert missing == [], f"not in strideweave/meson.build install_sources: {missing}"


def test_the_install_lists_name_only_files_that_exist():
    stale = sorted(n for n in _installed_sources() if not (ROOT / n).exists())
    assert stale == [], f"strideweave/meson.build installs files that do not exist: {stale}"
