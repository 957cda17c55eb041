"""The AwaitResult family: every framework-created handle kind is importable
where the spec says, shares the read-only base, and cannot be constructed or
awaited by users."""
import inspect
import typing

import pytest

import strideweave as sw
from strideweave.carriers import move as move_mod
from strideweave.carriers.tiled_evictable import AwaitProjection, AwaitResidency

from support.builders import cpu_tensor, values
from support.moves import WAIT


def test_await_names_are_importable_from_both_paths():
    assert move_mod.AwaitResult is sw.AwaitResult
    assert move_mod.AwaitMove is sw.AwaitMove
    assert move_mod.move_async is sw.move_async


@pytest.mark.parametrize("cls", [sw.AwaitMove, AwaitProjection, AwaitResidency])
def test_handle_kinds_share_the_read_only_base(cls):
    assert issubclass(cls, sw.AwaitResult)
    # done is the base's read-only getset, inherited rather than redefined.
    done = inspect.getattr_static(cls, "done")
    assert done is sw.AwaitResult.__dict__["done"]
    assert inspect.isgetsetdescriptor(done)
    assert not hasattr(cls, "__await__")
    assert not hasattr(cls, "await")


@pytest.mark.parametrize("cls", [sw.AwaitResult, sw.AwaitMove, AwaitProjection, AwaitResidency])
def test_handles_are_not_user_constructible(cls):
    with pytest.raises(TypeError):
        cls()


def test_done_rejects_writes():
    c = sw.CPU(1)
    c[0] = 1.0
    handle = sw.move_async(sw.Tensor(c, 0, sw.Layout.canonical(sw.Shape(1))), sw.CPU(1))
    handle.wait(10)
    with pytest.raises(AttributeError):
        handle.done = False
    assert handle.done is True


def test_await_types_are_subscriptable_as_the_spec_writes_them():
    alias = sw.AwaitMove[sw.Tensor]
    assert typing.get_origin(alias) is sw.AwaitMove and typing.get_args(alias) == (sw.Tensor,)
    assert typing.get_origin(sw.AwaitResult[sw.Tensor]) is sw.AwaitResult

    def submit(t: sw.Tensor, d: sw.Carrier) -> "sw.AwaitMove[sw.Tensor]":
        return sw.move_async(t, d)

    assert typing.get_type_hints(submit)["return"] == sw.AwaitMove[sw.Tensor]
    h = submit(cpu_tensor([1.0]), sw.CPU(1))
    assert isinstance(h, sw.AwaitMove) and isinstance(h, sw.AwaitResult)
    assert values(h.wait(timeout=WAIT)) == [1.0]
    assert not hasattr(h, "__await__")
