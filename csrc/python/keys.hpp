// Coordinate keys (API.md sections 2 and 11), shared by Layout.index,
// Tensor indexing and Shape.encode.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace swpy {

// Scalar index of key under l: an int-like (any __index__ object but bool)
// flat ordinal, or a tuple/list with one part per top-level mode. Out of the
// domain: ValueError("Key is not in domain of shape: key K is outside S")
// with shape_obj's repr as S; a bad part: TypeError. 0 / -1.
int key_index(const sw::Layout& l, PyObject* shape_obj, PyObject* key, int64_t* out);

}  // namespace swpy
