// Server's and Request's bases: a batch of requests taken in one call, and a request's reply.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "native.hpp"

#include <structmember.h>

namespace cudaipc_py {

namespace {

ServerObject* as_server(PyObject* o) {
  return reinterpret_cast<ServerObject*>(o);
}
RequestObject* as_request(PyObject* o) {
  return reinterpret_cast<RequestObject*>(o);
}

// ---- Server ---------------------------------------------------------------------------------

PyObject* server_new(PyTypeObject* type, PyObject*, PyObject*) {
  PyObject* o = type->tp_alloc(type, 0);
  if (!o) return nullptr;
  ServerObject* s = as_server(o);
  s->views =
      static_cast<cudaipc_request_view*>(PyMem_Calloc(kMaxBatch, sizeof(cudaipc_request_view)));
  if (!s->views) {
    Py_DECREF(o);
    return PyErr_NoMemory();
  }
  return o;
}

int server_traverse(PyObject* o, visitproc visit, void* arg) {
  Py_VISIT(as_server(o)->shared);
  Py_VISIT(as_server(o)->dict);
  Py_VISIT(as_server(o)->last_shared);
  return 0;
}

int server_clear(PyObject* o) {
  Py_CLEAR(as_server(o)->shared);
  Py_CLEAR(as_server(o)->dict);
  Py_CLEAR(as_server(o)->last_shared);
  return 0;
}

void server_dealloc(PyObject* o) {
  ServerObject* s = as_server(o);
  PyObject_GC_UnTrack(o);
  // The Python subclass's __del__ closes the server; a handle left here (its __init__ failed
  // after opening) is freed so it does not outlive the object.
  if (s->weakrefs) PyObject_ClearWeakRefs(o);
  if (s->h) {
    cudaipc_server_free(s->h);
    s->h = nullptr;
  }
  scratch_free(s->scratch);
  s->scratch = nullptr;
  PyMem_Free(s->views);
  s->views = nullptr;
  server_clear(o);
  // A static base: the subclass's deallocator (CPython's subtype_dealloc) drops the type's
  // reference itself.
  Py_TYPE(o)->tp_free(o);
}

PyObject* server_get_h(PyObject* o, void*) {
  ServerObject* s = as_server(o);
  if (!s->h) Py_RETURN_NONE;
  return PyLong_FromVoidPtr(s->h);
}

// `server._h = handle` once opened; `= None` when closing (the caller frees the handle).
int server_set_h(PyObject* o, PyObject* v, void*) {
  ServerObject* s = as_server(o);
  if (!v || v == Py_None) {
    s->h = nullptr;
    Py_CLEAR(s->last_shared);
    return 0;
  }
  void* p = PyLong_AsVoidPtr(v);
  if (!p && PyErr_Occurred()) return -1;
  s->h = static_cast<cudaipc_server*>(p);
  return 0;
}

PyGetSetDef server_getset[] = {
    {"_h", server_get_h, server_set_h, "the core's server while open, else None", nullptr},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyMemberDef server_members[] = {
    {"_shared", T_OBJECT, offsetof(ServerObject, shared), 0, "pipeline -> its frames' _Shared"},
    {nullptr, 0, 0, 0, nullptr}};

CUDAIPC_PY_HOT PyObject* request_new(PyObject* frame, uint32_t pipeline, PyObject* server) {
  PyTypeObject* type = package.request ? package.request : &RequestType;
  PyObject* o = type->tp_alloc(type, 0);
  if (!o) return nullptr;
  RequestObject* r = as_request(o);
  Py_INCREF(frame);
  r->frame = frame;
  r->pipeline = pipeline;
  Py_INCREF(server);
  r->server = server;
  return o;
}

void remember_shared(ServerObject* s, PyObject* shared, const cudaipc_request_view& v) {
  Py_XSETREF(s->last_shared, Py_NewRef(shared));
  s->last_pipeline = v.pipeline;
  s->last_tensor = v.frame.tensor_id;
  s->last_device = long(v.frame.cuda_device);
}

// The shared description of a pipeline's frames for this view, or made by the Python side
// (_describe) once per format.
CUDAIPC_PY_HOT PyObject* shared_for(ServerObject* s, PyObject* self,
                                    const cudaipc_request_view& v) {
  Ref key(PyLong_FromUnsignedLong(v.pipeline));
  if (!key) return nullptr;
  PyObject* shared = s->shared ? PyDict_GetItemWithError(s->shared, key.get()) : nullptr;
  if (!shared && PyErr_Occurred()) return nullptr;
  // The same object as the last match (held, so not another at its address), for the same
  // pipeline and description: its attributes were read then.
  if (shared && shared == s->last_shared && v.pipeline == s->last_pipeline &&
      v.frame.tensor_id == s->last_tensor && long(v.frame.cuda_device) == s->last_device) {
    Py_INCREF(shared);
    return shared;
  }
  if (shared) {
    static PyObject *tensor_id, *device_id;
    if (!interned(tensor_id, "tensor_id") || !interned(device_id, "device_id")) return nullptr;
    Ref tid(PyObject_GetAttr(shared, tensor_id));
    Ref dev(tid ? PyObject_GetAttr(shared, device_id) : nullptr);
    if (!dev) return nullptr;
    long t = PyLong_AsLong(tid.get()), d = PyLong_AsLong(dev.get());
    if (PyErr_Occurred()) return nullptr;
    if (t == long(v.frame.tensor_id) && d == long(v.frame.cuda_device)) {
      remember_shared(s, shared, v);
      return Py_NewRef(shared);
    }
  }
  PyObject* made = PyObject_CallMethod(self, "_describe", "kNkl", (unsigned long)v.pipeline,
                                       PyLong_FromVoidPtr(v.frame.frame),
                                       (unsigned long)v.frame.tensor_id, (long)v.frame.cuda_device);
  if (made) remember_shared(s, made, v);
  return made;
}

// One cudaipc_server_batch, each request made a Request (each owns its lease from then on, even
// when the call failed part-way); a failure is raised by _batch_failed(status), the pipelines'
// events said by _say_events().
CUDAIPC_PY_HOT PyObject* take(PyObject* self, unsigned long max_batch, uint64_t delay,
                              uint64_t timeout) {
  ServerObject* s = as_server(self);
  if (!s->h) return PyObject_CallMethod(self, "_handle", nullptr);  // raises ClosedError
  uint32_t count = 0, events = 0;
  int rc;
  cudaipc_server* h = s->h;
  // The server's buffer, unless another thread's call uses it now (a model's threads may each take
  // requests, and the Python this call runs may let another in): then one of this call's own.
  cudaipc_request_view one{};
  std::unique_ptr<cudaipc_request_view, decltype(&PyMem_Free)> own(nullptr, PyMem_Free);
  cudaipc_request_view* views = s->views;
  if (s->views_taken) {
    if (max_batch == 1) {
      views = &one;
    } else {
      own.reset(static_cast<cudaipc_request_view*>(
          PyMem_Calloc(max_batch, sizeof(cudaipc_request_view))));
      if (!own) return PyErr_NoMemory();
      views = own.get();
    }
  }
  struct Taken {
    bool* flag;
    ~Taken() {
      if (flag) *flag = false;
    }
  } taken{views == s->views ? &s->views_taken : nullptr};
  if (taken.flag) *taken.flag = true;
  ++s->waiting;
  Py_BEGIN_ALLOW_THREADS rc =
      cudaipc_server_batch(h, uint32_t(max_batch), delay, timeout, views, &count, &events);
  Py_END_ALLOW_THREADS;
  --s->waiting;
  if (count > max_batch) count = uint32_t(max_batch);
  if (!s->h) {
    // Closed by another thread meanwhile (its close() waited for this call to leave the core):
    // what was taken goes back, and the caller hears why.
    for (uint32_t i = 0; i < count; ++i) cudaipc_frame_release(views[i].frame.frame);
    return PyObject_CallMethod(self, "_handle", nullptr);
  }
  Ref out(PyList_New(count));
  uint32_t made = 0;
  if (out) {
    for (; made < count; ++made) {
      const cudaipc_request_view& v = views[made];
      Ref shared(shared_for(s, self, v));
      if (!shared) break;
      Ref frame(frame_new(v.frame, shared.get()));
      if (!frame) {
        ++made;  // frame_new released it
        break;
      }
      PyObject* req = request_new(frame.get(), v.pipeline, self);
      if (!req) {
        ++made;  // the frame object releases it
        break;
      }
      PyList_SET_ITEM(out.get(), made, req);
    }
  }
  if (made < count || !out) {
    for (uint32_t i = made; i < count; ++i) cudaipc_frame_release(views[i].frame.frame);
    return nullptr;
  }
  if (rc) {
    Ref r(PyObject_CallMethod(self, "_batch_failed", "i", rc));
    if (!r) return nullptr;
  }
  if (events) {
    // A pipeline that left takes its description with it (its slot views keep its slots mapped):
    // the one remembered is let go, whichever it was.
    Py_CLEAR(s->last_shared);
    Ref r(PyObject_CallMethod(self, "_say_events", nullptr));
    if (!r) return nullptr;
  }
  return out.release();
}

// _take(max_batch, max_delay_ns, timeout_ns): the requests of one cudaipc_server_batch.
CUDAIPC_PY_HOT PyObject* m_take(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (!arity("_take", nargs, 3)) return nullptr;
  unsigned long max_batch = PyLong_AsUnsignedLong(args[0]);
  uint64_t delay = PyLong_AsUnsignedLongLong(args[1]);
  uint64_t timeout = PyLong_AsUnsignedLongLong(args[2]);
  if (PyErr_Occurred()) return nullptr;
  if (max_batch < 1 || max_batch > kMaxBatch) {
    PyErr_Format(PyExc_ValueError, "a batch of %lu requests (1..%u)", max_batch, kMaxBatch);
    return nullptr;
  }
  return take(self, max_batch, delay, timeout);
}

// A wait of Server.next() lasts this long in C before signals are looked at (Ctrl-C).
constexpr uint64_t kSliceNs = 100'000'000;

uint64_t now_ns() {
  return uint64_t(monotonic_ns());
}

// next(timeout=None): the model loop's call, in C (issue #39): a timeout that is None or a
// non-negative number waits here, in slices; any other is the Python path's to refuse.
CUDAIPC_PY_HOT PyObject* m_next(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                                PyObject* kw) {
  static const char* const names[] = {"timeout"};
  PyObject* timeout;
  if (!parse("next", args, nargs, kw, names, &timeout, 1)) return nullptr;
  bool forever = timeout == Py_None;
  double seconds = 0;
  if (!forever) {
    seconds = PyFloat_Check(timeout) || PyLong_Check(timeout) ? seconds_of(timeout) : -1;
    if (seconds == -1 && PyErr_Occurred()) PyErr_Clear();
    if (!(seconds >= 0) || seconds > 1e9) {  // not a number, negative, NaN or beyond a deadline
      Ref out(PyObject_CallMethod(self, "_wait", "idO", 1, 0.0, timeout));
      if (!out) return nullptr;
      if (PyList_GET_SIZE(out.get()) == 0) Py_RETURN_NONE;
      return Py_NewRef(PyList_GET_ITEM(out.get(), 0));
    }
  }
  const uint64_t wait = forever ? 0 : uint64_t(seconds * 1e9);
  const uint64_t deadline = forever ? 0 : now_ns() + wait;
  for (;;) {
    uint64_t left = kSliceNs;
    if (!forever) {
      const uint64_t now = now_ns();
      left = now >= deadline ? 0 : std::min(kSliceNs, deadline - now);
    }
    Ref out(take(self, 1, 0, left));
    if (!out) return nullptr;
    if (PyList_GET_SIZE(out.get()) > 0) return Py_NewRef(PyList_GET_ITEM(out.get(), 0));
    if (!forever && now_ns() >= deadline) Py_RETURN_NONE;
    if (PyErr_CheckSignals() < 0) return nullptr;
  }
}

// Iterating: next() without timeout until the server is closed (here or by another thread while
// the loop waits) or interrupted, which end the loop instead of raising.
PyObject* server_iternext(PyObject* self) {
  PyObject* got = m_next(self, nullptr, 0, nullptr);
  if (got) return got;
  const bool closed =
      !as_server(self)->h && package.closed_error && PyErr_ExceptionMatches(package.closed_error);
  if (closed || PyErr_ExceptionMatches(PyExc_InterruptedError)) PyErr_Clear();
  return nullptr;
}

// _close(): the handle goes; a thread waiting for requests in it is woken (its call raises
// ClosedError) and waited for first, so the core's server never goes from under a call.
PyObject* m_close(PyObject* self, PyObject*) {
  ServerObject* s = as_server(self);
  cudaipc_server* h = s->h;
  if (!h) Py_RETURN_NONE;
  s->h = nullptr;
  Py_CLEAR(s->last_shared);
  // A waiter is woken within a slice of its wait: one that stays is this thread's own, and the
  // server is then left unfreed (a leak, not a crash).
  const auto wake = [](void* what) {
    cudaipc_server_interrupt(static_cast<cudaipc_server*>(what));
  };
  if (!wake_until_left(s->waiting, wake, h, kCloseWait)) {
    PyErr_Format(PyExc_RuntimeError,
                 "_close: a next() or batch() still waits in the server after %lld s; it is "
                 "closed but not freed",
                 static_cast<long long>(kCloseWait.count() / 1000));
    return nullptr;
  }
  Py_BEGIN_ALLOW_THREADS cudaipc_server_free(h);  // drains the reply channels
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

PyMethodDef server_methods[] = {
    {"_close", m_close, METH_NOARGS,
     "_close(): frees the core's server once no thread waits in it (close())"},
    {"_take", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(m_take)), METH_FASTCALL,
     "_take(max_batch, max_delay_ns, timeout_ns): the requests of one cudaipc_server_batch"},
    {"next", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(m_next)),
     METH_FASTCALL | METH_KEYWORDS,
     "next(timeout=None): the next request of any pipeline, or None when none came within "
     "`timeout` seconds (None: wait)"},
    {nullptr, nullptr, 0, nullptr}};

// ---- Request --------------------------------------------------------------------------------

int request_traverse(PyObject* o, visitproc visit, void* arg) {
  Py_VISIT(as_request(o)->frame);
  Py_VISIT(as_request(o)->server);
  return 0;
}

int request_clear(PyObject* o) {
  Py_CLEAR(as_request(o)->frame);
  Py_CLEAR(as_request(o)->server);
  return 0;
}

CUDAIPC_PY_HOT void request_dealloc(PyObject* o) {
  PyObject_GC_UnTrack(o);
  if (as_request(o)->weakrefs) PyObject_ClearWeakRefs(o);
  request_clear(o);
  // A static base: the subclass's deallocator (CPython's subtype_dealloc) drops the type's
  // reference itself.
  Py_TYPE(o)->tp_free(o);
}

PyMemberDef request_members[] = {
    {"frame", T_OBJECT_EX, offsetof(RequestObject, frame), READONLY,
     "The request's cudaipc.Frame (its metas, pts, ...)"},
    {"pipeline", T_UINT, offsetof(RequestObject, pipeline), READONLY,
     "The number of the pipeline that sent it, in this server"},
    {"_server", T_OBJECT_EX, offsetof(RequestObject, server), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

FrameObject* frame_of(PyObject* self) {
  return reinterpret_cast<FrameObject*>(as_request(self)->frame);
}

PyObject* r_dlpack(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kw) {
  PyObject* f = as_request(self)->frame;
  Ref name(PyUnicode_FromString("__dlpack__"));
  if (!name) return nullptr;
  // The frame's own method (C): the request's export is its frame's.
  PyObject* stack[8];
  Py_ssize_t total = nargs + (kw ? PyTuple_GET_SIZE(kw) : 0);
  if (total > 7) {
    PyErr_SetString(PyExc_TypeError, "__dlpack__ takes at most 4 arguments");
    return nullptr;
  }
  stack[0] = f;
  for (Py_ssize_t i = 0; i < total; ++i) stack[i + 1] = args[i];
  return PyObject_VectorcallMethod(name.get(), stack, size_t(nargs + 1), kw);
}

PyObject* r_dlpack_device(PyObject* self, PyObject*) {
  return frame_dlpack_device(frame_of(self));
}

CUDAIPC_PY_HOT PyObject* r_torch(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                                 PyObject* kw) {
  static const char* const names[] = {"stream"};
  PyObject* stream;
  if (!parse("torch", args, nargs, kw, names, &stream, 1)) return nullptr;
  return frame_torch(frame_of(self), stream);
}

PyObject* r_cupy(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kw) {
  static const char* const names[] = {"stream"};
  PyObject* stream;
  if (!parse("cupy", args, nargs, kw, names, &stream, 1)) return nullptr;
  return frame_cupy(frame_of(self), stream);
}

// reply(*, stream, tensors, detections, classifications, tracks, relations, meta, metas,
// label_names): the common answers (detections as NumPy arrays or torch CUDA tensors, a dict of
// plain fields) in C; any other goes to the Python path, _reply_py, with the same arguments.
CUDAIPC_PY_HOT PyObject* r_reply(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                                 PyObject* kw) {
  static const char* const names[] = {"stream",      "tensors",   "detections", "classifications",
                                      "tracks",      "relations", "meta",       "metas",
                                      "label_names", "after"};
  static PyObject* keys[10];
  PyObject* a[10];
  for (auto& x : a) x = Py_None;
  bool simple = nargs == 0;
  if (simple && kw) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kw); ++k) {
      const int i = name_index(PyTuple_GET_ITEM(kw, k), names, keys, 10);
      if (i < 0) {
        simple = false;
        break;
      }
      a[i] = args[k];
    }
  }
  RequestObject* r = as_request(self);
  if (simple && a[1] == Py_None && a[3] == Py_None && a[4] == Py_None && a[5] == Py_None &&
      a[7] == Py_None && PyObject_TypeCheck(r->server, &ServerType) && frame_of(self)->h) {
    bool sent = true;
    int done = reply_fast(as_server(r->server), r, a[0], a[9], a[2], a[6], a[8], &sent);
    if (done < 0) return nullptr;
    if (done > 0) return PyBool_FromLong(sent);
  }
  Ref name(PyUnicode_FromString("_reply_py"));
  if (!name) return nullptr;
  PyObject* stack[16];
  Py_ssize_t total = nargs + (kw ? PyTuple_GET_SIZE(kw) : 0);
  if (total > 15) {
    PyErr_SetString(PyExc_TypeError, "reply() takes 10 keyword arguments at most");
    return nullptr;
  }
  stack[0] = self;
  for (Py_ssize_t i = 0; i < total; ++i) stack[i + 1] = args[i];
  return PyObject_VectorcallMethod(name.get(), stack, size_t(nargs + 1), kw);
}

#define FASTCALL_KW(f) reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f))

PyMethodDef request_methods[] = {
    {"__dlpack__", FASTCALL_KW(r_dlpack), METH_FASTCALL | METH_KEYWORDS,
     "The frame's DLPack export (Frame.__dlpack__)"},
    {"__dlpack_device__", r_dlpack_device, METH_NOARGS, "(device type, device id) of DLPack"},
    {"torch", FASTCALL_KW(r_torch), METH_FASTCALL | METH_KEYWORDS,
     "torch(stream=None): the frame as a torch tensor (Frame.torch)"},
    {"cupy", FASTCALL_KW(r_cupy), METH_FASTCALL | METH_KEYWORDS,
     "cupy(stream=None): the frame as a cupy array (Frame.cupy)"},
    {"reply", FASTCALL_KW(r_reply), METH_FASTCALL | METH_KEYWORDS,
     "reply(*, stream=None, tensors=None, detections=None, classifications=None, tracks=None, "
     "relations=None, meta=None, metas=None, label_names=None, after=None) -> bool: Sends the "
     "frame's results (the meta keywords of :meth:`Producer.publish`) and releases the frame, "
     "after the work queued on `stream` so far when one is given (CUDA: no CPU wait; tensors of "
     "a torch stream are ordered on it as they are exported), and after the CUDA event `after` "
     "when one is given (recorded after the frame's reads: one query and no GPU work once the "
     "model waited for it, as :meth:`Frame.release`). Detections that are torch tensors on the "
     "GPU (boxes, scores, integer labels, rotation) are not waited for: their addresses go to "
     "the core in one call (no torch op here), which copies them to page-locked memory on "
     "`stream` (default: torch's current stream) and sends the reply once that stream has run "
     "the copies, so the model's thread goes on at once; other results on the GPU are copied to "
     "the host here. Never waits for the filter: a reply it has no room for is sent later, in "
     "order, by the core. Returns False when the reply was given up at once (the filter holds "
     "every reply slot and more replies wait for it: it is gone or stuck), or the request's "
     "pipeline has left (its reply channel is closed; results left on the GPU are queued first, "
     "then counted lost in ``replies_lost``)."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PyTypeObject ServerType = [] {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
  // CPython's static type head; every other slot is zero until set below.
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
#pragma GCC diagnostic pop
  t.tp_name = "cudaipc._native.Server";
  t.tp_basicsize = sizeof(ServerObject);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC;
  t.tp_doc = "A server's handle and batch (cudaipc.Server's base)";
  t.tp_new = server_new;
  t.tp_traverse = server_traverse;
  t.tp_clear = server_clear;
  t.tp_dealloc = server_dealloc;
  t.tp_dictoffset = offsetof(ServerObject, dict);
  t.tp_weaklistoffset = offsetof(ServerObject, weakrefs);
  t.tp_methods = server_methods;
  t.tp_members = server_members;
  t.tp_getset = server_getset;
  t.tp_iter = PyObject_SelfIter;
  t.tp_iternext = server_iternext;
  return t;
}();

PyTypeObject RequestType = [] {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
  // CPython's static type head; every other slot is zero until set below.
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
#pragma GCC diagnostic pop
  t.tp_name = "cudaipc._native.Request";
  t.tp_basicsize = sizeof(RequestObject);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC;
  t.tp_doc = "A request's frame, pipeline and server (cudaipc.Request's base)";
  t.tp_traverse = request_traverse;
  t.tp_clear = request_clear;
  t.tp_dealloc = request_dealloc;
  t.tp_weaklistoffset = offsetof(RequestObject, weakrefs);
  t.tp_methods = request_methods;
  t.tp_members = request_members;
  return t;
}();

}  // namespace cudaipc_py
