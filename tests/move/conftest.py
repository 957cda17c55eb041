"""Fixtures of the movement tests."""
import pytest

from strideweave.carriers.move import unregister_move_operation

from support.carriers import DstCPU, SrcCPU


@pytest.fixture
def clean_pair():
    """Leaves (SrcCPU, DstCPU) unregistered whatever a test does."""
    yield SrcCPU, DstCPU
    try:
        unregister_move_operation(SrcCPU, DstCPU)
    except KeyError:
        pass
