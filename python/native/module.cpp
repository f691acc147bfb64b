// The module cudaipc._native: its types, the package's helpers it raises through, and the
// tables of functions the other files define.
#include <cstdarg>
#include <cstring>
#include <iterator>
#include <utility>

#include "native.hpp"

namespace cudaipc_py {

Package package;

namespace {

Torch torch_cache;

PyObject* configure(PyObject*, PyObject* args) {
  PyObject *frame, *request, *from_code, *stream_handle, *closed_error, *end_of_stream,
      *numpy_slot_view;
  if (!PyArg_ParseTuple(args, "O!O!OOOOO", &PyType_Type, &frame, &PyType_Type, &request, &from_code,
                        &stream_handle, &closed_error, &end_of_stream, &numpy_slot_view))
    return nullptr;
  if (!PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(frame), &FrameType) ||
      !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(request), &RequestType)) {
    PyErr_SetString(PyExc_TypeError, "configure: Frame and Request must derive the bases");
    return nullptr;
  }
  PyObject** slots[] = {reinterpret_cast<PyObject**>(&package.frame),
                        reinterpret_cast<PyObject**>(&package.request),
                        &package.from_code,
                        &package.stream_handle,
                        &package.closed_error,
                        &package.end_of_stream,
                        &package.numpy_slot_view};
  PyObject* given[] = {frame,        request,       from_code,      stream_handle,
                       closed_error, end_of_stream, numpy_slot_view};
  // Spare frame objects are of the class configured until now: not handed out as another.
  if (reinterpret_cast<PyTypeObject*>(frame) != package.frame) frame_pool_clear();
  for (size_t i = 0; i < std::size(given); ++i) {
    Py_INCREF(given[i]);
    Py_XSETREF(*slots[i], given[i]);
  }
  frame_pool_install(package.frame);
  Py_RETURN_NONE;
}

// check(status, context): raises the package's exception for a nonzero status (the core's
// message after context), for the statuses the Python side gets back as ints.
PyObject* check(PyObject*, PyObject* const* a, Py_ssize_t n) {
  long long rc;
  if (n < 1 || n > 2) return arity("check", n, 2), nullptr;
  if (!arg_int("check", "status", a[0], INT32_MIN, INT32_MAX, &rc)) return nullptr;
  if (rc) return fail_in(int(rc), n == 2 ? a[1] : Py_None);
  Py_RETURN_NONE;
}

PyObject* last_error_code(PyObject*, PyObject*) {
  return PyLong_FromLong(cudaipc_last_error_code());
}

PyObject* dlpack_exports_alive(PyObject*, PyObject*) {
  return PyLong_FromUnsignedLongLong(cudaipc_dlpack_exports_alive());
}

PyObject* dlpack_views_alive(PyObject*, PyObject*) {
  return PyLong_FromUnsignedLongLong(cudaipc_dlpack_views_alive());
}

PyObject* numpy_read_in_place(PyObject*, PyObject*) {
  return PyLong_FromLong(numpy_arrays_read_in_place());
}

PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(Frame, Request, from_code, stream_handle, ClosedError, EndOfStream, "
     "numpy_slot_view): the package's classes and helpers"},
    {"check", CUDAIPC_FASTCALL(check), METH_FASTCALL,
     "check(status, context=None): raises the package's exception for a nonzero status"},
    {"last_error_code", last_error_code, METH_NOARGS, "the status of this thread's last failure"},
    {"dlpack_exports_alive", dlpack_exports_alive, METH_NOARGS,
     "live DLPack exports (frames and slots) of this process"},
    {"dlpack_views_alive", dlpack_views_alive, METH_NOARGS,
     "live slot views (frame.torch()'s tensors, one per slot) of this process"},
    {"numpy_read_in_place", numpy_read_in_place, METH_NOARGS,
     "how many NumPy result arrays reply() read from their C heads rather than their buffers"},
    {nullptr, nullptr, 0, nullptr}};

void module_free(void*) {
  frame_pool_clear();
}

PyModuleDef module_def = {PyModuleDef_HEAD_INIT,
                          "_native",
                          "cudaipc's compiled binding of the core (issue #39)",
                          -1,
                          methods,
                          nullptr,
                          nullptr,
                          nullptr,
                          module_free};

// The core makes and reads DLPack capsules through these (cudaipc_capsule_api).
void* capsule_new(void* pointer, const char* name, void (*destructor)(void*)) {
  return PyCapsule_New(pointer, name, reinterpret_cast<PyCapsule_Destructor>(destructor));
}
void* capsule_get_pointer(void* capsule, const char* name) {
  return PyCapsule_GetPointer(static_cast<PyObject*>(capsule), name);
}
const char* capsule_get_name(void* capsule) {
  return PyCapsule_GetName(static_cast<PyObject*>(capsule));
}
int capsule_set_name(void* capsule, const char* name) {
  return PyCapsule_SetName(static_cast<PyObject*>(capsule), name);
}
void set_error(void* type, const char* message) {
  PyErr_SetString(static_cast<PyObject*>(type), message);
}
void* save_thread() {
  return PyEval_SaveThread();
}
void restore_thread(void* state) {
  PyEval_RestoreThread(static_cast<PyThreadState*>(state));
}

}  // namespace

PyObject* fail(int status, const char* context) {
  const char* why = cudaipc_last_error();
  Ref msg(context && *context ? PyUnicode_FromFormat("%s: %s", context, why ? why : "")
                              : PyUnicode_FromString(why ? why : ""));
  if (!msg) return nullptr;
  if (!package.from_code) {
    PyErr_SetObject(PyExc_RuntimeError, msg.get());
    return nullptr;
  }
  Ref exc(PyObject_CallFunction(package.from_code, "iO", status, msg.get()));
  if (exc) PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.get())), exc.get());
  return nullptr;
}

PyObject* closed(const char* format, ...) {
  va_list va;
  va_start(va, format);
  Ref msg(PyUnicode_FromFormatV(format, va));
  va_end(va);
  if (msg)
    PyErr_SetObject(package.closed_error ? package.closed_error : PyExc_ValueError, msg.get());
  return nullptr;
}

bool stream_of(PyObject* stream, uintptr_t* out, uint32_t* flags) {
  *flags = 0;
  if (stream == Py_None) {
    *out = kStreamLegacy;
    return true;
  }
  if (PyLong_CheckExact(stream)) {
    long long v = PyLong_AsLongLong(stream);
    if (v == -1 && PyErr_Occurred()) return false;
    if (v == -1) {
      *out = 0;
      *flags = CUDAIPC_DLPACK_NO_SYNC;
      return true;
    }
    if (v == 0) {
      PyErr_SetString(PyExc_ValueError,
                      "stream 0 is ambiguous: pass 1 (legacy default) or 2 (per-thread)");
      return false;
    }
    *out = static_cast<uintptr_t>(v);
    return true;
  }
  // torch's and cupy's stream objects, read here: a Python call per frame saved.
  static PyObject* names[2];
  const char* const texts[] = {"cuda_stream", "ptr"};
  for (int i = 0; i < 2; ++i) {
    PyObject* attr = interned(names[i], texts[i]);
    if (!attr) return false;
    Ref v(PyObject_GetAttr(stream, attr));
    if (v && PyLong_Check(v.get())) {
      *out = static_cast<uintptr_t>(PyLong_AsUnsignedLongLongMask(v.get()));
      return !PyErr_Occurred();
    }
    PyErr_Clear();
  }
  // Anything else: the package's rules and messages (_cuda.stream_handle).
  if (!package.stream_handle) {
    PyErr_SetString(PyExc_TypeError, "a stream object before the package was configured");
    return false;
  }
  Ref v(PyObject_CallOneArg(package.stream_handle, stream));
  if (!v) return false;
  *out = static_cast<uintptr_t>(PyLong_AsUnsignedLongLongMask(v.get()));
  return !PyErr_Occurred();
}

bool event_of(PyObject* event, uintptr_t* out) {
  uint64_t raw = 0;
  if (PyLong_CheckExact(event)) {
    raw = PyLong_AsUnsignedLongLong(event);
    if (raw == static_cast<uint64_t>(-1) && PyErr_Occurred()) {
      PyErr_Format(PyExc_ValueError, "after=%R is no CUDA event handle", event);
      return false;
    }
  } else {
    // torch's Event has cuda_event; cupy's has ptr, which its streams have too: only an Event's.
    static PyObject* names[2];
    const char* const texts[] = {"cuda_event", "ptr"};
    const char* type = Py_TYPE(event)->tp_name;
    const char* dot = std::strrchr(type, '.');
    const bool an_event = std::strcmp(dot ? dot + 1 : type, "Event") == 0;
    bool found = false;
    for (int i = 0; i < 2 && an_event && !found; ++i) {
      PyObject* attr = interned(names[i], texts[i]);
      if (!attr) return false;
      Ref v(PyObject_GetAttr(event, attr));
      if (v && PyLong_Check(v.get())) {
        raw = PyLong_AsUnsignedLongLongMask(v.get());
        if (PyErr_Occurred()) return false;
        found = true;
      } else {
        PyErr_Clear();
      }
    }
    if (!found) {
      PyErr_Format(PyExc_TypeError,
                   "after= takes a CUDA event (torch.cuda.Event, cupy.cuda.Event or its handle as "
                   "an int), not %.100s",
                   type);
      return false;
    }
  }
  if (!raw) {
    PyErr_SetString(PyExc_ValueError,
                    "after=: the event has no CUDA event yet (torch makes it at its first record): "
                    "record it after the frame's reads");
    return false;
  }
  *out = static_cast<uintptr_t>(raw);
  return true;
}

const Torch* torch_api(bool import_it) {
  if (torch_cache.module) return &torch_cache;
  Ref mod;
  {
    Ref name(PyUnicode_FromString("torch"));
    if (!name) return nullptr;
    mod.reset(PyImport_GetModule(name.get()));
    if (!mod) {
      if (PyErr_Occurred()) return nullptr;
      if (!import_it) return nullptr;
      mod.reset(PyImport_Import(name.get()));
      if (!mod) return nullptr;
    }
  }
  Ref c(PyObject_GetAttrString(mod.get(), "_C"));
  if (!c) return nullptr;
  Torch t;
  t.from_dlpack = PyObject_GetAttrString(c.get(), "_from_dlpack");
  t.to_dlpack = PyObject_GetAttrString(c.get(), "_to_dlpack");
  t.raw_stream = PyObject_GetAttrString(c.get(), "_cuda_getCurrentRawStream");
  t.get_device = PyObject_GetAttrString(c.get(), "_cuda_getDevice");
  t.tensor_type = PyObject_GetAttrString(mod.get(), "Tensor");
  PyErr_Clear();  // a torch without one of them: the paths that need it fall back to Python
  t.module = mod.release();
  torch_cache = t;
  return &torch_cache;
}

namespace {

// cupy_backends.cuda.stream exports its cdef functions to other Cython modules in __pyx_capi__,
// each a capsule named by its C signature (Cython's own cimport checks the same name). Taken only
// with that exact signature; any other cupy keeps the Python call.
intptr_t (*cupy_stream_ptr())(int) {
  Ref module(PyImport_ImportModule("cupy_backends.cuda.stream"));
  Ref capi(module ? PyObject_GetAttrString(module.get(), "__pyx_capi__") : nullptr);
  PyObject* capsule = capi && PyDict_Check(capi.get())
                          ? PyDict_GetItemString(capi.get(), "get_stream_ptr")
                          : nullptr;
  intptr_t (*fn)(int) = nullptr;
  if (capsule && PyCapsule_CheckExact(capsule)) {
    const char* name = PyCapsule_GetName(capsule);
    if (name && std::strcmp(name, "intptr_t (int)") == 0)
      fn = reinterpret_cast<intptr_t (*)(int)>(PyCapsule_GetPointer(capsule, name));
  }
  PyErr_Clear();
  if (fn) module.release();  // the function's code stays loaded: its module is never freed
  return fn;
}

}  // namespace

const CuPy* cupy_api() {
  static CuPy cache;
  if (cache.slot_view) return &cache;
  Ref cuda(PyImport_ImportModule("cupy.cuda"));
  Ref consumer(cuda ? PyImport_ImportModule("cudaipc._consumer") : nullptr);
  if (!consumer) return nullptr;
  Ref current(PyObject_GetAttrString(cuda.get(), "get_current_stream"));
  Ref view(current ? PyObject_GetAttrString(consumer.get(), "_cupy_slot_view") : nullptr);
  if (!view) return nullptr;
  intptr_t (*stream_ptr)(int) = cupy_stream_ptr();
  if (!cache.slot_view) {  // the imports let the GIL go: another thread may have been first
    cache.stream_ptr = stream_ptr;
    cache.current_stream = current.release();
    cache.slot_view = view.release();
  }
  return &cache;
}

}  // namespace cudaipc_py

extern "C" PyMODINIT_FUNC PyInit__native(void) {
  using namespace cudaipc_py;
  for (PyTypeObject* t :
       {&FrameType, &RequestType, &ServerType, &ConsumerType, &EventsType, &MetasWriterType,
        &DetectionsArgsType, &AnalyticsArgsType, &ReplyBatchType})
    if (PyType_Ready(t) < 0) return nullptr;
  if (!slot_views_ready()) return nullptr;
  Ref m(PyModule_Create(&module_def));
  if (!m) return nullptr;
  Ref failed(PyErr_NewException("cudaipc._native.CapsuleFailed", nullptr, nullptr));
  if (!failed) return nullptr;
  package.capsule_failed = failed.get();
  Py_INCREF(package.capsule_failed);  // the core raises it for as long as the process lives
  if (PyModule_AddObject(m.get(), "CapsuleFailed", failed.get()) < 0) return nullptr;
  failed.release();
  for (auto [name, type] : {std::pair<const char*, PyTypeObject*>{"Frame", &FrameType},
                            {"Request", &RequestType},
                            {"Server", &ServerType},
                            {"Consumer", &ConsumerType},
                            {"Shared", &SharedType},
                            {"Events", &EventsType},
                            {"MetasWriter", &MetasWriterType},
                            {"DetectionsArgs", &DetectionsArgsType},
                            {"AnalyticsArgs", &AnalyticsArgsType},
                            {"ReplyBatch", &ReplyBatchType}}) {
    Py_INCREF(type);
    if (PyModule_AddObject(m.get(), name, reinterpret_cast<PyObject*>(type)) < 0) {
      Py_DECREF(type);
      return nullptr;
    }
  }
  for (PyMethodDef* table :
       {producer_functions, channel_setup_functions, consumer_functions, server_admin_functions,
        metas_functions, metas_args_functions, wrapped_functions, gst_results_functions})
    if (PyModule_AddFunctions(m.get(), table) < 0) return nullptr;
  cudaipc_capsule_api api{};
  api.capsule_new = capsule_new;
  api.capsule_get_pointer = capsule_get_pointer;
  api.capsule_get_name = capsule_get_name;
  api.capsule_set_name = capsule_set_name;
  api.set_error = set_error;
  api.error_type = package.capsule_failed;
  api.save_thread = save_thread;
  api.restore_thread = restore_thread;
  if (int rc = cudaipc_set_capsule_api(&api)) return fail(rc, "installing the capsule functions");
  return m.release();
}
