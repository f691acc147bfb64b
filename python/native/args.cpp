// The checks every function of the module puts its Python arguments through: a wrong type or an
// out-of-range value raises here, naming the call, instead of reaching the core as a bad pointer or
// a truncated integer.
#include <cstring>

#include "native.hpp"

namespace cudaipc_py {

CUDAIPC_PY_HOT bool parse(const char* what, PyObject* const* args, Py_ssize_t nargs,
                          PyObject* kwnames, const char* const* names, PyObject** out,
                          Py_ssize_t count) {
  for (Py_ssize_t i = 0; i < count; ++i) out[i] = Py_None;
  if (nargs > count) {
    PyErr_Format(PyExc_TypeError, "%s takes at most %zd arguments", what, count);
    return false;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) out[i] = args[i];
  Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nk; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    Py_ssize_t i = 0;
    for (; i < count; ++i)
      if (key_is(key, names[i])) break;
    if (i == count) {
      PyErr_Format(PyExc_TypeError, "%s got an unexpected keyword argument '%U'", what, key);
      return false;
    }
    if (i < nargs) {
      PyErr_Format(PyExc_TypeError, "%s got multiple values for argument '%U'", what, key);
      return false;
    }
    out[i] = args[nargs + k];
  }
  return true;
}

bool arity(const char* fn, Py_ssize_t nargs, Py_ssize_t want) {
  if (nargs == want) return true;
  PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", fn, want, nargs);
  return false;
}

namespace {

bool is_int(const char* fn, const char* name, PyObject* o) {
  if (PyLong_Check(o)) return true;
  PyErr_Format(PyExc_TypeError, "%s: %s must be an int, not %.100s", fn, name, Py_TYPE(o)->tp_name);
  return false;
}

}  // namespace

bool arg_int(const char* fn, const char* name, PyObject* o, long long lo, long long hi,
             long long* out) {
  if (!is_int(fn, name, o)) return false;
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (v == -1 && PyErr_Occurred()) return false;
  if (overflow || v < lo || v > hi) {
    PyErr_Format(PyExc_ValueError, "%s: %s %R is not between %lld and %lld", fn, name, o, lo, hi);
    return false;
  }
  *out = v;
  return true;
}

bool arg_u64(const char* fn, const char* name, PyObject* o, uint64_t* out) {
  if (!is_int(fn, name, o)) return false;
  unsigned long long v = PyLong_AsUnsignedLongLong(o);
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Format(PyExc_ValueError, "%s: %s %R is not between 0 and 2**64 - 1", fn, name, o);
    return false;
  }
  *out = v;
  return true;
}

bool arg_time(const char* fn, const char* name, PyObject* o, uint64_t* out) {
  if (o == Py_None) {
    *out = kNoTime;
    return true;
  }
  return arg_u64(fn, name, o, out);
}

bool arg_address(const char* fn, const char* name, PyObject* o, void** out) {
  if (o == Py_None) {
    *out = nullptr;
    return true;
  }
  uint64_t v;
  if (!arg_u64(fn, name, o, &v)) return false;
  *out = reinterpret_cast<void*>(static_cast<uintptr_t>(v));
  return true;
}

bool arg_handle(const char* fn, PyObject* o, void** out) {
  if (o == Py_None) {
    PyErr_Format(PyExc_ValueError, "%s: the handle is None (closed)", fn);
    return false;
  }
  if (!arg_address(fn, "the handle", o, out)) return false;
  if (*out) return true;
  PyErr_Format(PyExc_ValueError, "%s: a NULL handle", fn);
  return false;
}

const char* arg_str(const char* fn, const char* name, PyObject* o) {
  if (!PyUnicode_Check(o)) {
    PyErr_Format(PyExc_TypeError, "%s: %s must be a str, not %.100s", fn, name,
                 Py_TYPE(o)->tp_name);
    return nullptr;
  }
  Py_ssize_t n;
  const char* s = PyUnicode_AsUTF8AndSize(o, &n);
  if (s && static_cast<Py_ssize_t>(strlen(s)) != n) {
    PyErr_Format(PyExc_ValueError, "%s: %s contains a NUL character", fn, name);
    return nullptr;
  }
  return s;
}

PyObject* fail_in(int status, PyObject* context) {
  const char* text = context && PyUnicode_Check(context) ? PyUnicode_AsUTF8(context) : nullptr;
  if (!text) PyErr_Clear();
  return fail(status, text);
}

PyObject* tensor_tuple(const cudaipc_tensor& t) {
  uint32_t rank = t.rank < CUDAIPC_MAX_RANK ? t.rank : CUDAIPC_MAX_RANK;
  Ref shape(PyTuple_New(rank)), strides(PyTuple_New(rank));
  if (!shape || !strides) return nullptr;
  for (uint32_t i = 0; i < rank; ++i) {
    PyObject* n = PyLong_FromLongLong(t.shape[i]);
    if (!n) return nullptr;
    PyTuple_SET_ITEM(shape.get(), i, n);
    PyObject* s = PyLong_FromLongLong(t.strides[i]);
    if (!s) return nullptr;
    PyTuple_SET_ITEM(strides.get(), i, s);
  }
  return Py_BuildValue("(kOO)", static_cast<unsigned long>(t.dtype), shape.get(), strides.get());
}

}  // namespace cudaipc_py
