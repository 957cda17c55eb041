"""The test-only extension strideweave._testing (the fake Metal runtime, the
DLPack producer with a counting deleter). It is built with -Dtesting=enabled
(tools/test.sh, a plain `meson setup`); the wheel users install leaves it
out, and the tests that need it skip there."""
import os
import sys

import pytest

TESTING_ABSENT = ("strideweave._testing is not installed: the wheel leaves out the test doubles "
                  "(build with -Csetup-args=-Dtesting=enabled, as tools/test.sh does)")


# STRIDEWEAVE_TESTS_HIDE_TESTING=1 runs the suite as the wheel's users would:
# every import of strideweave._testing fails as if it were not installed
# (conftest imports this module first, so the hiding precedes every test).
HIDE_TESTING = "STRIDEWEAVE_TESTS_HIDE_TESTING"
if os.environ.get(HIDE_TESTING) == "1":
    sys.modules["strideweave._testing"] = None  # type: ignore[assignment]


def testing_extension():
    """strideweave._testing, or a skip with the reason when it is absent.
    Every test that needs it goes through here (never a module-level import),
    so the suite runs against a wheel without it."""
    return pytest.importorskip("strideweave._testing", reason=TESTING_ABSENT)
