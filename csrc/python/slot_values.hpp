// Python values in and out of carrier slots. The conversion rules (Float32
// rounding, the Int32 range, Bool strictness, native byte layouts) are the
// engine's slot codec (csrc/engine/storage/slot_codec.hpp); this layer only turns
// Python objects into codec values and back, and codec statuses into
// Python exceptions. Implemented in slot_values.cpp. GIL held throughout.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>

#include "dtype/dtype.hpp"
#include "storage/slot_codec.hpp"

namespace swpy {

// Slot value conversion shared by the built-ins. Numeric slots reject bool
// and non-numbers (TypeError); Float32 rounds to binary32; Int32 range is
// checked (OverflowError); Bool accepts only bool. 0 / -1.
int value_to_f64(PyObject* v, const char* dtype_name, double* out);
int value_to_f32(PyObject* v, float* out);
int value_to_i32(PyObject* v, int32_t* out);
int value_to_bool(PyObject* v, bool* out);
// v as the codec value a slot of code takes (float slots: double, Int32:
// int64_t, Bool: bool), with the type checks above. ValueError for a dtype
// without a slot codec. 0 / -1.
int value_to_slot(sw::DTypeCode code, PyObject* v, sw::codec::SlotValue* out);
// The Python object of a codec value (float, int or bool). New reference.
PyObject* slot_to_value(const sw::codec::SlotValue& v);
// Converts v and encodes it into the sw::codec::slot_bytes(code) native
// bytes at out; nothing is written on failure. 0 / -1.
int encode_slot_general(sw::DTypeCode code, PyObject* v, void* out);
inline int encode_slot(sw::DTypeCode code, PyObject* v, void* out) {
  // Inline fast path for the bulk case (new_like of floats): an exact float
  // into a float slot fails only beyond Float32's range (then the general
  // path raises).
  if (PyFloat_CheckExact(v) && (code == sw::DTypeCode::Float32 || code == sw::DTypeCode::Floating) &&
      sw::codec::encode(code, sw::codec::SlotValue{PyFloat_AS_DOUBLE(v)}, out) == sw::codec::Status::Ok)
    return 0;
  return encode_slot_general(code, v, out);
}
// The Python value of the native slot bytes at in. New reference.
inline PyObject* decode_slot(sw::DTypeCode code, const void* in) {
  return slot_to_value(sw::codec::decode(code, in));
}
// Canonical Python value of v for a slot of code (Any: v itself; Floating,
// Float32: float; Int32: int; Bool: bool). New reference or NULL.
PyObject* value_coerce(sw::DTypeCode code, PyObject* v);
// The zero value of a slot of code (Any and Int32: 0, floats: 0.0, Bool: False).
PyObject* value_zero(sw::DTypeCode code);

}  // namespace swpy
