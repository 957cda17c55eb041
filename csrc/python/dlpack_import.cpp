// strideweave.from_dlpack(x, /, *, device=None, copy=None): the consumer side
// of DLPack.
//
// Where the managed tensor comes from, in this order:
//  1. x is itself a DLPack capsule ("dltensor" / "dltensor_versioned");
//  2. type(x).__dlpack_c_exchange_api__ (DLPack 1.3's C exchange API; torch
//     has it): managed_tensor_from_py_object_no_sync, no capsule at all;
//  3. the array API's consumer protocol: x.__dlpack__(max_version=(1, 3),
//     dl_device=..., copy=...) with only the arguments that are not None,
//     then x.__dlpack__() when that raises TypeError (a producer older than
//     max_version). A producer that refuses copy=True with BufferError
//     (tvm-ffi) is asked for the alias and StrideWeave copies.
// A capsule is renamed used_dltensor[_versioned] the moment it is consumed;
// from then on the managed tensor is ours (sw::dlpack::ImportedTensor) and
// its deleter runs exactly once: right after a copy or a failure, or when
// the CPU carrier that adopted the memory gives it up (release, a move,
// garbage collection, interpreter exit; with re-exports outstanding, when
// the last of them is gone: AlignedBuffer::adopt).
//
// What the result is (engine: dlpack_import.hpp): a Tensor over an exact CPU
// carrier whose slot 0 is the producer's first element (data + byte_offset),
// with a flat Layout of one mode per dimension (extents and element strides
// as given). Memory on another device, a negative stride or a misaligned
// first element cannot be viewed: copy=None copies (into fresh, mutable,
// row-major storage), copy=False raises BufferError. Other dtypes are a
// TypeError whatever copy says (a dtype conversion is not this kind of
// copy). copy=True always gives mutable storage the result owns: the
// producer's own copy when it flags one (IS_COPIED) that is not READ_ONLY,
// else StrideWeave's.
#include <cstring>
#include <span>
#include <vector>

#include "dlpack/import.hpp"

#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "module.hpp"
#include "module_state.hpp"
#include "dlpack_exchange.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/args.hpp"
#include "util/compat.hpp"
#include "util/fastcall.hpp"
#include "util/scopes.hpp"
#include "util/type_object.hpp"

namespace swpy {

namespace {

namespace dl = sw::dlpack;

constexpr const char* kLegacyName = "dltensor";
constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kUsedLegacy = "used_dltensor";
constexpr const char* kUsedVersioned = "used_dltensor_versioned";
constexpr const char* kExchangeName = "dlpack_exchange_api";
// Copies of at least this many elements release the GIL.
constexpr int64_t kGilFreeElements = 1 << 16;

DlpackImportState& state() { return module_state.dlpack_import; }

enum class Copy : int8_t { Unset, No, Yes };

struct Request {
  bool device = false;  // device=(1, 0) given: ask for dl_device too
  Copy copy = Copy::Unset;
};

// ------------------------------------------------------------- arguments

int parse_device(PyObject* o, bool* given) {
  *given = false;
  if (!o || o == Py_None) return 0;
  dl::IntPair p;
  if (dlpack_parse_pair(o, "from_dlpack() device", &p) < 0) return -1;
  if (p.overflow[0] || p.overflow[1] || p.value[0] != kDLCPU || p.value[1] != 0) {
    PyErr_Format(PyExc_ValueError,
                 "from_dlpack() device must be None or the CPU device (1, 0), not %R: StrideWeave tensors "
                 "live in host memory",
                 o);
    return -1;
  }
  *given = true;
  return 0;
}

// copy is None, True or False (a NumPy bool, or an int equal to 0 or 1, as
// `copy in (None, True, False)` holds for them); anything else, a string
// above all, is ValueError as NumPy's from_dlpack says, never its truth.
int parse_copy(PyObject* o, Copy* out) {
  *out = Copy::Unset;
  if (!o || o == Py_None) return 0;
  int truthy = -1;
  if (is_bool(o)) {
    truthy = PyObject_IsTrue(o);
    if (truthy < 0) return -1;
  } else if (PyLong_Check(o)) {
    int overflow = 0;
    const long v = PyLong_AsLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (!overflow && (v == 0 || v == 1)) truthy = static_cast<int>(v);
  }
  if (truthy < 0) {
    PyErr_Format(PyExc_ValueError, "from_dlpack() copy must be None, True or False, not %R", o);
    return -1;
  }
  *out = truthy ? Copy::Yes : Copy::No;
  return 0;
}

// -------------------------------------------------------- the managed tensor

// Takes the managed tensor out of a DLPack capsule and renames the capsule,
// which makes its deleter ours to run (the producer's capsule destructor
// leaves a renamed capsule alone). A versioned tensor of another major
// version is refused before renaming: its producer still deletes it.
int consume_capsule(PyObject* capsule, dl::ImportedTensor* out) {
  const char* name = PyCapsule_GetName(capsule);
  if (!name && PyErr_Occurred()) return -1;
  bool versioned;
  if (name && std::strcmp(name, kVersionedName) == 0) {
    versioned = true;
  } else if (name && std::strcmp(name, kLegacyName) == 0) {
    versioned = false;
  } else if (name && (std::strcmp(name, kUsedLegacy) == 0 || std::strcmp(name, kUsedVersioned) == 0)) {
    PyErr_Format(PyExc_BufferError,
                 "from_dlpack(): the DLPack capsule was already consumed (it is named %s); a capsule can be "
                 "imported once",
                 name);
    return -1;
  } else {
    PyErr_Format(PyExc_TypeError, "from_dlpack() needs a DLPack capsule named dltensor or dltensor_versioned, not %s",
                 name ? name : "an unnamed capsule");
    return -1;
  }
  void* p = PyCapsule_GetPointer(capsule, name);
  if (!p) return -1;
  if (versioned) {
    auto* m = static_cast<DLManagedTensorVersioned*>(p);
    if (m->version.major != DLPACK_MAJOR_VERSION) {
      PyErr_Format(PyExc_BufferError,
                   "from_dlpack() reads DLPack %d.x, but the producer's tensor is version %u.%u", DLPACK_MAJOR_VERSION,
                   m->version.major, m->version.minor);
      return -1;
    }
  }
  if (PyCapsule_SetName(capsule, versioned ? kUsedVersioned : kUsedLegacy) < 0) return -1;
  *out = versioned ? dl::ImportedTensor::versioned(static_cast<DLManagedTensorVersioned*>(p))
                   : dl::ImportedTensor::legacy(static_cast<DLManagedTensor*>(p));
  return 0;
}

// The C exchange API on type (through its MRO), or NULL when it has none
// StrideWeave can call (no exception either way). The last capsule seen is
// cached by identity.
const DLPackExchangeAPI* exchange_api_of(PyTypeObject* type) {
  DlpackImportState& st = state();
  // The last type found without one, identified by its version tag, which
  // is unique to that type as it is now (any change to the type, or another
  // type at the same address, has another tag).
  const bool tagged = PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG);
  if (tagged && type == st.no_exchange_type && type->tp_version_tag == st.no_exchange_tag) return nullptr;
  PyObject* cap = compat::type_lookup(type, names().dunder_dlpack_exchange_api);
  if (!cap) {
    if (tagged) {
      st.no_exchange_type = type;
      st.no_exchange_tag = type->tp_version_tag;
    }
    return nullptr;
  }
  if (cap == st.exchange_capsule) return st.exchange_api;
  const DLPackExchangeAPI* api = nullptr;
  if (PyCapsule_CheckExact(cap)) {
    api = static_cast<const DLPackExchangeAPI*>(PyCapsule_GetPointer(cap, kExchangeName));
    if (!api) PyErr_Clear();
  }
  // The struct this header declares is 1.3's; another major version is
  // another layout.
  if (api && (api->header.version.major != 1 || api->header.version.minor < 3 ||
              !api->managed_tensor_from_py_object_no_sync))
    api = nullptr;
  Py_XSETREF(st.exchange_capsule, Py_NewRef(cap));
  st.exchange_api = api;
  return api;
}

// How x's __dlpack__ is called: looked up on each call (callable NULL), an
// unbound method of x's type called with x first (with_self), or a bound
// callable found on the instance.
struct DlpackMethod {
  Ref callable;
  bool with_self = false;
};

// x.__dlpack__(max_version=(1, 3)[, dl_device=(1, 0)][, copy=...]) and the
// TypeError fallback to x.__dlpack__().
PyObject* call_dlpack(PyObject* x, const DlpackMethod& m, bool dl_device, Copy copy) {
  DlpackImportState& st = state();
  // stack[0] is the slot vectorcall may borrow (PY_VECTORCALL_ARGUMENTS_OFFSET);
  // x is stack[1], the keyword values follow.
  PyObject* stack[5] = {nullptr, x, st.max_version, nullptr, nullptr};
  Py_ssize_t nkw = 1;
  if (dl_device) stack[2 + nkw++] = dlpack_cpu_device();
  if (copy != Copy::Unset) stack[2 + nkw++] = copy == Copy::Yes ? Py_True : Py_False;
  PyObject* kwnames = st.kwnames[(dl_device ? 1 : 0) | (copy != Copy::Unset ? 2 : 0)];
  const size_t self_arg = 1 | PY_VECTORCALL_ARGUMENTS_OFFSET;
  PyObject* r;
  if (!m.callable)
    r = PyObject_VectorcallMethod(names().dunder_dlpack, stack + 1, self_arg, kwnames);
  else if (m.with_self)
    r = PyObject_Vectorcall(m.callable.get(), stack + 1, self_arg, kwnames);
  else
    r = PyObject_Vectorcall(m.callable.get(), stack + 2, PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
  if (r || !PyErr_ExceptionMatches(PyExc_TypeError)) return r;
  // A producer that predates max_version (and dl_device, copy): its legacy
  // capsule is imported read-only, and the device and copy demands are
  // enforced here instead.
  PyErr_Clear();
  if (!m.callable) return PyObject_CallMethodNoArgs(x, names().dunder_dlpack);
  if (m.with_self) return PyObject_CallOneArg(m.callable.get(), x);
  return PyObject_CallNoArgs(m.callable.get());
}

// What type has as __dlpack__ (*on_type: whether it has one) and how it
// can be called without a lookup: the result is that function when it is a
// plain method of a type whose attribute access is the generic one, else
// NULL (borrowed). *dict_offset is then where an instance's own dict sits
// (0: instances have none), which PyObject_VectorcallMethod would search
// first (an instance attribute shadows a method): ndarray has no dict,
// jax.Array a plain dict slot. Types whose instances keep their dict
// elsewhere (Python classes with a managed dict, negative offsets) and a
// custom __getattribute__ get NULL: each import looks __dlpack__ up the
// ordinary way. The answer for the last type asked is kept by version tag,
// as exchange_api_of keeps its own: an import loop over one producer's
// arrays looks nothing up.
PyObject* type_dlpack_method(PyTypeObject* type, bool* on_type, Py_ssize_t* dict_offset) {
  DlpackImportState& st = state();
  if (type == st.method_type && PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG) &&
      type->tp_version_tag == st.method_tag) {
    *on_type = st.method_on_type;
    *dict_offset = st.method_dict_offset;
    return st.method_unbound;
  }
  PyObject* descr = compat::type_lookup(type, names().dunder_dlpack);
  const Py_ssize_t offset = type->tp_dictoffset;
  const bool plain_dict = offset == 0 || (offset > 0 && !compat::has_managed_dict(type));
  PyObject* unbound = descr && type->tp_getattro == PyObject_GenericGetAttr && plain_dict &&
                              PyType_HasFeature(Py_TYPE(descr), Py_TPFLAGS_METHOD_DESCRIPTOR)
                          ? descr
                          : nullptr;
  // The lookup gives the type its tag when it had none.
  if (PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG)) {
    st.method_type = type;
    st.method_tag = type->tp_version_tag;
    st.method_on_type = descr != nullptr;
    st.method_unbound = unbound;
    st.method_dict_offset = unbound ? offset : 0;
  }
  *on_type = descr != nullptr;
  *dict_offset = unbound ? offset : 0;
  return unbound;
}

// The consumer protocol: a capsule from x.__dlpack__, consumed into *out.
int protocol_import(PyObject* x, bool dl_device, Copy copy, dl::ImportedTensor* out) {
  DlpackMethod method;
  bool on_type;
  Py_ssize_t dict_offset;
  if (PyObject* unbound = type_dlpack_method(Py_TYPE(x), &on_type, &dict_offset)) {
    // Called unbound with x first, as PyObject_VectorcallMethod would after
    // finding it again, unless x's own dict has a __dlpack__ (which that
    // would call instead, without x). Held first: the dict lookup may run
    // Python code (a key's __eq__) that takes the method off the type.
    method.callable = Ref::borrow(unbound);
    method.with_self = true;
    PyObject* dict = dict_offset ? *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(x) + dict_offset) : nullptr;
    if (dict && PyDict_Check(dict)) {
      Ref keep = Ref::borrow(dict);
      PyObject* own = PyDict_GetItemWithError(dict, names().dunder_dlpack);
      if (own) {
        method.callable = Ref::borrow(own);
        method.with_self = false;
      } else if (PyErr_Occurred()) {
        return -1;
      }
    }
  } else if (!on_type) {
    // Not on the type: an instance attribute (or __getattr__) still counts.
    method.callable = Ref::steal(PyObject_GetAttr(x, names().dunder_dlpack));
    if (!method.callable) {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError,
                   "from_dlpack() needs an object with __dlpack__ (the DLPack protocol: NumPy, PyTorch, JAX, "
                   "tvm-ffi, CuPy arrays) or a DLPack capsule, not %.100s; strideweave.tensor(x) copies lists, "
                   "buffers and __array__ objects into a new tensor",
                   type_name(x));
      return -1;
    }
  }
  Ref capsule = Ref::steal(call_dlpack(x, method, dl_device, copy));
  if (!capsule && copy == Copy::Yes && PyErr_ExceptionMatches(PyExc_BufferError)) {
    // A producer that cannot copy (tvm-ffi: "copy not yet supported"): take
    // the alias and copy here. If that fails too, the first refusal stands.
    Ref refusal = Ref::steal(compat::take_raised());
    capsule = Ref::steal(call_dlpack(x, method, dl_device, Copy::Unset));
    if (!capsule) {
      PyErr_Clear();
      compat::restore_raised(refusal.release());
      return -1;
    }
  }
  if (!capsule) return -1;
  if (!PyCapsule_CheckExact(capsule.get())) {
    PyErr_Format(PyExc_TypeError, "from_dlpack(): %.100s.__dlpack__() returned %.100s, not a DLPack capsule",
                 type_name(x), type_name(capsule.get()));
    return -1;
  }
  return consume_capsule(capsule.get(), out);
}

// The managed tensor of x by the first route that applies (see the top).
int acquire(PyObject* x, const Request& req, dl::ImportedTensor* out) {
  if (PyCapsule_CheckExact(x)) return consume_capsule(x, out);
  if (const DLPackExchangeAPI* api = exchange_api_of(Py_TYPE(x))) {
    DLManagedTensorVersioned* m = nullptr;
    if (api->managed_tensor_from_py_object_no_sync(x, &m) == 0 && m) {
      *out = dl::ImportedTensor::versioned(m);
      // (version, manager_ctx, deleter) lead every versioned struct, so a
      // tensor of another major version can still be given back.
      if (m->version.major != DLPACK_MAJOR_VERSION) {
        PyErr_Format(PyExc_BufferError,
                     "from_dlpack() reads DLPack %d.x, but %.100s's exchange API exported version %u.%u",
                     DLPACK_MAJOR_VERSION, type_name(x), m->version.major, m->version.minor);
        out->reset();
        return -1;
      }
      return 0;
    }
    // The C path refused (torch reports its C++ error, stack and all, as a
    // RuntimeError): the protocol gives the producer's own Python-level
    // answer, a refusal with its proper type or a capsule after all.
    PyErr_Clear();
  }
  return protocol_import(x, req.device, req.copy, out);
}

// ---------------------------------------------------------------- results

// The Layout of view v: its own leaves, or the row-major ones a copy gets.
// New reference or NULL.
PyObject* layout_for(const dl::ImportView& v, bool row_major) {
  if (row_major) {
    std::vector<sw::LeafMode> leaves;
    if (engine_call([&] { dl::row_major_leaves(v, &leaves); }) < 0) return nullptr;
    return flat_layout_object(leaves);
  }
  LeafBuffer buf;
  std::span<sw::LeafMode> leaves;
  if (engine_call([&] { leaves = buf.resize(static_cast<size_t>(v.ndim)); }) < 0) return nullptr;
  for (int32_t i = 0; i < v.ndim; ++i) leaves[static_cast<size_t>(i)] = v.leaf(i);
  return flat_layout_object(leaves);
}

// A Tensor viewing the producer's memory in place; the carrier adopts the
// managed tensor (its deleter runs when the carrier gives the memory up).
// A zero-size array has nothing to view: it gets empty storage of its own
// and the producer's tensor goes back at once.
PyObject* view_result(const dl::ImportView& v, dl::ImportedTensor m, bool read_only) {
  Ref layout = Ref::steal(layout_for(v, /*row_major=*/false));
  if (!layout) return nullptr;
  Ref carrier;
  if (v.size == 0) {
    m.reset();
    carrier = Ref::steal(cpu_new(0, v.dtype, !read_only, false));
  } else {
    carrier = Ref::steal(cpu_adopt(v.first, static_cast<Py_ssize_t>(v.span), v.dtype, !read_only, m.hand_over()));
  }
  if (!carrier) return nullptr;
  // The carrier's span is the layout's cosize by construction.
  return tensor_over_native(carrier.get(), layout.get(), v.dtype);
}

// A Tensor over fresh, mutable, row-major storage holding a copy; the
// producer's tensor goes back as soon as the copy is done.
PyObject* copy_result(const dl::ImportView& v, dl::ImportedTensor m) {
  Ref layout = Ref::steal(layout_for(v, /*row_major=*/true));
  if (!layout) return nullptr;
  Ref carrier = Ref::steal(cpu_new(static_cast<Py_ssize_t>(v.size), v.dtype, true, /*empty=*/true));
  if (!carrier) return nullptr;
  void* dst = carrier_host_data(carrier.get());
  int rc;
  if (v.size >= kGilFreeElements) {
    GilRelease nogil;
    rc = engine_call([&] { dl::copy_row_major(v, dst); });
  } else {
    rc = engine_call([&] { dl::copy_row_major(v, dst); });
  }
  if (rc < 0) return nullptr;
  m.reset();
  return tensor_over_native(carrier.get(), layout.get(), v.dtype);
}

// "(2, 0)" for messages.
void device_of(const dl::ImportedTensor& m, int* type, int* id) {
  *type = static_cast<int>(m.tensor().device.device_type);
  *id = static_cast<int>(m.tensor().device.device_id);
}

PyObject* refuse_dtype(const dl::ImportedTensor& m) {
  const DLDataType t = m.tensor().dtype;
  std::string name;
  if (engine_call([&] { name = dl::dtype_text(t); }) < 0) return nullptr;
  const char* target = dl::conversion_target(t);
  PyErr_Format(PyExc_TypeError,
               "from_dlpack() imports float32, int32 and bool data (Float32, Int32, Bool), not %s, and does not "
               "convert dtypes; convert while copying instead: strideweave.tensor(np.asarray(x, np.%s))",
               name.c_str(), target);
  return nullptr;
}

PyObject* refuse_view(const dl::ImportView& v, const dl::ImportedTensor& m) {
  if (v.check == dl::ImportCheck::NegativeStride) {
    PyErr_SetString(PyExc_BufferError,
                    "from_dlpack(copy=False) cannot view this array: it has a negative stride, which a "
                    "StrideWeave Layout cannot express; copy=None or copy=True copies it");
  } else if (v.check == dl::ImportCheck::Misaligned) {
    PyErr_Format(PyExc_BufferError,
                 "from_dlpack(copy=False) cannot view this array: its first element (address %p) is not "
                 "aligned to its %d-byte items; copy=None or copy=True copies it",
                 static_cast<void*>(v.first), sw::itemsize(v.dtype));
  } else {
    int type, id;
    device_of(m, &type, &id);
    PyErr_Format(PyExc_BufferError,
                 "from_dlpack(copy=False) cannot view memory on device (%d, %d): StrideWeave tensors live in "
                 "host memory, and bringing it there is a copy (copy=None or copy=True allows it)",
                 type, id);
  }
  return nullptr;
}

PyObject* import(PyObject* x, const Request& req) {
  dl::ImportedTensor m;
  if (acquire(x, req, &m) < 0) return nullptr;
  dl::ImportView v = dl::inspect_import(m.tensor());
  if (v.check == dl::ImportCheck::NotHost) {
    if (req.copy == Copy::No) return refuse_view(v, m);
    int type, id;
    device_of(m, &type, &id);
    // Ask the producer for a host copy, unless it was asked already or
    // there is no one to ask (a bare capsule).
    const bool can_ask = !req.device && !PyCapsule_CheckExact(x);
    m.reset();
    if (!can_ask) {
      PyErr_Format(PyExc_BufferError,
                   "from_dlpack(): the DLPack tensor is on device (%d, %d), not in host memory%s", type, id,
                   req.device ? " as device=(1, 0) asked" : "; import it through its producer, which can copy it");
      return nullptr;
    }
    if (protocol_import(x, /*dl_device=*/true, Copy::Yes, &m) < 0) return nullptr;
    v = dl::inspect_import(m.tensor());
    if (v.check == dl::ImportCheck::NotHost) {
      device_of(m, &type, &id);
      PyErr_Format(PyExc_BufferError,
                   "from_dlpack(): asked for a host copy (dl_device=(1, 0)), %.100s.__dlpack__() returned memory "
                   "on device (%d, %d)",
                   type_name(x), type, id);
      return nullptr;
    }
  }
  switch (v.check) {
    case dl::ImportCheck::Dtype:
      return refuse_dtype(m);
    case dl::ImportCheck::Malformed:
      PyErr_Format(PyExc_BufferError, "from_dlpack(): the producer's DLTensor is malformed: it has %s", v.malformed);
      return nullptr;
    case dl::ImportCheck::TooLarge:
      PyErr_SetString(PyExc_BufferError,
                      "from_dlpack(): the producer's DLTensor is too large: its size or span overflows 64 bits");
      return nullptr;
    default:
      break;
  }
  const bool viewable = v.check == dl::ImportCheck::View;
  if (req.copy == Copy::Yes) {
    // The producer's own fresh copy is already the result's alone, unless
    // the producer flags it read-only too (JAX 0.12 does): a copy the
    // caller asked for is mutable, so StrideWeave copies it once more.
    if (viewable && m.is_copied() && !m.read_only()) return view_result(v, std::move(m), false);
    return copy_result(v, std::move(m));
  }
  if (viewable) {
    // A legacy capsule carries no read-only flag: assume the worst, as
    // NumPy does (JAX arrays, immutable, export legacy capsules).
    const bool read_only = !m.is_versioned() || m.read_only();
    return view_result(v, std::move(m), read_only);
  }
  if (req.copy == Copy::No) return refuse_view(v, m);
  return copy_result(v, std::move(m));
}

constexpr Signature kFromDlpackSignature{"from_dlpack", {"x", "device", "copy"}, 1, 1, 1};

// Flattened: this file's steps of an import inline into one body, so the
// code an import runs right after a producer's __dlpack__ (which evicts the
// instruction cache) is contiguous: 140 instructions and about 26 simulated
// L1i misses fewer per import of a JAX array (callgrind --cache-sim).
[[gnu::flatten]] PyObject* from_dlpack_fn(PyObject*, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  PyObject* a[3];
  if (parse_args(kFromDlpackSignature, module_state.keywords.from_dlpack, args, static_cast<size_t>(nargsf), kwnames,
                 a) < 0)
    return nullptr;
  Request req;
  if (parse_device(a[1], &req.device) < 0 || parse_copy(a[2], &req.copy) < 0) return nullptr;
  return import(a[0], req);
}

PyMethodDef import_functions[] = {
    {"from_dlpack", method_cast(from_dlpack_fn), METH_FASTCALL | METH_KEYWORDS,
     "from_dlpack(x, /, *, device=None, copy=None)\n--\n\n"
     "A Tensor over the memory of x, an object with __dlpack__ (NumPy, PyTorch, JAX, tvm-ffi arrays, a "
     "StrideWeave Tensor) or a DLPack capsule, without a copy: an exact CPU carrier whose slot 0 is x's "
     "first element, and a Layout with one mode per dimension (x's extents and element strides). "
     "float32, int32 and bool map to Float32, Int32 and Bool; any other dtype raises TypeError. Memory the "
     "CPU cannot view in place (another device, a negative stride, a misaligned first element) is copied "
     "when copy is None; copy=False raises BufferError instead, and copy=True always gives fresh storage "
     "the result owns. A read-only export (and any legacy capsule, which cannot say) gives a carrier that "
     "is not mutable. The producer's memory stays valid while the carrier holds it; release() or moving "
     "the tensor away gives it back. device is None or the CPU device (1, 0)."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

int dlpack_import_module_init(PyObject* module) {
  DlpackImportState& st = state();
  if (!st.max_version && !(st.max_version = Py_BuildValue("(ii)", 1, 3))) return -1;
  // kwnames[i]: max_version, then dl_device when i & 1, then copy when i & 2.
  for (int i = 0; i < 4; ++i) {
    if (st.kwnames[i]) continue;
    PyObject* keys[3] = {names().max_version, names().dl_device, names().copy};
    PyObject* t = PyTuple_New(1 + ((i & 1) != 0) + ((i & 2) != 0));
    if (!t) return -1;
    Py_ssize_t n = 0;
    PyTuple_SET_ITEM(t, n++, Py_NewRef(keys[0]));
    if (i & 1) PyTuple_SET_ITEM(t, n++, Py_NewRef(keys[1]));
    if (i & 2) PyTuple_SET_ITEM(t, n++, Py_NewRef(keys[2]));
    st.kwnames[i] = t;
  }
  if (!dlpack_cpu_device()) return -1;
  return PyModule_AddFunctions(module, import_functions);
}

}  // namespace swpy
