"""no_grad as a re-entrant context manager: the nesting rules that live in
the engine (sw::autograd::ModeStack) as seen from Python."""
import pytest

import strideweave as sw


def test_nested_entries_of_one_object_restore_each_mode():
    ng = sw.no_grad()
    assert sw.is_grad_enabled()
    with ng:
        assert not sw.is_grad_enabled()
        sw.set_grad_enabled(True)
        with ng:
            assert not sw.is_grad_enabled()
        assert sw.is_grad_enabled()
    assert sw.is_grad_enabled()


def test_exit_without_enter_raises():
    with pytest.raises(RuntimeError, match="no_grad exited without a matching enter"):
        sw.no_grad().__exit__(None, None, None)
    assert sw.is_grad_enabled()


def test_depth_is_bounded_at_64():
    ng = sw.no_grad()
    try:
        for _ in range(64):
            ng.__enter__()
        with pytest.raises(RuntimeError, match="no_grad entered more than 64 times without exiting"):
            ng.__enter__()
    finally:
        while True:
            try:
                ng.__exit__(None, None, None)
            except RuntimeError:
                break
    assert sw.is_grad_enabled()
