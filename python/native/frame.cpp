// Frame's base: a leased frame's handle and description in C, its release and its DLPack export.
// cudaipc.Frame (Python) adds what is read once per frame at most (metas, NumPy copies).
#include "native.hpp"

#include <structmember.h>

#include <cstring>

namespace cudaipc_py {

namespace {

FrameObject* as_frame(PyObject* o) {
  return reinterpret_cast<FrameObject*>(o);
}

int frame_traverse(PyObject* o, visitproc visit, void* arg) {
  FrameObject* f = as_frame(o);
  Py_VISIT(f->shared);
  Py_VISIT(f->metas);
  return 0;
}

CUDAIPC_PY_HOT int frame_clear(PyObject* o) {
  FrameObject* f = as_frame(o);
  Py_CLEAR(f->shared);
  Py_CLEAR(f->metas);
  return 0;
}

// fail() naming the frame: "<doing> frame <seq><what>".
PyObject* fail_on_frame(int rc, const FrameObject* f, const char* doing, const char* what = "") {
  char context[96];
  snprintf(context, sizeof context, "%s frame %llu%s", doing, (unsigned long long)f->seq, what);
  return fail(rc, context);
}

// Releases `h`, ordered after `stream` when there is one (0: none); the release happens even when
// the ordering fails, whose status is returned.
CUDAIPC_PY_HOT int release_after_stream(cudaipc_frame* h, uintptr_t stream) {
  if (stream) return cudaipc_frame_release_after(h, reinterpret_cast<void*>(stream));
  cudaipc_frame_release(h);
  return 0;
}

// Everything a frame object's end does but freeing it: untracked, weak references cleared, the
// frame released, its references dropped.
CUDAIPC_PY_HOT void frame_dealloc_body(PyObject* o) {
  FrameObject* f = as_frame(o);
  PyObject_GC_UnTrack(o);
  if (f->weakrefs) PyObject_ClearWeakRefs(o);
  if (f->h) {
    // After the reads of its slot tensor; a deallocator cannot raise a failed ordering.
    release_after_stream(f->h, f->view_stream);
    f->h = nullptr;
  }
  frame_clear(o);
}

void frame_dealloc(PyObject* o) {
  frame_dealloc_body(o);
  // A static base: the subclass's deallocator (CPython's subtype_dealloc) drops the type's
  // reference itself.
  Py_TYPE(o)->tp_free(o);
}

// Frame objects whose frames ended, kept for the next ones (under the GIL): making and freeing one
// per frame through CPython's allocator and its generic deallocator cost the package's next()
// ~25 cache lines after each wait for a frame on the GPU machine's CPU (issue #39). Only objects
// of the package's Frame class, which adds no fields, are kept; they hold no reference.
constexpr int kSpareFrames = 8;
PyObject* spare_frames[kSpareFrames];
int spare_count = 0;

// The package's Frame class's deallocator, in place of CPython's generic one (see
// frame_pool_install): what that one does for a class with no fields, __del__ or dict of its
// own, with the object kept as a spare instead of freed.
CUDAIPC_PY_HOT void frame_pooled_dealloc(PyObject* o) {
  PyTypeObject* type = Py_TYPE(o);
  frame_dealloc_body(o);
  // The package's class itself, not a subclass of it (whose objects may be laid out otherwise),
  // and still a plain one.
  if (type == package.frame && type->tp_dealloc == frame_pooled_dealloc &&
      spare_count < kSpareFrames)
    spare_frames[spare_count++] = o;
  else
    type->tp_free(o);
  Py_DECREF(type);  // a heap type: each of its objects held a reference to it
}

PyObject* time_or_none(uint64_t t) {
  if (t == kNoTime) Py_RETURN_NONE;
  return PyLong_FromUnsignedLongLong(t);
}

PyObject* get_h(PyObject* o, void*) {
  FrameObject* f = as_frame(o);
  if (!f->h) Py_RETURN_NONE;
  return PyLong_FromVoidPtr(f->h);
}

// `frame._h = None`: the handle was handed to the core (a reply released it); nothing released.
int set_h(PyObject* o, PyObject* v, void*) {
  if (v != Py_None) {
    PyErr_SetString(PyExc_AttributeError, "a frame's handle can only be given up (None)");
    return -1;
  }
  as_frame(o)->h = nullptr;
  return 0;
}

PyObject* get_seq(PyObject* o, void*) {
  return PyLong_FromUnsignedLongLong(as_frame(o)->seq);
}
PyObject* get_pts(PyObject* o, void*) {
  return time_or_none(as_frame(o)->pts);
}
PyObject* get_dts(PyObject* o, void*) {
  return time_or_none(as_frame(o)->dts);
}
PyObject* get_duration(PyObject* o, void*) {
  return time_or_none(as_frame(o)->duration);
}
PyObject* get_flags(PyObject* o, void*) {
  return PyLong_FromUnsignedLong(as_frame(o)->flags);
}
PyObject* get_publish_time(PyObject* o, void*) {
  return PyLong_FromUnsignedLongLong(as_frame(o)->publish_time);
}
PyObject* get_nbytes(PyObject* o, void*) {
  return PyLong_FromUnsignedLongLong(as_frame(o)->size);
}
PyObject* get_data_ptr(PyObject* o, void*) {
  return PyLong_FromSize_t(as_frame(o)->data);
}
PyObject* get_released(PyObject* o, void*) {
  return PyBool_FromLong(as_frame(o)->h == nullptr);
}
PyObject* get_device_id(PyObject* o, void*) {
  return PyLong_FromLong(as_frame(o)->device);
}
PyObject* get_tensor_id(PyObject* o, void*) {
  return PyLong_FromUnsignedLong(as_frame(o)->tensor_id);
}

PyGetSetDef frame_getset[] = {
    {"_h", get_h, set_h, "the frame's handle while held, else None", nullptr},
    {"seq", get_seq, nullptr,
     "The producer's frame number (1, 2, ...); a gap means frames were skipped.", nullptr},
    {"pts", get_pts, nullptr, "Presentation time in ns, or None when the producer set none.",
     nullptr},
    {"dts", get_dts, nullptr, "Decoding time in ns, or None.", nullptr},
    {"duration", get_duration, nullptr, "Duration in ns, or None.", nullptr},
    {"flags", get_flags, nullptr, "The frame's buffer flags as the producer set them.", nullptr},
    {"publish_time_ns", get_publish_time, nullptr,
     "The producer's time.monotonic_ns() at publish (same clock in every process).", nullptr},
    {"nbytes", get_nbytes, nullptr,
     "Bytes the tensor spans from its first element (all planes, for video).", nullptr},
    {"data_ptr", get_data_ptr, nullptr,
     "The first element: a host pointer, or a CUdeviceptr for CUDA channels.", nullptr},
    {"released", get_released, nullptr,
     "Whether this frame's own hold was given back (tensors made from it keep theirs).", nullptr},
    {"_device_id", get_device_id, nullptr, "the CUDA ordinal, -1 for host memory", nullptr},
    {"_tensor_id", get_tensor_id, nullptr, "the tensor description's id", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyMemberDef frame_members[] = {
    {"_s", T_OBJECT_EX, offsetof(FrameObject, shared), 0, "what the frames of its format share"},
    {"_m", T_OBJECT, offsetof(FrameObject, metas), 0, "its metas, once decoded"},
    {nullptr, 0, 0, 0, nullptr}};

CUDAIPC_PY_HOT PyObject* m_release(PyObject* o, PyObject* const* args, Py_ssize_t nargs,
                                   PyObject* kw) {
  static const char* const names[] = {"stream", "after"};
  if (!nargs && !kw) return frame_release(as_frame(o), Py_None, Py_None);
  PyObject* a[2];
  if (!parse("release", args, nargs, kw, names, a, 2)) return nullptr;
  return frame_release(as_frame(o), a[0], a[1]);
}

PyObject* m_order_event(PyObject* o, PyObject* after) {
  uintptr_t event = 0;
  if (after != Py_None && (!event_of(after, &event) || !frame_order_event(as_frame(o), event)))
    return nullptr;
  Py_RETURN_NONE;
}

CUDAIPC_PY_HOT PyObject* m_enter(PyObject* o, PyObject*) {
  Py_INCREF(o);
  return o;
}

CUDAIPC_PY_HOT PyObject* m_exit(PyObject* o, PyObject* const*, Py_ssize_t) {
  return frame_release(as_frame(o), Py_None);
}

PyObject* m_order_views(PyObject* o, PyObject* stream) {
  unsigned long long s = PyLong_AsUnsignedLongLong(stream);
  if (PyErr_Occurred()) return nullptr;
  if (!frame_order_views(as_frame(o), static_cast<uintptr_t>(s))) return nullptr;
  Py_RETURN_NONE;
}

PyObject* m_dlpack(PyObject* o, PyObject* const* args, Py_ssize_t nargs, PyObject* kw) {
  static const char* const names[] = {"stream", "max_version", "dl_device", "copy"};
  PyObject* a[4];
  if (!parse("__dlpack__", args, nargs, kw, names, a, 4)) return nullptr;
  FrameObject* f = as_frame(o);
  if (!f->h) return closed("frame %llu was released", (unsigned long long)f->seq);
  if (a[2] != Py_None) {
    Ref mine(frame_dlpack_device(f));
    Ref theirs(PySequence_Tuple(a[2]));
    if (!mine || !theirs) return nullptr;
    int same = PyObject_RichCompareBool(mine.get(), theirs.get(), Py_EQ);
    if (same < 0) return nullptr;
    if (!same) {
      if (f->device >= 0)
        PyErr_Format(PyExc_BufferError,
                     "the frame is on cuda:%d; cudaipc exports it only there (copy after "
                     "importing)",
                     int(f->device));
      else
        PyErr_SetString(
            PyExc_BufferError,
            "the frame is on cpu; cudaipc exports it only there (copy after importing)");
      return nullptr;
    }
  }
  int copy = a[3] == Py_None ? 0 : PyObject_IsTrue(a[3]);
  if (copy < 0) return nullptr;
  if (copy) {
    PyErr_SetString(PyExc_BufferError,
                    "cudaipc exports frames without copying (copy=True refused)");
    return nullptr;
  }
  uint32_t flags = 0;
  if (a[1] != Py_None) {
    Ref major(PySequence_GetItem(a[1], 0));
    if (!major) return nullptr;
    long v = PyLong_AsLong(major.get());
    if (v == -1 && PyErr_Occurred()) return nullptr;
    if (v >= 1) flags |= CUDAIPC_DLPACK_VERSIONED;
  }
  return frame_dlpack(f, a[0], flags, true);
}

PyObject* m_dlpack_device(PyObject* o, PyObject*) {
  return frame_dlpack_device(as_frame(o));
}

CUDAIPC_PY_HOT PyObject* m_torch(PyObject* o, PyObject* const* args, Py_ssize_t nargs,
                                 PyObject* kw) {
  static const char* const names[] = {"stream"};
  PyObject* stream;
  if (!parse("torch", args, nargs, kw, names, &stream, 1)) return nullptr;
  return frame_torch(as_frame(o), stream);
}

CUDAIPC_PY_HOT PyObject* m_numpy(PyObject* o, PyObject*) {
  return frame_numpy(as_frame(o));
}

CUDAIPC_PY_HOT PyObject* m_cupy(PyObject* o, PyObject* const* args, Py_ssize_t nargs,
                                PyObject* kw) {
  static const char* const names[] = {"stream"};
  PyObject* stream;
  if (!parse("cupy", args, nargs, kw, names, &stream, 1)) return nullptr;
  return frame_cupy(as_frame(o), stream);
}

#define FASTCALL_KW(f) reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f))

PyMethodDef frame_methods[] = {
    {"release", FASTCALL_KW(m_release), METH_FASTCALL | METH_KEYWORDS,
     "release(stream=None, after=None): gives the frame's own hold on the slot back. With "
     "`stream` (CUDA), the producer may reuse the slot only after the work queued on that stream "
     "so far (a GPU-side wait, no CPU wait); each tensor exported through __dlpack__ does the "
     "same for the stream it was exported to when it is freed. With `after`, a CUDA event "
     "(torch.cuda.Event, cupy.cuda.Event or its handle) recorded after every read of the frame, "
     "only after that event: one query and no GPU work when it has completed (a loop that waited "
     "for its answer through it). Releasing twice does nothing."},
    {"__enter__", m_enter, METH_NOARGS, nullptr},
    {"_order_event", m_order_event, METH_O,
     "_order_event(after): the release, whenever it comes, after the event `after` too"},
    {"_order_views", m_order_views, METH_O,
     "_order_views(stream): before the handle goes to the core, released after `stream` (an "
     "int): the slot tensor's reads on another stream are waited for too"},
    {"__exit__", FASTCALL_KW(m_exit), METH_FASTCALL, nullptr},
    {"__dlpack__", FASTCALL_KW(m_dlpack), METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__(stream=None, max_version=None, dl_device=None, copy=None): a DLPack capsule "
     "viewing the slot (versioned DLPack 1.x when max_version allows it). For CUDA frames, "
     "`stream` (the caller's: an int, None for the legacy default stream, -1 for none) waits on "
     "the GPU until the frame is readable, and the tensor's release is ordered after the work on "
     "it."},
    {"__dlpack_device__", m_dlpack_device, METH_NOARGS, "(device type, device id) of DLPack"},
    {"torch", FASTCALL_KW(m_torch), METH_FASTCALL | METH_KEYWORDS,
     "torch(stream=None): the frame as a torch tensor, zero-copy, valid until the frame is "
     "released (a request: answered). It views the frame's slot (made once per slot and handed "
     "out again, an alias per frame); for CUDA frames its reads are ordered on `stream` (default: "
     "torch's current stream on the frame's device) and the release after the work queued on "
     "that stream by then. A tensor that must outlive the frame: torch.from_dlpack(frame), "
     "which holds the frame's slot until it is freed."},
    {"numpy", m_numpy, METH_NOARGS,
     "numpy(): the frame as a NumPy array. Host channels: a read-only view of the frame's slot, "
     "valid until the frame is released (a request: answered), made once per slot and handed out "
     "again (an alias, itself handed out again once nobody holds it and its layout is the "
     "slot's), as cupy() is; an array that must outlive the "
     "frame: np.from_dlpack(frame), which holds the slot until it is freed, or numpy().copy(). "
     "CUDA channels: a copy on the host."},
    {"cupy", FASTCALL_KW(m_cupy), METH_FASTCALL | METH_KEYWORDS,
     "cupy(stream=None): the frame as a cupy array, zero-copy, valid until the frame is released "
     "(a request: answered). As torch(): a view of the frame's slot made once per slot (an alias, "
     "itself handed out again once nobody holds it and its shape is the slot's); its reads are "
     "ordered on `stream` (default: cupy's current stream on the "
     "frame's device) and the release after the work queued on that stream by then. An array "
     "that must outlive the frame: cupy.from_dlpack(frame)."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void frame_pool_install(PyTypeObject* type) {
  // CPython's generic deallocator also runs __del__, clears an instance dict and the slots a class
  // adds: a Frame class with any of those keeps it. (A __del__ given to the class after this is
  // not run: the package's class is not one to change.)
  const bool plain = type->tp_basicsize == FrameType.tp_basicsize && !type->tp_finalize &&
                     !type->tp_del && type->tp_dictoffset == 0 &&
                     (type->tp_flags & Py_TPFLAGS_HEAPTYPE) &&
                     type->tp_weaklistoffset == FrameType.tp_weaklistoffset;
  if (plain) type->tp_dealloc = frame_pooled_dealloc;
}

void frame_pool_clear() {
  while (spare_count > 0) {
    PyObject* o = spare_frames[--spare_count];
    // A spare holds no reference to its class, which may be gone (configure() again); freeing
    // reads the type for the allocation's start, the same as the base's for a plain class.
    Py_SET_TYPE(o, &FrameType);
    PyObject_GC_Del(o);
  }
}

CUDAIPC_PY_HOT PyObject* frame_new(const cudaipc_frame_view& v, PyObject* shared) {
  PyTypeObject* type = package.frame ? package.frame : &FrameType;
  PyObject* o;
  if (spare_count > 0 && type->tp_dealloc == frame_pooled_dealloc) {
    // As tp_alloc leaves one: the type referenced, one reference, the fields zero, tracked.
    o = spare_frames[--spare_count];
    std::memset(reinterpret_cast<char*>(o) + sizeof(PyObject), 0,
                sizeof(FrameObject) - sizeof(PyObject));
    PyObject_Init(o, type);
    PyObject_GC_Track(o);
  } else {
    o = type->tp_alloc(type, 0);
  }
  if (!o) {
    cudaipc_frame_release(v.frame);  // never leaked: nobody else holds it
    return nullptr;
  }
  FrameObject* f = as_frame(o);
  f->h = v.frame;
  f->seq = v.seq;
  f->size = v.size;
  f->pts = v.pts;
  f->dts = v.dts;
  f->duration = v.duration;
  f->publish_time = v.publish_time_ns;
  f->data = v.data;
  f->flags = v.flags;
  f->tensor_id = v.tensor_id;
  f->device = v.cuda_device;
  Py_INCREF(shared);
  f->shared = shared;
  return o;
}

namespace {

// The frame's handle and the stream its views were handed out on, taken from it: released from
// here on, whatever the caller does with the handle.
CUDAIPC_PY_HOT inline cudaipc_frame* take_handle(FrameObject* f, uintptr_t* views) {
  cudaipc_frame* h = f->h;
  *views = f->view_stream;
  f->h = nullptr;
  f->view_stream = 0;
  Py_CLEAR(f->metas);  // views handed out keep their own hold; the frame no longer does
  return h;
}

// frame_release with a stream or an event to order it after.
// The handle is taken from the frame before any argument is read (reading one may run Python that
// releases the frame). `after`, an event recorded after every read of the frame, stands for its
// views' stream (a loop that waited for it releases with one query and a CPU store); without it,
// or when it is not one or the driver refuses it, the release follows the views' stream. A stream
// named is followed either way. Released whatever fails; the first failure is raised.
PyObject* release_ordered(FrameObject* f, PyObject* stream, PyObject* after) {
  uintptr_t views;
  cudaipc_frame* h = take_handle(f, &views);
  uintptr_t s = 0, event = 0;
  uint32_t flags = 0;
  bool ok = f->device < 0 || stream == Py_None || stream_of(stream, &s, &flags);
  if (!ok) s = 0;  // released after the views' stream, as without one
  if (ok && after != Py_None) ok = event_of(after, &event);
  if (f->device < 0) {
    cudaipc_frame_release(h);
    if (!ok) return nullptr;
    Py_RETURN_NONE;
  }
  if (flags & CUDAIPC_DLPACK_NO_SYNC) s = 0;  // the caller's reads are its own to order
  const auto failure = [f](int rc) { return fail_on_frame(rc, f, "releasing"); };
  if (ok && event) {
    const int failed = cudaipc_frame_order_release_event(h, reinterpret_cast<void*>(event));
    if (!failed) {
      if (int rc = release_after_stream(h, s)) return failure(rc);
      Py_RETURN_NONE;
    }
    failure(failed);  // now, while the core's message is the event's
    ok = false;
  }
  const int ordered =
      views && s && views != s ? cudaipc_frame_order_release(h, reinterpret_cast<void*>(views)) : 0;
  const int rc = release_after_stream(h, s ? s : views);
  if (!ok) return nullptr;
  if (int first = ordered ? ordered : rc) return failure(first);
  Py_RETURN_NONE;
}

}  // namespace

// The release a loop makes (no stream, no event) runs here alone, straight through: spread over
// the ordered cases, it touched 7 cache lines of code after each wait for a frame (issue #39).
CUDAIPC_PY_HOT PyObject* frame_release(FrameObject* f, PyObject* stream, PyObject* after) {
  if (!f->h) Py_RETURN_NONE;
  if (!CUDAIPC_PY_LIKELY(stream == Py_None && after == Py_None))
    return release_ordered(f, stream, after);
  uintptr_t views;
  cudaipc_frame* h = take_handle(f, &views);
  // After the reads of its views' stream, if any (only a CUDA frame's views have one).
  if (int rc = release_after_stream(h, views)) return fail_on_frame(rc, f, "releasing");
  Py_RETURN_NONE;
}

bool frame_order_event(FrameObject* f, uintptr_t event) {
  if (!f->h || f->device < 0) return true;
  const int rc = cudaipc_frame_order_release_event(f->h, reinterpret_cast<void*>(event));
  if (!rc) return true;
  fail_on_frame(rc, f, "ordering", "'s release after an event");
  return false;
}

bool frame_order_views(FrameObject* f, uintptr_t stream) {
  const uintptr_t views = f->view_stream;
  if (f->h && views && views != stream) {
    // Kept on failure: the frame's release still waits for those reads then.
    if (int rc = cudaipc_frame_order_release(f->h, reinterpret_cast<void*>(views))) {
      fail_on_frame(rc, f, "ordering", "'s release after its tensor's reads");
      return false;
    }
  }
  f->view_stream = 0;
  return true;
}

// The package's exception for a failed capsule call (CapsuleFailed set by the core); as
// BufferError for an argument DLPack cannot take, when `buffer_errors`.
PyObject* capsule_error(bool buffer_errors) {
  if (!PyErr_ExceptionMatches(package.capsule_failed)) return nullptr;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  Ref t(type), v(value), b(tb);
  Ref text(v ? PyObject_Str(v.get()) : PyUnicode_FromString(""));
  if (!text) return nullptr;
  int code = cudaipc_last_error_code();
  if (buffer_errors && code == CUDAIPC_ERR_INVALID_ARGUMENT) {
    PyErr_SetObject(PyExc_BufferError, text.get());
    return nullptr;
  }
  Ref exc(package.from_code ? PyObject_CallFunction(package.from_code, "iO", code, text.get())
                            : nullptr);
  if (exc)
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.get())), exc.get());
  else if (!PyErr_Occurred())
    PyErr_SetObject(PyExc_RuntimeError, text.get());
  return nullptr;
}

PyObject* frame_dlpack(FrameObject* f, PyObject* stream, uint32_t flags, bool buffer_errors) {
  if (!f->h) return closed("frame %llu was released", (unsigned long long)f->seq);
  uintptr_t s = 0;
  if (f->device >= 0) {
    uint32_t extra;
    if (!stream_of(stream, &s, &extra)) return nullptr;
    flags |= extra;
  } else if (stream != Py_None) {
    // Only DLPack's -1 (no ordering) goes with a host frame.
    int overflow = 0;
    long v = PyLong_Check(stream) ? PyLong_AsLongAndOverflow(stream, &overflow) : 0;
    if (v != -1 || overflow) {
      Ref r(PyObject_Repr(stream));
      PyErr_Format(PyExc_BufferError, "stream %U given for a frame in host memory", r.get());
      return nullptr;
    }
  }
  auto* capsule =
      static_cast<PyObject*>(cudaipc_frame_dlpack_capsule(f->h, reinterpret_cast<void*>(s), flags));
  if (!capsule) return capsule_error(buffer_errors);
  return capsule;
}

namespace {

// The frame's reads ordered on the caller's stream `s`, and its release after that stream's work
// (and after a stream its view went out on before), unless `flags` leave that to the caller.
CUDAIPC_PY_HOT bool order_views_on(FrameObject* f, uintptr_t s, uint32_t flags) {
  if (flags & CUDAIPC_DLPACK_NO_SYNC) return true;
  if (int rc = cudaipc_frame_order_reads(f->h, reinterpret_cast<void*>(s))) {
    fail(rc, "ordering the frame's reads");
    return false;
  }
  // Reads handed out on another stream before: the release waits for those too.
  if (!frame_order_views(f, s)) return false;
  f->view_stream = s;
  return true;
}

// A CUstream from a library's current-stream call's result (an int, or an object whose `attr` is
// one); 0, the library's default stream, is the legacy one.
bool raw_stream(PyObject* got, PyObject* attr, uintptr_t* out) {
  if (!got) return false;
  Ref value(attr ? PyObject_GetAttr(got, attr) : Py_NewRef(got));
  if (!value) return false;
  *out = static_cast<uintptr_t>(PyLong_AsUnsignedLongLongMask(value.get()));
  if (PyErr_Occurred()) return false;
  if (!*out) *out = kStreamLegacy;
  return true;
}

PyObject* torch_view(PyObject* capsule, int) {
  const Torch* t = torch_api(true);
  if (!t) return nullptr;
  return t->from_dlpack ? PyObject_CallOneArg(t->from_dlpack, capsule)
                        : PyObject_CallMethod(t->module, "from_dlpack", "O", capsule);
}

// torch's current stream on `device` (the legacy one for a torch that cannot say).
CUDAIPC_PY_HOT bool torch_current(int device, uintptr_t* out) {
  const Torch* t = torch_api(true);
  if (!t) return false;
  if (!t->raw_stream) {
    *out = kStreamLegacy;
    return true;
  }
  Ref dev(PyLong_FromLong(device));
  return dev && raw_stream(Ref(PyObject_CallOneArg(t->raw_stream, dev.get())).get(), nullptr, out);
}

PyObject* cupy_view(PyObject* capsule, int device) {
  const CuPy* c = cupy_api();
  return c ? PyObject_CallFunction(c->slot_view, "Oi", capsule, device) : nullptr;
}

// cupy's current stream on `device`.
CUDAIPC_PY_HOT bool cupy_current(int device, uintptr_t* out) {
  static PyObject* ptr;
  const CuPy* c = cupy_api();
  if (c && c->stream_ptr) {
    const intptr_t raw = c->stream_ptr(device);
    if (PyErr_Occurred()) return false;
    *out = raw ? static_cast<uintptr_t>(raw) : kStreamLegacy;
    return true;
  }
  Ref dev(c ? PyLong_FromLong(device) : nullptr);
  if (!dev || !interned(ptr, "ptr")) return false;
  Ref current(PyObject_CallOneArg(c->current_stream, dev.get()));
  if (!current && PyErr_ExceptionMatches(PyExc_TypeError)) {
    // A cupy whose get_current_stream() takes no device: the current device's stream, which the
    // ordering refuses, naming the context, when it is not the frame's.
    PyErr_Clear();
    current.reset(PyObject_CallNoArgs(c->current_stream));
  }
  return raw_stream(current.get(), ptr, out);
}

CUDAIPC_PY_HOT const ViewMaker* maker(ViewMaker& m, PyObject* SharedObject::*field,
                                      const char* alias, PyObject* (*make)(PyObject*, int),
                                      bool (*current)(int, uintptr_t*), ViewMaker::Reuse reuse) {
  if (!interned(m.alias, alias)) return nullptr;
  m.field = field;
  m.make = make;
  m.current = current;
  m.reuse = reuse;
  return &m;
}

// The frame as a library's view of its slot, its reads ordered on `stream` (None: the library's
// current stream on the frame's device) and its release after that stream's work.
CUDAIPC_PY_HOT PyObject* library_view(FrameObject* f, PyObject* stream, const ViewMaker& m) {
  if (!f->h) return closed("frame %llu was released", (unsigned long long)f->seq);
  if (f->device >= 0) {
    uintptr_t s = 0;
    uint32_t flags = 0;
    if (!(stream == Py_None ? m.current(f->device, &s) : stream_of(stream, &s, &flags)))
      return nullptr;
    // Released by another thread while the library's calls ran?
    if (!f->h) return closed("frame %llu was released", (unsigned long long)f->seq);
    if (!order_views_on(f, s, flags)) return nullptr;
  }
  return slot_view(f, m);
}

}  // namespace

CUDAIPC_PY_HOT PyObject* frame_torch(FrameObject* f, PyObject* stream) {
  static ViewMaker views;
  const ViewMaker* m = torch_api(true) ? maker(views, &SharedObject::views, "detach", torch_view,
                                               torch_current, ViewMaker::Reuse::never)
                                       : nullptr;
  return m ? library_view(f, stream, *m) : nullptr;
}

CUDAIPC_PY_HOT PyObject* frame_cupy(FrameObject* f, PyObject* stream) {
  static ViewMaker views;
  if (f->h && f->device < 0) {
    PyErr_SetString(PyExc_BufferError,
                    "cupy(): the frame is in host memory; read it with numpy() (or "
                    "cupy.asarray(frame.numpy()) for a copy on the GPU)");
    return nullptr;
  }
  const ViewMaker* m = cupy_api() ? maker(views, &SharedObject::cupy_views, "view", cupy_view,
                                          cupy_current, ViewMaker::Reuse::cupy_layout)
                                  : nullptr;
  return m ? library_view(f, stream, *m) : nullptr;
}

namespace {

// The NumPy array of a host slot, made by the package (its read-only flag set where the capsule
// carries none).
PyObject* numpy_view(PyObject* capsule, int) {
  if (!package.numpy_slot_view) {
    PyErr_SetString(PyExc_RuntimeError, "numpy(): the package did not configure the binding");
    return nullptr;
  }
  return PyObject_CallOneArg(package.numpy_slot_view, capsule);
}

}  // namespace

CUDAIPC_PY_HOT PyObject* frame_numpy(FrameObject* f) {
  static ViewMaker views;
  static PyObject* other;
  if (f->h && f->device < 0 && f->shared) {
    const SharedObject* shared = as_shared(f->shared);
    if (!shared) return nullptr;
    if (shared->host_dlpack) {
      const ViewMaker* m = maker(views, &SharedObject::numpy_views, "view", numpy_view, nullptr,
                                 ViewMaker::Reuse::numpy_layout);
      return m ? slot_view(f, *m) : nullptr;
    }
  }
  // A copy of a CUDA frame, a dtype NumPy's DLPack import lacks, or a released frame (which says
  // so): the package's Python.
  if (!interned(other, "_numpy_other")) return nullptr;
  return PyObject_CallMethodNoArgs(reinterpret_cast<PyObject*>(f), other);
}

PyObject* frame_dlpack_device(FrameObject* f) {
  if (f->device >= 0) return Py_BuildValue("(ii)", 2, f->device);  // kDLCUDA
  return Py_BuildValue("(ii)", 1, 0);                              // kDLCPU
}

PyTypeObject FrameType = [] {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
  // CPython's static type head; every other slot is zero until set below.
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
#pragma GCC diagnostic pop
  t.tp_name = "cudaipc._native.Frame";
  t.tp_basicsize = sizeof(FrameObject);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC;
  t.tp_doc = "A frame's handle and description (cudaipc.Frame's base)";
  t.tp_traverse = frame_traverse;
  t.tp_clear = frame_clear;
  t.tp_dealloc = frame_dealloc;
  t.tp_weaklistoffset = offsetof(FrameObject, weakrefs);
  t.tp_methods = frame_methods;
  t.tp_members = frame_members;
  t.tp_getset = frame_getset;
  return t;
}();

}  // namespace cudaipc_py
