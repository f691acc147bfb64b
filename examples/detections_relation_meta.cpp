// GStreamer 1.24+: a model's results are a GstAnalyticsRelationMeta, its object detections with
// the classifications and tracks related to them.
#include <gst/analytics/analytics.h>

#include "detections.h"

namespace detections {
namespace {

std::string quark_text(GQuark q) {
  const gchar* s = q ? g_quark_to_string(q) : nullptr;
  return s ? s : "";
}

Classes classes(GstAnalyticsClsMtd* c) {
  Classes out;
  const gsize n = gst_analytics_cls_mtd_get_length(c);
  for (gsize j = 0; j < n; ++j)
    out.emplace_back(quark_text(gst_analytics_cls_mtd_get_quark(c, j)),
                     gst_analytics_cls_mtd_get_level(c, j));
  return out;
}

Track track(GstAnalyticsTrackingMtd* t) {
  guint64 id = 0;
  GstClockTime first = 0, last = 0;
  gboolean lost = FALSE;
  gst_analytics_tracking_mtd_get_info(t, &id, &first, &last, &lost);
  return Track{id, lost != FALSE};
}

// The detection (index into `ods`) a classification or track belongs to, -1 for none: the first
// related to it, a detection's relation to it before its own to a detection, as cudaipc links them
// for 1.22's custom meta and Python's Frame.detections (GStreamer's own elements make a detection
// CONTAIN its classification and RELATE_TO its track).
int owner(GstAnalyticsRelationMeta* meta, const std::vector<GstAnalyticsMtd>& ods, guint id) {
  for (int forward = 1; forward >= 0; --forward)
    for (std::size_t i = 0; i < ods.size(); ++i)
      if (gst_analytics_relation_meta_get_relation(meta, forward ? ods[i].id : id,
                                                   forward ? id : ods[i].id) !=
          GST_ANALYTICS_REL_TYPE_NONE)
        return static_cast<int>(i);
  return -1;
}

}  // namespace

bool read_relation_meta(GstBuffer* buf, Frame* out) {
  GstAnalyticsRelationMeta* meta = gst_buffer_get_analytics_relation_meta(buf);
  if (!meta) return false;
  std::vector<GstAnalyticsMtd> ods, others;
  gpointer state = nullptr;
  GstAnalyticsMtd mtd;
  while (gst_analytics_relation_meta_iterate(meta, &state, GST_ANALYTICS_MTD_TYPE_ANY, &mtd)) {
    const GstAnalyticsMtdType type = gst_analytics_mtd_get_mtd_type(&mtd);
    if (type == gst_analytics_od_mtd_get_mtd_type()) {
      Object obj;
      gint x = 0, y = 0, w = 0, h = 0;
      gfloat score = 0;
      if (!gst_analytics_od_mtd_get_location(&mtd, &x, &y, &w, &h, &score)) continue;
      obj.x = x, obj.y = y, obj.w = w, obj.h = h, obj.score = score;
      obj.label = quark_text(gst_analytics_od_mtd_get_obj_type(&mtd));
      out->objects.push_back(std::move(obj));
      ods.push_back(mtd);
    } else if (type == gst_analytics_cls_mtd_get_mtd_type() ||
               type == gst_analytics_tracking_mtd_get_mtd_type()) {
      others.push_back(mtd);
    }
  }
  // Classifications and tracks after every detection is known, in the meta's order.
  for (GstAnalyticsMtd& m : others) {
    const int o = owner(meta, ods, m.id);
    if (gst_analytics_mtd_get_mtd_type(&m) == gst_analytics_cls_mtd_get_mtd_type()) {
      Classes c = classes(&m);
      (o >= 0 ? out->objects[o].classifications : out->classifications).push_back(std::move(c));
    } else if (o >= 0) {
      out->objects[o].has_track = true;  // a detection's track: the last one linked to it
      out->objects[o].track = track(&m);
    } else {
      out->tracks.push_back(track(&m));
    }
  }
  return true;
}

}  // namespace detections
