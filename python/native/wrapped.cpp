// Capsules of memory a Python object owns (a NumPy array NumPy will not export, an object with only
// __cuda_array_interface__), for the producer's publish: the core fills the DLPack tensor, and the
// object is kept until the importer deletes it (or the capsule dies unconsumed).
#include "native.hpp"

namespace cudaipc_py {

namespace {

// The core's `done` for a wrapped tensor: runs once, on whatever thread deletes it, with or
// without the GIL. An interpreter that is shutting down is left alone (the reference with it). A
// thread of another library that passes this check just as the interpreter starts to finalize
// blocks in PyGILState_Ensure for good (CPython's rule for threads it does not own); the window is
// the same as for any C callback into Python (ctypes' included), and a tensor freed that late is
// rare.
void drop_owner(void* ctx) {
#if PY_VERSION_HEX >= 0x030D0000
  if (!Py_IsInitialized() || Py_IsFinalizing()) return;
#else
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
#endif
  PyGILState_STATE state = PyGILState_Ensure();
  Py_DECREF(static_cast<PyObject*>(ctx));
  PyGILState_Release(state);
}

bool arg_dims(const char* fn, const char* name, PyObject* o, int64_t* out, Py_ssize_t* n) {
  if (!PyTuple_Check(o)) {
    PyErr_Format(PyExc_TypeError, "%s: %s must be a tuple, not %.100s", fn, name,
                 Py_TYPE(o)->tp_name);
    return false;
  }
  *n = PyTuple_GET_SIZE(o);
  if (*n > CUDAIPC_MAX_RANK) {
    PyErr_Format(PyExc_BufferError, "%s: rank %zd is more than cudaipc carries (%d)", fn, *n,
                 CUDAIPC_MAX_RANK);
    return false;
  }
  for (Py_ssize_t i = 0; i < *n; ++i) {
    long long v;
    if (!arg_int(fn, name, PyTuple_GET_ITEM(o, i), INT64_MIN, INT64_MAX, &v)) return false;
    out[i] = v;
  }
  return true;
}

// wrap_capsule(data, device_type, device_id, dtype, shape, byte_strides, flags, owner)
PyObject* wrap_capsule(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  const char* fn = "wrap_capsule";
  if (!arity(fn, nargs, 8)) return nullptr;
  void* data;
  long long device_type, device_id, dtype, flags;
  if (!arg_address(fn, "data", args[0], &data) ||
      !arg_int(fn, "device_type", args[1], 0, INT32_MAX, &device_type) ||
      !arg_int(fn, "device_id", args[2], 0, INT32_MAX, &device_id) ||
      !arg_int(fn, "dtype", args[3], 0, UINT32_MAX, &dtype) ||
      !arg_int(fn, "flags", args[6], 0, CUDAIPC_DLPACK_VERSIONED | CUDAIPC_DLPACK_READ_ONLY,
               &flags))
    return nullptr;
  cudaipc_tensor t{};
  t.dtype = static_cast<uint32_t>(dtype);
  Py_ssize_t rank, strides;
  if (!arg_dims(fn, "shape", args[4], t.shape, &rank) ||
      !arg_dims(fn, "byte_strides", args[5], t.strides, &strides))
    return nullptr;
  if (strides != rank) {
    PyErr_Format(PyExc_ValueError, "%s: %zd strides for a shape of rank %zd", fn, strides, rank);
    return nullptr;
  }
  t.rank = static_cast<uint32_t>(rank);
  PyObject* owner = args[7];
  Py_INCREF(owner);  // the tensor's from here on: drop_owner gives it back
  cudaipc_dl_device device{static_cast<int32_t>(device_type), static_cast<int32_t>(device_id)};
  void* capsule = cudaipc_dlpack_wrap_capsule(&t, data, device, static_cast<uint32_t>(flags),
                                              drop_owner, owner);
  if (capsule) return static_cast<PyObject*>(capsule);
  Py_DECREF(owner);  // no tensor: drop_owner will not run
  return capsule_error(true);
}

PyObject* wrapped_alive(PyObject*, PyObject*) {
  return PyLong_FromUnsignedLongLong(cudaipc_dlpack_wrapped_alive());
}

}  // namespace

PyMethodDef wrapped_functions[] = {
    {"wrap_capsule", CUDAIPC_FASTCALL(wrap_capsule), METH_FASTCALL,
     "wrap_capsule(data, device_type, device_id, dtype, shape, byte_strides, flags, owner): a "
     "DLPack capsule viewing `data` that keeps `owner` until its tensor is deleted"},
    {"dlpack_wrapped_alive", wrapped_alive, METH_NOARGS, "wrapped tensors alive in this process"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace cudaipc_py
