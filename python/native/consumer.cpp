// A consumer's calls: the per-frame read (consumer_next) into an Events buffer the reading thread
// owns, what the buffer says when no frame came (a format, the end of stream...), and the calls
// made once per format or on demand (memory kind, stream, held frames, a frame's description).
#include <cstring>
#include <vector>

#include "native.hpp"

namespace cudaipc_py {

namespace {

// The core writes an event and a frame view per read; the caps the event points to stay valid
// until the next read, so they are copied out as soon as Python asks.
struct EventsObject {
  PyObject_HEAD cudaipc_event ev;
  cudaipc_frame_view view;
};

EventsObject* as_events(PyObject* o) {
  return reinterpret_cast<EventsObject*>(o);
}

PyObject* events_new(PyTypeObject* type, PyObject* args, PyObject* kw) {
  if (PyTuple_GET_SIZE(args) || (kw && PyDict_GET_SIZE(kw))) {
    PyErr_SetString(PyExc_TypeError, "Events() takes no arguments");
    return nullptr;
  }
  PyObject* o = type->tp_alloc(type, 0);  // zeroed: no event, no frame
  return o;
}

// A frame read but not handed out (an exception between the read and frame(): a format's
// description failing, a KeyboardInterrupt) is released here, or its lease would be lost for good.
// Frames outlive their consumer's handle, so this is safe after close() too.
CUDAIPC_PY_HOT void drop_unclaimed(EventsObject* e) {
  if (cudaipc_frame* f = e->view.frame) {
    e->view.frame = nullptr;
    e->ev.frame = nullptr;
    cudaipc_frame_release(f);
  }
}

void events_dealloc(PyObject* o) {
  drop_unclaimed(as_events(o));
  Py_TYPE(o)->tp_free(o);
}

PyObject* get_type(PyObject* o, void*) {
  return PyLong_FromLong(as_events(o)->ev.type);
}

// (tensor_id, frame handle, CUDA device or -1) of the last FRAME read.
PyObject* get_view(PyObject* o, void*) {
  const cudaipc_frame_view& v = as_events(o)->view;
  return Py_BuildValue("(kNi)", static_cast<unsigned long>(v.tensor_id),
                       PyLong_FromVoidPtr(v.frame), int(v.cuda_device));
}

// (caps, (dtype, shape, strides), generation) of the last FORMAT read.
PyObject* get_format(PyObject* o, void*) {
  const cudaipc_event& ev = as_events(o)->ev;
  if (ev.type != CUDAIPC_EVENT_FORMAT) {
    PyErr_SetString(PyExc_ValueError, "Events.format: the last event is not a format");
    return nullptr;
  }
  Ref tensor(tensor_tuple(ev.tensor));
  if (!tensor) return nullptr;
  const char* caps = ev.caps ? ev.caps : "";
  return Py_BuildValue("(NOK)", PyUnicode_DecodeUTF8(caps, strlen(caps), "replace"), tensor.get(),
                       static_cast<unsigned long long>(ev.generation));
}

// frame(shared): the Frame of the FRAME read, once; the buffer gives its hold up to it.
PyObject* m_frame(PyObject* o, PyObject* shared) {
  cudaipc_frame_view& v = as_events(o)->view;
  if (v.type != CUDAIPC_EVENT_FRAME || !v.frame) {
    PyErr_SetString(PyExc_ValueError, "Events.frame: no frame read, or it was handed out");
    return nullptr;
  }
  cudaipc_frame_view taken = v;
  v.frame = nullptr;
  as_events(o)->ev.frame = nullptr;
  return frame_new(taken, shared);
}

PyGetSetDef events_getset[] = {
    {"type", get_type, nullptr, "the last event's type (cudaipc_event_type)", nullptr},
    {"view", get_view, nullptr, "(tensor_id, frame handle, device) of the last frame", nullptr},
    {"format", get_format, nullptr, "(caps, (dtype, shape, strides), generation)", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyMethodDef events_methods[] = {
    {"frame", m_frame, METH_O, "frame(shared): the Frame of the frame read"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

CUDAIPC_PY_HOT PyObject* read_frame(cudaipc_consumer* c, uint64_t wait, PyObject* events,
                                    PyObject* shared, long long tensor_id, long long device) {
  EventsObject* e = as_events(events);
  drop_unclaimed(e);
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = cudaipc_consumer_next_frame(c, wait, &e->ev, &e->view);
  Py_END_ALLOW_THREADS if (rc == 0 && e->view.type == CUDAIPC_EVENT_FRAME &&
                           tensor_id == static_cast<long long>(e->view.tensor_id) &&
                           device == static_cast<long long>(e->view.cuda_device)) {
    cudaipc_frame_view taken = e->view;
    e->view.frame = nullptr;
    e->ev.frame = nullptr;
    return frame_new(taken, shared);
  }
  return PyLong_FromLong(rc);
}

namespace {

// consumer_next(h, wait_ns, events, shared, tensor_id, device): read_frame() from Python (the
// reads after the first of a next(), which the Python side makes).
PyObject* consumer_next(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "consumer_next";
  cudaipc_consumer* c;
  uint64_t wait;
  long long tensor_id, device;
  if (!arity(fn, n, 6) || !arg_handle(fn, a[0], &c) || !arg_u64(fn, "wait_ns", a[1], &wait) ||
      !arg_int(fn, "tensor_id", a[4], -1, UINT32_MAX, &tensor_id) ||
      !arg_int(fn, "device", a[5], -2, INT32_MAX, &device))
    return nullptr;
  if (Py_TYPE(a[2]) != &EventsType) {
    PyErr_SetString(PyExc_TypeError, "consumer_next: events must be an Events buffer");
    return nullptr;
  }
  return read_frame(c, wait, a[2], a[3], tensor_id, device);
}

// consumer_held(h, capacity, context): (count, [seq, ...] up to capacity).
PyObject* consumer_held(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "consumer_held";
  cudaipc_consumer* c;
  long long capacity;
  if (!arity(fn, n, 3) || !arg_handle(fn, a[0], &c) ||
      !arg_int(fn, "capacity", a[1], 0, 1 << 16, &capacity))
    return nullptr;
  std::vector<uint64_t> seqs(size_t(capacity) + 1);
  uint32_t count = 0;
  if (int rc = cudaipc_consumer_held(c, &count, seqs.data(), uint32_t(capacity)))
    return fail_in(rc, a[2]);
  uint32_t shown = count < capacity ? count : uint32_t(capacity);
  Ref list(PyList_New(shown));
  if (!list) return nullptr;
  for (uint32_t i = 0; i < shown; ++i) {
    PyObject* s = PyLong_FromUnsignedLongLong(seqs[i]);
    if (!s) return nullptr;
    PyList_SET_ITEM(list.get(), i, s);
  }
  return Py_BuildValue("(kO)", static_cast<unsigned long>(count), list.get());
}

// consumer_counters(h, context): (delivered, skipped, producer_published, producer_dropped,
// gpu_waits, gpu_releases).
PyObject* consumer_counters(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "consumer_counters";
  cudaipc_consumer* c;
  if (!arity(fn, n, 2) || !arg_handle(fn, a[0], &c)) return nullptr;
  cudaipc_consumer_stats k{};
  if (int rc = cudaipc_consumer_counters(c, &k)) return fail_in(rc, a[1]);
  return Py_BuildValue("(KKKKKK)", static_cast<unsigned long long>(k.delivered),
                       static_cast<unsigned long long>(k.skipped),
                       static_cast<unsigned long long>(k.producer_published),
                       static_cast<unsigned long long>(k.producer_dropped),
                       static_cast<unsigned long long>(k.gpu_waits),
                       static_cast<unsigned long long>(k.gpu_releases));
}

// consumer_memory(h, context): the memory kind.
PyObject* consumer_memory(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "consumer_memory";
  cudaipc_consumer* c;
  if (!arity(fn, n, 2) || !arg_handle(fn, a[0], &c)) return nullptr;
  cudaipc_memory memory = CUDAIPC_MEMORY_HOST;
  if (int rc = cudaipc_consumer_memory(c, &memory)) return fail_in(rc, a[1]);
  return PyLong_FromLong(int(memory));
}

PyObject* stream_or_none(void* stream) {
  if (!stream) Py_RETURN_NONE;
  return PyLong_FromVoidPtr(stream);
}

// Asked for only where a caller is handed the stream (cuda_stream, __cuda_array_interface__):
// until then the core knows nobody else queues work on it (cudaipc_consumer_cuda_stream).
PyObject* consumer_cuda_stream(PyObject*, PyObject* h) {
  cudaipc_consumer* c;
  if (!arg_handle("consumer_cuda_stream", h, &c)) return nullptr;
  return stream_or_none(cudaipc_consumer_cuda_stream(c));
}

PyObject* frame_cuda_stream(PyObject*, PyObject* h) {
  cudaipc_frame* f;
  if (!arg_handle("frame_cuda_stream", h, &f)) return nullptr;
  return stream_or_none(cudaipc_frame_cuda_stream(f));
}

PyObject* consumer_interrupt(PyObject*, PyObject* h) {
  cudaipc_consumer* c;
  if (!arg_handle("consumer_interrupt", h, &c)) return nullptr;
  Py_BEGIN_ALLOW_THREADS cudaipc_consumer_interrupt(c);
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

PyObject* frame_written(PyObject*, PyObject* h) {
  cudaipc_frame* f;
  if (!arg_handle("frame_written", h, &f)) return nullptr;
  return PyBool_FromLong(cudaipc_frame_written(f));
}

// frame_tensor(h): (dtype, shape, strides) of a held frame (a request's too).
PyObject* frame_tensor(PyObject*, PyObject* h) {
  cudaipc_frame* f;
  if (!arg_handle("frame_tensor", h, &f)) return nullptr;
  const cudaipc_tensor* t = cudaipc_frame_tensor(f);
  if (!t) return fail(cudaipc_last_error_code(), "a frame's tensor");
  return tensor_tuple(*t);
}

// frame_capsule(h, stream, flags): the frame in a new DLPack capsule; CapsuleFailed as the core
// raised it (callers tell its status with last_error_code).
PyObject* frame_capsule(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "frame_capsule";
  cudaipc_frame* f;
  void* stream;
  long long flags;
  if (!arity(fn, n, 3) || !arg_handle(fn, a[0], &f) || !arg_address(fn, "stream", a[1], &stream) ||
      !arg_int(fn, "flags", a[2], 0, UINT32_MAX, &flags))
    return nullptr;
  return static_cast<PyObject*>(cudaipc_frame_dlpack_capsule(f, stream, uint32_t(flags)));
}

// frame_copy_to_host(h, dst, nbytes): the frame's bytes into host memory at `dst`, complete on
// return. A CUDA frame's copy waits for the producer's write: the GIL is let go meanwhile, and a
// hold of this call's own keeps the frame should another thread release it then.
PyObject* frame_copy_to_host(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "frame_copy_to_host";
  cudaipc_frame* f;
  void* dst;
  uint64_t bytes;
  if (!arity(fn, n, 3) || !arg_handle(fn, a[0], &f) || !arg_address(fn, "dst", a[1], &dst) ||
      !arg_u64(fn, "nbytes", a[2], &bytes))
    return nullptr;
  if (int rc = cudaipc_frame_retain(f)) return fail(rc, "holding a frame to copy it");
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = cudaipc_frame_copy_to_host(f, dst, bytes);
  Py_END_ALLOW_THREADS;
  // The core's message is read before the release makes another call.
  PyObject* out = rc ? fail(rc, "copying a frame to the host") : Py_NewRef(Py_None);
  cudaipc_frame_release(f);
  return out;
}

// frame_metas(h): (address or None, size) of a held frame's meta area.
PyObject* frame_metas(PyObject*, PyObject* h) {
  cudaipc_frame* f;
  if (!arg_handle("frame_metas", h, &f)) return nullptr;
  uint32_t size = 0;
  const void* at = cudaipc_frame_metas(f, &size);
  if (!at) return Py_BuildValue("(Ok)", Py_None, static_cast<unsigned long>(size));
  return Py_BuildValue("(Nk)", PyLong_FromVoidPtr(const_cast<void*>(at)),
                       static_cast<unsigned long>(size));
}

}  // namespace

PyTypeObject EventsType = [] {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
#pragma GCC diagnostic pop
  t.tp_name = "cudaipc._native.Events";
  t.tp_basicsize = sizeof(EventsObject);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "Events(): what a consumer's reads wrote (an event and a frame view)";
  t.tp_new = events_new;
  t.tp_dealloc = events_dealloc;
  t.tp_methods = events_methods;
  t.tp_getset = events_getset;
  return t;
}();

PyMethodDef consumer_functions[] = {
    {"consumer_next", CUDAIPC_FASTCALL(consumer_next), METH_FASTCALL,
     "consumer_next(h, wait_ns, events, shared, tensor_id, device): a Frame, or the status with "
     "the event to read"},
    {"consumer_held", CUDAIPC_FASTCALL(consumer_held), METH_FASTCALL,
     "consumer_held(h, capacity, context): (count, seqs)"},
    {"consumer_counters", CUDAIPC_FASTCALL(consumer_counters), METH_FASTCALL,
     "consumer_counters(h, context): (delivered, skipped, producer_published, producer_dropped, "
     "gpu_waits, gpu_releases)"},
    {"consumer_memory", CUDAIPC_FASTCALL(consumer_memory), METH_FASTCALL,
     "consumer_memory(h, context): the memory kind"},
    {"consumer_cuda_stream", consumer_cuda_stream, METH_O,
     "consumer_cuda_stream(h): the consumer's CUstream, or None"},
    {"frame_cuda_stream", frame_cuda_stream, METH_O,
     "frame_cuda_stream(h): the CUstream its consumer orders reads on, or None"},
    {"consumer_interrupt", consumer_interrupt, METH_O, "consumer_interrupt(h)"},
    {"frame_written", frame_written, METH_O, "frame_written(h): whether the producer wrote it"},
    {"frame_tensor", frame_tensor, METH_O, "frame_tensor(h): (dtype, shape, strides)"},
    {"frame_capsule", CUDAIPC_FASTCALL(frame_capsule), METH_FASTCALL,
     "frame_capsule(h, stream, flags): the frame as a DLPack capsule"},
    {"frame_copy_to_host", CUDAIPC_FASTCALL(frame_copy_to_host), METH_FASTCALL,
     "frame_copy_to_host(h, dst, nbytes): the frame's bytes into host memory at dst"},
    {"frame_metas", frame_metas, METH_O, "frame_metas(h): (address or None, size)"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace cudaipc_py
