// GStreamer 1.22 has no analytics metas, so cudaipc attaches a model's results as the
// CudaipcAnalyticsMeta custom meta (docs/metas.md, "GStreamer 1.22: analytics as a custom meta"):
// a structure of arrays of structures, read here with GStreamer's public API.
#include "detections.h"

namespace detections {
namespace {

// Member `i` of the array field `name` of `s`, when it is a structure; nullptr otherwise.
const GstStructure* member(const GstStructure* s, const char* name, guint i) {
  const GValue* array = gst_structure_get_value(s, name);
  if (!array || !GST_VALUE_HOLDS_ARRAY(array) || i >= gst_value_array_get_size(array))
    return nullptr;
  const GValue* v = gst_value_array_get_value(array, i);
  return GST_VALUE_HOLDS_STRUCTURE(v) ? gst_value_get_structure(v) : nullptr;
}

// A classification's classes: its `labels` (strings) and `scores` (floats), side by side.
Classes classes(const GstStructure* c) {
  const GValue* labels = gst_structure_get_value(c, "labels");
  const GValue* scores = gst_structure_get_value(c, "scores");
  Classes out;
  if (!labels || !scores || !GST_VALUE_HOLDS_ARRAY(labels) || !GST_VALUE_HOLDS_ARRAY(scores))
    return out;
  for (guint j = 0; j < gst_value_array_get_size(labels) && j < gst_value_array_get_size(scores);
       ++j) {
    const GValue* label = gst_value_array_get_value(labels, j);
    const GValue* score = gst_value_array_get_value(scores, j);
    if (!G_VALUE_HOLDS_STRING(label) || !G_VALUE_HOLDS_FLOAT(score)) continue;
    const gchar* text = g_value_get_string(label);
    out.emplace_back(text ? text : "", g_value_get_float(score));
  }
  return out;
}

Track track(const GstStructure* t) {
  guint64 id = 0;
  gboolean lost = FALSE;
  gst_structure_get(t, "id", G_TYPE_UINT64, &id, "lost", G_TYPE_BOOLEAN, &lost, nullptr);
  return Track{id, lost != FALSE};
}

}  // namespace

bool read_custom_meta(GstBuffer* buf, Frame* out) {
  GstCustomMeta* meta = gst_buffer_get_custom_meta(buf, "CudaipcAnalyticsMeta");
  if (!meta) return false;
  const GstStructure* s = gst_custom_meta_get_structure(meta);
  for (guint i = 0; const GstStructure* o = member(s, "objects", i); ++i) {
    Object obj;
    gst_structure_get(o, "x", G_TYPE_INT, &obj.x, "y", G_TYPE_INT, &obj.y, "w", G_TYPE_INT, &obj.w,
                      "h", G_TYPE_INT, &obj.h, "score", G_TYPE_FLOAT, &obj.score, nullptr);
    const gchar* label = gst_structure_get_string(o, "label");
    obj.label = label ? label : "";
    const GValue* t = gst_structure_get_value(o, "track");
    if (t && GST_VALUE_HOLDS_STRUCTURE(t)) {
      obj.has_track = true;
      obj.track = track(gst_value_get_structure(t));
    }
    for (guint k = 0; const GstStructure* c = member(o, "classifications", k); ++k)
      obj.classifications.push_back(classes(c));
    out->objects.push_back(std::move(obj));
  }
  for (guint k = 0; const GstStructure* c = member(s, "classifications", k); ++k)
    out->classifications.push_back(classes(c));
  for (guint k = 0; const GstStructure* t = member(s, "tracks", k); ++k)
    out->tracks.push_back(track(t));
  return true;
}

}  // namespace detections
