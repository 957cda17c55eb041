// FileBacked: slots in a binary file (native byte order; Floating as 8-byte
// double, Float32 and Int32 as 4 bytes, Bool as 1 byte) inside a
// per-process temporary directory. A new FileBacked is empty and grows
// (zero-filled) when used as a move destination. The file is removed on
// release, on garbage collection and at interpreter exit (atexit hook, with
// a C++ static destructor sweeping the directory as a last resort).
#include <dirent.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "sw.hpp"

namespace swpy {

namespace {

FileBackedObject* as_fb(PyObject* o) { return reinterpret_cast<FileBackedObject*>(o); }
FileBackedObject* as_fb(CarrierObject* o) { return reinterpret_cast<FileBackedObject*>(o); }

// Removes every entry of dir, then dir itself (best effort).
void sweep_directory(const std::string& dir) {
  if (DIR* d = ::opendir(dir.c_str())) {
    while (struct dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      ::unlink((dir + "/" + e->d_name).c_str());
    }
    ::closedir(d);
  }
  ::rmdir(dir.c_str());
}

// The per-process directory. Its destructor runs after interpreter
// finalization and removes whatever the atexit hook could not (files
// created after it ran). A forked child never removes its parent's
// directory: it creates its own.
struct Directory {
  std::string path;
  pid_t pid = 0;
  ~Directory() {
    if (!path.empty() && pid == ::getpid()) sweep_directory(path);
  }
};
Directory g_dir;
// Live (unreleased) FileBacked objects, for the exit hook, with the pid of
// the process that created each file.
std::unordered_map<FileBackedObject*, pid_t> g_live;
unsigned long long g_counter = 0;

bool supported(sw::DTypeCode c) {
  return c == sw::DTypeCode::Floating || c == sw::DTypeCode::Float32 || c == sw::DTypeCode::Int32 ||
         c == sw::DTypeCode::Bool;
}

int check_dtype(PyObject* dtype) {
  if (!is_dtype(dtype)) {
    PyErr_Format(PyExc_TypeError, "FileBacked dtype must be a DType, not %.100s", type_name(dtype));
    return -1;
  }
  if (!supported(dtype_code(dtype))) {
    PyErr_Format(PyExc_ValueError,
                 "FileBacked does not support dtype %R; use DType.Floating, Float32, Int32 or Bool", dtype);
    return -1;
  }
  return 0;
}

int64_t item_bytes(FileBackedObject* o) { return sw::itemsize(dtype_code(o->dtype)); }

// Sets OSError (the errno subclass: FileExistsError, ...) from e.
void raise_os_error(const std::system_error& e, const std::string& path) {
  errno = e.code().value();
  if (path.empty())
    PyErr_SetFromErrno(PyExc_OSError);
  else
    PyErr_SetFromErrnoWithFilename(PyExc_OSError, path.c_str());
}

// Encodes one value into its native slot bytes.
int encode(sw::DTypeCode code, PyObject* v, unsigned char* out) {
  switch (code) {
    case sw::DTypeCode::Floating: {
      double d;
      if (value_to_f64(v, "Floating", &d) < 0) return -1;
      std::memcpy(out, &d, sizeof d);
      return 0;
    }
    case sw::DTypeCode::Float32: {
      float f;
      if (value_to_f32(v, &f) < 0) return -1;
      std::memcpy(out, &f, sizeof f);
      return 0;
    }
    case sw::DTypeCode::Int32: {
      int32_t x;
      if (value_to_i32(v, &x) < 0) return -1;
      std::memcpy(out, &x, sizeof x);
      return 0;
    }
    default: {
      bool b;
      if (value_to_bool(v, &b) < 0) return -1;
      *out = b ? 1 : 0;
      return 0;
    }
  }
}

PyObject* decode(sw::DTypeCode code, const unsigned char* in) {
  switch (code) {
    case sw::DTypeCode::Floating: {
      double d;
      std::memcpy(&d, in, sizeof d);
      return PyFloat_FromDouble(d);
    }
    case sw::DTypeCode::Float32: {
      float f;
      std::memcpy(&f, in, sizeof f);
      return PyFloat_FromDouble(f);
    }
    case sw::DTypeCode::Int32: {
      int32_t x;
      std::memcpy(&x, in, sizeof x);
      return PyLong_FromLong(x);
    }
    default:
      return PyBool_FromLong(*in != 0);
  }
}

// Validates a user filename: a plain name inside the directory.
int parse_filename(PyObject* filename, std::string* out) {
  PyObject* fs = PyOS_FSPath(filename);
  if (!fs) return -1;
  if (!PyUnicode_Check(fs)) {
    PyErr_Format(PyExc_TypeError, "FileBacked filename must be a str or None, not %.100s",
                 type_name(filename));
    Py_DECREF(fs);
    return -1;
  }
  PyObject* bytes = PyUnicode_EncodeFSDefault(fs);
  Py_DECREF(fs);
  if (!bytes) return -1;
  std::string name(PyBytes_AS_STRING(bytes), static_cast<size_t>(PyBytes_GET_SIZE(bytes)));
  Py_DECREF(bytes);
  if (name.empty() || name == "." || name == ".." || name.find('\0') != std::string::npos) {
    PyErr_Format(PyExc_ValueError, "invalid FileBacked filename %R", filename);
    return -1;
  }
  if (name.find('/') != std::string::npos) {
    PyErr_Format(PyExc_ValueError,
                 "FileBacked filename %R must not contain directory parts; files live in the per-process "
                 "temporary directory",
                 filename);
    return -1;
  }
  *out = std::move(name);
  return 0;
}

// Creates the file of a fresh object (no file yet) under name, or under a
// generated unique name when name is NULL.
int fb_create(FileBackedObject* o, const std::string* name, PyObject* dtype, bool mutable_) {
  const char* dir = file_backed_directory();
  if (!dir) return -1;
  std::string chosen;
  for (int attempt = 0;; ++attempt) {
    if (name) {
      chosen = *name;
    } else {
      chosen = "sw-" + std::to_string(static_cast<long long>(::getpid())) + "-" + std::to_string(++g_counter) +
               ".bin";
    }
    std::string path = std::string(dir) + "/" + chosen;
    try {
      o->file.create(path);
      break;
    } catch (const std::system_error& e) {
      // A generated name may collide with a user-chosen one: try the next.
      if (!name && e.code().value() == EEXIST && attempt < 1000) continue;
      raise_os_error(e, path);
      return -1;
    }
  }
  PyObject* n = PyUnicode_DecodeFSDefault(chosen.c_str());
  if (!n) {
    o->file.close_and_unlink();
    return -1;
  }
  Py_XSETREF(o->name, n);
  Py_SETREF(o->dtype, Py_NewRef(dtype));
  o->size = 0;
  o->base.constructed_mutable = mutable_;
  g_live[o] = ::getpid();
  return 0;
}

// Closes o's file and forgets it. The file is removed only by the process
// that created it: a forked child shares its parent's files (as it does the
// directory) and leaves them in place on release, collection and exit.
void fb_close(FileBackedObject* o) {
  auto it = g_live.find(o);
  if (it != g_live.end() && it->second != ::getpid())
    o->file.close_keep_file();
  else
    o->file.close_and_unlink();
  if (it != g_live.end()) g_live.erase(it);
}

int fb_resize(FileBackedObject* o, Py_ssize_t n) {
  int64_t item = item_bytes(o);
  if (n > INT64_MAX / item) {
    PyErr_SetString(PyExc_OverflowError, "FileBacked size too large");
    return -1;
  }
  try {
    o->file.resize(static_cast<int64_t>(n) * item);
  } catch (const std::system_error& e) {
    raise_os_error(e, o->file.path());
    return -1;
  }
  o->size = n;
  return 0;
}

// Fresh file-backed instance of type (the receiver's exact class) with n
// zero slots. Python __init__ of a subclass is not run.
PyObject* fb_make(PyTypeObject* type, Py_ssize_t n, PyObject* dtype, bool mutable_) {
  PyObject* args = PyTuple_New(0);
  if (!args) return nullptr;
  PyObject* self = type->tp_new(type, args, nullptr);
  Py_DECREF(args);
  if (!self) return nullptr;
  if (!PyObject_TypeCheck(self, &FileBacked_Type)) {
    PyErr_Format(PyExc_TypeError, "%s.__new__ did not return a FileBacked carrier", type_name(type));
    Py_DECREF(self);
    return nullptr;
  }
  if (fb_create(as_fb(self), nullptr, dtype, mutable_) < 0 || (n > 0 && fb_resize(as_fb(self), n) < 0)) {
    Py_DECREF(self);  // dealloc removes a created file
    return nullptr;
  }
  return self;
}

// ------------------------------------------------------------------ vtable

sw::DTypeCode vt_dtype_code(CarrierObject* o) { return dtype_code(as_fb(o)->dtype); }
Py_ssize_t vt_size(CarrierObject* o) { return as_fb(o)->size; }

PyObject* vt_get(CarrierObject* c, Py_ssize_t i) {
  FileBackedObject* o = as_fb(c);
  int64_t item = item_bytes(o);
  unsigned char buf[8];
  try {
    o->file.read(i * item, buf, item);
  } catch (const std::system_error& e) {
    raise_os_error(e, o->file.path());
    return nullptr;
  }
  return decode(dtype_code(o->dtype), buf);
}

int vt_set(CarrierObject* c, Py_ssize_t i, PyObject* v) {
  FileBackedObject* o = as_fb(c);
  int64_t item = item_bytes(o);
  unsigned char buf[8];
  if (encode(dtype_code(o->dtype), v, buf) < 0) return -1;
  // Conversion may have run Python code that released or shrank us.
  if (!o->file.is_open() || i >= o->size) {
    PyErr_SetString(PyExc_RuntimeError, "FileBacked carrier changed during the write");
    return -1;
  }
  try {
    o->file.write(i * item, buf, item);
  } catch (const std::system_error& e) {
    raise_os_error(e, o->file.path());
    return -1;
  }
  return 0;
}

void vt_release(CarrierObject* c) {
  FileBackedObject* o = as_fb(c);
  fb_close(o);
  o->size = 0;
}

PyObject* vt_new_like(CarrierObject* c, PyObject* values, bool mutable_, PyObject* dtype) {
  if (!dtype) dtype = as_fb(c)->dtype;  // kept after release
  else if (check_dtype(dtype) < 0) return nullptr;
  sw::DTypeCode code = dtype_code(dtype);
  int64_t item = sw::itemsize(code);
  PyObject* seq = PySequence_Fast(values, "new_like() values must be iterable");
  if (!seq) return nullptr;
  // Conversion may run Python code (__index__, __float__) that mutates a
  // list under the borrowed items: walk an immutable snapshot instead.
  if (PyList_Check(seq)) Py_SETREF(seq, PyList_AsTuple(seq));
  if (!seq) return nullptr;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  // Encode everything before touching the file system.
  std::vector<unsigned char> bytes;
  try {
    bytes.resize(static_cast<size_t>(n) * static_cast<size_t>(item));
  } catch (const std::bad_alloc&) {
    Py_DECREF(seq);
    return PyErr_NoMemory();
  }
  PyObject** items = PySequence_Fast_ITEMS(seq);
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (encode(code, items[i], bytes.data() + i * item) < 0) {
      Py_DECREF(seq);
      return nullptr;
    }
  }
  Py_DECREF(seq);
  PyObject* r = fb_make(Py_TYPE(c), 0, dtype, mutable_);
  if (!r) return nullptr;
  FileBackedObject* o = as_fb(r);
  try {
    if (n > 0) o->file.write(0, bytes.data(), static_cast<int64_t>(bytes.size()));
  } catch (const std::system_error& e) {
    raise_os_error(e, o->file.path());
    Py_DECREF(r);
    return nullptr;
  }
  o->size = n;
  return r;
}

PyObject* vt_allocate_like(CarrierObject* c, Py_ssize_t n, bool mutable_, PyObject* dtype, bool) {
  // Growing a file zero-fills it for free, so empty=True changes nothing.
  if (!dtype) dtype = as_fb(c)->dtype;
  else if (check_dtype(dtype) < 0) return nullptr;
  return fb_make(Py_TYPE(c), n, dtype, mutable_);
}

int vt_reserve(CarrierObject* c, Py_ssize_t n) {
  FileBackedObject* o = as_fb(c);
  if (o->size != 0) return 0;  // only an empty destination grows
  if (!o->file.is_open()) {
    PyErr_SetString(PyExc_RuntimeError, "FileBacked carrier has no file (was __init__ called?)");
    return -1;
  }
  return fb_resize(o, n) < 0 ? -1 : 1;
}

const CarrierVTable fb_vt = {
    vt_dtype_code, vt_size, vt_get, vt_set, vt_release, vt_new_like, vt_allocate_like,
    vt_reserve, nullptr /* host_data */, nullptr /* dlpack_info: none */,
};

// ------------------------------------------------------------ Python type

PyObject* FileBacked_new(PyTypeObject* type, PyObject*, PyObject*) {
  PyObject* self = carrier_alloc(type, &fb_vt);
  if (!self) return nullptr;
  FileBackedObject* o = as_fb(self);
  new (&o->file) sw::FileStorage();
  o->dtype = Py_NewRef(dtype_singleton(sw::DTypeCode::Floating));
  o->name = nullptr;
  o->size = 0;
  return self;
}

int FileBacked_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"filename", "dtype", "mutable", nullptr};
  PyObject* filename = Py_None;
  PyObject* dtype = dtype_singleton(sw::DTypeCode::Floating);
  int mutable_ = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O$Op:FileBacked", const_cast<char**>(kw), &filename, &dtype,
                                   &mutable_))
    return -1;
  FileBackedObject* o = as_fb(self);
  if (o->name || o->base.released) {
    PyErr_SetString(PyExc_RuntimeError, "FileBacked.__init__() cannot be called twice");
    return -1;
  }
  if (check_dtype(dtype) < 0) return -1;
  if (filename == Py_None) return fb_create(o, nullptr, dtype, mutable_ != 0);
  std::string name;
  if (parse_filename(filename, &name) < 0) return -1;
  return fb_create(o, &name, dtype, mutable_ != 0);
}

void FileBacked_dealloc(PyObject* self) {
  FileBackedObject* o = as_fb(self);
  fb_close(o);
  o->file.~FileStorage();
  Py_CLEAR(o->name);
  Py_CLEAR(o->dtype);
  carrier_dealloc(self);
}

PyObject* FileBacked_get_path(PyObject* self, void*) {
  FileBackedObject* o = as_fb(self);
  if (!o->name) Py_RETURN_NONE;
  // After release the file is gone; the path still names where it was.
  PyObject* full;
  if (o->file.is_open()) {
    full = PyUnicode_DecodeFSDefault(o->file.path().c_str());
  } else {
    full = PyUnicode_FromFormat("%s/%U", g_dir.path.c_str(), o->name);
  }
  if (!full) return nullptr;
  PyObject* pathlib = PyImport_ImportModule("pathlib");
  if (!pathlib) { Py_DECREF(full); return nullptr; }
  PyObject* r = PyObject_CallMethod(pathlib, "Path", "O", full);
  Py_DECREF(pathlib);
  Py_DECREF(full);
  return r;
}

PyGetSetDef FileBacked_getset[] = {
    {"path", FileBacked_get_path, nullptr, "pathlib.Path of the backing file (where it was, after release).",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

// atexit: remove the live files and the directory.
PyObject* cleanup(PyObject*, PyObject*) {
  for (auto& [o, pid] : g_live) {
    if (pid == ::getpid())
      o->file.close_and_unlink();
    else
      o->file.close_keep_file();  // a forked child's copy of its parent's file
    o->size = 0;
    o->base.released = true;  // later reads say "released", not EBADF
  }
  g_live.clear();
  if (!g_dir.path.empty() && g_dir.pid == ::getpid()) {
    sweep_directory(g_dir.path);
    g_dir.path.clear();
  }
  Py_RETURN_NONE;
}

PyMethodDef cleanup_def = {"_file_backed_cleanup", cleanup, METH_NOARGS,
                           "Removes FileBacked files and their directory (registered with atexit)."};

}  // namespace

PyTypeObject FileBacked_Type = {
    PyVarObject_HEAD_INIT(nullptr, 0)
    "strideweave.FileBacked",            /* tp_name */
    sizeof(FileBackedObject),            /* tp_basicsize */
};

const char* file_backed_directory() {
  if (!g_dir.path.empty() && g_dir.pid == ::getpid()) return g_dir.path.c_str();
  const char* tmp = std::getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  std::string tmpl = std::string(tmp) + "/strideweave-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) {
    PyErr_SetFromErrnoWithFilename(PyExc_OSError, tmp);
    return nullptr;
  }
  g_dir.path = buf.data();
  g_dir.pid = ::getpid();
  return g_dir.path.c_str();
}

int file_backed_module_init(PyObject* module) {
  FileBacked_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  FileBacked_Type.tp_doc =
      "FileBacked(filename=None, *, dtype=DType.Floating, mutable=True)\n\n"
      "Slots in a binary file (native byte order; Floating 8-byte double, Float32/Int32 4 bytes, Bool 1 "
      "byte) inside a per-process temporary directory under $TMPDIR (or /tmp). filename must be a plain "
      "name (no directory parts); None generates a unique one. A new FileBacked is empty and grows, "
      "zero-filled, when it is a move destination. The file is removed on release, on garbage collection "
      "and at exit. No DLPack export.";
  FileBacked_Type.tp_base = &Carrier_Type;
  FileBacked_Type.tp_new = FileBacked_new;
  FileBacked_Type.tp_init = FileBacked_init;
  FileBacked_Type.tp_dealloc = FileBacked_dealloc;
  FileBacked_Type.tp_getset = FileBacked_getset;
  if (add_type(module, &FileBacked_Type, "FileBacked") < 0) return -1;
  PyObject* atexit = PyImport_ImportModule("atexit");
  if (!atexit) return -1;
  PyObject* fn = PyCFunction_New(&cleanup_def, nullptr);
  PyObject* r = fn ? PyObject_CallMethod(atexit, "register", "O", fn) : nullptr;
  Py_XDECREF(fn);
  Py_DECREF(atexit);
  if (!r) return -1;
  Py_DECREF(r);
  return 0;
}

}  // namespace swpy
