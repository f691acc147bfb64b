// A server's calls beside the batch (server.cpp) and the reply fast path (results.cpp): adding a
// filter, listing pipelines, the events logged, a request's format, the plain reply with an encoded
// meta area, and the GPU replies' call with its buffer of cudaipc_reply_results.
#include <cstring>
#include <vector>

#include "native.hpp"

namespace cudaipc_py {

namespace {

PyObject* text(const char* s) {
  if (!s) s = "";
  return PyUnicode_DecodeUTF8(s, strlen(s), "replace");
}

// server_add(h, path, context): the new pipeline's number.
PyObject* server_add(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "server_add";
  cudaipc_server* s;
  if (!arity(fn, n, 3) || !arg_handle(fn, a[0], &s)) return nullptr;
  const char* path = arg_str(fn, "path", a[1]);
  if (!path) return nullptr;
  uint32_t pipeline = 0;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = cudaipc_server_add(s, path, &pipeline);
  Py_END_ALLOW_THREADS if (rc) return fail_in(rc, a[2]);
  return PyLong_FromUnsignedLong(pipeline);
}

// server_pipelines(h): [(id, path, connected, queued, requests, replies, replies_lost), ...].
PyObject* server_pipelines(PyObject*, PyObject* h) {
  cudaipc_server* s;
  if (!arg_handle("server_pipelines", h, &s)) return nullptr;
  uint32_t count = 0;
  if (int rc = cudaipc_server_pipelines(s, nullptr, 0, &count))
    return fail(rc, "listing pipelines");
  // Room for a few more: pipelines may join between the two calls.
  uint32_t room = count + 8;
  std::vector<cudaipc_server_pipeline> out(room);
  if (int rc = cudaipc_server_pipelines(s, out.data(), room, &count))
    return fail(rc, "listing pipelines");
  uint32_t shown = count < room ? count : room;
  Ref list(PyList_New(shown));
  if (!list) return nullptr;
  for (uint32_t i = 0; i < shown; ++i) {
    const cudaipc_server_pipeline& p = out[i];
    PyObject* row = Py_BuildValue(
        "(kNOkKKK)", static_cast<unsigned long>(p.id), text(p.path),
        p.connected ? Py_True : Py_False, static_cast<unsigned long>(p.queued),
        static_cast<unsigned long long>(p.requests), static_cast<unsigned long long>(p.replies),
        static_cast<unsigned long long>(p.replies_lost));
    if (!row) return nullptr;
    PyList_SET_ITEM(list.get(), i, row);
  }
  return list.release();
}

// server_next_event(h): (type, pipeline, path, message), or None when there is none.
PyObject* server_next_event(PyObject*, PyObject* h) {
  cudaipc_server* s;
  if (!arg_handle("server_next_event", h, &s)) return nullptr;
  cudaipc_server_event ev{};
  if (int rc = cudaipc_server_next_event(s, &ev)) return fail(rc, "server events");
  if (!ev.type) Py_RETURN_NONE;
  return Py_BuildValue("(ikNN)", ev.type, static_cast<unsigned long>(ev.pipeline), text(ev.path),
                       text(ev.message));
}

// request_format(h): (caps, generation). Its stream is the frame's (frame_cuda_stream), asked
// for only when handed out.
PyObject* request_format(PyObject*, PyObject* h) {
  cudaipc_frame* f;
  if (!arg_handle("request_format", h, &f)) return nullptr;
  const char* caps = nullptr;
  uint64_t generation = 0;
  if (int rc = cudaipc_request_format(f, &caps, &generation, nullptr))
    return fail(rc, "a request's format");
  return Py_BuildValue("(NK)", text(caps), static_cast<unsigned long long>(generation));
}

// server_reply(h, request, metas, metas_size): cudaipc_server_reply's status (a timeout is an
// answer given up, which the caller tells apart from a failure).
PyObject* server_reply(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "server_reply";
  cudaipc_server* s;
  cudaipc_frame* f;
  void* metas;
  long long size;
  if (!arity(fn, n, 4) || !arg_handle(fn, a[0], &s) || !arg_handle(fn, a[1], &f) ||
      !arg_address(fn, "metas", a[2], &metas) ||
      !arg_int(fn, "metas_size", a[3], 0, UINT32_MAX, &size))
    return nullptr;
  if (!metas && size) {
    PyErr_Format(PyExc_ValueError, "%s: %lld bytes of metas at NULL", fn, size);
    return nullptr;
  }
  int rc;
  // The reply may wait for a slot of the reply channel.
  Py_BEGIN_ALLOW_THREADS rc = cudaipc_server_reply(s, f, metas, uint32_t(size));
  Py_END_ALLOW_THREADS return PyLong_FromLong(rc);
}

PyObject* server_interrupt(PyObject*, PyObject* h) {
  cudaipc_server* s;
  if (!arg_handle("server_interrupt", h, &s)) return nullptr;
  Py_BEGIN_ALLOW_THREADS cudaipc_server_interrupt(s);
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

}  // namespace

PyMethodDef server_admin_functions[] = {
    {"server_add", CUDAIPC_FASTCALL(server_add), METH_FASTCALL,
     "server_add(h, path, context): the new pipeline's number"},
    {"server_pipelines", server_pipelines, METH_O,
     "server_pipelines(h): [(id, path, connected, queued, requests, replies, replies_lost)]"},
    {"server_next_event", server_next_event, METH_O,
     "server_next_event(h): (type, pipeline, path, message) or None"},
    {"request_format", request_format, METH_O, "request_format(h): (caps, generation)"},
    {"server_reply", CUDAIPC_FASTCALL(server_reply), METH_FASTCALL,
     "server_reply(h, request, metas, metas_size): the status"},
    {"server_interrupt", server_interrupt, METH_O, "server_interrupt(h)"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace cudaipc_py
