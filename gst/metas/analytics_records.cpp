#include "metas/analytics_records.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

#include "metas/peer_quarks.h"

#ifdef CUDAIPC_HAVE_ANALYTICS
#include <gst/analytics/analytics.h>
#endif

namespace cudaipc::gst {

#ifndef CUDAIPC_HAVE_ANALYTICS

GType analytics_api_type() {
  return 0;
}
Encoded encode_analytics(GstMeta*, metas::AreaWriter&, std::uint32_t*) {
  return Encoded::unsupported;
}
bool attach_analytics(GstBuffer*, metas::Bytes, std::uint32_t*, std::string* error) {
  *error = "this GStreamer has no analytics library (1.24+)";
  return false;
}

#else

namespace {

#if GST_CHECK_VERSION(1, 26, 0)
constexpr bool kHasSegmentation = true;
// 1.26 accepts any relation bits up to 0xff; 1.24 only those below GST_ANALYTICS_REL_TYPE_LAST.
constexpr std::uint32_t kMaxRelation = 0xff;
#else
constexpr bool kHasSegmentation = false;
constexpr std::uint32_t kMaxRelation = GST_ANALYTICS_REL_TYPE_LAST - 1;
#endif

// Most metas have few mtds: their id -> record index map lives on the stack.
constexpr std::size_t kInlineMtds = 256;

class IndexMap {
 public:
  explicit IndexMap(std::size_t n) : n_(n) {
    if (n > kInlineMtds) heap_.assign(n, -1);
    std::fill(inline_, inline_ + std::min(n, kInlineMtds), -1);
  }
  int& operator[](std::size_t id) { return n_ > kInlineMtds ? heap_[id] : inline_[id]; }
  std::size_t size() const { return n_; }

 private:
  std::size_t n_;
  int inline_[kInlineMtds];
  std::vector<int> heap_;
};

int add_od(metas::AnalyticsWriter& aw, GstAnalyticsMtd* mtd) {
  auto* od = reinterpret_cast<GstAnalyticsODMtd*>(mtd);
  metas::ObjectDetection d;
  gint x = 0, y = 0, w = 0, h = 0;
  gfloat conf = 0.f;
#if GST_CHECK_VERSION(1, 26, 0)
  gfloat r = 0.f;
  if (!gst_analytics_od_mtd_get_oriented_location(od, &x, &y, &w, &h, &r, &conf)) return -1;
  d.r = r;
  d.oriented = r != 0.f;
#else
  if (!gst_analytics_od_mtd_get_location(od, &x, &y, &w, &h, &conf)) return -1;
#endif
  d.x = x, d.y = y, d.w = w, d.h = h, d.confidence = conf;
  const GQuark type = gst_analytics_od_mtd_get_obj_type(od);
  d.label = type ? g_quark_to_string(type) : "";
  return aw.add_object_detection(gst_analytics_mtd_get_id(mtd), d);
}

int add_cls(metas::AnalyticsWriter& aw, GstAnalyticsMtd* mtd) {
  auto* cls = reinterpret_cast<GstAnalyticsClsMtd*>(mtd);
  const gsize n = gst_analytics_cls_mtd_get_length(cls);
  constexpr gsize kInline = 64;
  metas::ClassEntry inline_classes[kInline];
  std::vector<metas::ClassEntry> many;
  metas::ClassEntry* classes = inline_classes;
  if (n > kInline) {
    many.resize(n);
    classes = many.data();
  }
  for (gsize i = 0; i < n; ++i) {
    classes[i].confidence = gst_analytics_cls_mtd_get_level(cls, i);
    const GQuark q = gst_analytics_cls_mtd_get_quark(cls, i);
    classes[i].label = q ? g_quark_to_string(q) : "";
  }
  return aw.add_classification(gst_analytics_mtd_get_id(mtd), classes,
                               static_cast<std::uint32_t>(n));
}

int add_tracking(metas::AnalyticsWriter& aw, GstAnalyticsMtd* mtd) {
  auto* trk = reinterpret_cast<GstAnalyticsTrackingMtd*>(mtd);
  guint64 id = 0;
  GstClockTime first = 0, last = 0;
  gboolean lost = FALSE;
  if (!gst_analytics_tracking_mtd_get_info(trk, &id, &first, &last, &lost)) return -1;
  metas::Tracking t;
  t.tracking_id = id, t.first_seen = first, t.last_seen = last, t.lost = lost != FALSE;
  return aw.add_tracking(gst_analytics_mtd_get_id(mtd), t);
}

#if GST_CHECK_VERSION(1, 26, 0)
// GStreamer has no getter for a segmentation mtd's type. Its data (gstanalyticssegmentationmtd.c,
// 1.26 to 1.28) begins with the GstSegmentationType, so that is read; anything but instance reads
// as semantic.
std::uint32_t segmentation_type(GstAnalyticsMtd* mtd) {
  const auto* data = static_cast<const GstSegmentationType*>(
      gst_analytics_relation_meta_get_mtd_data(mtd->meta, mtd->id));
  return data && *data == GST_SEGMENTATION_TYPE_INSTANCE ? 1u : 0u;
}

int add_segmentation(metas::AnalyticsWriter& aw, GstAnalyticsMtd* mtd) {
  auto* seg = reinterpret_cast<GstAnalyticsSegmentationMtd*>(mtd);
  metas::Segmentation s;
  gint x = 0, y = 0;
  guint w = 0, h = 0;
  GstBuffer* mask = gst_analytics_segmentation_mtd_get_mask(seg, &x, &y, &w, &h);
  if (!mask) return -1;
  GstVideoMeta* vm = gst_buffer_get_video_meta(mask);
  GstMapInfo map;
  int index = -1;
  if (vm && gst_buffer_map(mask, &map, GST_MAP_READ)) {
    const gsize regions = gst_analytics_segmentation_mtd_get_region_count(seg);
    std::vector<std::uint32_t> ids(regions);
    for (gsize i = 0; i < regions; ++i)
      ids[i] = gst_analytics_segmentation_mtd_get_region_id(seg, i);
    s.seg_type = segmentation_type(mtd);
    s.x = x, s.y = y, s.w = w, s.h = h;
    s.region_count = static_cast<std::uint32_t>(regions);
    s.region_ids = ids.data();
    s.mask_width = vm->width;
    s.mask_height = vm->height;
    s.mask_stride = static_cast<std::uint32_t>(vm->stride[0]);
    s.mask_format = static_cast<std::uint32_t>(vm->format);
    // Rows from the video meta's plane 0: the record keeps one plane of stride * height bytes.
    if (vm->offset[0] + static_cast<gsize>(s.mask_stride) * s.mask_height <= map.size) {
      s.mask = map.data + vm->offset[0];
      index = aw.add_segmentation(gst_analytics_mtd_get_id(mtd), s);
    }
    gst_buffer_unmap(mask, &map);
  }
  gst_buffer_unref(mask);
  return index;
}
#endif

// GStreamer lists relations only through a scan of one row of its n x n matrix per call
// (gst_analytics_relation_meta_get_direct_related): 12 us for 100 boxes, most of what encoding
// them costs. 1.24 to 1.28 keep the matrix the same way (gstanalyticsmeta.c: after the GstMeta,
// `guint next_id; guint8 **adj_mat; gsize *mtd_data_lookup; gsize rel_order;`, rows of rel_order
// bytes), so on those versions the rows are read directly, eight cells at a time; the first
// relation found is checked against gst_analytics_relation_meta_get_relation, and any
// disagreement falls back to the public scan. Other versions use the public scan.
#if GST_CHECK_VERSION(1, 24, 0) && GST_VERSION_MINOR <= 28
struct RelationMatrix {
  GstMeta parent;
  guint next_id;
  guint8** adj_mat;
  gsize* mtd_data_lookup;
  gsize rel_order;
};

bool matrix_readable(GstAnalyticsRelationMeta* rmeta, gsize n) {
  const auto* m = reinterpret_cast<const RelationMatrix*>(rmeta);
  if (!m->adj_mat || m->rel_order < n) return false;
  // Spot checks: a cell the library reports equals the cell read here.
  for (gsize id : {gsize{0}, n / 2, n - 1})
    for (gsize j : {gsize{0}, n - 1})
      if (static_cast<guint8>(gst_analytics_relation_meta_get_relation(
              rmeta, static_cast<guint>(id), static_cast<guint>(j))) != m->adj_mat[id][j])
        return false;
  return true;
}
#endif

template <typename Map>
bool add_relations(GstAnalyticsRelationMeta* rmeta, gsize n, Map& index,
                   metas::AnalyticsWriter& aw) {
  if (n == 0) return true;
#if GST_CHECK_VERSION(1, 24, 0) && GST_VERSION_MINOR <= 28
  if (matrix_readable(rmeta, n)) {
    const auto* m = reinterpret_cast<const RelationMatrix*>(rmeta);
    for (gsize id = 0; id < n; ++id) {
      if (index[id] < 0) continue;
      const guint8* row = m->adj_mat[id];
      for (gsize j = 0; j < n; j += 8) {
        if (j + 8 <= n) {  // a fixed-size copy is one load; a variable one is a call
          std::uint64_t word;
          std::memcpy(&word, row + j, 8);
          if (!word) continue;
        }
        for (gsize k = j; k < std::min<gsize>(j + 8, n); ++k) {
          if (!row[k] || index[k] < 0) continue;
          if (!aw.add_relation(static_cast<std::uint32_t>(index[id]),
                               static_cast<std::uint32_t>(index[k]), row[k]))
            return false;
        }
      }
    }
    return true;
  }
#endif
  for (gsize id = 0; id < n; ++id) {
    if (index[id] < 0) continue;
    gpointer rel_state = nullptr;
    GstAnalyticsMtd other;
    while (gst_analytics_relation_meta_get_direct_related(
        rmeta, static_cast<guint>(id), GST_ANALYTICS_REL_TYPE_ANY, GST_ANALYTICS_MTD_TYPE_ANY,
        &rel_state, &other)) {
      if (other.id >= n || index[other.id] < 0) continue;
      const auto types = static_cast<std::uint32_t>(
          gst_analytics_relation_meta_get_relation(rmeta, static_cast<guint>(id), other.id));
      if (!aw.add_relation(static_cast<std::uint32_t>(index[id]),
                           static_cast<std::uint32_t>(index[other.id]), types))
        return false;
    }
  }
  return true;
}

}  // namespace

GType analytics_api_type() {
  return GST_ANALYTICS_RELATION_META_API_TYPE;
}

Encoded encode_analytics(GstMeta* meta, metas::AreaWriter& w, std::uint32_t* skipped) {
  auto* rmeta = reinterpret_cast<GstAnalyticsRelationMeta*>(meta);
  const gsize n = gst_analytics_relation_get_length(rmeta);
  const std::size_t room = body_room(w, kAnalyticsApiName);
  std::uint8_t* body = w.begin_record(metas::RecordKind::analytics, kAnalyticsApiName, room);
  if (!body) return Encoded::no_room;
  metas::AnalyticsWriter aw(body, room, static_cast<std::uint32_t>(n));
  if (!aw.ok()) {
    w.cancel_record();
    return Encoded::no_room;
  }
  IndexMap index(n);
  const GstAnalyticsMtdType od_type = gst_analytics_od_mtd_get_mtd_type();
  const GstAnalyticsMtdType cls_type = gst_analytics_cls_mtd_get_mtd_type();
  const GstAnalyticsMtdType trk_type = gst_analytics_tracking_mtd_get_mtd_type();
  gpointer state = nullptr;
  GstAnalyticsMtd mtd;
  while (gst_analytics_relation_meta_iterate(rmeta, &state, GST_ANALYTICS_MTD_TYPE_ANY, &mtd)) {
    const GstAnalyticsMtdType type = gst_analytics_mtd_get_mtd_type(&mtd);
    int at = -2;
    if (type == od_type) {
      at = add_od(aw, &mtd);
    } else if (type == cls_type) {
      at = add_cls(aw, &mtd);
    } else if (type == trk_type) {
      at = add_tracking(aw, &mtd);
#if GST_CHECK_VERSION(1, 26, 0)
    } else if (type == gst_analytics_segmentation_mtd_get_mtd_type()) {
      at = add_segmentation(aw, &mtd);
#endif
    }
    if (at == -2) {
      ++*skipped;
      continue;
    }
    if (at < 0) {  // no room left in the area for this mtd: the meta does not fit
      w.cancel_record();
      return Encoded::no_room;
    }
    if (mtd.id < n) index[mtd.id] = at;
  }
  if (!add_relations(rmeta, n, index, aw)) {
    w.cancel_record();
    return Encoded::no_room;
  }
  w.commit_record(aw.finish());
  return Encoded::written;
}

namespace {

// Labels repeat from mtd to mtd (every box a "person"): the last one's quark is kept.
class QuarkCache {
 public:
  bool get(std::string_view label, GQuark* out, std::string* error) {
    if (!have_ || label != last_) {
      if (!peer_quark(label, &quark_, error)) return false;
      last_.assign(label.data(), label.size());
      have_ = true;
    }
    *out = quark_;
    return true;
  }

 private:
  bool have_ = false;
  std::string last_;
  GQuark quark_ = 0;
};

bool attach_one(GstAnalyticsRelationMeta* rmeta, const metas::AnalyticsView& view,
                const metas::Mtd& m, QuarkCache& quarks, guint* id, std::string* error) {
  GstAnalyticsMtd out;
  switch (m.type) {
    case metas::MtdType::object_detection: {
      GQuark q = 0;
      if (!quarks.get(m.od.label, &q, error)) return false;
      gboolean ok;
#if GST_CHECK_VERSION(1, 26, 0)
      if (m.od.oriented)
        ok = gst_analytics_relation_meta_add_oriented_od_mtd(
            rmeta, q, m.od.x, m.od.y, m.od.w, m.od.h, m.od.r, m.od.confidence,
            reinterpret_cast<GstAnalyticsODMtd*>(&out));
      else
#endif
        ok = gst_analytics_relation_meta_add_od_mtd(rmeta, q, m.od.x, m.od.y, m.od.w, m.od.h,
                                                    m.od.confidence,
                                                    reinterpret_cast<GstAnalyticsODMtd*>(&out));
      if (!ok) return (*error = "could not add an object detection mtd", false);
      break;
    }
    case metas::MtdType::classification: {
      // One more than the classes: a classification of none is valid, and GStreamer refuses the
      // NULL that an empty vector's data() would hand it.
      std::vector<gfloat> levels(m.class_count + 1);
      std::vector<GQuark> quark_list(m.class_count + 1);
      for (std::uint32_t j = 0; j < m.class_count; ++j) {
        metas::ClassEntry c;
        if (!view.class_entry(m, j, &c)) return (*error = "malformed class entry", false);
        levels[j] = c.confidence;
        if (!quarks.get(c.label, &quark_list[j], error)) return false;
      }
      if (!gst_analytics_relation_meta_add_cls_mtd(rmeta, m.class_count, levels.data(),
                                                   quark_list.data(),
                                                   reinterpret_cast<GstAnalyticsClsMtd*>(&out)))
        return (*error = "could not add a classification mtd", false);
      break;
    }
    case metas::MtdType::tracking: {
      auto* t = reinterpret_cast<GstAnalyticsTrackingMtd*>(&out);
      if (!gst_analytics_relation_meta_add_tracking_mtd(rmeta, m.tracking.tracking_id,
                                                        m.tracking.first_seen, t))
        return (*error = "could not add a tracking mtd", false);
      gst_analytics_tracking_mtd_update_last_seen(t, m.tracking.last_seen);
      if (m.tracking.lost) gst_analytics_tracking_mtd_set_lost(t);
      break;
    }
    case metas::MtdType::segmentation: {
#if GST_CHECK_VERSION(1, 26, 0)
      const metas::Segmentation& s = m.segmentation;
      // The formats GStreamer takes for a mask, checked before the peer's number becomes an enum.
      if (s.mask_format != GST_VIDEO_FORMAT_GRAY8 && s.mask_format != GST_VIDEO_FORMAT_GRAY16_LE &&
          s.mask_format != GST_VIDEO_FORMAT_GRAY16_BE)
        return (*error = "segmentation mask of an unsupported format", false);
      const auto format = static_cast<GstVideoFormat>(s.mask_format);
      GstVideoInfo vinfo;
      if (!gst_video_info_set_format(&vinfo, format, s.mask_width, s.mask_height) ||
          static_cast<gsize>(GST_VIDEO_INFO_PLANE_STRIDE(&vinfo, 0)) > s.mask_stride)
        return (*error = "segmentation mask rows shorter than its width", false);
      const gsize bytes = static_cast<gsize>(s.mask_stride) * s.mask_height;
      GstBuffer* mask = gst_buffer_new_memdup(s.mask, bytes);
      gsize offsets[GST_VIDEO_MAX_PLANES] = {0};
      gint strides[GST_VIDEO_MAX_PLANES] = {static_cast<gint>(s.mask_stride)};
      gst_buffer_add_video_meta_full(mask, GST_VIDEO_FRAME_FLAG_NONE, format, s.mask_width,
                                     s.mask_height, 1, offsets, strides);
      std::vector<guint> ids(s.region_count + 1);  // never empty: data() is not NULL
      for (std::uint32_t j = 0; j < s.region_count; ++j) ids[j] = metas::region_id(s, j);
      const gboolean ok = gst_analytics_relation_meta_add_segmentation_mtd(
          rmeta, mask, static_cast<GstSegmentationType>(s.seg_type), s.region_count, ids.data(),
          s.x, s.y, s.w, s.h, reinterpret_cast<GstAnalyticsSegmentationMtd*>(&out));
      // The meta takes the mask (transfer full) when it adds the mtd.
      if (!ok) {
        gst_buffer_unref(mask);
        return (*error = "could not add a segmentation mtd", false);
      }
      break;
#else
      return false;
#endif
    }
    default:
      return false;
  }
  *id = out.id;
  return true;
}

}  // namespace

bool attach_analytics(GstBuffer* buf, metas::Bytes body, std::uint32_t* skipped,
                      std::string* error) {
  metas::AnalyticsView view;
  if (!view.parse(body, error)) return false;
  const std::uint32_t n = view.mtd_count();
  std::vector<metas::Mtd> mtds;
  std::vector<metas::Relation> relations;
  if (!view.read_all(&mtds, &relations, error)) return false;
  for (std::uint32_t i = 0; i < relations.size(); ++i) {
    if (relations[i].types > kMaxRelation) {
      *error = "relation " + std::to_string(i) + " has types " +
               std::to_string(relations[i].types) + " this GStreamer cannot hold";
      return false;
    }
  }
  GstAnalyticsRelationMetaInitParams params = {n ? n : 1, 64 * (n ? n : 1)};
  GstAnalyticsRelationMeta* rmeta = gst_buffer_add_analytics_relation_meta_full(buf, &params);
  if (!rmeta) return (*error = "could not add a GstAnalyticsRelationMeta", false);
  std::vector<guint> ids(n, G_MAXUINT);
  QuarkCache quarks;
  for (std::uint32_t i = 0; i < n; ++i) {
    const bool known = mtds[i].type == metas::MtdType::object_detection ||
                       mtds[i].type == metas::MtdType::classification ||
                       mtds[i].type == metas::MtdType::tracking ||
                       (kHasSegmentation && mtds[i].type == metas::MtdType::segmentation);
    if (!known) {
      ++*skipped;
      continue;
    }
    std::string why;
    if (!attach_one(rmeta, view, mtds[i], quarks, &ids[i], &why)) {
      gst_buffer_remove_meta(buf, reinterpret_cast<GstMeta*>(rmeta));
      *error = "mtd " + std::to_string(i) + ": " + why;
      return false;
    }
  }
  for (const metas::Relation& r : relations) {
    if (ids[r.from] == G_MAXUINT || ids[r.to] == G_MAXUINT) continue;  // a skipped mtd's
    gst_analytics_relation_meta_set_relation(rmeta, static_cast<GstAnalyticsRelTypes>(r.types),
                                             ids[r.from], ids[r.to]);
  }
  return true;
}

#endif  // CUDAIPC_HAVE_ANALYTICS

}  // namespace cudaipc::gst
