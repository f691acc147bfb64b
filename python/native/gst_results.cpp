// cudaipc.gst_detections in C (issue #39: one binding): a Gst.Buffer's detections in a PyGObject
// application, read through GStreamer's own C API from the GstAnalyticsRelationMeta of 1.24+ or
// the CudaipcAnalyticsMeta custom meta 1.22 gets instead (docs/metas.md). C rather than
// PyGObject's typelibs: PyGObject cannot turn a GstValueArray into Python without gst-python's
// overrides, and the analytics typelib is a package most machines lack. No GStreamer header or
// library is needed to build or import the package: the calls are looked up in the libraries the
// process already has loaded (RTLD_NOLOAD), so they reach the very GStreamer PyGObject uses, and
// their few types are GLib's fixed ABI, declared here.
#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#include "native.hpp"

namespace cudaipc_py {

namespace {

using GType = size_t;
using Ptr = const void*;
// GLib's fundamental types: fixed numbers of its ABI (gtype.h, G_TYPE_MAKE_FUNDAMENTAL).
constexpr GType kInt = 6 << 2, kUint = 7 << 2, kInt64 = 10 << 2, kUint64 = 11 << 2,
                kFloat = 14 << 2, kDouble = 15 << 2, kString = 16 << 2;

struct Mtd {  // GstAnalyticsMtd (1.24+)
  unsigned id;
  void* meta;
};

// GStreamer's calls, found once GStreamer is in the process; the analytics ones once its analytics
// library is (a relation meta can exist only after that library registered it).
struct Gst {
  bool found = false;
  unsigned version[4] = {};
  GType buffer_type = 0, structure_type = 0, array_type = 0;
  Ptr (*buffer_get_custom_meta)(Ptr, const char*) = nullptr;
  Ptr (*custom_meta_get_structure)(Ptr) = nullptr;
  Ptr (*structure_get_value)(Ptr, const char*) = nullptr;
  unsigned (*value_array_get_size)(Ptr) = nullptr;
  Ptr (*value_array_get_value)(Ptr, unsigned) = nullptr;
  Ptr (*value_get_structure)(Ptr) = nullptr;
  int (*get_int)(Ptr) = nullptr;
  unsigned (*get_uint)(Ptr) = nullptr;
  int64_t (*get_int64)(Ptr) = nullptr;
  uint64_t (*get_uint64)(Ptr) = nullptr;
  float (*get_float)(Ptr) = nullptr;
  double (*get_double)(Ptr) = nullptr;
  const char* (*get_string)(Ptr) = nullptr;
  const char* (*quark_to_string)(uint32_t) = nullptr;
  // 1.24+
  bool analytics = false;
  size_t od_type = 0, tracking_type = 0;
  Ptr (*buffer_get_relation_meta)(Ptr) = nullptr;
  int (*relation_iterate)(Ptr, void**, size_t, Mtd*) = nullptr;
  int (*get_relation)(Ptr, unsigned, unsigned) = nullptr;
  int (*od_location)(Mtd*, int*, int*, int*, int*, float*) = nullptr;
  int (*od_oriented_location)(Mtd*, int*, int*, int*, int*, float*, float*) = nullptr;  // 1.26+
  uint32_t (*od_obj_type)(Mtd*) = nullptr;
  int (*tracking_info)(Mtd*, uint64_t*, uint64_t*, uint64_t*, int*) = nullptr;
};

void* loaded(const char* soname) {
  return dlopen(soname, RTLD_NOLOAD | RTLD_NOW);
}

// Every symbol of `names` into `slots`; false when one is missing. The reference the lookup took
// is kept for as long as the process lives (the calls are kept as long), as ctypes kept its own.
template <size_t N>
bool bind(const char* soname, const char* const (&names)[N], void** const (&slots)[N]) {
  void* lib = loaded(soname);
  if (!lib) return false;
  bool all = true;
  for (size_t i = 0; i < N && all; ++i) all = (*slots[i] = dlsym(lib, names[i])) != nullptr;
  if (!all) dlclose(lib);
  return all;
}

template <class F>
void** slot(F& f) {
  return reinterpret_cast<void**>(&f);
}

Gst gst;

bool find_gstreamer() {
  if (gst.found) return true;
  Gst g;
  void (*version)(unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  GType (*buffer_type)() = nullptr;
  GType (*structure_type)() = nullptr;
  GType (*array_type)() = nullptr;
  static const char* const core_names[] = {"gst_version",
                                           "gst_buffer_get_type",
                                           "gst_structure_get_type",
                                           "gst_value_array_get_type",
                                           "gst_buffer_get_custom_meta",
                                           "gst_custom_meta_get_structure",
                                           "gst_structure_get_value",
                                           "gst_value_array_get_size",
                                           "gst_value_array_get_value",
                                           "gst_value_get_structure"};
  void** const core_slots[] = {slot(version),
                               slot(buffer_type),
                               slot(structure_type),
                               slot(array_type),
                               slot(g.buffer_get_custom_meta),
                               slot(g.custom_meta_get_structure),
                               slot(g.structure_get_value),
                               slot(g.value_array_get_size),
                               slot(g.value_array_get_value),
                               slot(g.value_get_structure)};
  static const char* const gobject_names[] = {
      "g_value_get_int",   "g_value_get_uint",   "g_value_get_int64", "g_value_get_uint64",
      "g_value_get_float", "g_value_get_double", "g_value_get_string"};
  void** const gobject_slots[] = {slot(g.get_int),    slot(g.get_uint),  slot(g.get_int64),
                                  slot(g.get_uint64), slot(g.get_float), slot(g.get_double),
                                  slot(g.get_string)};
  static const char* const glib_names[] = {"g_quark_to_string"};
  void** const glib_slots[] = {slot(g.quark_to_string)};
  if (!bind("libgstreamer-1.0.so.0", core_names, core_slots) ||
      !bind("libgobject-2.0.so.0", gobject_names, gobject_slots) ||
      !bind("libglib-2.0.so.0", glib_names, glib_slots))
    return false;
  version(&g.version[0], &g.version[1], &g.version[2], &g.version[3]);
  g.buffer_type = buffer_type();
  g.structure_type = structure_type();
  g.array_type = array_type();
  g.found = true;
  gst = g;
  return true;
}

bool find_analytics() {
  if (gst.analytics) return true;
  if (gst.version[0] == 1 && gst.version[1] < 24) return false;
  size_t (*od_type)() = nullptr;
  size_t (*tracking_type)() = nullptr;
  static const char* const names[] = {
      "gst_buffer_get_analytics_relation_meta",   "gst_analytics_relation_meta_iterate",
      "gst_analytics_relation_meta_get_relation", "gst_analytics_od_mtd_get_location",
      "gst_analytics_od_mtd_get_obj_type",        "gst_analytics_tracking_mtd_get_info",
      "gst_analytics_od_mtd_get_mtd_type",        "gst_analytics_tracking_mtd_get_mtd_type"};
  void** const slots[] = {slot(gst.buffer_get_relation_meta),
                          slot(gst.relation_iterate),
                          slot(gst.get_relation),
                          slot(gst.od_location),
                          slot(gst.od_obj_type),
                          slot(gst.tracking_info),
                          slot(od_type),
                          slot(tracking_type)};
  if (!bind("libgstanalytics-1.0.so.0", names, slots)) return false;
  static const char* const oriented[] = {"gst_analytics_od_mtd_get_oriented_location"};
  void** const oriented_slot[] = {slot(gst.od_oriented_location)};
  if (!bind("libgstanalytics-1.0.so.0", oriented, oriented_slot))
    gst.od_oriented_location = nullptr;
  gst.od_type = od_type();
  gst.tracking_type = tracking_type();
  gst.analytics = true;
  return true;
}

GType value_type(Ptr v) {  // a GValue's GType: its first word
  GType t;
  std::memcpy(&t, v, sizeof t);
  return t;
}

// A guint64 track id as Frame.detections' int64 holds it (wrapped, as NumPy's cast does).
long long wrapped(uint64_t id) {
  long long out;
  std::memcpy(&out, &id, sizeof out);
  return out;
}

// One detection: (x, y, w, h, score, rotation, oriented, id, track id) and its label.
struct Row {
  int x, y, w, h;
  double score, rotation;
  unsigned id;
  long long track;
};

bool add_row(PyObject* rows, PyObject* labels, const Row& r, const char* label) {
  Ref row(Py_BuildValue("(iiiiddOIL)", r.x, r.y, r.w, r.h, r.score, r.rotation,
                        r.rotation != 0.0 ? Py_True : Py_False, r.id, r.track));
  Ref text(label ? PyUnicode_DecodeUTF8(label, Py_ssize_t(std::strlen(label)), "replace")
                 : PyUnicode_FromString(""));
  return row && text && PyList_Append(rows, row.get()) == 0 &&
         PyList_Append(labels, text.get()) == 0;
}

// ---- 1.24+: GstAnalyticsRelationMeta ----

// Each detection's track id (-1: none). A track belongs to the first detection related to it, the
// detection's relation to it before its own to a detection, as cudaipc's own reader links them
// (GStreamer's trackers make the detection RELATE_TO its track).
void track_ids(Ptr meta, const Mtd* ods, size_t n, long long* out) {
  for (size_t i = 0; i < n; ++i) out[i] = -1;
  void* state = nullptr;
  Mtd t{};
  while (gst.relation_iterate(meta, &state, gst.tracking_type, &t)) {
    size_t owner = n;
    for (size_t i = 0; i < n && owner == n; ++i)
      if (gst.get_relation(meta, ods[i].id, t.id)) owner = i;
    for (size_t i = 0; i < n && owner == n; ++i)
      if (gst.get_relation(meta, t.id, ods[i].id)) owner = i;
    if (owner == n) continue;
    uint64_t id = 0, first = 0, last = 0;
    int lost = 0;
    if (gst.tracking_info(&t, &id, &first, &last, &lost)) out[owner] = wrapped(id);
  }
}

bool from_relation_meta(Ptr meta, PyObject* rows, PyObject* labels) {
  try {
    std::vector<Mtd> ods;
    void* state = nullptr;
    Mtd m{};
    while (gst.relation_iterate(meta, &state, gst.od_type, &m)) ods.push_back(m);
    std::vector<long long> tracks(ods.size());
    track_ids(meta, ods.data(), ods.size(), tracks.data());
    for (size_t i = 0; i < ods.size(); ++i) {
      Row r{};
      float conf = 0, rotation = 0;
      const int got =
          gst.od_oriented_location
              ? gst.od_oriented_location(&ods[i], &r.x, &r.y, &r.w, &r.h, &rotation, &conf)
              : gst.od_location(&ods[i], &r.x, &r.y, &r.w, &r.h, &conf);
      if (!got) continue;
      r.score = conf;
      r.rotation = rotation;  // as GStreamer 1.26 decides: a box is oriented when rotated
      r.id = ods[i].id;
      r.track = tracks[i];
      const uint32_t quark = gst.od_obj_type(&ods[i]);
      if (!add_row(rows, labels, r, quark ? gst.quark_to_string(quark) : nullptr)) return false;
    }
    return true;
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
    return false;
  }
}

// ---- 1.22: the CudaipcAnalyticsMeta custom meta (docs/metas.md) ----

Ptr field(Ptr s, const char* name) {
  return gst.structure_get_value(s, name);
}

// A float or double field: `fallback` when absent, false when of another type.
bool number(Ptr v, double fallback, double* out) {
  if (!v) {
    *out = fallback;
    return true;
  }
  const GType t = value_type(v);
  if (t == kFloat)
    *out = gst.get_float(v);
  else if (t == kDouble)
    *out = gst.get_double(v);
  else
    return false;
  return true;
}

// The object's track id (the unsigned and signed integer types the plugin takes), else -1.
long long track_id(Ptr o) {
  Ptr t = field(o, "track");
  if (!t || value_type(t) != gst.structure_type) return -1;
  Ptr v = field(gst.value_get_structure(t), "id");
  if (!v) return -1;
  switch (value_type(v)) {
    case kUint64:
      return wrapped(gst.get_uint64(v));
    case kUint:
      return gst.get_uint(v);
    case kInt64: {
      const int64_t id = gst.get_int64(v);
      return id >= 0 ? id : -1;
    }
    case kInt: {
      const int id = gst.get_int(v);
      return id >= 0 ? id : -1;
    }
    default:
      return -1;
  }
}

// One `object` structure as a row and its label; false for one without the fields and types
// docs/metas.md gives (the plugin leaves such an entry out too).
bool object_row(Ptr o, unsigned index, Row* r, const char** label) {
  int* xywh[] = {&r->x, &r->y, &r->w, &r->h};
  const char* names[] = {"x", "y", "w", "h"};
  for (int i = 0; i < 4; ++i) {
    Ptr v = field(o, names[i]);
    if (!v || value_type(v) != kInt) return false;
    *xywh[i] = gst.get_int(v);
  }
  if (!number(field(o, "score"), 0.0, &r->score) ||
      !number(field(o, "rotation"), 0.0, &r->rotation))
    return false;
  Ptr v = field(o, "label");
  if (v && value_type(v) != kString) return false;
  *label = v ? gst.get_string(v) : nullptr;
  r->id = index;
  r->track = track_id(o);
  return true;
}

bool from_custom_meta(Ptr s, PyObject* rows, PyObject* labels) {
  Ptr objects = field(s, "objects");
  const unsigned n =
      objects && value_type(objects) == gst.array_type ? gst.value_array_get_size(objects) : 0;
  for (unsigned i = 0; i < n; ++i) {
    Ptr v = gst.value_array_get_value(objects, i);
    if (!v || value_type(v) != gst.structure_type) continue;
    Ptr o = gst.value_get_structure(v);
    Row r{};
    const char* label = nullptr;
    if (o && object_row(o, i, &r, &label) && !add_row(rows, labels, r, label)) return false;
  }
  return true;
}

// gst_detections(address): the detections of the GstBuffer at `address` (what PyGObject's
// Gst.Buffer wraps) as ([(x, y, w, h, score, rotation, oriented, id, track id), ...], [label,
// ...]), None when it carries no results; -1 when GStreamer is not loaded in this process, -2 when
// no GstBuffer is at `address`.
PyObject* gst_detections(PyObject*, PyObject* arg) {
  const uintptr_t address = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return nullptr;
  if (!find_gstreamer()) return PyLong_FromLong(-1);
  // The buffer's GType in its first word (a GstMiniObject's) is checked before anything else is
  // read: an address that is not a GstBuffer's is refused, not followed.
  GType type;
  if (!address) return PyLong_FromLong(-2);
  std::memcpy(&type, reinterpret_cast<const void*>(address), sizeof type);
  if (type != gst.buffer_type) return PyLong_FromLong(-2);
  Ptr buf = reinterpret_cast<Ptr>(address);
  Ref rows(PyList_New(0)), labels(PyList_New(0));
  if (!rows || !labels) return nullptr;
  bool ok;
  if (Ptr meta = find_analytics() ? gst.buffer_get_relation_meta(buf) : nullptr) {
    ok = from_relation_meta(meta, rows.get(), labels.get());
  } else if (Ptr custom = gst.buffer_get_custom_meta(buf, "CudaipcAnalyticsMeta")) {
    ok = from_custom_meta(gst.custom_meta_get_structure(custom), rows.get(), labels.get());
  } else {
    Py_RETURN_NONE;
  }
  if (!ok) return nullptr;
  return Py_BuildValue("(OO)", rows.get(), labels.get());
}

}  // namespace

PyMethodDef gst_results_functions[] = {
    {"gst_detections", gst_detections, METH_O,
     "gst_detections(address): the detections of the GstBuffer at address, ([rows], [labels]) "
     "or None; -1 when GStreamer is not loaded, -2 when no GstBuffer is there"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace cudaipc_py
