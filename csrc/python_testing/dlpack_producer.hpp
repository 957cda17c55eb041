// strideweave._testing's counting DLPack producer (dlpack_producer.cpp).
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace swtesting {

// dlpack_capsule, dlpack_deleted, dlpack_report_deletions.
extern PyMethodDef dlpack_producer_functions[];

}  // namespace swtesting
