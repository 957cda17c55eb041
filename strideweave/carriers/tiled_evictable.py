"""Tiled evictable storage: the completion handles.

``AwaitProjection`` (completes with one compact ordinary Tensor) and
``AwaitResidency`` (completes with None) share the ``AwaitResult`` contract.
The ``TiledEvictable`` carrier itself is later work and not provided yet.
"""
from .._core import AwaitProjection, AwaitResidency  # noqa: F401

__all__ = ["AwaitProjection", "AwaitResidency"]
