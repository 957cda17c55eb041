// FileBacked: slots in a binary file (native byte order; Floating as 8-byte
// double, Float32 and Int32 as 4 bytes).
// - Temporary (the constructor, new_like, allocate_like): in the
//   per-process temporary directory (sw::TempDirectory under
//   tempfile.gettempdir()) or in a directory the caller names. A new one is
//   empty and grows (zero-filled) when used as a move destination. The file
//   is removed on release, on garbage collection and at exit: the atexit
//   hook, in a forked multiprocessing worker a multiprocessing finalizer
//   (workers leave through os._exit, past atexit), and the directory's C++
//   destructor as a last resort. Across fork it behaves like memory (the
//   engine's copy on first write, sw::FileStore::unshare).
// - A user's file (FileBacked.open / FileBacked.create): never removed,
//   shared like any file; an opened one is a fixed region of the file.
#include <cerrno>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dtype_object.hpp"
#include "carrier_object.hpp"
#include "module.hpp"
#include "module_state.hpp"
#include "util/args.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/compat.hpp"
#include "files/store.hpp"
#include "util/type_object.hpp"

namespace swpy {

namespace {

FileBackedObject* as_fb(PyObject* o) { return reinterpret_cast<FileBackedObject*>(o); }
FileBackedObject* as_fb(CarrierObject* o) { return reinterpret_cast<FileBackedObject*>(o); }

sw::FileStore& store() { return module_state.files; }

// A dtype argument this kind stores (a NumPy dtype becomes its DType). 0 / -1.
int check_dtype(PyObject*& dtype) { return carrier_dtype_arg(sw::CarrierKind::FileBacked, &dtype); }

int64_t item_bytes(FileBackedObject* o) { return sw::codec::slot_bytes(dtype_code(o->dtype)); }

// A str or path-like argument as a file-system string (bytes rejected, as
// for the filename). what names the argument in the TypeError; none_ok
// says whether the message offers None.
int fs_string(PyObject* arg, const char* what, std::string* out, bool none_ok = true) {
  Ref fs = Ref::steal(PyOS_FSPath(arg));
  if (!fs && !PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
  if (!fs || !PyUnicode_Check(fs.get())) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "FileBacked %s must be %s, not %.100s", what,
                 none_ok ? "a str, a path-like object or None" : "a str or a path-like object", type_name(arg));
    return -1;
  }
  Ref bytes = Ref::steal(PyUnicode_EncodeFSDefault(fs.get()));
  if (!bytes) return -1;
  out->assign(PyBytes_AS_STRING(bytes.get()), static_cast<size_t>(PyBytes_GET_SIZE(bytes.get())));
  if (out->find('\0') != std::string::npos) {
    PyErr_Format(PyExc_ValueError, "FileBacked %s %R contains a NUL character", what, arg);
    return -1;
  }
  return 0;
}

// Validates a user filename: a plain name inside the directory.
int parse_filename(PyObject* filename, std::string* out) {
  std::string name;
  if (fs_string(filename, "filename", &name) < 0) {
    if (PyErr_ExceptionMatches(PyExc_ValueError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_ValueError, "invalid FileBacked filename %R", filename);
    }
    return -1;
  }
  switch (sw::check_file_name(name)) {
    case sw::FileNameProblem::None:
      *out = std::move(name);
      return 0;
    case sw::FileNameProblem::Invalid:
      PyErr_Format(PyExc_ValueError, "invalid FileBacked filename %R", filename);
      return -1;
    case sw::FileNameProblem::HasDirectoryParts:
      break;
  }
  PyErr_Format(PyExc_ValueError,
               "FileBacked filename %R must not contain directory parts; pass the directory as directory=", filename);
  return -1;
}

// Validates directory=: an existing directory. A missing one raises
// FileNotFoundError, a non-directory NotADirectoryError (both OSError).
int parse_directory(PyObject* directory, std::string* out) {
  std::string dir;
  if (fs_string(directory, "directory", &dir) < 0) return -1;
  return engine_call_at(dir, [&] { *out = sw::resolve_directory(dir); });
}

// In a forked multiprocessing worker: cleanup at the worker's exit, which
// goes through multiprocessing's finalizers and then os._exit (no atexit).
// Registered once per process, at its first file; best effort (a plain
// os.fork() child that exits normally still runs the inherited atexit hook).
void hook_child_exit() {
  if (!store().needs_exit_hook()) return;
  ErrorGuard keep;  // never fails the construction
  Ref name = Ref::steal(PyUnicode_FromString("multiprocessing.util"));
  if (!name) return;
  Ref mp_util = Ref::steal(PyImport_GetModule(name.get()));
  if (!mp_util) return;  // multiprocessing not in use: not a worker
  Ref finalize = Ref::steal(PyObject_GetAttrString(mp_util.get(), "Finalize"));
  Ref kwargs = Ref::steal(Py_BuildValue("{s:i}", "exitpriority", -100));
  Ref args = Ref::steal(Py_BuildValue("(OO)", Py_None, module_state.file_cleanup));
  if (!finalize || !kwargs || !args) return;
  Ref r = Ref::steal(PyObject_Call(finalize.get(), args.get(), kwargs.get()));
}

// tempfile.gettempdir() as the file store's base directory; throws
// PythonError with the exception set.
std::string temp_base() {
  Ref tempfile = Ref::steal(PyImport_ImportModule("tempfile"));
  Ref base = tempfile ? Ref::steal(PyObject_CallMethod(tempfile.get(), "gettempdir", nullptr)) : Ref();
  std::string b;
  if (!base || fs_string(base.get(), "temporary directory", &b) < 0) throw PythonError{};
  return b;
}

// The first FileBacked of a process sweeps the per-process directories of
// dead processes under tempfile.gettempdir(); a temporary file in the
// per-process directory does so when it creates that directory, the other
// kinds (directory=, FileBacked.open/create) here. Never fails the caller.
void sweep_dead_directories() {
  ErrorGuard keep;  // no usable temporary directory: nothing to sweep (the error is dropped)
  engine_call([] { store().sweep_once(temp_base); });
}

// Creates the file of a fresh object (no file yet) under name (or a
// generated unique name when NULL) in directory (or the per-process
// directory when NULL).
int fb_create(FileBackedObject* o, const std::string* name, const std::string* directory, PyObject* dtype,
              bool mutable_) {
  std::string path;
  if (directory) sweep_dead_directories();
  if (engine_call_at(std::string(), [&] { path = store().create(o->file, o, name, directory, temp_base); }) < 0)
    return -1;
  PyObject* p = PyUnicode_DecodeFSDefault(path.c_str());
  if (!p) {
    store().close(o->file);
    return -1;
  }
  Py_XSETREF(o->path, p);
  o->user_directory = directory != nullptr;
  Py_SETREF(o->dtype, Py_NewRef(dtype));
  o->size = 0;
  o->base.constructed_mutable = mutable_;
  hook_child_exit();
  return 0;
}

int fb_resize(FileBackedObject* o, Py_ssize_t n) {
  if (engine_call_at(o->file.path(), [&] { o->file.resize(sw::file_slot_bytes(n, static_cast<int>(item_bytes(o)))); }) <
      0)
    return -1;
  o->size = n;
  return 0;
}


// A fresh instance of type (FileBacked or a subclass) with no file yet;
// Python __init__ of a subclass is not run.
Ref fb_alloc(PyTypeObject* type) {
  Ref args = Ref::steal(PyTuple_New(0));
  if (!args) return Ref();
  Ref self = Ref::steal(type->tp_new(type, args.get(), nullptr));
  if (!self) return Ref();
  if (!PyObject_TypeCheck(self.get(), &FileBacked_Type)) {
    PyErr_Format(PyExc_TypeError, "%s.__new__ did not return a FileBacked carrier", type_name(type));
    return Ref();
  }
  return self;
}

// Fresh file-backed instance of type (the receiver's exact class) with n
// zero slots, in directory (NULL: the per-process directory). Python
// __init__ of a subclass is not run.
PyObject* fb_make(PyTypeObject* type, Py_ssize_t n, PyObject* dtype, bool mutable_, const std::string* directory) {
  Ref self = fb_alloc(type);
  if (!self) return nullptr;
  // On failure the Ref's DECREF runs dealloc, which removes a created file.
  if (fb_create(as_fb(self.get()), nullptr, directory, dtype, mutable_) < 0) return nullptr;
  if (n > 0 && fb_resize(as_fb(self.get()), n) < 0) return nullptr;
  return self.release();
}

// fb_make in the receiver's directory: a user directory= is inherited, the
// per-process directory is this process's.
PyObject* fb_make_like(FileBackedObject* c, Py_ssize_t n, PyObject* dtype, bool mutable_) {
  if (!c->user_directory || !c->path) return fb_make(Py_TYPE(c), n, dtype, mutable_, nullptr);
  Ref bytes = Ref::steal(PyUnicode_EncodeFSDefault(c->path));
  if (!bytes) return nullptr;
  const std::string dir = sw::parent_directory(
      std::string(PyBytes_AS_STRING(bytes.get()), static_cast<size_t>(PyBytes_GET_SIZE(bytes.get()))));
  return fb_make(Py_TYPE(c), n, dtype, mutable_, &dir);
}

// ------------------------------------------------------------------ vtable

sw::DTypeCode vt_dtype_code(CarrierObject* o) { return dtype_code(as_fb(o)->dtype); }
Py_ssize_t vt_size(CarrierObject* o) { return as_fb(o)->size; }

PyObject* vt_get(CarrierObject* c, Py_ssize_t i) {
  FileBackedObject* o = as_fb(c);
  int64_t item = item_bytes(o);
  unsigned char buf[sw::codec::kMaxSlotBytes];
  if (engine_call_at(o->file.path(), [&] { o->file.read(i * item, buf, item); }) < 0) return nullptr;
  return decode_slot(dtype_code(o->dtype), buf);
}

int vt_set(CarrierObject* c, Py_ssize_t i, PyObject* v) {
  FileBackedObject* o = as_fb(c);
  int64_t item = item_bytes(o);
  unsigned char buf[sw::codec::kMaxSlotBytes];
  if (encode_slot(dtype_code(o->dtype), v, buf) < 0) return -1;
  // Conversion may have run Python code that released or shrank us.
  if (!o->file.is_open() || i >= o->size) {
    PyErr_SetString(PyExc_RuntimeError, "FileBacked carrier changed during the write");
    return -1;
  }
  return engine_call_at(o->file.path(), [&] { o->file.write(i * item, buf, item); });
}

// o->path := the file's current path while it is open (a temporary file's
// changes when a forked process makes its private copy). 0 / -1.
int refresh_path(FileBackedObject* o) {
  if (!o->file.is_open()) return 0;
  PyObject* p = PyUnicode_DecodeFSDefault(o->file.path().c_str());
  if (!p) return -1;
  Py_XSETREF(o->path, p);
  return 0;
}

void vt_release(CarrierObject* c) {
  FileBackedObject* o = as_fb(c);
  {
    ErrorGuard keep;  // release never fails: the old path stays on error
    if (refresh_path(o) < 0) PyErr_Clear();
  }
  store().close(o->file);
  o->size = 0;
}

PyObject* vt_new_like(CarrierObject* c, PyObject* values, bool mutable_, PyObject* dtype) {
  if (!dtype) dtype = as_fb(c)->dtype;  // kept after release
  else if (check_dtype(dtype) < 0) return nullptr;
  // Encode everything before touching the file system.
  std::vector<unsigned char> bytes;
  const Py_ssize_t n = carrier_encode_values(values, dtype_code(dtype), &bytes);
  if (n < 0) return nullptr;
  Ref r = Ref::steal(fb_make_like(as_fb(c), 0, dtype, mutable_));
  if (!r) return nullptr;
  FileBackedObject* o = as_fb(r.get());
  if (n > 0 && engine_call_at(o->file.path(), [&] { o->file.write(0, bytes.data(), static_cast<int64_t>(bytes.size())); }) < 0)
    return nullptr;
  o->size = n;
  return r.release();
}

PyObject* vt_allocate_like(CarrierObject* c, Py_ssize_t n, bool mutable_, PyObject* dtype, bool) {
  // Growing a file zero-fills it for free, so empty=True changes nothing.
  if (!dtype) dtype = as_fb(c)->dtype;
  else if (check_dtype(dtype) < 0) return nullptr;
  return fb_make_like(as_fb(c), n, dtype, mutable_);
}

int vt_reserve(CarrierObject* c, Py_ssize_t n) {
  FileBackedObject* o = as_fb(c);
  if (o->size != 0) return 0;  // only an empty destination grows
  // An opened region never grows: the bytes after it are the user's.
  if (o->file.is_open() && !o->file.resizable()) return 0;
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
  o->path = nullptr;
  o->user_directory = false;
  o->size = 0;
  return self;
}

int FileBacked_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"filename", "dtype", "mutable", "directory", nullptr};
  PyObject* filename = Py_None;
  PyObject* dtype = dtype_singleton(sw::DTypeCode::Floating);
  PyObject* directory = Py_None;
  int mutable_ = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O$OpO:FileBacked", const_cast<char**>(kw), &filename, &dtype,
                                   &mutable_, &directory))
    return -1;
  FileBackedObject* o = as_fb(self);
  if (o->path || o->base.released) {
    PyErr_SetString(PyExc_RuntimeError, "FileBacked.__init__() cannot be called twice");
    return -1;
  }
  if (check_dtype(dtype) < 0) return -1;
  std::string name, dir;
  if (filename != Py_None && parse_filename(filename, &name) < 0) return -1;
  if (directory != Py_None && parse_directory(directory, &dir) < 0) return -1;
  return fb_create(o, filename != Py_None ? &name : nullptr, directory != Py_None ? &dir : nullptr, dtype,
                   mutable_ != 0);
}

void FileBacked_dealloc(PyObject* self) {
  FileBackedObject* o = as_fb(self);
  store().close(o->file);
  o->file.~FileStorage();
  Py_CLEAR(o->path);
  Py_CLEAR(o->dtype);
  carrier_dealloc(self);
}

PyObject* FileBacked_get_path(PyObject* self, void*) {
  FileBackedObject* o = as_fb(self);
  if (refresh_path(o) < 0) return nullptr;
  if (!o->path) Py_RETURN_NONE;
  // After release the file is gone; the path still names where it was.
  Ref pathlib = Ref::steal(PyImport_ImportModule("pathlib"));
  if (!pathlib) return nullptr;
  return PyObject_CallMethod(pathlib.get(), "Path", "O", o->path);
}

// ------------------------------------------------------ a user's files

// dtype= of open()/create(): required, keyword-only (PyArg cannot require a
// keyword-only argument); replaced by its DType singleton (by reference: a
// NumPy dtype must not be read as a DType afterwards). 0 / -1.
int required_dtype(PyObject*& dtype, const char* fn) {
  if (!dtype) {
    PyErr_Format(PyExc_TypeError, "%s() missing required keyword-only argument: 'dtype'", fn);
    return -1;
  }
  return check_dtype(dtype);
}

int slots_arg(PyObject* o, void* out) { return ssize_arg(o, static_cast<Py_ssize_t*>(out), "slots"); }

// The path argument of open()/create(), made absolute (a later chdir()
// changes nothing). 0 / -1.
int user_path(PyObject* arg, std::string* out) {
  std::string p;
  if (fs_string(arg, "path", &p, false) < 0) return -1;
  if (p.empty()) {
    PyErr_SetString(PyExc_ValueError, "FileBacked path must not be empty");
    return -1;
  }
  return engine_call_at(p, [&] { *out = sw::absolute_path(p); });
}

// Opens or creates a user's file at path (f): a failure is the OSError of
// the errno subclass naming path (engine_call_at), but ValueError for a
// file that is not a regular file (EINVAL from FileStorage::open_existing).
template <class F>
int user_file_call(const std::string& path, F&& f) {
  if (engine_call_at(path, std::forward<F>(f)) == 0) return 0;
  if (PyErr_ExceptionMatches(PyExc_OSError)) {
    Ref exc = Ref::steal(compat::take_raised());
    PyObject* err = reinterpret_cast<PyOSErrorObject*>(exc.get())->myerrno;
    if (err && PyLong_Check(err) && PyLong_AsLong(err) == EINVAL) {
      PyErr_Format(PyExc_ValueError, "FileBacked needs a regular file: '%s' is not one", path.c_str());
      return -1;
    }
    compat::restore_raised(exc.release());
  }
  return -1;
}

// Fills the fresh object o (its file open) as a user's file of n slots.
void fill_user_file(FileBackedObject* o, PyObject* path, PyObject* dtype, Py_ssize_t n, bool mutable_) {
  Py_XSETREF(o->path, path);
  Py_SETREF(o->dtype, Py_NewRef(dtype));
  o->size = n;
  o->user_directory = false;
  o->base.constructed_mutable = mutable_;
}

// A fresh object of cls (no file yet) for a user's file at path, and path
// as a str; the process's first FileBacked sweeps first. False with an
// exception set.
bool user_file_object(PyObject* cls, const std::string& path, Ref* self, Ref* py_path) {
  sweep_dead_directories();
  *self = fb_alloc(reinterpret_cast<PyTypeObject*>(cls));
  if (!*self) return false;
  *py_path = Ref::steal(PyUnicode_DecodeFSDefault(path.c_str()));
  return static_cast<bool>(*py_path);
}

PyObject* FileBacked_open(PyObject* cls, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"path", "dtype", "offset", "slots", "mutable", nullptr};
  PyObject* path_arg;
  PyObject* dtype = nullptr;
  PyObject* slots_obj = Py_None;
  Py_ssize_t offset = 0;
  int mutable_ = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OO&Op:open", const_cast<char**>(kw), &path_arg, &dtype,
                                   offset_arg, &offset, &slots_obj, &mutable_))
    return nullptr;
  if (required_dtype(dtype, "FileBacked.open") < 0) return nullptr;
  std::optional<int64_t> slots;
  if (slots_obj != Py_None) {
    Py_ssize_t n;
    if (!slots_arg(slots_obj, &n)) return nullptr;
    slots = n;
  }
  const int item = sw::itemsize(dtype_code(dtype));
  std::string path;
  // The arguments are checked before the file system is touched.
  if (engine_call([&] { sw::check_region_arguments(offset, slots, item); }) < 0 || user_path(path_arg, &path) < 0)
    return nullptr;
  Ref self, py_path;
  if (!user_file_object(cls, path, &self, &py_path)) return nullptr;
  FileBackedObject* o = as_fb(self.get());
  sw::FileRegion region{};
  if (user_file_call(path, [&] {
        const int64_t file_bytes = o->file.open_existing(path, mutable_ != 0);
        region = sw::plan_file_region(path, file_bytes, offset, slots, item);
        o->file.set_region(region.base, region.slots * item);
      }) < 0)
    return nullptr;
  fill_user_file(o, py_path.release(), dtype, static_cast<Py_ssize_t>(region.slots), mutable_ != 0);
  return self.release();
}

PyObject* FileBacked_create_file(PyObject* cls, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"path", "slots", "dtype", nullptr};
  PyObject* path_arg;
  PyObject* dtype = nullptr;
  Py_ssize_t n;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO&|$O:create", const_cast<char**>(kw), &path_arg, slots_arg, &n,
                                   &dtype))
    return nullptr;
  if (required_dtype(dtype, "FileBacked.create") < 0) return nullptr;
  if (n < 0) {
    PyErr_Format(PyExc_ValueError, "FileBacked.create slots must be non-negative, not %zd", n);
    return nullptr;
  }
  int64_t bytes = 0;
  std::string path;
  if (engine_call([&] { bytes = sw::file_slot_bytes(n, sw::itemsize(dtype_code(dtype))); }) < 0 ||
      user_path(path_arg, &path) < 0)
    return nullptr;
  Ref self, py_path;
  if (!user_file_object(cls, path, &self, &py_path)) return nullptr;
  FileBackedObject* o = as_fb(self.get());
  if (user_file_call(path, [&] { o->file.create_persistent(path, bytes); }) < 0) return nullptr;
  fill_user_file(o, py_path.release(), dtype, n, true);
  return self.release();
}

PyMethodDef FileBacked_methods[] = {
    {"open", method_cast(FileBacked_open),
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "open($cls, /, path, *, dtype, offset=0, slots=None, mutable=False)\n--\n\n"
     "A FileBacked over a region of an existing file, without copying: slot 0 at byte offset (a multiple of the "
     "item size), slots slots (None: the rest of the file, a whole number of slots). Read-only unless "
     "mutable=True (writes then reach the file). The file is never removed and is shared like any file, "
     "across fork too; release() only closes it. The region has a fixed size."},
    {"create", method_cast(FileBacked_create_file),
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "create($cls, /, path, slots, *, dtype)\n--\n\n"
     "A FileBacked over a new file at path (an existing one: FileExistsError) of slots zero slots. The file "
     "persists: never removed at release, garbage collection or exit, and shared like any file across fork."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef FileBacked_getset[] = {
    {"path", FileBacked_get_path, nullptr, "pathlib.Path of the backing file (where it was, after release).",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

// Exit hook (atexit; multiprocessing finalizer in a forked worker): remove
// this process's live files and its directory. Idempotent.
PyObject* cleanup(PyObject*, PyObject*) {
  store().close_all([](void* owner) {
    FileBackedObject* o = static_cast<FileBackedObject*>(owner);
    o->size = 0;
    o->base.released = true;  // later reads say "released", not EBADF
  });
  Py_RETURN_NONE;
}

// Before fork: make sure this process has its directory, so a forked child's
// directory nests inside it and goes with this process's sweep even when
// the child is killed (Pool.terminate()) before its own cleanup. Errors are
// ignored: the child then creates its directory under the base.
PyObject* before_fork(PyObject*, PyObject*) {
  {
    ErrorGuard keep;  // a failure is dropped: the child then makes its own directory
    engine_call([] { store().prepare_fork(temp_base); });
  }
  Py_RETURN_NONE;
}

PyMethodDef cleanup_def = {"_file_backed_cleanup", cleanup, METH_NOARGS,
                           "Removes this process's FileBacked files and directory (exit hook)."};
PyMethodDef before_fork_def = {"_file_backed_before_fork", before_fork, METH_NOARGS,
                               "Prepares the FileBacked directory a forked child nests its own in."};

// Registers the exit and fork hooks. 0 / -1.
int register_hooks() {
  module_state.file_cleanup = PyCFunction_New(&cleanup_def, nullptr);  // module lifetime
  if (!module_state.file_cleanup) return -1;
  Ref atexit = Ref::steal(PyImport_ImportModule("atexit"));
  if (!atexit) return -1;
  Ref r = Ref::steal(PyObject_CallMethod(atexit.get(), "register", "O", module_state.file_cleanup));
  if (!r) return -1;
  store().mark_exit_hooked();
  Ref before = Ref::steal(PyCFunction_New(&before_fork_def, nullptr));
  Ref os = Ref::steal(PyImport_ImportModule("os"));
  if (!before || !os) return -1;
  Ref reg = Ref::steal(PyObject_GetAttrString(os.get(), "register_at_fork"));
  Ref args = Ref::steal(PyTuple_New(0));
  Ref kwargs = Ref::steal(Py_BuildValue("{s:O}", "before", before.get()));
  if (!reg || !args || !kwargs) return -1;
  r = Ref::steal(PyObject_Call(reg.get(), args.get(), kwargs.get()));
  return r ? 0 : -1;
}

}  // namespace

PyTypeObject FileBacked_Type = static_type("strideweave.FileBacked", sizeof(FileBackedObject));

int file_backed_module_init(PyObject* module) {
  FileBacked_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  FileBacked_Type.tp_doc =
      "FileBacked(filename=None, *, dtype=DType.Floating, mutable=True, directory=None)\n\n"
      "Slots in a binary file (native byte order; Floating 8-byte double, Float32/Int32 4 bytes; no other "
      "dtype: ValueError). The file lives in directory when given (an existing directory, str or path-like; "
      "a missing one raises FileNotFoundError, a non-directory NotADirectoryError), else in a per-process "
      "temporary directory under tempfile.gettempdir() (so TMPDIR is honoured), re-created if it vanished. "
      "filename must be a plain name (no directory parts: ValueError; an existing file: FileExistsError); "
      "None generates a unique one. A new FileBacked is empty and grows, zero-filled, when it is a move "
      "destination; new_like/allocate_like results land in the receiver's directory (a temporary directory "
      "for a user's file). Such a temporary file behaves like memory: removed on release, on garbage "
      "collection and at exit (forked multiprocessing workers included), private to each process after "
      "fork() (the first write in a process copies it), and swept by the next process when its process died "
      "without cleaning up. FileBacked.open and FileBacked.create use files at a user's path instead, never "
      "removed. No DLPack export.";
  FileBacked_Type.tp_base = &Carrier_Type;
  FileBacked_Type.tp_new = FileBacked_new;
  FileBacked_Type.tp_init = FileBacked_init;
  FileBacked_Type.tp_dealloc = FileBacked_dealloc;
  FileBacked_Type.tp_getset = FileBacked_getset;
  FileBacked_Type.tp_methods = FileBacked_methods;
  if (add_type(module, &FileBacked_Type, "FileBacked") < 0) return -1;
  return register_hooks();
}

}  // namespace swpy
