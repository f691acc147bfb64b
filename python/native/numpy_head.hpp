// NumPy's array object as its C API lays it out (PyArrayObject_fields in numpy/ndarraytypes.h, the
// same from NumPy 1.7 through 2.x), read in place where attributes or the buffer protocol cost a
// frame's path microseconds of the GPU machine's CPU (issue #39). Read only for a type whose head
// was first seen to agree with what NumPy itself says of the same array.
#pragma once

#include <Python.h>

namespace cudaipc_py {

struct NumpyHead {
  PyObject_HEAD char* data;
  int nd;
  Py_ssize_t* dimensions;
  Py_ssize_t* strides;
  PyObject* base;
  PyObject* descr;
  int flags;  // a.flags.aligned = False, set on an alias, would stay with the next frame's
};

// NPY_ARRAY_C_CONTIGUOUS and NPY_ARRAY_ALIGNED: NumPy keeps them right as an array's shape or
// strides change in place. An array read in place has both.
constexpr int kNumpyCContiguous = 0x0001;
constexpr int kNumpyAligned = 0x0100;
constexpr int kNumpyReadable = kNumpyCContiguous | kNumpyAligned;

inline const NumpyHead* numpy_head(const PyObject* o) {
  return reinterpret_cast<const NumpyHead*>(o);
}

// Whether `o`'s type is large enough to hold the head at all (a check before the first read).
inline bool may_hold_numpy_head(const PyObject* o) {
  return Py_TYPE(o)->tp_basicsize >= Py_ssize_t(sizeof(NumpyHead));
}

// Whether `a` and `b` hold the same `n` sizes (dimensions or strides; either may be NULL when n is
// 0): a loop over the few of them, not a call into libc's memcmp, whose code is one more place to
// fetch after each wait for a frame.
inline bool same_sizes(const Py_ssize_t* a, const Py_ssize_t* b, int n) {
  if (n > 0 && (!a || !b)) return false;
  for (int i = 0; i < n; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

}  // namespace cudaipc_py
