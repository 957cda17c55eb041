// The layout family (shape.cpp, layout.cpp): Shape, Stride and Layout objects
// over the engine's IntTree and Layout.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>

#include "layout.hpp"

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
  PyObject* shape;   // the Shape object given (identity kept)
  PyObject* stride;  // the Stride object given
  sw::Layout layout;
  int64_t* dl_dims;  // DLPack shape then strides (malloc'd on first C-exchange export) or NULL
};
extern PyTypeObject Layout_Type;
inline bool is_layout(PyObject* o) { return PyObject_TypeCheck(o, &Layout_Type); }
inline const sw::Layout& layout_of(PyObject* o) { return reinterpret_cast<LayoutObject*>(o)->layout; }
// New Layout object (with fresh Shape/Stride objects) for an engine layout.
PyObject* layout_from_engine(const sw::Layout& l);
// Parses a key as API.md section 2 describes into a scalar index.
int layout_index_from_key(PyObject* layout, PyObject* key, int64_t* out_index);

}  // namespace swpy
