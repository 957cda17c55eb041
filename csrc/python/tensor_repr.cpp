// repr(Tensor): the values (NumPy-style summarisation, sw::text), dtype,
// carrier class and layout:
//
//   Tensor([[0.0, 1.0, 2.0],
//           [3.0, 4.0, 5.0]], dtype=Float32, carrier=CPU, layout=Layout<...>)
//
// Reading the values never changes residency or versions: they are read
// only from carriers whose reads are plain native reads (CPU, Generic,
// FileBacked, Metal, without a Python get_value hook), an Evictable through
// the tier that holds its values now (no promote()), a TiledEvictable whose
// tiers are such plain carriers through its native slot reads (each from
// where its tile is: no promotion, no version change; an invalid tile's
// read fails and the repr says the values are not readable), and never
// through a Python hook (extension carriers, tiers with hooks), whose
// tensors show "<values not shown ...>" instead. A released carrier shows
// "<released>".
#include <string>
#include <vector>

#include "tensor/value_text.hpp"
#include "carrier_object.hpp"
#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "tensor_object.hpp"
#include "tiled_object.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"

namespace swpy {

namespace {

constexpr const char* kOpen = "Tensor(";

// The carrier a repr may read the values from without side effects: c
// itself, or the tier an Evictable keeps them in; NULL when none.
PyObject* plain_reader(PyObject* c) {
  if (PyObject_TypeCheck(c, &Evictable_Type)) {
    if (carrier_overrides(c, "get_value")) return nullptr;
    PyObject* tier = evictable_value_tier(c);
    return tier ? plain_reader(tier) : nullptr;
  }
  if (PyObject_TypeCheck(c, &TiledEvictable_Type)) {
    // Its slot reads are native and read each tile where it is; they run a
    // hook only through a tier of a hooked class (tile buffers are of the
    // primary's class, like proto).
    const TiledState* s = reinterpret_cast<TiledObject*>(c)->s;
    if (!s || carrier_overrides(c, "get_value")) return nullptr;
    for (PyObject* tier : {s->proto.get(), s->secondary.get()})
      if (tier && plain_reader(tier) != tier) return nullptr;
    return c;
  }
  const bool native = PyObject_TypeCheck(c, &CPU_Type) || PyObject_TypeCheck(c, &Generic_Type) ||
                      PyObject_TypeCheck(c, &FileBacked_Type) || PyObject_TypeCheck(c, &Metal_Type);
  if (!native || !as_carrier(c)->vt || carrier_overrides(c, "get_value")) return nullptr;
  return c;
}

// The text of one value (Float32 as the shortest text that reads back).
int value_text(PyObject* v, bool f32, std::string* out) {
  if (f32 && PyFloat_Check(v)) {
    *out = sw::text::float32_text(static_cast<float>(PyFloat_AS_DOUBLE(v)));
    return 0;
  }
  Ref r = Ref::steal(PyObject_Repr(v));
  if (!r) return -1;
  const char* s = PyUnicode_AsUTF8(r.get());
  if (!s) return -1;
  *out = s;
  return 0;
}

// The nested text of t's values read from reader (a carrier; the tensor's
// offset and layout index it). -1 with an exception when a read failed.
int values_text(TensorObject* t, PyObject* reader, std::string* out) {
  const sw::Layout& l = layout_of(t->layout);
  std::vector<int64_t> extents;
  for (const sw::LeafMode& m : l.leaves()) extents.push_back(m.extent);
  const sw::text::Summary summary;
  std::vector<std::vector<int64_t>> shown;
  if (engine_call([&] { shown = sw::text::shown_coordinates(extents, summary); }) < 0) return -1;
  const bool f32 = dtype_code(t->dtype) == sw::DTypeCode::Float32;
  std::vector<std::string> texts;
  // Row-major over the shown coordinates (last leaf fastest), cuts skipped.
  const size_t rank = shown.size();
  std::vector<size_t> pos(rank, 0);
  auto next_valid = [&](size_t d) { while (pos[d] < shown[d].size() && shown[d][pos[d]] == sw::text::kCut) ++pos[d]; };
  for (size_t d = 0; d < rank; ++d) next_valid(d);
  // A zero-size tensor (an extent-0 mode) has no slot to read: only brackets.
  const bool empty = sw::text::shown_count(shown) == 0;
  while (!empty) {
    int64_t index = t->offset;
    for (size_t d = 0; d < rank; ++d) index += shown[d][pos[d]] * l.leaves()[d].stride;
    Ref v = Ref::steal(carrier_get(reader, static_cast<Py_ssize_t>(index)));
    if (!v) return -1;
    std::string s;
    if (value_text(v.get(), f32, &s) < 0) return -1;
    texts.push_back(std::move(s));
    size_t d = rank;
    for (; d > 0; --d) {
      ++pos[d - 1];
      next_valid(d - 1);
      if (pos[d - 1] < shown[d - 1].size()) break;
      pos[d - 1] = 0;
      next_valid(d - 1);
    }
    if (d == 0) break;
  }
  return engine_call([&] { *out = sw::text::nested_text(shown, texts, std::char_traits<char>::length(kOpen), summary); });
}

// The "<...>" part that stands for the values when they are not shown.
std::string placeholder(PyObject* c) {
  const char* cls = type_name(c);
  if (carrier_is_released(c) == 1) return std::string("<released: the ") + cls + " carrier's storage was given up (moved or released)>";
  const char* what = PyObject_TypeCheck(c, &TiledEvictable_Type) ? " carrier's tiers are" : " carrier is";
  return std::string("<values not shown: ") + article(cls) + " " + cls + what +
         " read through Python hooks, which a repr does not run; t.tolist() reads them>";
}

}  // namespace

PyObject* tensor_repr(PyObject* self) {
  TensorObject* t = as_tensor(self);
  if (tensor_is_multi(self))
    return PyUnicode_FromFormat("Tensor(<multi-subtensor %R>, layout=%R)", t->dtype, t->layout);
  PyObject* c = t->carrier;
  std::string body;
  PyObject* reader = carrier_is_released(c) == 1 ? nullptr : plain_reader(c);
  if (!reader) {
    body = placeholder(c);
  } else if (values_text(t, reader, &body) < 0) {
    if (PyErr_ExceptionMatches(PyExc_MemoryError)) return nullptr;
    // A failed read (a tier released under an Evictable, a file gone) is
    // shown, not raised: repr must not fail on a live object.
    Ref exc = Ref::steal(compat::take_raised());
    Ref msg = Ref::steal(exc ? PyObject_Str(exc.get()) : nullptr);
    const char* m = msg ? PyUnicode_AsUTF8(msg.get()) : nullptr;
    if (!m) PyErr_Clear();
    body = std::string("<values not readable: ") + (exc ? type_name(exc.get()) : "error") + ": " + (m ? m : "?") + ">";
  }
  Ref text = Ref::steal(PyUnicode_FromString(body.c_str()));
  if (!text) return nullptr;
  if (t->offset != 0)
    return PyUnicode_FromFormat("%s%U, dtype=%R, carrier=%s, offset=%zd, layout=%R)", kOpen, text.get(), t->dtype,
                                type_name(c), t->offset, t->layout);
  return PyUnicode_FromFormat("%s%U, dtype=%R, carrier=%s, layout=%R)", kOpen, text.get(), t->dtype, type_name(c),
                              t->layout);
}

}  // namespace swpy
