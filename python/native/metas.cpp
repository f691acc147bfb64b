// The meta codec (cudaipc.h, "Meta areas") for the package's Python encoders and decoder: a decode
// into a caller's buffer, and MetasWriter, the core's writer with one method per add. Names,
// strings and bodies come as bytes-like objects, read in place through the buffer protocol.
#include <string>
#include <vector>

#include "native.hpp"

namespace cudaipc_py {

namespace {

// A bytes-like argument held for a call (the buffer protocol), with its size checked to fit the
// core's 32-bit sizes.
class Bytes {
 public:
  Bytes() = default;
  Bytes(const Bytes&) = delete;
  Bytes& operator=(const Bytes&) = delete;
  Bytes(Bytes&& o) noexcept : view_(o.view_), held_(o.held_) { o.held_ = false; }
  ~Bytes() {
    if (held_) PyBuffer_Release(&view_);
  }
  bool take(const char* fn, const char* name, PyObject* o, uint64_t most = UINT32_MAX) {
    if (PyObject_GetBuffer(o, &view_, PyBUF_C_CONTIGUOUS) < 0) {
      PyErr_Format(PyExc_TypeError, "%s: %s must be a contiguous bytes-like object, not %.100s", fn,
                   name, Py_TYPE(o)->tp_name);
      return false;
    }
    held_ = true;
    if (uint64_t(view_.len) > most) {
      PyErr_Format(PyExc_ValueError, "%s: %s of %zd bytes is too large", fn, name, view_.len);
      return false;
    }
    return true;
  }
  const char* data() const { return static_cast<const char*>(view_.buf); }
  uint32_t size() const { return uint32_t(view_.len); }
  uint64_t size64() const { return uint64_t(view_.len); }

 private:
  Py_buffer view_{};
  bool held_ = false;
};

struct WriterObject {
  PyObject_HEAD cudaipc_metas_writer* w;
};

WriterObject* as_writer(PyObject* o) {
  return reinterpret_cast<WriterObject*>(o);
}

PyObject* writer_new(PyTypeObject* type, PyObject* args, PyObject* kw) {
  if (PyTuple_GET_SIZE(args) || (kw && PyDict_GET_SIZE(kw))) {
    PyErr_SetString(PyExc_TypeError, "MetasWriter() takes no arguments");
    return nullptr;
  }
  Ref o(type->tp_alloc(type, 0));
  if (!o) return nullptr;
  if (int rc = cudaipc_metas_writer_new(&as_writer(o.get())->w))
    return fail(rc, "making a meta writer");
  return o.release();
}

void writer_dealloc(PyObject* o) {
  if (as_writer(o)->w) cudaipc_metas_writer_free(as_writer(o)->w);
  Py_TYPE(o)->tp_free(o);
}

// Every add's status: a failure raises with the core's message alone, as the Python encoders
// always reported it.
PyObject* status(int rc) {
  if (rc) return fail(rc, nullptr);
  Py_RETURN_NONE;
}

// begin(address, capacity): an area of `capacity` bytes at `address` (None or 0 with 0).
PyObject* w_begin(PyObject* o, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "MetasWriter.begin";
  void* at;
  long long capacity;
  if (!arity(fn, n, 2) || !arg_address(fn, "address", a[0], &at) ||
      !arg_int(fn, "capacity", a[1], 0, UINT32_MAX, &capacity))
    return nullptr;
  if (!at && capacity) {
    PyErr_Format(PyExc_ValueError, "%s: %lld bytes at NULL", fn, capacity);
    return nullptr;
  }
  return status(
      cudaipc_metas_writer_begin(as_writer(o)->w, static_cast<uint8_t*>(at), uint32_t(capacity)));
}

// finish(): the area's size.
PyObject* w_finish(PyObject* o, PyObject*) {
  int64_t size = cudaipc_metas_writer_finish(as_writer(o)->w);
  if (size < 0) return fail(int(-size), nullptr);
  return PyLong_FromLongLong(size);
}

// raw(kind, name, body)
PyObject* w_raw(PyObject* o, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "MetasWriter.raw";
  long long kind;
  Bytes name, body;
  if (!arity(fn, n, 3) || !arg_int(fn, "kind", a[0], 1, 65535, &kind) ||
      !name.take(fn, "name", a[1]) || !body.take(fn, "body", a[2]))
    return nullptr;
  return status(cudaipc_metas_add_raw(as_writer(o)->w, uint32_t(kind), name.data(), name.size(),
                                      body.data(), body.size()));
}

// timestamp(name, caps, timestamp, duration): times in ns or None.
PyObject* w_timestamp(PyObject* o, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "MetasWriter.timestamp";
  Bytes name, caps;
  uint64_t ts, dur;
  if (!arity(fn, n, 4) || !name.take(fn, "name", a[0]) || !caps.take(fn, "caps", a[1]) ||
      !arg_time(fn, "timestamp", a[2], &ts) || !arg_time(fn, "duration", a[3], &dur))
    return nullptr;
  return status(cudaipc_metas_add_timestamp(as_writer(o)->w, name.data(), name.size(), ts, dur,
                                            caps.data(), caps.size()));
}

// tensors(name, items): items a sequence of (id, data type name, dims, data), each but dims
// bytes-like, dims a sequence of ints.
PyObject* w_tensors(PyObject* o, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "MetasWriter.tensors";
  Bytes name;
  if (!arity(fn, n, 2) || !name.take(fn, "name", a[0])) return nullptr;
  Ref items(PySequence_Fast(a[1], "MetasWriter.tensors: items must be a sequence"));
  if (!items) return nullptr;
  Py_ssize_t count = PySequence_Fast_GET_SIZE(items.get());
  std::vector<cudaipc_metas_tensor_in> rows(static_cast<size_t>(count));
  std::vector<Bytes> held(static_cast<size_t>(count) * 3);
  std::string text;
  for (Py_ssize_t k = 0; k < count; ++k) {
    PyObject* item = PySequence_Fast_GET_ITEM(items.get(), k);
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 4) {
      PyErr_Format(PyExc_TypeError, "%s: a tensor is an (id, dtype, dims, data) tuple", fn);
      return nullptr;
    }
    Bytes &id = held[3 * k], &dt = held[3 * k + 1], &data = held[3 * k + 2];
    if (!id.take(fn, "an id", PyTuple_GET_ITEM(item, 0), 1 << 20) ||
        !dt.take(fn, "a data type name", PyTuple_GET_ITEM(item, 1), 1 << 20) ||
        !data.take(fn, "a tensor's data", PyTuple_GET_ITEM(item, 3), UINT64_MAX))
      return nullptr;
    Ref dims(PySequence_Fast(PyTuple_GET_ITEM(item, 2), "MetasWriter.tensors: dims"));
    if (!dims) return nullptr;
    Py_ssize_t nd = PySequence_Fast_GET_SIZE(dims.get());
    if (nd > CUDAIPC_METAS_MAX_DIMS) {
      PyErr_Format(PyExc_ValueError, "%s: %zd dims, at most %d", fn, nd, CUDAIPC_METAS_MAX_DIMS);
      return nullptr;
    }
    cudaipc_metas_tensor_in& r = rows[size_t(k)];
    r.id_offset = uint32_t(text.size());
    r.id_size = id.size();
    text.append(id.data(), id.size());
    r.dtype_offset = uint32_t(text.size());
    r.dtype_size = dt.size();
    text.append(dt.data(), dt.size());
    r.num_dims = uint32_t(nd);
    r.dims_order = 0;
    r.data = data.data();
    r.data_size = data.size64();
    for (Py_ssize_t d = 0; d < nd; ++d)
      if (!arg_u64(fn, "a dim", PySequence_Fast_GET_ITEM(dims.get(), d), &r.dims[d]))
        return nullptr;
  }
  if (count > UINT32_MAX || text.size() > UINT32_MAX) {
    PyErr_Format(PyExc_ValueError, "%s: too many tensors", fn);
    return nullptr;
  }
  return status(cudaipc_metas_add_tensors(as_writer(o)->w, name.data(), name.size(), rows.data(),
                                          uint32_t(count), text.data(), uint32_t(text.size())));
}

// custom_begin(name) / custom_end() / custom_end_nested()
PyObject* w_custom_begin(PyObject* o, PyObject* arg) {
  Bytes name;
  if (!name.take("MetasWriter.custom_begin", "name", arg)) return nullptr;
  return status(cudaipc_metas_custom_begin(as_writer(o)->w, name.data(), name.size()));
}

PyObject* w_custom_end(PyObject* o, PyObject*) {
  return status(cudaipc_metas_custom_end(as_writer(o)->w));
}

PyObject* w_custom_end_nested(PyObject* o, PyObject*) {
  return status(cudaipc_metas_custom_end_nested(as_writer(o)->w));
}

// A custom field's adds: (key, value...), the key bytes-like.
PyObject* w_custom_int64(PyObject* o, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "MetasWriter.custom_int64";
  Bytes key;
  long long v;
  if (!arity(fn, n, 2) || !key.take(fn, "key", a[0]) ||
      !arg_int(fn, "value", a[1], INT64_MIN, INT64_MAX, &v))
    return nullptr;
  return status(cudaipc_metas_custom_int64(as_writer(o)->w, key.data(), key.size(), v));
}

PyObject* w_custom_uint64(PyObject* o, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "MetasWriter.custom_uint64";
  Bytes key;
  uint64_t v;
  if (!arity(fn, n, 2) || !key.take(fn, "key", a[0]) || !arg_u64(fn, "value", a[1], &v))
    return nullptr;
  return status(cudaipc_metas_custom_uint64(as_writer(o)->w, key.data(), key.size(), v));
}

PyObject* w_custom_double(PyObject* o, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "MetasWriter.custom_double";
  Bytes key;
  if (!arity(fn, n, 2) || !key.take(fn, "key", a[0])) return nullptr;
  if (!PyFloat_Check(a[1])) {
    PyErr_Format(PyExc_TypeError, "%s: value must be a float", fn);
    return nullptr;
  }
  return status(cudaipc_metas_custom_double(as_writer(o)->w, key.data(), key.size(),
                                            PyFloat_AS_DOUBLE(a[1])));
}

PyObject* w_custom_boolean(PyObject* o, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "MetasWriter.custom_boolean";
  Bytes key;
  if (!arity(fn, n, 2) || !key.take(fn, "key", a[0])) return nullptr;
  int v = PyObject_IsTrue(a[1]);
  if (v < 0) return nullptr;
  return status(cudaipc_metas_custom_boolean(as_writer(o)->w, key.data(), key.size(), v));
}

PyObject* w_custom_fraction(PyObject* o, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "MetasWriter.custom_fraction";
  Bytes key;
  long long num, den;
  if (!arity(fn, n, 3) || !key.take(fn, "key", a[0]) ||
      !arg_int(fn, "numerator", a[1], INT32_MIN, INT32_MAX, &num) ||
      !arg_int(fn, "denominator", a[2], INT32_MIN, INT32_MAX, &den))
    return nullptr;
  return status(cudaipc_metas_custom_fraction(as_writer(o)->w, key.data(), key.size(), int32_t(num),
                                              int32_t(den)));
}

PyObject* w_custom_string(PyObject* o, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "MetasWriter.custom_string";
  Bytes key, v;
  if (!arity(fn, n, 2) || !key.take(fn, "key", a[0]) || !v.take(fn, "value", a[1])) return nullptr;
  return status(
      cudaipc_metas_custom_string(as_writer(o)->w, key.data(), key.size(), v.data(), v.size()));
}

PyObject* w_custom_bytes(PyObject* o, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "MetasWriter.custom_bytes";
  Bytes key, v;
  if (!arity(fn, n, 2) || !key.take(fn, "key", a[0]) || !v.take(fn, "value", a[1])) return nullptr;
  return status(
      cudaipc_metas_custom_bytes(as_writer(o)->w, key.data(), key.size(), v.data(), v.size()));
}

PyObject* w_custom_other(PyObject* o, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "MetasWriter.custom_other";
  Bytes key, type, text;
  if (!arity(fn, n, 3) || !key.take(fn, "key", a[0]) || !type.take(fn, "type name", a[1]) ||
      !text.take(fn, "text", a[2]))
    return nullptr;
  return status(cudaipc_metas_custom_other(as_writer(o)->w, key.data(), key.size(), type.data(),
                                           type.size(), text.data(), text.size()));
}

PyObject* w_custom_begin_structure(PyObject* o, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "MetasWriter.custom_begin_structure";
  Bytes key, name;
  if (!arity(fn, n, 2) || !key.take(fn, "key", a[0]) || !name.take(fn, "name", a[1]))
    return nullptr;
  return status(cudaipc_metas_custom_begin_structure(as_writer(o)->w, key.data(), key.size(),
                                                     name.data(), name.size()));
}

PyObject* w_custom_begin_array(PyObject* o, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "MetasWriter.custom_begin_array";
  Bytes key;
  if (!arity(fn, n, 2) || !key.take(fn, "key", a[0])) return nullptr;
  int list = PyObject_IsTrue(a[1]);
  if (list < 0) return nullptr;
  return status(cudaipc_metas_custom_begin_array(as_writer(o)->w, key.data(), key.size(), list));
}

PyMethodDef writer_methods[] = {
    {"begin", CUDAIPC_FASTCALL(w_begin), METH_FASTCALL, "begin(address, capacity)"},
    {"finish", w_finish, METH_NOARGS, "finish(): the area's size"},
    {"raw", CUDAIPC_FASTCALL(w_raw), METH_FASTCALL, "raw(kind, name, body)"},
    {"timestamp", CUDAIPC_FASTCALL(w_timestamp), METH_FASTCALL,
     "timestamp(name, caps, timestamp, duration)"},
    {"tensors", CUDAIPC_FASTCALL(w_tensors), METH_FASTCALL,
     "tensors(name, [(id, dtype, dims, data), ...])"},
    {"analytics", CUDAIPC_FASTCALL(writer_analytics), METH_FASTCALL,
     "analytics(name, args): the status of adding the AnalyticsArgs' record"},
    {"custom_begin", w_custom_begin, METH_O, "custom_begin(name)"},
    {"custom_end", w_custom_end, METH_NOARGS, "custom_end()"},
    {"custom_end_nested", w_custom_end_nested, METH_NOARGS, "custom_end_nested()"},
    {"custom_int64", CUDAIPC_FASTCALL(w_custom_int64), METH_FASTCALL, "custom_int64(key, v)"},
    {"custom_uint64", CUDAIPC_FASTCALL(w_custom_uint64), METH_FASTCALL, "custom_uint64(key, v)"},
    {"custom_double", CUDAIPC_FASTCALL(w_custom_double), METH_FASTCALL, "custom_double(key, v)"},
    {"custom_boolean", CUDAIPC_FASTCALL(w_custom_boolean), METH_FASTCALL, "custom_boolean(key, v)"},
    {"custom_fraction", CUDAIPC_FASTCALL(w_custom_fraction), METH_FASTCALL,
     "custom_fraction(key, numerator, denominator)"},
    {"custom_string", CUDAIPC_FASTCALL(w_custom_string), METH_FASTCALL, "custom_string(key, v)"},
    {"custom_bytes", CUDAIPC_FASTCALL(w_custom_bytes), METH_FASTCALL, "custom_bytes(key, v)"},
    {"custom_other", CUDAIPC_FASTCALL(w_custom_other), METH_FASTCALL,
     "custom_other(key, type_name, text)"},
    {"custom_begin_structure", CUDAIPC_FASTCALL(w_custom_begin_structure), METH_FASTCALL,
     "custom_begin_structure(key, name)"},
    {"custom_begin_array", CUDAIPC_FASTCALL(w_custom_begin_array), METH_FASTCALL,
     "custom_begin_array(key, is_list)"},
    {nullptr, nullptr, 0, nullptr}};

// metas_decode(area, size, out, capacity): cudaipc_metas_decode's result (the bytes the decode
// needs, or minus the status); area and out are addresses.
PyObject* metas_decode(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "metas_decode";
  void *area, *out;
  long long size;
  uint64_t capacity;
  if (!arity(fn, n, 4) || !arg_address(fn, "area", a[0], &area) ||
      !arg_int(fn, "size", a[1], 0, UINT32_MAX, &size) || !arg_address(fn, "out", a[2], &out) ||
      !arg_u64(fn, "capacity", a[3], &capacity))
    return nullptr;
  if ((!area && size) || (!out && capacity)) {
    PyErr_Format(PyExc_ValueError, "%s: bytes at NULL", fn);
    return nullptr;
  }
  return PyLong_FromLongLong(
      cudaipc_metas_decode(static_cast<const uint8_t*>(area), uint32_t(size), out, capacity));
}

}  // namespace

cudaipc_metas_writer* writer_of(PyObject* o) {
  return Py_TYPE(o) == &MetasWriterType ? as_writer(o)->w : nullptr;
}

PyTypeObject MetasWriterType = [] {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
#pragma GCC diagnostic pop
  t.tp_name = "cudaipc._native.MetasWriter";
  t.tp_basicsize = sizeof(WriterObject);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "MetasWriter(): the core's meta area writer (cudaipc_metas_writer)";
  t.tp_new = writer_new;
  t.tp_dealloc = writer_dealloc;
  t.tp_methods = writer_methods;
  return t;
}();

PyMethodDef metas_functions[] = {
    {"metas_decode", CUDAIPC_FASTCALL(metas_decode), METH_FASTCALL,
     "metas_decode(area, size, out, capacity): bytes needed, or minus the status"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace cudaipc_py
