// The DLPack export family's globals (a member of ModuleState): what the
// last __dlpack__ calls passed, so a caller that passes the same objects
// every time (np.from_dlpack does) pays no parsing.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>

#include "dlpack_export.hpp"

namespace swpy {

// Strong references, held for the process: each cached object stays alive,
// so its address can never name another object, and what it parsed to is
// fixed (tuples of exact ints are immutable through and through).
struct DlpackArgCache {
  // The keyword-name tuple of the last call (at most kMaxKeywords names;
  // a call site's constant, or np.from_dlpack's static tuple) and the
  // argument each name binds (see dlpack.cpp: ExportSlot).
  static constexpr int kMaxKeywords = 4;
  PyObject* kwnames = nullptr;
  int8_t keyword_slot[kMaxKeywords] = {};
  // The last max_version and dl_device arguments that parsed, when they
  // were exact tuples of exact ints, with their parsed values.
  PyObject* max_version = nullptr;
  sw::dlpack::IntPair max_version_value{};
  PyObject* dl_device = nullptr;
  sw::dlpack::IntPair dl_device_value{};
  // (1, 0): what __dlpack_device__() of a CPU export returns; built once.
  PyObject* cpu_device = nullptr;
};

}  // namespace swpy
