// Full TiledEvictable tensors in autograd: the tile-by-tile forward of the
// direct operations (ops_tiled_bands.cpp), and the visible nodes of
// projection and scatter (ops_tiled.cpp).
#pragma once
#include <Python.h>

#include <cstdint>
#include <vector>

#include "util/ref.hpp"

namespace swpy {

namespace ops {

// When op is a native AddOperation, MulOperation, ReluOperation or
// ReduceSumOperation (exact type) and args hold a full TiledEvictable
// tensor whose operation can run tile by tile (a CPU-class primary or a
// Float32 Generic one, a kernel dtype, every operand's layout splitting at
// the tile grid, the "tiles" geometry), computes the result reading one
// band of tiles at a time and returns true: *result is the Tensor, or empty
// with the operation's exception set. Otherwise returns false with nothing
// raised, and the node's _forward runs (it reads a dense copy of the tiled
// operands, or raises what is wrong with the arguments).
bool tiled_forward(PyObject* op, PyObject* args, Ref* result);
// The private knob _options.name of the TiledEvictable Python module
// (tests compare the tile-by-tile and dense paths): dense_only makes the
// direct operations read every tiled operand as one dense copy; a list in
// dense_spy collects the purpose of each dense copy. NULL when unset.
PyObject* tiled_option(const char* name);

}  // namespace ops

// The gather node of a differentiable projection: result (stolen) gets a
// _ProjectOperation whose input is source (a full tensor of te) and whose
// backward scatter-adds the compact cotangent into a fresh TiledEvictable
// gradient. tiles: the selection in compact order; cgrid its compact grid.
// The result, or NULL with an exception.
PyObject* tiled_gather_node(PyObject* te, PyObject* source, PyObject* result, const std::vector<int64_t>& tiles,
                            const std::vector<int64_t>& cgrid);
// The node of a differentiable scatter: inputs (compact, full template);
// backward projects the cotangent into compact's gradient and, for add,
// scatter-adds it into the template's.
PyObject* tiled_scatter_node(PyObject* te, PyObject* compact, PyObject* full, PyObject* result,
                             const std::vector<int64_t>& tiles, const std::vector<int64_t>& cgrid, bool add);
// Readies the node types (called by the TiledEvictable family's init). 0 / -1.
int tiled_nodes_init(PyObject* module);

}  // namespace swpy
