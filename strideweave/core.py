"""The tensor representation types (multi-subtensor construction)."""
from ._core import Subtensor, TensorRepresentation  # noqa: F401

__all__ = ["Subtensor", "TensorRepresentation"]
