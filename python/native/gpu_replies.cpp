// The buffer of cudaipc_reply_results the package's GPU replies (_server_gpu.py: a batch of
// replies whose detections are torch tensors on the GPU) are packed into, and the one call that
// queues them. Packing a reply stores Python's ints in C: no struct module, no ctypes buffer.
#include <memory>
#include <new>
#include <vector>

#include "native.hpp"

namespace cudaipc_py {

namespace {

struct ReplyBatchObject {
  PyObject_HEAD std::vector<cudaipc_reply_results>* rows;  // capacity rows, made once
};

ReplyBatchObject* as_batch(PyObject* o) {
  return reinterpret_cast<ReplyBatchObject*>(o);
}

PyObject* batch_new(PyTypeObject* type, PyObject* args, PyObject* kw) {
  unsigned int capacity = 0;
  static const char* names[] = {"capacity", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kw, "I:ReplyBatch", const_cast<char**>(names), &capacity))
    return nullptr;
  if (capacity < 1 || capacity > kMaxBatch) {
    PyErr_Format(PyExc_ValueError, "ReplyBatch: capacity %u is not between 1 and %u", capacity,
                 kMaxBatch);
    return nullptr;
  }
  Ref o(type->tp_alloc(type, 0));
  if (!o) return nullptr;
  try {
    as_batch(o.get())->rows =
        std::make_unique<std::vector<cudaipc_reply_results>>(capacity).release();
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  }
  return o.release();
}

void batch_dealloc(PyObject* o) {
  std::unique_ptr<std::vector<cudaipc_reply_results>> rows(as_batch(o)->rows);
  Py_TYPE(o)->tp_free(o);
}

bool row_index(const char* fn, PyObject* self, PyObject* arg, cudaipc_reply_results** out) {
  long long i;
  auto& rows = *as_batch(self)->rows;
  if (!arg_int(fn, "i", arg, 0, static_cast<long long>(rows.size()) - 1, &i)) return false;
  *out = &rows[size_t(i)];
  return true;
}

// pack(i, request, n, boxes, scores, labels, rotation, boxes_stride0, boxes_stride1,
// scores_stride, labels_stride, rotation_stride, boxes_dtype, scores_dtype, labels_dtype,
// rotation_dtype, names, name_offsets, name_count, flags): reply i, without metas.
PyObject* b_pack(PyObject* self, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "ReplyBatch.pack";
  cudaipc_reply_results* r;
  if (!arity(fn, n, 20) || !row_index(fn, self, a[0], &r)) return nullptr;
  cudaipc_reply_results v{};
  void* request;
  long long count, dt[4], name_count, flags;
  void* at[4];
  void *names, *offsets;
  if (!arg_handle(fn, a[1], &request) || !arg_int(fn, "n", a[2], 0, UINT32_MAX, &count))
    return nullptr;
  for (int k = 0; k < 4; ++k)
    if (!arg_address(fn, "an array", a[3 + k], &at[k])) return nullptr;
  long long strides[5];
  for (int k = 0; k < 5; ++k)
    if (!arg_int(fn, "a stride", a[7 + k], INT64_MIN, INT64_MAX, &strides[k])) return nullptr;
  for (int k = 0; k < 4; ++k)
    if (!arg_int(fn, "a dtype", a[12 + k], 0, UINT32_MAX, &dt[k])) return nullptr;
  if (!arg_address(fn, "names", a[16], &names) ||
      !arg_address(fn, "name_offsets", a[17], &offsets) ||
      !arg_int(fn, "name_count", a[18], 0, UINT32_MAX, &name_count) ||
      !arg_int(fn, "flags", a[19], 0, UINT32_MAX, &flags))
    return nullptr;
  if (!at[0] && count) {
    PyErr_Format(PyExc_ValueError, "%s: %lld boxes at NULL", fn, count);
    return nullptr;
  }
  v.request = static_cast<cudaipc_frame*>(request);
  v.n = uint32_t(count);
  v.boxes = at[0];
  v.scores = at[1];
  v.labels = at[2];
  v.rotation = at[3];
  v.boxes_strides[0] = strides[0];
  v.boxes_strides[1] = strides[1];
  v.scores_stride = strides[2];
  v.labels_stride = strides[3];
  v.rotation_stride = strides[4];
  v.boxes_dtype = uint32_t(dt[0]);
  v.scores_dtype = uint32_t(dt[1]);
  v.labels_dtype = uint32_t(dt[2]);
  v.rotation_dtype = uint32_t(dt[3]);
  v.names = static_cast<const uint8_t*>(names);
  v.name_offsets = static_cast<const uint32_t*>(offsets);
  v.name_count = uint32_t(name_count);
  v.flags = uint32_t(flags);
  *r = v;
  Py_RETURN_NONE;
}

// set_metas(i, address, size): reply i's records ready on the host.
PyObject* b_set_metas(PyObject* self, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "ReplyBatch.set_metas";
  cudaipc_reply_results* r;
  void* at;
  long long size;
  if (!arity(fn, n, 3) || !row_index(fn, self, a[0], &r) ||
      !arg_address(fn, "address", a[1], &at) || !arg_int(fn, "size", a[2], 0, UINT32_MAX, &size))
    return nullptr;
  if (!at && size) {
    PyErr_Format(PyExc_ValueError, "%s: %lld bytes at NULL", fn, size);
    return nullptr;
  }
  r->metas = at;
  r->metas_size = uint32_t(size);
  Py_RETURN_NONE;
}

// send(server, count, stream, release): cudaipc_server_reply_results of the first `count` rows;
// (status, replies queued).
PyObject* b_send(PyObject* self, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "ReplyBatch.send";
  cudaipc_server* s;
  long long count;
  void* stream;
  auto& rows = *as_batch(self)->rows;
  if (!arity(fn, n, 4) || !arg_handle(fn, a[0], &s) ||
      !arg_int(fn, "count", a[1], 0, static_cast<long long>(rows.size()), &count) ||
      !arg_address(fn, "stream", a[2], &stream))
    return nullptr;
  int release = PyObject_IsTrue(a[3]);
  if (release < 0) return nullptr;
  uint32_t sent = 0;
  uint64_t ticket = 0;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = cudaipc_server_reply_results(s, stream, rows.data(), uint32_t(count),
                                                           release, &sent, &ticket);
  Py_END_ALLOW_THREADS return Py_BuildValue("(ik)", rc, static_cast<unsigned long>(sent));
}

PyMethodDef batch_methods[] = {
    {"pack", CUDAIPC_FASTCALL(b_pack), METH_FASTCALL, "pack(i, request, n, ...): reply i"},
    {"set_metas", CUDAIPC_FASTCALL(b_set_metas), METH_FASTCALL,
     "set_metas(i, address, size): reply i's records on the host"},
    {"send", CUDAIPC_FASTCALL(b_send), METH_FASTCALL,
     "send(server, count, stream, release): (status, replies queued)"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PyTypeObject ReplyBatchType = [] {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
#pragma GCC diagnostic pop
  t.tp_name = "cudaipc._native.ReplyBatch";
  t.tp_basicsize = sizeof(ReplyBatchObject);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "ReplyBatch(capacity): cudaipc_reply_results rows and their one call";
  t.tp_new = batch_new;
  t.tp_dealloc = batch_dealloc;
  t.tp_methods = batch_methods;
  return t;
}();

}  // namespace cudaipc_py
