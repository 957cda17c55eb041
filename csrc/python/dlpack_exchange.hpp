// What dlpack.cpp shares with the rest of the DLPack family: the export as
// the C exchange API (dlpack_exchange.cpp) reaches it (dlpack.cpp runs the
// checks of __dlpack__ and builds the managed tensor), and the argument
// helpers from_dlpack (dlpack_import.cpp) parses its device with.
#pragma once
#include <Python.h>

#include "dlpack/export.hpp"

namespace swpy {

// What tensor.__dlpack__(max_version=(1, 0)) would put in its capsule: the
// same checks in the same order, the READ_ONLY flag, and a strong reference
// to tensor that the managed tensor's deleter drops. NULL with the
// exception set.
DLManagedTensorVersioned* dlpack_export_v1(PyObject* tensor);
// The same checks, describing the export into spec (no reference is taken:
// spec.leaves points into tensor's Layout). 0 / -1.
int dlpack_describe_v1(PyObject* tensor, sw::dlpack::ExportSpec* spec);
// A two-element tuple or list of ints (what = the argument's name in
// messages): TypeError for another container, ValueError for a wrong count
// or a non-integer element. 0 / -1.
int dlpack_parse_pair(PyObject* o, const char* what, sw::dlpack::IntPair* out);
// The (1, 0) device tuple (borrowed, module lifetime), or NULL on OOM.
PyObject* dlpack_cpu_device();

}  // namespace swpy
