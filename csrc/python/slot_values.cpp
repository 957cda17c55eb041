// Python values in and out of carrier slots (slot_values.hpp): Python
// objects to codec values and back; the rules are sw::codec's.
#include "slot_values.hpp"

#include "dtype/info.hpp"

#include "util/errors.hpp"
#include "util/ref.hpp"
#include "carrier_object.hpp"

namespace swpy {

namespace {

namespace codec = sw::codec;

const char* slot_name(sw::DTypeCode code) { return codec::has_codec(code) ? sw::dtype_name(code) : "this"; }

// The Python exception of a failed codec step on a value of type v.
int raise_codec_status(codec::Status s, sw::DTypeCode code, PyObject* v) {
  switch (s) {
    case codec::Status::Ok:
      return 0;
    case codec::Status::OutOfRange:
      if (code == sw::DTypeCode::Float32)
        PyErr_Format(PyExc_OverflowError,
                     "value out of range for Float32: %R is finite but beyond +-3.4028235e+38 (write inf for an "
                     "infinity)",
                     v);
      else
        PyErr_Format(PyExc_OverflowError, "value out of range for %s", slot_name(code));
      return -1;
    case codec::Status::WrongType:
      PyErr_Format(PyExc_TypeError, "%s slot cannot hold a %.100s", slot_name(code), type_name(v));
      return -1;
    case codec::Status::Unsupported:
      break;
  }
  PyErr_SetString(PyExc_ValueError, "dtype cannot hold slot values");
  return -1;
}

// An integer (not bool) as int64_t; beyond 64 bits -> OverflowError naming
// the slot dtype (no slot holds such a value exactly).
int value_to_i64(PyObject* v, const char* dtype_name, int64_t* out) {
  if (PyBool_Check(v) || !(PyLong_Check(v) || PyIndex_Check(v))) {
    PyErr_Format(PyExc_TypeError, "%s slot expects an int, not %.100s", dtype_name, type_name(v));
    return -1;
  }
  Ref i = Ref::steal(PyNumber_Index(v));
  if (!i) return -1;
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(i.get(), &overflow);
  if (x == -1 && PyErr_Occurred()) return -1;
  if (overflow) {
    PyErr_Format(PyExc_OverflowError, "value out of range for %s", dtype_name);
    return -1;
  }
  *out = x;
  return 0;
}

}  // namespace

int value_to_f64(PyObject* v, const char* dtype_name, double* out) {
  double d;
  if (PyFloat_Check(v)) {
    d = PyFloat_AS_DOUBLE(v);
  } else if (PyBool_Check(v)) {
    // bool is an int subclass, but a Bool value in a numeric slot is almost
    // always a mistake; Bool slots are strict the other way round too.
    PyErr_Format(PyExc_TypeError, "%s slot expects an int or float, not bool", dtype_name);
    return -1;
  } else if (PyLong_Check(v) || PyIndex_Check(v)) {
    Ref i = Ref::steal(PyNumber_Index(v));
    if (!i) return -1;
    d = PyLong_AsDouble(i.get());
    if (d == -1.0 && PyErr_Occurred()) return -1;
  } else if (Py_TYPE(v)->tp_as_number && Py_TYPE(v)->tp_as_number->nb_float) {
    d = PyFloat_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred()) return -1;
  } else {
    PyErr_Format(PyExc_TypeError, "%s slot expects an int or float, not %.100s", dtype_name, type_name(v));
    return -1;
  }
  *out = d;
  return 0;
}

int value_to_f32(PyObject* v, float* out) {
  double d;
  if (value_to_f64(v, "Float32", &d) < 0) return -1;
  return raise_codec_status(codec::to_float32(d, out), sw::DTypeCode::Float32, v);
}

int value_to_i32(PyObject* v, int32_t* out) {
  int64_t x;
  if (value_to_i64(v, "Int32", &x) < 0) return -1;
  return raise_codec_status(codec::to_int32(x, out), sw::DTypeCode::Int32, v);
}

int value_to_bool(PyObject* v, bool* out) {
  if (!PyBool_Check(v)) {
    PyErr_Format(PyExc_TypeError, "Bool slot expects a bool, not %.100s", type_name(v));
    return -1;
  }
  *out = v == Py_True;
  return 0;
}

int value_to_slot(sw::DTypeCode code, PyObject* v, codec::SlotValue* out) {
  switch (code) {
    case sw::DTypeCode::Floating:
    case sw::DTypeCode::Float64:
    case sw::DTypeCode::Float32: {
      double d;
      if (value_to_f64(v, slot_name(code), &d) < 0) return -1;
      *out = d;
      return 0;
    }
    case sw::DTypeCode::Int32: {
      int64_t x;
      if (value_to_i64(v, "Int32", &x) < 0) return -1;
      *out = x;
      return 0;
    }
    case sw::DTypeCode::Bool: {
      bool b;
      if (value_to_bool(v, &b) < 0) return -1;
      *out = b;
      return 0;
    }
    default:
      return raise_codec_status(codec::Status::Unsupported, code, v);
  }
}

PyObject* slot_to_value(const codec::SlotValue& v) {
  if (const double* d = std::get_if<double>(&v)) return PyFloat_FromDouble(*d);
  if (const int64_t* i = std::get_if<int64_t>(&v)) return PyLong_FromLongLong(*i);
  return PyBool_FromLong(std::get<bool>(v));
}

int encode_slot_general(sw::DTypeCode code, PyObject* v, void* out) {
  codec::SlotValue x;
  if (value_to_slot(code, v, &x) < 0) return -1;
  return raise_codec_status(codec::encode(code, x, out), code, v);
}

PyObject* value_coerce(sw::DTypeCode code, PyObject* v) {
  if (code == sw::DTypeCode::Any) return Py_NewRef(v);
  codec::SlotValue x, canonical;
  if (value_to_slot(code, v, &x) < 0) return nullptr;
  if (raise_codec_status(codec::canonical(code, x, &canonical), code, v) < 0) return nullptr;
  return slot_to_value(canonical);
}

PyObject* value_zero(sw::DTypeCode code) {
  switch (code) {
    case sw::DTypeCode::Floating:
    case sw::DTypeCode::Float64:
    case sw::DTypeCode::Float32:
      return PyFloat_FromDouble(0.0);
    case sw::DTypeCode::Bool:
      Py_RETURN_FALSE;
    default:
      return PyLong_FromLong(0);
  }
}

}  // namespace swpy
