// The tile-by-tile forward of add, mul, relu and reduce_sum on full
// TiledEvictable tensors (ops_tiled_bands.cpp), run by Operation.forward in
// place of the node's _forward.
#pragma once
#include <Python.h>

#include "util/ref.hpp"

namespace swpy::ops {

// When op is a native AddOperation, MulOperation, ReluOperation or
// ReduceSumOperation (exact type) and args hold a full TiledEvictable
// tensor whose operation can run tile by tile (a CPU-class primary or a
// Float32 Generic one, a kernel dtype, every operand's layout splitting at
// the tile grid), computes the
// result reading one tile at a time and returns true: *result is the
// Tensor, or empty with the operation's exception set. Otherwise returns
// false with nothing raised, and the node's _forward runs (it materializes
// the tiled operands, or raises what is wrong with the arguments).
bool tiled_forward(PyObject* op, PyObject* args, Ref* result);

}  // namespace swpy::ops
