// A reply's results in C (issue #39): a detector's boxes, scores, labels and rotation as NumPy
// arrays (encoded here with the core's writer, one copy into the reply) or as torch tensors on the
// GPU (their addresses handed to cudaipc_server_reply_results, which copies them on the model's
// stream), and a dict of plain fields as the custom meta. Other forms return 0: the Python path
// answers them with the same rules, and its messages.
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "native.hpp"
#include "numpy_head.hpp"

namespace cudaipc_py {

namespace {

constexpr const char kAnalytics[] = "GstAnalyticsRelationMetaAPI";
constexpr const char kCustom[] = "cudaipc-meta";
constexpr uint32_t kMaxName = 1024;

// A names table as the core takes it, made from the last label_names seen and kept while they stay
// equal (a model passes the same list, or an equal one made anew, with every reply).
struct NameTable {
  std::vector<PyObject*> items;  // owned references to the str items
  std::string blob;
  std::vector<uint32_t> offsets{0};

  void clear() {
    for (PyObject* o : items) Py_DECREF(o);
    items.clear();
    blob.clear();
    offsets.assign(1, 0);
  }
  // The table for `names` (a list or tuple of str); false (no exception) for other names.
  bool take(PyObject* names) {
    if (!PyList_CheckExact(names) && !PyTuple_CheckExact(names)) return false;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(names);
    PyObject** src = PySequence_Fast_ITEMS(names);
    if (size_t(n) == items.size()) {
      bool same = true;
      for (Py_ssize_t i = 0; i < n && same; ++i) {
        if (src[i] == items[size_t(i)]) continue;
        same = PyUnicode_CheckExact(src[i]) && PyUnicode_Compare(src[i], items[size_t(i)]) == 0;
      }
      if (PyErr_Occurred()) PyErr_Clear();
      if (same) return true;
    }
    clear();
    for (Py_ssize_t i = 0; i < n; ++i) {
      Py_ssize_t size;
      const char* utf8 =
          PyUnicode_CheckExact(src[i]) ? PyUnicode_AsUTF8AndSize(src[i], &size) : nullptr;
      if (!utf8) {
        PyErr_Clear();
        clear();
        return false;
      }
      Py_INCREF(src[i]);
      items.push_back(src[i]);
      blob.append(utf8, size_t(size));
      offsets.push_back(uint32_t(blob.size()));
    }
    return true;
  }
};

}  // namespace

struct ReplyScratch {
  cudaipc_metas_writer* writer = nullptr;
  std::vector<uint8_t> area;
  NameTable names;
  std::vector<int64_t> labels;  // int32 labels widened
};

void scratch_free(ReplyScratch* s) {
  if (!s) return;
  if (s->writer) cudaipc_metas_writer_free(s->writer);
  s->names.clear();
  std::unique_ptr<ReplyScratch> owned(s);  // made by reply_fast; the server's C struct holds it
}

namespace {

// NumPy's arrays as the buffer protocol describes them, read from their head (numpy_head.hpp)
// instead: NumPy builds each array's buffer description on its first export (a format string and
// shape copies, allocated and freed with the array), and a model's results are new arrays every
// reply. Its type is trusted once an array's head agreed with the buffer NumPy exported for it,
// and a dtype once an aligned array's buffer format was read: an aligned array's format follows
// from its dtype alone (an unaligned one's gains a byte-order prefix, and is read through the
// buffer protocol), and NumPy's built-in dtypes are single objects, kept here (a reference each)
// so their addresses stay theirs.
struct KnownDtype {
  PyObject* descr;
  char format[2];
  Py_ssize_t itemsize;
};

struct NumpyBuffers {
  PyTypeObject* type = nullptr;  // numpy.ndarray, a reference held
  KnownDtype dtypes[8]{};
  int count = 0;
  long read_in_place = 0;  // arrays read from their heads (numpy_read_in_place, for the tests)

  const KnownDtype* dtype(const PyObject* descr) const {
    for (int i = 0; i < count; ++i)
      if (dtypes[i].descr == descr) return &dtypes[i];
    return nullptr;
  }
} numpy_buffers;

// After NumPy exported `view` for `o`: where `o` is an exact numpy.ndarray whose head says the
// same, its type and (a single-letter format) its dtype are read from heads from now on.
void learn_numpy(PyObject* o, const Py_buffer& view, char kind) {
  if (numpy_buffers.type ? Py_TYPE(o) != numpy_buffers.type
                         : std::strcmp(Py_TYPE(o)->tp_name, "numpy.ndarray") != 0)
    return;
  if (!may_hold_numpy_head(o)) return;
  const NumpyHead* h = numpy_head(o);
  if (h->data != view.buf || h->nd != view.ndim || h->nd < 0 || h->nd > CUDAIPC_MAX_RANK ||
      (h->flags & kNumpyReadable) != kNumpyReadable ||
      !same_sizes(h->dimensions, view.shape, h->nd))
    return;
  if (!numpy_buffers.type) {
    Py_INCREF(Py_TYPE(o));
    numpy_buffers.type = Py_TYPE(o);
  }
  if (!kind || !h->descr || numpy_buffers.dtype(h->descr) ||
      numpy_buffers.count == int(std::size(numpy_buffers.dtypes)))
    return;
  KnownDtype& d = numpy_buffers.dtypes[numpy_buffers.count++];
  d.descr = Py_NewRef(h->descr);
  d.format[0] = kind;
  d.format[1] = 0;
  d.itemsize = view.itemsize;
}

// A NumPy array's (any buffer's) C-contiguous view, released with the object.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (held_)
      PyBuffer_Release(&view_);
    else
      Py_XDECREF(view_.obj);
  }
  // False (no exception) when `o` is no C-contiguous buffer. An array read from its head is held
  // by a reference, not an export: another value's buffer export may run Python code (a
  // __buffer__ method) before the reply is written, and NumPy resizes no array that others
  // reference (only with refcheck=False, which NumPy documents as unsafe).
  bool take(PyObject* o) {
    if (Py_TYPE(o) == numpy_buffers.type && from_head(o)) return true;
    if (!PyObject_CheckBuffer(o)) return false;
    if (PyObject_GetBuffer(o, &view_, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
      PyErr_Clear();
      return false;
    }
    held_ = true;
    learn_numpy(o, view_, kind());
    return true;
  }
  const Py_buffer& view() const { return view_; }
  // The element's format letter without a native byte-order prefix; 0 for others.
  char kind() const {
    const char* f = view_.format ? view_.format : "B";
    if (*f == '@' || *f == '=' || *f == '<') ++f;
    return f[0] && !f[1] ? f[0] : 0;
  }

 private:
  bool from_head(PyObject* o) {
    const NumpyHead* h = numpy_head(o);
    const KnownDtype* d = numpy_buffers.dtype(h->descr);
    if (!d || (h->flags & kNumpyReadable) != kNumpyReadable || h->nd < 0 ||
        h->nd > CUDAIPC_MAX_RANK)
      return false;
    Py_ssize_t n = 1;
    for (int i = 0; i < h->nd; ++i) n *= h->dimensions[i];
    view_ = Py_buffer{};
    view_.buf = h->data;
    view_.len = n * d->itemsize;
    view_.itemsize = d->itemsize;
    view_.readonly = 1;
    view_.ndim = h->nd;
    view_.format = const_cast<char*>(d->format);
    view_.shape = h->dimensions;  // no strides: C-contiguous, as NumPy's flag says
    view_.obj = Py_NewRef(o);
    ++numpy_buffers.read_in_place;
    return true;
  }

  Py_buffer view_{};
  bool held_ = false;
};

// The custom meta of a dict of plain fields; 0 when one is not plain (the Python path writes it,
// or says why it cannot), -1 with an exception.
CUDAIPC_PY_HOT int write_fields(cudaipc_metas_writer* w, PyObject* meta) {
  if (!PyDict_CheckExact(meta)) return 0;
  // Checked whole first: a field the Python path must write leaves the area to it untouched.
  Py_ssize_t pos = 0;
  PyObject *key, *value;
  while (PyDict_Next(meta, &pos, &key, &value)) {
    if (!PyUnicode_CheckExact(key)) return 0;
    if (!(PyBool_Check(value) || PyLong_CheckExact(value) || PyFloat_CheckExact(value) ||
          PyUnicode_CheckExact(value) || PyBytes_CheckExact(value)))
      return 0;
  }
  if (int rc = cudaipc_metas_custom_begin(w, kCustom, sizeof kCustom - 1)) return fail(rc, ""), -1;
  pos = 0;
  while (PyDict_Next(meta, &pos, &key, &value)) {
    Py_ssize_t n;
    const char* k = PyUnicode_AsUTF8AndSize(key, &n);
    if (!k) return -1;
    if (n == 0 || size_t(n) > kMaxName || memchr(k, 0, size_t(n))) return 0;
    auto ks = uint32_t(n);
    int rc;
    if (PyBool_Check(value)) {
      rc = cudaipc_metas_custom_boolean(w, k, ks, value == Py_True);
    } else if (PyLong_CheckExact(value)) {
      int overflow;
      long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
      if (!overflow) {
        if (v == -1 && PyErr_Occurred()) return -1;
        rc = cudaipc_metas_custom_int64(w, k, ks, v);
      } else {
        unsigned long long u = PyLong_AsUnsignedLongLong(value);
        if (PyErr_Occurred()) {
          PyErr_Clear();
          return 0;  // beyond 64 bits: the Python path says so
        }
        rc = cudaipc_metas_custom_uint64(w, k, ks, u);
      }
    } else if (PyFloat_CheckExact(value)) {
      rc = cudaipc_metas_custom_double(w, k, ks, PyFloat_AS_DOUBLE(value));
    } else if (PyUnicode_CheckExact(value)) {
      Py_ssize_t sn;
      const char* s = PyUnicode_AsUTF8AndSize(value, &sn);
      if (!s) return -1;
      rc = cudaipc_metas_custom_string(w, k, ks, s, uint32_t(sn));
    } else {
      rc = cudaipc_metas_custom_bytes(w, k, ks, PyBytes_AS_STRING(value),
                                      uint32_t(PyBytes_GET_SIZE(value)));
    }
    if (rc) return fail(rc, "a meta field"), -1;
  }
  if (int rc = cudaipc_metas_custom_end(w)) return fail(rc, ""), -1;
  return 1;
}

enum Key { kBoxes, kScores, kLabels, kRotation };

// A detections dict's values by key, read in one pass over it (a key check and four lookups were
// a quarter of a served reply's instructions) and held: reading one value's buffer may run Python
// code that changes the dict. A key written as a literal in the model's code is the interned str
// itself, so most keys match by address (name_index).
struct Detections {
  PyObject* v[4] = {};
  Detections() = default;
  Detections(const Detections&) = delete;
  Detections& operator=(const Detections&) = delete;
  ~Detections() {
    for (PyObject* o : v) Py_XDECREF(o);
  }
  PyObject* operator[](Key k) const { return v[k]; }
};

// False (no exception) where `det` is no dict of those keys only.
CUDAIPC_PY_HOT bool read_detections(PyObject* det, Detections* out) {
  static const char* const names[] = {"boxes", "scores", "labels", "rotation"};
  static PyObject* keys[4];
  if (!PyDict_CheckExact(det)) return false;
  Py_ssize_t pos = 0;
  PyObject *key, *value;
  while (PyDict_Next(det, &pos, &key, &value)) {
    const int i = PyUnicode_CheckExact(key) ? name_index(key, names, keys, 4) : -1;
    if (i < 0) return false;
    Py_XSETREF(out->v[i], Py_NewRef(value));
  }
  return true;
}

// ---- host results ---------------------------------------------------------------------------

struct HostDetections {
  Buffer boxes, scores, rotation, labels;
  cudaipc_metas_analytics a{};
};

// The detections of `det` (a dict of NumPy arrays) staged in `d`; 0 for other forms.
CUDAIPC_PY_HOT int stage_host(ReplyScratch* sc, const Detections& det, PyObject* label_names,
                              HostDetections* d) {
  PyObject* boxes = det[kBoxes];
  if (!boxes || !d->boxes.take(boxes)) return 0;
  const Py_buffer& b = d->boxes.view();
  if (d->boxes.kind() != 'f' || b.itemsize != 4 || b.ndim != 2 || b.shape[1] != 4) return 0;
  Py_ssize_t n = b.shape[0];
  auto vector = [n](Buffer& buf, PyObject* o, char kind) {
    if (!buf.take(o)) return false;
    const Py_buffer& v = buf.view();
    return v.ndim == 1 && v.shape[0] == n && buf.kind() == kind && v.itemsize == 4;
  };
  d->a.n = uint32_t(n);
  d->a.boxes = b.buf;
  if (PyObject* s = det[kScores]) {
    if (!vector(d->scores, s, 'f')) return 0;
    d->a.scores = static_cast<const float*>(d->scores.view().buf);
  }
  if (PyObject* r = det[kRotation]) {
    if (!vector(d->rotation, r, 'f')) return 0;
    d->a.rotation = static_cast<const float*>(d->rotation.view().buf);
  }
  if (PyObject* l = det[kLabels]) {
    if (!d->labels.take(l)) return 0;
    const Py_buffer& v = d->labels.view();
    char k = d->labels.kind();
    if (v.ndim != 1 || v.shape[0] != n) return 0;
    if (n && !sc->names.take(label_names)) return 0;
    auto count = int64_t(sc->names.items.size());
    if (v.itemsize == 8 && (k == 'l' || k == 'q')) {
      const auto* p = static_cast<const int64_t*>(v.buf);
      for (Py_ssize_t i = 0; i < n; ++i)
        if (p[i] < 0 || p[i] >= count) return 0;  // named in decimal by the Python path
      d->a.labels = p;
    } else if (v.itemsize == 4 && k == 'i') {
      const auto* p = static_cast<const int32_t*>(v.buf);
      sc->labels.resize(size_t(n));
      for (Py_ssize_t i = 0; i < n; ++i) {
        if (p[i] < 0 || p[i] >= count) return 0;
        sc->labels[size_t(i)] = p[i];
      }
      d->a.labels = sc->labels.data();
    } else {
      return 0;
    }
    if (n) {
      d->a.names = reinterpret_cast<const uint8_t*>(sc->names.blob.data());
      d->a.name_offsets = sc->names.offsets.data();
      d->a.name_count = uint32_t(count);
    }
  }
  return 1;
}

// The reply's area in the scratch: its size (0: none), -1 with an exception, or -2 when the
// Python path is to write it. `det`: nullptr for a reply without detections.
CUDAIPC_PY_HOT int64_t encode_host(ReplyScratch* sc, const Detections* det, PyObject* meta,
                                   PyObject* label_names) {
  HostDetections d;
  if (det) {
    int staged = stage_host(sc, *det, label_names, &d);
    if (staged <= 0) return staged < 0 ? -1 : -2;
  }
  auto cap = uint32_t(sc->area.size());
  uint8_t* area = sc->area.data();
  if (meta == Py_None) {
    if (!det) return 0;
    cudaipc_detections one{};
    one.area = area;
    one.capacity = cap;
    one.n = d.a.n;
    one.boxes = static_cast<const float*>(d.a.boxes);
    one.scores = d.a.scores;
    one.rotation = d.a.rotation;
    one.labels = d.a.labels;
    one.names = d.a.names;
    one.name_offsets = d.a.name_offsets;
    one.name_count = d.a.name_count;
    int64_t size = cudaipc_metas_detections_area(&one);
    if (size < 0) return fail(int(-size), "the reply's detections"), -1;
    return size;
  }
  if (!sc->writer) {
    if (int rc = cudaipc_metas_writer_new(&sc->writer)) return fail(rc, "a meta writer"), -1;
  }
  if (int rc = cudaipc_metas_writer_begin(sc->writer, area, cap)) return fail(rc, ""), -1;
  if (det) {
    if (int rc = cudaipc_metas_add_analytics(sc->writer, kAnalytics, sizeof kAnalytics - 1, &d.a))
      return fail(rc, "the reply's detections"), -1;
  }
  int f = write_fields(sc->writer, meta);
  if (f <= 0) return f < 0 ? -1 : -2;
  int64_t size = cudaipc_metas_writer_finish(sc->writer);
  if (size < 0) return fail(int(-size), "the reply's metas"), -1;
  return size;
}

// ---- GPU results ----------------------------------------------------------------------------

// A torch tensor's DLPack description (torch._C._to_dlpack), kept while the capsule lives.
struct DeviceArray {
  Ref capsule;
  const cudaipc_dl_tensor* t = nullptr;
  // False (no exception) for what is not a CUDA torch tensor.
  bool take(const Torch* torch, PyObject* o) {
    if (Py_TYPE(o) != reinterpret_cast<PyTypeObject*>(torch->tensor_type)) return false;
    capsule.reset(PyObject_CallOneArg(torch->to_dlpack, o));
    if (!capsule) {
      PyErr_Clear();
      return false;
    }
    auto* m =
        static_cast<cudaipc_dl_managed_tensor*>(PyCapsule_GetPointer(capsule.get(), "dltensor"));
    if (!m) {
      PyErr_Clear();
      return false;
    }
    t = &m->dl_tensor;
    return t->device.device_type == CUDAIPC_DL_CUDA && t->dtype.lanes == 1;
  }
  const void* data() const { return static_cast<const char*>(t->data) + t->byte_offset; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
    return n;
  }
  // Elements from one entry to the next of a vector (or an [N, 1] column); 0 for other shapes.
  int64_t step() const {
    if (t->ndim == 1) return t->strides ? t->strides[0] : 1;
    if (t->ndim == 2 && t->shape[1] == 1) return t->strides ? t->strides[0] : 1;
    return 0;
  }
};

// cudaipc_tensor's numbering of a float dtype (boxes, scores, rotation), 0 for others.
uint32_t float_code(const cudaipc_dl_dtype& d) {
  if (d.code == 2 && d.bits == 32) return 10;
  if (d.code == 2 && d.bits == 16) return 9;
  if (d.code == 2 && d.bits == 64) return 11;
  if (d.code == 4 && d.bits == 16) return 12;
  return 0;
}

uint32_t int_code(const cudaipc_dl_dtype& d) {
  if (d.code == 0 && d.bits == 64) return 4;
  if (d.code == 0 && d.bits == 32) return 3;
  return 0;
}

// Out of line: inlined, it spread the host reply's path over 40 code lines.
CUDAIPC_PY_HOT __attribute__((noinline)) int reply_device(ServerObject* s, RequestObject* r,
                                                          const Torch* torch, PyObject* stream,
                                                          PyObject* after, const Detections& det,
                                                          PyObject* meta, PyObject* label_names) {
  ReplyScratch* sc = s->scratch;
  FrameObject* f = reinterpret_cast<FrameObject*>(r->frame);
  DeviceArray boxes, scores, labels, rotation;
  if (!boxes.take(torch, det[kBoxes])) return 0;
  const cudaipc_dl_tensor* b = boxes.t;
  if (b->ndim != 2 || b->shape[1] != 4) return 0;
  int64_t n = b->shape[0];
  cudaipc_reply_results res{};
  res.request = f->h;
  res.n = uint32_t(n);
  res.boxes = boxes.data();
  res.boxes_strides[0] = b->strides ? b->strides[0] : 4;
  res.boxes_strides[1] = b->strides ? b->strides[1] : 1;
  if (res.boxes_strides[1] < 1 || (n > 1 && res.boxes_strides[0] < 1)) return 0;
  res.boxes_dtype = float_code(b->dtype);
  if (!res.boxes_dtype) return 0;
  int dev = b->device.device_id;
  struct Item {
    Key key;
    DeviceArray* a;
    bool integer;
    const void** data;
    int64_t* stride;
    uint32_t* dtype;
  } items[] = {
      {kScores, &scores, false, &res.scores, &res.scores_stride, &res.scores_dtype},
      {kLabels, &labels, true, &res.labels, &res.labels_stride, &res.labels_dtype},
      {kRotation, &rotation, false, &res.rotation, &res.rotation_stride, &res.rotation_dtype}};
  for (Item& it : items) {
    *it.stride = 1;
    PyObject* o = det[it.key];
    if (!o) continue;
    if (!it.a->take(torch, o) || it.a->t->device.device_id != dev || it.a->numel() != n) return 0;
    int64_t st = it.a->step();
    if (st < 1 && n > 1) return 0;  // an expanded tensor: the host path copies it
    *it.dtype = it.integer ? int_code(it.a->t->dtype) : float_code(it.a->t->dtype);
    if (!*it.dtype) return 0;
    *it.data = it.a->data();
    *it.stride = st < 1 ? 1 : st;
  }
  if (res.labels && n) {
    // Labels past the list are named by the core in decimal, as the host path does.
    if (!sc->names.take(label_names)) return 0;
    res.names = reinterpret_cast<const uint8_t*>(sc->names.blob.data());
    res.name_offsets = sc->names.offsets.data();
    res.name_count = uint32_t(sc->names.items.size());
  }
  res.flags = CUDAIPC_RESULTS_DETECTIONS;
  if (meta != Py_None) {
    if (!sc->writer) {
      if (int rc = cudaipc_metas_writer_new(&sc->writer)) return fail(rc, "a meta writer"), -1;
    }
    if (int rc = cudaipc_metas_writer_begin(sc->writer, sc->area.data(), uint32_t(sc->area.size())))
      return fail(rc, ""), -1;
    int w = write_fields(sc->writer, meta);
    if (w <= 0) return w;
    int64_t size = cudaipc_metas_writer_finish(sc->writer);
    if (size < 0) return fail(int(-size), "the reply's metas"), -1;
    if (size) {
      res.metas = sc->area.data();
      res.metas_size = uint32_t(size);
    }
  }
  // The stream the replies go after: the caller's, else torch's current one on the results'
  // device; torch's default stream is the legacy one, where that device must be current.
  uintptr_t raw = 0;
  if (stream == Py_None) {
    if (!torch->raw_stream) return 0;
    Ref d(PyLong_FromLong(dev));
    Ref v(d ? PyObject_CallOneArg(torch->raw_stream, d.get()) : nullptr);
    if (!v) return -1;
    raw = uintptr_t(PyLong_AsUnsignedLongLongMask(v.get()));
  } else {
    uint32_t flags;  // DLPack's -1 (no ordering) is no stream to order a GPU reply after
    if (!stream_of(stream, &raw, &flags)) return -1;
  }
  if (PyErr_Occurred()) return -1;
  if (!raw) {
    if (!torch->get_device) return 0;
    Ref cur(PyObject_CallNoArgs(torch->get_device));
    if (!cur) return -1;
    if (PyLong_AsLong(cur.get()) != dev) return 0;  // the Python path makes it current
    raw = kStreamLegacy;
  }
  // An `after` that is no event releases the frame as without it, before anything is queued; one
  // the driver refuses leaves the frame held with its views' stream, released after it when freed.
  uintptr_t event = 0;
  if (after != Py_None && !event_of(after, &event)) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    Ref released(frame_release(f, stream));
    PyErr_Restore(type, value, tb);
    return -1;
  }
  if ((event && !frame_order_event(f, event)) || !frame_order_views(f, raw)) return -1;
  uint32_t sent = 0;
  uint64_t ticket = 0;
  int rc =
      cudaipc_server_reply_results(s->h, reinterpret_cast<void*>(raw), &res, 1, 1, &sent, &ticket);
  if (sent) {
    f->h = nullptr;  // released by the core after the stream
    Py_CLEAR(f->metas);
  } else {
    cudaipc_frame* h = f->h;
    f->h = nullptr;
    Py_CLEAR(f->metas);
    cudaipc_frame_release_after(h, reinterpret_cast<void*>(raw));
  }
  if (rc) {
    char context[64];
    snprintf(context, sizeof context, "replying to frame %llu", (unsigned long long)f->seq);
    return fail(rc, context), -1;
  }
  return 1;
}

}  // namespace

long numpy_arrays_read_in_place() {
  return numpy_buffers.read_in_place;
}

CUDAIPC_PY_HOT int reply_fast(ServerObject* s, RequestObject* r, PyObject* stream, PyObject* after,
                              PyObject* det, PyObject* meta, PyObject* label_names, bool* sent) {
  if (!s->h) return 0;  // the Python path says the server is closed
  if (!s->scratch) {
    Ref cap(PyObject_GetAttrString(reinterpret_cast<PyObject*>(s), "_reply_meta_size"));
    if (!cap) return -1;
    long size = PyLong_AsLong(cap.get());
    if (size < 0 || PyErr_Occurred()) return -1;
    s->scratch = std::make_unique<ReplyScratch>().release();
    s->scratch->area.resize(size_t(size) ? size_t(size) : 1);
  }
  FrameObject* f = reinterpret_cast<FrameObject*>(r->frame);
  *sent = true;
  Detections read;
  if (det != Py_None && !read_detections(det, &read)) return 0;  // other forms: the Python path
  if (det != Py_None) {
    PyObject* boxes = read[kBoxes];
    const Torch* torch = boxes && !PyObject_CheckBuffer(boxes) ? torch_api(false) : nullptr;
    if (torch && torch->to_dlpack && torch->tensor_type) {
      int done = reply_device(s, r, torch, stream, after, read, meta, label_names);
      if (done != 0) return done;
    }
  }
  int64_t size = encode_host(s->scratch, det != Py_None ? &read : nullptr, meta, label_names);
  if (size == -2) return 0;
  int rc = 0;
  if (size >= 0) {
    rc = cudaipc_server_reply(s->h, f->h, size ? s->scratch->area.data() : nullptr, uint32_t(size));
  }
  // Released whatever happened, as the Python path's `finally`.
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  Ref released(frame_release(f, stream, after));
  if (type) {
    PyErr_Restore(type, value, tb);
    return -1;
  }
  if (!released) return -1;
  if (rc == CUDAIPC_ERR_TIMEOUT) {
    *sent = false;
    return 1;
  }
  if (rc) {
    char context[64];
    snprintf(context, sizeof context, "replying to frame %llu", (unsigned long long)f->seq);
    return fail(rc, context), -1;
  }
  return 1;
}

}  // namespace cudaipc_py
