"""Moving a tensor's values from one carrier into another.

Everything here is the object ``strideweave._core`` defines (and the top-level
package re-exports): ``strideweave.move is strideweave.carriers.move.move``.
"""
from .. import _core

move = _core.move
move_async = _core.move_async
AwaitResult = _core.AwaitResult
AwaitMove = _core.AwaitMove
MoveOperation = _core.MoveOperation
ElementwiseMoveOperation = _core.ElementwiseMoveOperation
CpuToFileBackedMoveOperation = _core.CpuToFileBackedMoveOperation
FileBackedToCpuMoveOperation = _core.FileBackedToCpuMoveOperation
# The Metal pair operations exist on every platform (metal.cpp).
CpuToMetalMoveOperation = _core.CpuToMetalMoveOperation
MetalToCpuMoveOperation = _core.MetalToCpuMoveOperation
MetalToMetalMoveOperation = _core.MetalToMetalMoveOperation
dispatch_move = _core.dispatch_move
register_move_operation = _core.register_move_operation
unregister_move_operation = _core.unregister_move_operation
registered_move_operation = _core.registered_move_operation

__all__ = [
    "move",
    "move_async",
    "AwaitResult",
    "AwaitMove",
    "MoveOperation",
    "ElementwiseMoveOperation",
    "CpuToFileBackedMoveOperation",
    "FileBackedToCpuMoveOperation",
    "CpuToMetalMoveOperation",
    "MetalToCpuMoveOperation",
    "MetalToMetalMoveOperation",
    "dispatch_move",
    "register_move_operation",
    "unregister_move_operation",
    "registered_move_operation",
]

