// Every global of the _core module in one struct: the interned names, the
// cached singletons and callables, the argument parsers' keyword caches,
// the FileBacked file store, and the state of the DLPack, move and
// extension families. This plays the part of PEP 489 module state in
// CPython's own modules (Modules/_struct.c); _core is a single-phase module
// that supports one interpreter per process, so ModuleState is one static
// object, alive until the process exits (its file store's destructor is the
// last sweep of temporary files). The few process-wide variables that are
// not here, and why, are listed in csrc/python/README.md.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <vector>

#include "dlpack_state.hpp"
#include "files/store.hpp"
#include "layout/iter.hpp"
#include "extension/state.hpp"
#include "move/state.hpp"
#include "util/fastcall.hpp"
#include "util/object_pool.hpp"

namespace swpy {

// Attribute and keyword names looked up on hot paths, interned once by
// intern_module_names() (module lifetime).
struct InternedNames {
  // Carrier hooks (carrier.cpp).
  PyObject *size, *dtype, *get_value, *set_value, *is_mutable, *release, *new_like, *allocate_like,
      *dlpack_info, *mutable_, *empty;
  // __dlpack__ keywords and dlpack_info() fields (dlpack.cpp).
  PyObject *stream, *max_version, *dl_device, *copy, *pointer, *device_type, *device_id;
  // The consumer protocol (dlpack_import.cpp).
  PyObject *dunder_dlpack, *dunder_dlpack_exchange_api;
};

// Flat Layout objects made recently by the tensor constructors and
// from_dlpack (flat_layout_object, layout.cpp), by their leaf modes:
// layouts are immutable, so tensors of one layout share one object. kSize
// entries replaced in turn; strong references, module lifetime.
struct FlatLayoutCache {
  static constexpr size_t kSize = 16;
  struct Entry {
    PyObject* layout = nullptr;
    std::vector<sw::LeafMode> leaves;
  };
  Entry entries[kSize];
  size_t next = 0;      // the entry a miss replaces
  size_t last_hit = 0;  // the entry flat_layout_object checks first
};

// The keyword-name tuple each FASTCALL entry point bound last (parse_args).
struct KeywordCaches {
  KeywordCache dlpack, from_dlpack, move, move_async, zeros, ones, empty, cpu;
};

struct TiledValueTypes {
  PyObject *tile_set = nullptr, *tile_selection = nullptr, *residency_plan = nullptr, *tile_state = nullptr,
           *residency_policy = nullptr;
  // The module's private knobs (tests): dense_only, dense_spy.
  PyObject* options = nullptr;
};

struct ModuleState {
  InternedNames names{};
  KeywordCaches keywords;
  // The built-in DType singletons, in dtype.cpp's table order.
  static constexpr int kMaxBuiltinDTypes = 16;
  PyObject* dtype_singletons[kMaxBuiltinDTypes]{};
  // FileBacked's files, their per-process directory and the fork rule
  // (engine). Its directory's destructor sweeps what the exit hooks could
  // not (files created after they ran), in the owning process only.
  sw::FileStore files;
  // FileBacked's cleanup, registered with atexit and re-registered after fork.
  PyObject* file_cleanup = nullptr;
  // The tiled value types the Python package's TiledEvictable module hands over
  // at import (_install_tiled_values).
  TiledValueTypes tiled;
  move_internal::MoveState move;
  ext::ExtensionState extension;
  DlpackArgCache dlpack;
  DlpackImportState dlpack_import;
  FlatLayoutCache flat_layouts;
  // Freed Tensor and CPU objects kept for reuse (util/object_pool.hpp).
  ObjectPool tensor_pool, cpu_pool;
};

inline ModuleState module_state;

// The interned names; valid once intern_module_names() has run (first step of
// PyInit__core).
inline const InternedNames& names() { return module_state.names; }
int intern_module_names();

}  // namespace swpy
