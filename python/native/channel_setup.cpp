// Opening and closing a channel's ends: the core's options structs filled here from Python values
// (the package has checked their meaning and worded its own messages; the checks here keep a bad
// value from reaching the core as a truncated integer), the handles handed back as ints.
#include <vector>

#include "native.hpp"

namespace cudaipc_py {

namespace {

PyObject* handle(void* h) {
  return PyLong_FromVoidPtr(h);
}

// producer_new(path, slots, memory, on_full, block_timeout_ns, cuda_device, meta_size, role,
// context): the producer's handle.
PyObject* producer_new(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "producer_new";
  cudaipc_producer_options o;
  cudaipc_producer_options_init(&o);
  long long slots, memory, on_full, device, meta_size, role;
  if (!arity(fn, n, 9) || !(o.path = arg_str(fn, "path", a[0])) ||
      !arg_int(fn, "slots", a[1], 1, CUDAIPC_MAX_SLOTS, &slots) ||
      !arg_int(fn, "memory", a[2], CUDAIPC_MEMORY_HOST, CUDAIPC_MEMORY_CUDA, &memory) ||
      !arg_int(fn, "on_full", a[3], CUDAIPC_BLOCK, CUDAIPC_DROP, &on_full) ||
      !arg_u64(fn, "block_timeout_ns", a[4], &o.block_timeout_ns) ||
      !arg_int(fn, "cuda_device", a[5], 0, INT32_MAX, &device) ||
      !arg_int(fn, "meta_size", a[6], 0, UINT32_MAX, &meta_size) ||
      !arg_int(fn, "role", a[7], CUDAIPC_ROLE_FRAMES, CUDAIPC_ROLE_REQUESTS, &role))
    return nullptr;
  o.slots = uint32_t(slots);
  o.memory = cudaipc_memory(memory);
  o.on_full = cudaipc_full_policy(on_full);
  o.cuda_device = int(device);
  o.meta_size = uint32_t(meta_size);
  o.role = cudaipc_role(role);
  cudaipc_producer* p = nullptr;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = cudaipc_producer_new(&o, &p);
  Py_END_ALLOW_THREADS if (rc) return fail_in(rc, a[8]);
  PyObject* h = producer_opened(p);
  if (!h) cudaipc_producer_free(p);
  return h;
}

// producer_free(h, eos=False): once the calls in it have left (woken), ends the stream when `eos`
// (after every frame that will ever be published) and waits (GIL released) for the copies still
// in flight.
PyObject* producer_free(PyObject*, PyObject* const* a, Py_ssize_t n) {
  if (n < 1 || n > 2) return arity("producer_free", n, 2), nullptr;
  int eos = n == 2 ? PyObject_IsTrue(a[1]) : 0;
  if (eos < 0) return nullptr;
  return producer_close("producer_free", a[0], eos != 0);
}

// consumer_new(path, mode, reconnect, cuda_device, context): the consumer's handle; cuda_device
// -1 reads on the producer's.
PyObject* consumer_new(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "consumer_new";
  cudaipc_consumer_options o;
  cudaipc_consumer_options_init(&o);
  long long mode, device;
  if (!arity(fn, n, 5) || !(o.path = arg_str(fn, "path", a[0])) ||
      !arg_int(fn, "mode", a[1], CUDAIPC_EVERY_FRAME, CUDAIPC_LATEST, &mode) ||
      !arg_int(fn, "cuda_device", a[3], -1, INT32_MAX, &device))
    return nullptr;
  int reconnect = PyObject_IsTrue(a[2]);
  if (reconnect < 0) return nullptr;
  o.mode = cudaipc_mode(mode);
  o.reconnect = reconnect;
  o.cuda_device = int(device);
  cudaipc_consumer* c = nullptr;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = cudaipc_consumer_new(&o, &c);
  Py_END_ALLOW_THREADS if (rc) return fail_in(rc, a[4]);
  return handle(c);
}

PyObject* consumer_close(PyObject*, PyObject* h) {
  cudaipc_consumer* c;
  if (!arg_handle("consumer_close", h, &c)) return nullptr;
  Py_BEGIN_ALLOW_THREADS cudaipc_consumer_close(c);
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

PyObject* consumer_free(PyObject*, PyObject* h) {
  cudaipc_consumer* c;
  if (!arg_handle("consumer_free", h, &c)) return nullptr;
  Py_BEGIN_ALLOW_THREADS cudaipc_consumer_free(c);
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

// server_new(paths, directory, cuda_device, reply_slots, reply_meta_size, queue_depth,
// socket_mode, allowed_gid, context): the server's handle. paths a list of str, directory a str or
// None, allowed_gid -1 for none.
PyObject* server_new(PyObject*, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "server_new";
  cudaipc_server_options o;
  cudaipc_server_options_init(&o);
  long long device, reply_slots, reply_meta_size, queue_depth, mode, gid;
  if (!arity(fn, n, 9)) return nullptr;
  if (!PyList_Check(a[0])) {
    PyErr_Format(PyExc_TypeError, "%s: paths must be a list of str", fn);
    return nullptr;
  }
  Py_ssize_t count = PyList_GET_SIZE(a[0]);
  // The list's items are held for the call: the core copies the paths before it returns.
  Ref items(PyList_AsTuple(a[0]));
  if (!items) return nullptr;
  std::vector<const char*> paths;
  for (Py_ssize_t i = 0; i < count; ++i) {
    const char* p = arg_str(fn, "a path", PyTuple_GET_ITEM(items.get(), i));
    if (!p) return nullptr;
    paths.push_back(p);
  }
  if (a[1] != Py_None && !(o.directory = arg_str(fn, "directory", a[1]))) return nullptr;
  if (!arg_int(fn, "cuda_device", a[2], -1, INT32_MAX, &device) ||
      !arg_int(fn, "reply_slots", a[3], 1, 32, &reply_slots) ||
      !arg_int(fn, "reply_meta_size", a[4], 0, UINT32_MAX, &reply_meta_size) ||
      !arg_int(fn, "queue_depth", a[5], 1, 64, &queue_depth) ||
      !arg_int(fn, "socket_mode", a[6], 0, 0777, &mode) ||
      !arg_int(fn, "allowed_gid", a[7], -1, UINT32_MAX, &gid))
    return nullptr;
  o.paths = paths.data();
  o.path_count = uint32_t(count);
  o.cuda_device = int32_t(device);
  o.reply_slots = uint32_t(reply_slots);
  o.reply_meta_size = uint32_t(reply_meta_size);
  o.queue_depth = uint32_t(queue_depth);
  o.socket_mode = uint32_t(mode);
  o.allowed_gid = gid;
  cudaipc_server* s = nullptr;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = cudaipc_server_new(&o, &s);
  Py_END_ALLOW_THREADS if (rc) return fail_in(rc, a[8]);
  return handle(s);
}

// server_free(h): closes the reply channels (GIL released: it drains them).
PyObject* server_free(PyObject*, PyObject* h) {
  cudaipc_server* s;
  if (!arg_handle("server_free", h, &s)) return nullptr;
  Py_BEGIN_ALLOW_THREADS cudaipc_server_free(s);
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

}  // namespace

PyMethodDef channel_setup_functions[] = {
    {"producer_new", CUDAIPC_FASTCALL(producer_new), METH_FASTCALL,
     "producer_new(path, slots, memory, on_full, block_timeout_ns, cuda_device, meta_size, role, "
     "context): a producer's handle"},
    {"producer_free", CUDAIPC_FASTCALL(producer_free), METH_FASTCALL,
     "producer_free(h, eos=False): closes the producer once the calls in it have left"},
    {"consumer_new", CUDAIPC_FASTCALL(consumer_new), METH_FASTCALL,
     "consumer_new(path, mode, reconnect, cuda_device, context): a consumer's handle"},
    {"consumer_close", consumer_close, METH_O, "consumer_close(h)"},
    {"consumer_free", consumer_free, METH_O, "consumer_free(h)"},
    {"server_new", CUDAIPC_FASTCALL(server_new), METH_FASTCALL,
     "server_new(paths, directory, cuda_device, reply_slots, reply_meta_size, queue_depth, "
     "socket_mode, allowed_gid, context): a server's handle"},
    {"server_free", server_free, METH_O, "server_free(h)"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace cudaipc_py
