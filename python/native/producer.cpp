// A producer's calls (cudaipc.Producer and its WritableFrame): publish, the borrowed slot's
// begin/commit/abort, its DLPack export and meta area, formats, stream control. The per-frame ones
// take plain ints and build the core's structs on the C stack, so a frame costs no Python-side
// packing.
#include "native.hpp"

namespace cudaipc_py {

namespace {

// Statuses the Python side gives no context for are ignored (a close that ends the stream anyway,
// an abort on the way to another exception); with a context they raise.
PyObject* done(int rc, PyObject* context) {
  if (rc && context != Py_None) return fail_in(rc, context);
  Py_RETURN_NONE;
}

// producer_publish(h, capsule, stream, flags, pts, duration, metas, metas_size): the publish
// result (>= 0) or minus the status, as cudaipc_producer_publish_capsule returns them.
PyObject* producer_publish(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "producer_publish";
  ProducerCall p;
  void *stream, *metas;
  long long flags, metas_size;
  uint64_t pts, duration;
  if (!arity(fn, n, 8) || !p.enter(fn, a[0]) || !arg_address(fn, "stream", a[2], &stream) ||
      !arg_int(fn, "flags", a[3], 0, UINT32_MAX, &flags) || !arg_time(fn, "pts", a[4], &pts) ||
      !arg_time(fn, "duration", a[5], &duration) || !arg_address(fn, "metas", a[6], &metas) ||
      !arg_int(fn, "metas_size", a[7], 0, UINT32_MAX, &metas_size))
    return nullptr;
  if (!PyCapsule_CheckExact(a[1])) {
    PyErr_Format(PyExc_TypeError, "%s: a DLPack capsule, not %.100s", fn, Py_TYPE(a[1])->tp_name);
    return nullptr;
  }
  if (!metas && metas_size) {
    PyErr_Format(PyExc_ValueError, "%s: %lld bytes of metas at NULL", fn, metas_size);
    return nullptr;
  }
  // The GIL stays: the core lets it go itself while it waits for a slot.
  int r = cudaipc_producer_publish_capsule(p.get(), a[1], stream, uint32_t(flags), pts, duration,
                                           metas, uint32_t(metas_size));
  if (PyErr_Occurred()) return nullptr;
  // A wait for a slot that the close woke: the caller hears why.
  if (r != CUDAIPC_PUBLISHED && r != CUDAIPC_DROPPED && p.closed_meanwhile(fn)) return nullptr;
  return PyLong_FromLong(r);
}

// capsule_describe(capsule, context): (dtype, shape, strides) of the tensor in a DLPack capsule.
PyObject* capsule_describe(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "capsule_describe";
  if (!arity(fn, n, 2)) return nullptr;
  if (!PyCapsule_CheckExact(a[0])) {
    PyErr_Format(PyExc_TypeError, "%s: a DLPack capsule, not %.100s", fn, Py_TYPE(a[0])->tp_name);
    return nullptr;
  }
  cudaipc_tensor t{};
  int32_t type = 0, id = 0;
  int rc = cudaipc_capsule_describe(a[0], &t, &type, &id);
  if (PyErr_Occurred()) return nullptr;
  if (rc) return fail_in(rc, a[1]);
  return tensor_tuple(t);
}

// producer_set_format(h, caps, dtype, shape, strides, size, planes, context): planes a sequence of
// (offset, pitch).
PyObject* producer_set_format(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "producer_set_format";
  ProducerCall p;
  long long dtype;
  uint64_t size;
  if (!arity(fn, n, 8) || !p.enter(fn, a[0])) return nullptr;
  const char* caps = arg_str(fn, "caps", a[1]);
  if (!caps || !arg_int(fn, "dtype", a[2], 0, UINT32_MAX, &dtype) ||
      !arg_u64(fn, "size", a[5], &size))
    return nullptr;
  cudaipc_tensor t{};
  t.dtype = uint32_t(dtype);
  t.size = size;
  Ref shape(PySequence_Fast(a[3], "producer_set_format: shape must be a sequence"));
  Ref strides(PySequence_Fast(a[4], "producer_set_format: strides must be a sequence"));
  Ref planes(PySequence_Fast(a[6], "producer_set_format: planes must be a sequence"));
  if (!shape || !strides || !planes) return nullptr;
  Py_ssize_t rank = PySequence_Fast_GET_SIZE(shape.get());
  if (rank < 1 || rank > CUDAIPC_MAX_RANK || PySequence_Fast_GET_SIZE(strides.get()) != rank) {
    PyErr_Format(PyExc_ValueError, "%s: rank 1 to %d, as many strides as dimensions", fn,
                 CUDAIPC_MAX_RANK);
    return nullptr;
  }
  t.rank = uint32_t(rank);
  for (Py_ssize_t i = 0; i < rank; ++i) {
    long long d, s;
    if (!arg_int(fn, "a dimension", PySequence_Fast_GET_ITEM(shape.get(), i), 1, INT64_MAX, &d) ||
        !arg_int(fn, "a stride", PySequence_Fast_GET_ITEM(strides.get(), i), INT64_MIN, INT64_MAX,
                 &s))
      return nullptr;
    t.shape[i] = d;
    t.strides[i] = s;
  }
  Py_ssize_t np = PySequence_Fast_GET_SIZE(planes.get());
  if (np > CUDAIPC_MAX_PLANES) {
    PyErr_Format(PyExc_ValueError, "%s: at most %d planes", fn, CUDAIPC_MAX_PLANES);
    return nullptr;
  }
  t.num_planes = uint32_t(np);
  for (Py_ssize_t i = 0; i < np; ++i) {
    PyObject* pl = PySequence_Fast_GET_ITEM(planes.get(), i);
    if (!PyTuple_Check(pl) || PyTuple_GET_SIZE(pl) != 2) {
      PyErr_Format(PyExc_TypeError, "%s: a plane is an (offset, pitch) tuple", fn);
      return nullptr;
    }
    if (!arg_u64(fn, "a plane's offset", PyTuple_GET_ITEM(pl, 0), &t.planes[i].offset) ||
        !arg_u64(fn, "a plane's pitch", PyTuple_GET_ITEM(pl, 1), &t.planes[i].pitch))
      return nullptr;
  }
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = cudaipc_producer_set_format(p.get(), caps, &t, 0);
  Py_END_ALLOW_THREADS if (rc) return p.closed_meanwhile(fn) ? nullptr : fail_in(rc, a[7]);
  Py_RETURN_NONE;
}

// producer_begin(h, context): (slot address, capacity, publish result) of a borrowed slot.
PyObject* producer_begin(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "producer_begin";
  ProducerCall p;
  if (!arity(fn, n, 2) || !p.enter(fn, a[0])) return nullptr;
  uintptr_t address = 0;
  uint64_t capacity = 0;
  cudaipc_publish result = CUDAIPC_PUBLISHED;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = cudaipc_producer_begin(p.get(), &address, &capacity, &result);
  Py_END_ALLOW_THREADS if (!rc && address) p.borrowed();
  if (p.closed_meanwhile(fn)) {
    if (!rc && address) {
      cudaipc_producer_abort(p.get());  // not written, never published: the close goes on
      p.returned();
    }
    return nullptr;
  }
  if (rc) return fail_in(rc, a[1]);
  return Py_BuildValue("(KKi)", static_cast<unsigned long long>(address),
                       static_cast<unsigned long long>(capacity), int(result));
}

// producer_commit(h, pts, duration, metas, metas_size, context): publishes the borrowed slot.
PyObject* producer_commit(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "producer_commit";
  ProducerCall p;
  cudaipc_frame_info info{};
  void* metas;
  long long metas_size;
  if (!arity(fn, n, 6) || !p.enter(fn, a[0], ProducerCall::Borrow::end) ||
      !arg_time(fn, "pts", a[1], &info.pts) || !arg_time(fn, "duration", a[2], &info.duration) ||
      !arg_address(fn, "metas", a[3], &metas) ||
      !arg_int(fn, "metas_size", a[4], 0, UINT32_MAX, &metas_size))
    return nullptr;
  if (!metas && metas_size) {
    PyErr_Format(PyExc_ValueError, "%s: %lld bytes of metas at NULL", fn, metas_size);
    return nullptr;
  }
  info.dts = kNoTime;
  info.metas = metas;
  info.metas_size = uint32_t(metas_size);
  if (p.closing()) {
    // A close waits for this frame: not published after the end of stream it sent.
    cudaipc_producer_abort(p.get());
    p.returned();
    return closed("%s: the producer was closed by another thread; the frame is not published", fn);
  }
  int rc;
  // The commit waits on the GPU for the streams the slot was exported to.
  Py_BEGIN_ALLOW_THREADS rc = cudaipc_producer_commit(p.get(), &info);
  Py_END_ALLOW_THREADS p.returned();  // committed, or aborted by the failure
  if (rc) return fail_in(rc, a[5]);
  Py_RETURN_NONE;
}

// producer_abort(h, context) and producer_end_of_stream(h, context): context None ignores the
// status.
PyObject* producer_abort(PyObject*, PyObject* const* a, Py_ssize_t n) {
  ProducerCall p;
  if (!arity("producer_abort", n, 2) || !p.enter("producer_abort", a[0], ProducerCall::Borrow::end))
    return nullptr;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = cudaipc_producer_abort(p.get());
  Py_END_ALLOW_THREADS p.returned();
  return done(rc, a[1]);
}

PyObject* producer_end_of_stream(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "producer_end_of_stream";
  ProducerCall p;
  if (!arity(fn, n, 2) || !p.enter(fn, a[0])) return nullptr;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = cudaipc_producer_end_of_stream(p.get());
  Py_END_ALLOW_THREADS return done(rc, a[1]);
}

PyObject* producer_interrupt(PyObject*, PyObject* h) {
  ProducerCall p;
  if (!p.enter("producer_interrupt", h)) return nullptr;
  Py_BEGIN_ALLOW_THREADS cudaipc_producer_interrupt(p.get());
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

PyObject* producer_clear_interrupt(PyObject*, PyObject* h) {
  ProducerCall p;
  if (!p.enter("producer_clear_interrupt", h)) return nullptr;
  cudaipc_producer_clear_interrupt(p.get());
  Py_RETURN_NONE;
}

// producer_counters(h, context): (published, dropped, consumers).
PyObject* producer_counters(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "producer_counters";
  ProducerCall p;
  if (!arity(fn, n, 2) || !p.enter(fn, a[0])) return nullptr;
  uint64_t published = 0, dropped = 0;
  uint32_t consumers = 0;
  if (int rc = cudaipc_producer_counters(p.get(), &published, &dropped, &consumers))
    return fail_in(rc, a[1]);
  return Py_BuildValue("(KKk)", static_cast<unsigned long long>(published),
                       static_cast<unsigned long long>(dropped),
                       static_cast<unsigned long>(consumers));
}

// producer_slot_metas(h): (address or None, capacity) of the borrowed slot's meta area.
PyObject* producer_slot_metas(PyObject*, PyObject* h) {
  ProducerCall p;
  if (!p.enter("producer_slot_metas", h)) return nullptr;
  uint32_t capacity = 0;
  void* at = cudaipc_producer_slot_metas(p.get(), &capacity);
  if (!at) return Py_BuildValue("(Ok)", Py_None, static_cast<unsigned long>(capacity));
  return Py_BuildValue("(Nk)", PyLong_FromVoidPtr(at), static_cast<unsigned long>(capacity));
}

// slot_capsule(h, stream, flags): the borrowed slot in a new DLPack capsule.
PyObject* slot_capsule(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "slot_capsule";
  ProducerCall p;
  void* stream;
  long long flags;
  if (!arity(fn, n, 3) || !p.enter(fn, a[0]) || !arg_address(fn, "stream", a[1], &stream) ||
      !arg_int(fn, "flags", a[2], 0, UINT32_MAX, &flags))
    return nullptr;
  auto* capsule = static_cast<PyObject*>(
      cudaipc_producer_slot_dlpack_capsule(p.get(), stream, uint32_t(flags)));
  if (!capsule) return capsule_error(false);
  return capsule;
}

// What a producer says about itself once opened: (CUDA device or -1, its CUstream or None, bytes
// of meta area per slot).
PyObject* producer_describe(PyObject*, PyObject* h) {
  ProducerCall p;
  if (!p.enter("producer_describe", h)) return nullptr;
  int device = cudaipc_producer_cuda_device(p.get());
  void* stream = cudaipc_producer_cuda_stream(p.get());
  uint32_t meta_size = cudaipc_producer_meta_size(p.get());
  return Py_BuildValue("(iNk)", device,
                       stream ? PyLong_FromVoidPtr(stream) : (Py_INCREF(Py_None), Py_None),
                       static_cast<unsigned long>(meta_size));
}

}  // namespace

PyMethodDef producer_functions[] = {
    {"producer_publish", CUDAIPC_FASTCALL(producer_publish), METH_FASTCALL,
     "producer_publish(h, capsule, stream, flags, pts, duration, metas, metas_size): the result, "
     "or minus the status"},
    {"capsule_describe", CUDAIPC_FASTCALL(capsule_describe), METH_FASTCALL,
     "capsule_describe(capsule, context): (dtype, shape, strides) of a DLPack capsule"},
    {"producer_set_format", CUDAIPC_FASTCALL(producer_set_format), METH_FASTCALL,
     "producer_set_format(h, caps, dtype, shape, strides, size, planes, context)"},
    {"producer_begin", CUDAIPC_FASTCALL(producer_begin), METH_FASTCALL,
     "producer_begin(h, context): (address, capacity, result) of a borrowed slot"},
    {"producer_commit", CUDAIPC_FASTCALL(producer_commit), METH_FASTCALL,
     "producer_commit(h, pts, duration, metas, metas_size, context)"},
    {"producer_abort", CUDAIPC_FASTCALL(producer_abort), METH_FASTCALL,
     "producer_abort(h, context): context None ignores a failure"},
    {"producer_end_of_stream", CUDAIPC_FASTCALL(producer_end_of_stream), METH_FASTCALL,
     "producer_end_of_stream(h, context): context None ignores a failure"},
    {"producer_interrupt", producer_interrupt, METH_O, "producer_interrupt(h)"},
    {"producer_clear_interrupt", producer_clear_interrupt, METH_O, "producer_clear_interrupt(h)"},
    {"producer_counters", CUDAIPC_FASTCALL(producer_counters), METH_FASTCALL,
     "producer_counters(h, context): (published, dropped, consumers)"},
    {"producer_slot_metas", producer_slot_metas, METH_O,
     "producer_slot_metas(h): (address or None, capacity)"},
    {"slot_capsule", CUDAIPC_FASTCALL(slot_capsule), METH_FASTCALL,
     "slot_capsule(h, stream, flags): the borrowed slot as a DLPack capsule"},
    {"producer_describe", producer_describe, METH_O,
     "producer_describe(h): (cuda device, cuda stream or None, meta size)"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace cudaipc_py
