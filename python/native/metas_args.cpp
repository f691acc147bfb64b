// The core's argument structs of the detections writers (cudaipc_detections for the one-call area,
// cudaipc_metas_analytics for an analytics record) as small objects whose fields Python sets once
// per array it stages (the arrays' addresses, counts), so a frame's call passes one object instead
// of a dozen arguments.
#include "native.hpp"

#include <structmember.h>

#include <cstddef>

namespace cudaipc_py {

namespace {

static_assert(sizeof(void*) == sizeof(unsigned long long), "pointer fields are set as T_ULONGLONG");

struct DetectionsObject {
  PyObject_HEAD cudaipc_detections d;
};

struct AnalyticsObject {
  PyObject_HEAD cudaipc_metas_analytics a;
};

template <class T>
PyObject* args_new(PyTypeObject* type, PyObject* args, PyObject* kw) {
  if (PyTuple_GET_SIZE(args) || (kw && PyDict_GET_SIZE(kw))) {
    PyErr_Format(PyExc_TypeError, "%s() takes no arguments", type->tp_name);
    return nullptr;
  }
  return type->tp_alloc(type, 0);  // zeroed: every array NULL, every count 0
}

#define DET(name, type)                                                                          \
  {                                                                                              \
#name, type, Py_ssize_t(offsetof(DetectionsObject, d) + offsetof(cudaipc_detections, name)), \
        0, nullptr                                                                               \
  }
#define ANA(name, type)                                                                        \
  {                                                                                            \
#name, type,                                                                               \
        Py_ssize_t(offsetof(AnalyticsObject, a) + offsetof(cudaipc_metas_analytics, name)), 0, \
        nullptr                                                                                \
  }

PyMemberDef detections_members[] = {
    DET(area, T_ULONGLONG),   DET(capacity, T_UINT),      DET(n, T_UINT),
    DET(boxes, T_ULONGLONG),  DET(scores, T_ULONGLONG),   DET(rotation, T_ULONGLONG),
    DET(labels, T_ULONGLONG), DET(names, T_ULONGLONG),    DET(name_offsets, T_ULONGLONG),
    DET(name_count, T_UINT),  {nullptr, 0, 0, 0, nullptr}};

PyMemberDef analytics_members[] = {ANA(n, T_UINT),
                                   ANA(boxes_f64, T_UINT),
                                   ANA(boxes, T_ULONGLONG),
                                   ANA(scores, T_ULONGLONG),
                                   ANA(rotation, T_ULONGLONG),
                                   ANA(labels, T_ULONGLONG),
                                   ANA(classifications, T_UINT),
                                   ANA(tracks, T_UINT),
                                   ANA(class_detection, T_ULONGLONG),
                                   ANA(class_first, T_ULONGLONG),
                                   ANA(class_scores, T_ULONGLONG),
                                   ANA(class_labels, T_ULONGLONG),
                                   ANA(track_detection, T_ULONGLONG),
                                   ANA(track_ids, T_ULONGLONG),
                                   ANA(first_seen, T_ULONGLONG),
                                   ANA(last_seen, T_ULONGLONG),
                                   ANA(lost, T_ULONGLONG),
                                   ANA(relations, T_ULONGLONG),
                                   ANA(relation_count, T_UINT),
                                   ANA(name_count, T_UINT),
                                   ANA(names, T_ULONGLONG),
                                   ANA(name_offsets, T_ULONGLONG),
                                   {nullptr, 0, 0, 0, nullptr}};

// metas_detections_area(args): the area's size, or minus the status.
PyObject* metas_detections_area(PyObject*, PyObject* args) {
  if (Py_TYPE(args) != &DetectionsArgsType) {
    PyErr_SetString(PyExc_TypeError, "metas_detections_area: args must be a DetectionsArgs");
    return nullptr;
  }
  const cudaipc_detections& d = reinterpret_cast<DetectionsObject*>(args)->d;
  if (!d.area && d.capacity) {
    PyErr_SetString(PyExc_ValueError, "metas_detections_area: an area of bytes at NULL");
    return nullptr;
  }
  return PyLong_FromLongLong(cudaipc_metas_detections_area(&d));
}

}  // namespace

PyObject* writer_analytics(PyObject* self, PyObject* const* a, Py_ssize_t n) {
  const char* fn = "MetasWriter.analytics";
  if (!arity(fn, n, 2)) return nullptr;
  if (!PyBytes_Check(a[0]) || Py_TYPE(a[1]) != &AnalyticsArgsType) {
    PyErr_Format(PyExc_TypeError, "%s: (name as bytes, AnalyticsArgs)", fn);
    return nullptr;
  }
  cudaipc_metas_writer* w = writer_of(self);
  if (!w) {
    PyErr_Format(PyExc_TypeError, "%s: not a MetasWriter", fn);
    return nullptr;
  }
  Py_ssize_t size = PyBytes_GET_SIZE(a[0]);
  if (size > UINT32_MAX) {
    PyErr_Format(PyExc_ValueError, "%s: the name is too long", fn);
    return nullptr;
  }
  return PyLong_FromLong(cudaipc_metas_add_analytics(w, PyBytes_AS_STRING(a[0]), uint32_t(size),
                                                     &reinterpret_cast<AnalyticsObject*>(a[1])->a));
}

PyTypeObject DetectionsArgsType = [] {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
#pragma GCC diagnostic pop
  t.tp_name = "cudaipc._native.DetectionsArgs";
  t.tp_basicsize = sizeof(DetectionsObject);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "cudaipc_detections: the one-call detections area's arguments";
  t.tp_new = args_new<DetectionsObject>;
  t.tp_members = detections_members;
  return t;
}();

PyTypeObject AnalyticsArgsType = [] {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
#pragma GCC diagnostic pop
  t.tp_name = "cudaipc._native.AnalyticsArgs";
  t.tp_basicsize = sizeof(AnalyticsObject);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "cudaipc_metas_analytics: an analytics record's arguments";
  t.tp_new = args_new<AnalyticsObject>;
  t.tp_members = analytics_members;
  return t;
}();

PyMethodDef metas_args_functions[] = {
    {"metas_detections_area", metas_detections_area, METH_O,
     "metas_detections_area(args): the area's size, or minus the status"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace cudaipc_py
