// The DLPack family's globals (members of ModuleState). Export: what the
// last __dlpack__ calls passed, so a caller that passes the same objects
// every time (np.from_dlpack does) pays no parsing (the keyword names are
// the parser's, KeywordCaches::dlpack). Import: the call
// arguments from_dlpack passes and the last exchange API.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <vector>

#include <dlpack/dlpack.h>
#include "dlpack/export.hpp"
#include "layout/iter.hpp"

namespace swpy {

// Strong references, held for the process: each cached object stays alive,
// so its address can never name another object, and what it parsed to is
// fixed (tuples of exact ints are immutable through and through).
struct DlpackArgCache {
  // The last max_version and dl_device arguments that parsed, when they
  // were exact tuples of exact ints, with their parsed values.
  PyObject* max_version = nullptr;
  sw::dlpack::IntPair max_version_value{};
  PyObject* dl_device = nullptr;
  sw::dlpack::IntPair dl_device_value{};
  // (1, 0): what __dlpack_device__() of a CPU export returns; built once.
  PyObject* cpu_device = nullptr;
};

// The DLPack import family's globals (dlpack_import.cpp). GIL-protected.
struct DlpackImportState {
  // Keyword names of the __dlpack__ calls from_dlpack makes, indexed by
  // (dl_device given) | (copy given) << 1; each starts with max_version.
  PyObject* kwnames[4] = {};
  // (1, 3): the max_version every call passes.
  PyObject* max_version = nullptr;
  // The last __dlpack_c_exchange_api__ capsule looked at (strong, so its
  // address names nothing else) and the API it holds, or null when it is
  // not one StrideWeave can call.
  PyObject* exchange_capsule = nullptr;
  const DLPackExchangeAPI* exchange_api = nullptr;
  // The last type looked at that has none (never dereferenced: compared
  // with its version tag, see exchange_api_of).
  const PyTypeObject* no_exchange_type = nullptr;
  unsigned int no_exchange_tag = 0;
  // What the last producer type looked at has as __dlpack__ (see
  // type_dlpack_method), identified the same way: whether the type has one
  // and, when it is a plain method that only an instance dict can shadow,
  // that method (borrowed from the type's dict, which holds it while the
  // tag stands).
  const PyTypeObject* method_type = nullptr;
  unsigned int method_tag = 0;
  bool method_on_type = false;
  PyObject* method_unbound = nullptr;
  // Where that type's instances keep their dict (0: they have none).
  Py_ssize_t method_dict_offset = 0;
  // (The Layouts of recent imports are ModuleState::flat_layouts.)
};

}  // namespace swpy
