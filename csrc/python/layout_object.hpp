// The layout family (shape.cpp, layout.cpp): Shape, Stride and Layout objects
// over the engine's IntTree and Layout.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <span>
#include <vector>

#include "layout/layout.hpp"

namespace swpy {

// Shape and Stride share one object layout (an IntTree root node).
struct IntTreeObject {
  PyObject_HEAD
  sw::IntTree tree;
};
extern PyTypeObject Shape_Type;
extern PyTypeObject Stride_Type;
PyObject* shape_from_tree(const sw::IntTree& t);
PyObject* stride_from_tree(const sw::IntTree& t);
inline const sw::IntTree& tree_of(PyObject* o) { return reinterpret_cast<IntTreeObject*>(o)->tree; }

struct LayoutObject {
  PyObject_HEAD
  // The Shape and Stride objects given (identity kept). A layout the engine
  // made (views, results) builds them on first use: NULL until then.
  PyObject* shape;
  PyObject* stride;
  sw::Layout layout;
  int64_t* dl_dims;  // DLPack shape then strides (malloc'd on first C-exchange export) or NULL
  // The flat Layout object last made for a view of this layout (layout_flat_view),
  // reused while views keep the same modes; NULL until then. Strong.
  PyObject* last_view;
  // Layout::is_injective() once asked for (views ask on every indexing):
  // 0 not yet known, 1 injective, -1 not.
  int8_t injective;
};
extern PyTypeObject Layout_Type;
inline bool is_layout(PyObject* o) { return PyObject_TypeCheck(o, &Layout_Type); }
inline const sw::Layout& layout_of(PyObject* o) { return reinterpret_cast<LayoutObject*>(o)->layout; }
// New Layout object for an engine layout (its Shape and Stride objects are
// made when first asked for).
PyObject* layout_from_engine(const sw::Layout& l);
PyObject* layout_from_engine(sw::Layout&& l);
// The layout's Shape / Stride object (borrowed; built on first use), or NULL
// with an exception.
PyObject* layout_shape(PyObject* layout);
PyObject* layout_stride(PyObject* layout);
// The Layout object whose top-level modes are leaves[0..n) (a flat layout),
// for a view of source: the one the last such view of source got when its
// modes are the same (layouts are immutable), else a new one. New reference.
PyObject* layout_flat_view(PyObject* source, const sw::LeafMode* leaves, size_t n);
// The flat Layout object (top-level modes = leaves) that tensor constructors
// and from_dlpack give: a recently made one with the same leaves
// (FlatLayoutCache in module state; layouts are immutable, so tensors may
// share one), else a new one, then remembered. New reference or NULL.
PyObject* flat_layout_object(std::span<const sw::LeafMode> leaves);
// Room for the leaf modes of a rank known at run time: inline up to kInline
// (every practical rank, no allocation), else on the heap.
struct LeafBuffer {
  static constexpr size_t kInline = 8;
  // n modes to fill; the heap case may throw std::bad_alloc (engine_call).
  std::span<sw::LeafMode> resize(size_t n) {
    if (n <= kInline) return {inline_, n};
    heap_.resize(n);
    return heap_;
  }

 private:
  sw::LeafMode inline_[kInline];
  std::vector<sw::LeafMode> heap_;
};
// Whether the layout is injective (cached on the object). 1 / 0, or -1 with
// MemoryError.
int layout_is_injective(PyObject* layout);
// layout_shape for error messages: never NULL (Py_None when building the
// Shape failed; the pending exception is kept).
PyObject* layout_shape_or_none(PyObject* layout);
// pickle's reductions of a Layout / Shape with an extent-0 mode (a zero-size
// tensor's, from DLPack), which Layout(Shape(...), ...) cannot rebuild
// because a Shape refuses extent 0 (pickling.cpp: _core._empty_layout).
PyObject* empty_layout_reduce(PyObject* layout);
PyObject* empty_shape_reduce(PyObject* shape);
// Parses a key as API.md section 2 describes into a scalar index.
int layout_index_from_key(PyObject* layout, PyObject* key, int64_t* out_index);

}  // namespace swpy
