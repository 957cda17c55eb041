"""The suite runs against a wheel, which leaves out strideweave._testing:
every test that needs it skips with the reason instead of failing. Checked by
running the tests that use it with the extension hidden
(STRIDEWEAVE_TESTS_HIDE_TESTING makes every import of it fail, as on a
wheel), and by a scan for imports of it that bypass the
testing_extension() skip helper (support.doubles)."""
import ast
import pathlib
import re
import subprocess
import sys

from support.doubles import HIDE_TESTING, TESTING_ABSENT
from support.process import SAFE_PATH, TESTS_DIR, child_env

TESTS = pathlib.Path(TESTS_DIR)
# What reaches the extension: the skip helper, the fake Metal fixture, or
# support.dlpack's counting producer (producer_capsule, deleted).
USES = re.compile(r"testing_extension\(|producer_capsule|\bdeleted\b|_testing\.|\(fake\)|, fake\b")
ALLOWED = {"conftest.py", pathlib.Path(__file__).name}


def files_using_testing():
    return sorted(p for p in TESTS.rglob("test_*.py")
                  if p.name not in ALLOWED and USES.search(p.read_text()))


def direct_imports(tree):
    """Import statements of strideweave._testing in a module's code (a
    subprocess script's text is a string, not code: its test calls
    testing_extension() before starting it, which the run below checks)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "strideweave._testing" for a in node.names):
            yield node.lineno
        elif isinstance(node, ast.ImportFrom) and (
                node.module == "strideweave._testing"
                or (node.module == "strideweave" and any(a.name == "_testing" for a in node.names))):
            yield node.lineno


def test_no_test_module_imports_the_extension_directly():
    offenders = [f"{p.relative_to(TESTS)}:{line}" for p in TESTS.rglob("*.py")
                 for line in direct_imports(ast.parse(p.read_text()))]
    assert not offenders, ("import strideweave._testing through support.doubles.testing_extension() (it skips where the "
                           f"wheel left the extension out): {offenders}")


def test_the_tests_that_use_it_skip_when_it_is_absent(tmp_path):
    files = files_using_testing()
    assert len(files) >= 5, files  # the Metal, DLPack-producer and copy-hook tests at least
    r = subprocess.run([sys.executable, *SAFE_PATH, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                        *map(str, files)], cwd=tmp_path, env=child_env({HIDE_TESTING: "1"}),
                       capture_output=True, text=True, timeout=600)
    tail = r.stdout[-4000:] + r.stderr[-2000:]
    assert r.returncode == 0, tail
    assert re.search(r"\d+ passed", r.stdout) and re.search(r"\d+ skipped", r.stdout), tail
    assert TESTING_ABSENT.split(":")[0] in r.stdout, tail  # skipped with the reason
