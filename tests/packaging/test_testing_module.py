"""The test doubles live in the test-only extension strideweave._testing,
never in _core (as NumPy builds _multiarray_tests): _core carries only a
private capsule through which _testing installs its fake Metal runtime."""
import pathlib

import pytest

from support import doubles
from support import process
import strideweave as sw
from support.process import assert_child_ok

_testing = doubles.testing_extension()  # the whole file is about it


def run_python(code):
    """-P: the child must not see the tests folder (the checkout) first."""
    r = process.run_python(code, flags=process.SAFE_PATH)
    assert_child_ok(r)
    return r.stdout


def test_core_holds_no_fake_runtime():
    for name in ("_metal_install_fake_runtime", "_metal_remove_runtime", "_MetalFakeRuntime"):
        assert not hasattr(sw._core, name)
    binary = pathlib.Path(sw._core.__file__).read_bytes()
    assert b"FakeRuntime" not in binary and b"injected" not in binary
    assert b"FakeRuntime" in pathlib.Path(_testing.__file__).read_bytes()


def test_testing_is_next_to_core_and_not_reexported():
    assert pathlib.Path(_testing.__file__).parent == pathlib.Path(sw._core.__file__).parent
    assert "_testing" not in getattr(sw, "__all__", [])
    out = run_python("""
        import sys
        import strideweave as sw
        print("strideweave._testing" in sys.modules, hasattr(sw, "install_fake_metal_runtime"))
    """)
    assert out.split() == ["False", "False"]


def test_the_hook_is_a_private_capsule():
    hooks = sw._core._metal_test_hooks
    assert type(hooks).__name__ == "PyCapsule"
    assert "strideweave._core._metal_test_hooks" in repr(hooks)


def test_install_and_remove():
    with pytest.raises(RuntimeError, match="Metal requires macOS"):
        sw.Metal(1)
    ctl = _testing.install_fake_metal_runtime()
    try:
        assert isinstance(ctl, _testing.FakeMetalRuntime)
        m = sw.Metal(2)
        assert ctl.live_buffers() == 1 and ctl.buffer_id(m) != 0
        with pytest.raises(TypeError, match="Metal carrier"):
            ctl.buffer_id(sw.CPU(1))
        with pytest.raises(ValueError, match="unknown step"):
            ctl.fail("nothing")
    finally:
        _testing.remove_metal_runtime()
    with pytest.raises(RuntimeError, match="Metal requires macOS"):
        sw.Metal(1)
    assert m.size() == 2 and m[0] == 0.0  # an existing carrier keeps its runtime
    m.release()
    assert ctl.live_buffers() == 0
    with pytest.raises(TypeError):
        _testing.FakeMetalRuntime()
