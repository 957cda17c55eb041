"""The test-only extension strideweave._testing (the fake Metal runtime, the
DLPack producer with a counting deleter). It is built with -Dtesting=enabled
(tools/test.sh, a plain `meson setup`); the wheel users install leaves it
out, and the tests that need it skip there."""
import pytest

TESTING_ABSENT = ("strideweave._testing is not installed: the wheel leaves out the test doubles "
                  "(build with -Csetup-args=-Dtesting=enabled, as tools/test.sh does)")


def testing_extension():
    """strideweave._testing, or a skip with the reason when it is absent."""
    return pytest.importorskip("strideweave._testing", reason=TESTING_ABSENT)
