// The whole mapping between GstMetas and the meta area (gst/metas, docs/metas.md), on real
// GstBuffers, in both directions, under GLib criticals made fatal:
//   A (mode odd): the input is a meta area a peer wrote. decode_metas puts what it accepts on a
//     buffer; encode_metas of that buffer, decoded again, must give the same metas (each compared
//     field by field, every value with its own GType), and the second encoding must be byte for
//     byte the first. Nothing may crash, leak or log a GLib critical on the way.
//   B (mode even): the input builds a buffer with metas of every kind this GStreamer has (custom
//     metas with fields of many GTypes, nested structures, arrays and lists; reference timestamps;
//     analytics relation metas with od, classification, tracking and segmentation mtds; tensor
//     metas; a meta GStreamer serializes). encode_metas then decode_metas must give them back
//     equal; an encoding into a smaller area must still decode cleanly.
// Analytics metas need GStreamer 1.24+ (segmentation and oriented boxes 1.26+), tensor metas 1.26+,
// serialized metas 1.24+: a build against an older GStreamer fuzzes what it has.
#include <gst/gst.h>
#include <gst/video/video.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "cudaipc/metas.hpp"
#include "fuzz.hpp"
#include "metas/custom_records.h"
#include "metas/meta_decoder.h"
#include "metas/meta_encoder.h"
#include "metas/meta_filter.h"
#include "metas/tensor_meta.h"

#ifdef CUDAIPC_HAVE_ANALYTICS
#include <gst/analytics/analytics.h>
#define FUZZ_ANALYTICS 1
#if GST_CHECK_VERSION(1, 26, 0)
#define FUZZ_TENSORS 1
#define FUZZ_SEGMENTATION 1
#endif
#endif
#if GST_CHECK_VERSION(1, 24, 0)
#define FUZZ_SERIALIZED 1
#endif

namespace cudaipc::fuzz {
namespace {

using cudaipc::gst::DecodeCounts;
using cudaipc::gst::EncodeCounts;
using cudaipc::gst::MetaFilter;

constexpr std::size_t kMaxArea = 1 << 16;         // the most area bytes direction A reads
constexpr std::size_t kEncodeCapacity = 1 << 20;  // room enough for anything decoded from 64 KiB
// Direction B nests structures, arrays and lists as deep as the record format carries them.
constexpr int kMaxDepth = static_cast<int>(metas::kMaxCustomDepth);

// The custom metas direction B builds (registered once: each name is a GType for good).
constexpr const char* kCustomNames[] = {"cudaipc-fuzz-a", "cudaipc-fuzz-b", "X_fuzz+meta-c"};

// ---- GLib's log: criticals are findings ----

GLogWriterOutput log_writer(GLogLevelFlags level, const GLogField* fields, gsize n, gpointer) {
  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL)) {
    std::string domain, message;
    for (gsize i = 0; i < n; ++i) {
      const char* v = static_cast<const char*>(fields[i].value);
      if (!v || fields[i].length > 0) continue;  // only the NUL-terminated text fields
      if (std::strcmp(fields[i].key, "GLIB_DOMAIN") == 0) domain = v;
      if (std::strcmp(fields[i].key, "MESSAGE") == 0) message = v;
    }
    fail("GLib " + std::string(level & G_LOG_LEVEL_ERROR ? "error" : "critical") + " (" + domain +
         "): " + message);
  }
  return g_log_writer_default(level, fields, n, nullptr);
}

// ---- a meta GStreamer serializes (the `serialized` record kind, 1.24+) ----

#ifdef FUZZ_SERIALIZED
constexpr gsize kFuzzPayload = 32;
struct FuzzMeta {
  GstMeta meta;
  guint8 size;
  guint8 data[kFuzzPayload];
};

GType fuzz_meta_api_type() {
  static GType type = 0;
  if (g_once_init_enter(&type)) {
    const gchar* tags[] = {nullptr};
    g_once_init_leave(&type, gst_meta_api_type_register("CudaipcFuzzMetaAPI", tags));
  }
  return type;
}

gboolean fuzz_meta_init(GstMeta* meta, gpointer, GstBuffer*) {
  auto* m = reinterpret_cast<FuzzMeta*>(meta);
  m->size = 0;
  std::memset(m->data, 0, sizeof m->data);
  return TRUE;
}

gboolean fuzz_meta_serialize(const GstMeta* meta, GstByteArrayInterface* data, guint8* version) {
  const auto* m = reinterpret_cast<const FuzzMeta*>(meta);
  *version = 0;
  return gst_byte_array_interface_append_data(data, m->data, m->size);
}

// Called by gst_meta_deserialize on a peer's bytes: checks them like any reader of peer data.
GstMeta* fuzz_meta_deserialize(const GstMetaInfo* info, GstBuffer* buffer, const guint8* data,
                               gsize size, guint8 version) {
  if (version != 0 || size > kFuzzPayload) return nullptr;
  auto* m = reinterpret_cast<FuzzMeta*>(gst_buffer_add_meta(buffer, info, nullptr));
  if (!m) return nullptr;
  m->size = static_cast<guint8>(size);
  if (size) std::memcpy(m->data, data, size);
  return &m->meta;
}

const GstMetaInfo* fuzz_meta_info() {
  static const GstMetaInfo* info = nullptr;
  if (g_once_init_enter(&info)) {
    GstMetaInfo* i = gst_meta_info_new(fuzz_meta_api_type(), "CudaipcFuzzMeta", sizeof(FuzzMeta));
    i->init_func = fuzz_meta_init;
    i->serialize_func = fuzz_meta_serialize;
    i->deserialize_func = fuzz_meta_deserialize;
    g_once_init_leave(&info, gst_meta_info_register(i));
  }
  return info;
}
#endif

void init() {
  // No plugin is needed: gst_init scans nothing and writes no registry.
  ::setenv("GST_REGISTRY_DISABLE", "yes", 1);
  g_log_set_writer_func(log_writer, nullptr, nullptr);
  g_log_set_always_fatal(
      static_cast<GLogLevelFlags>(G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_ERROR));
  gst_init(nullptr, nullptr);
  for (const char* name : kCustomNames) {
    const gchar* tags[] = {nullptr};
    gst_meta_register_custom(name, tags, nullptr, nullptr, nullptr);
  }
  // Types registered lazily on first use, registered here so no input pays for them.
  (void)GST_VIDEO_META_INFO;
  (void)GST_REFERENCE_TIMESTAMP_META_INFO;
  (void)cudaipc::gst::tensor_meta_info();
#ifdef FUZZ_ANALYTICS
  (void)GST_ANALYTICS_RELATION_META_INFO;
#endif
#ifdef FUZZ_TENSORS
  (void)gst_tensor_meta_get_info();
#endif
#ifdef FUZZ_SERIALIZED
  (void)fuzz_meta_info();
#endif
}

// ---- helpers ----

struct BufferUnref {
  void operator()(GstBuffer* b) const { gst_buffer_unref(b); }
};
using Buffer = std::unique_ptr<GstBuffer, BufferUnref>;

// A 64-byte aligned area, as a slot's meta area lies.
class Area {
 public:
  explicit Area(std::size_t n) : storage_(n + 64) {}
  std::uint8_t* data() {
    return reinterpret_cast<std::uint8_t*>(
        (reinterpret_cast<std::uintptr_t>(storage_.data()) + 63) & ~std::uintptr_t{63});
  }

 private:
  std::vector<std::uint8_t> storage_;
};

// Metas the encoder leaves out on purpose: the frame's own description, and the source's stamps.
bool sent_by_encoder(GstMeta* m) {
  const GType api = m->info->api;
  if (api == GST_VIDEO_META_API_TYPE || api == cudaipc::gst::tensor_meta_api_type()) return false;
  if (api == GST_REFERENCE_TIMESTAMP_META_API_TYPE && cudaipc::gst::is_own_reference_timestamp(m))
    return false;
  return true;
}

std::vector<GstMeta*> metas_of(GstBuffer* b, bool only_sent) {
  std::vector<GstMeta*> out;
  gpointer state = nullptr;
  while (GstMeta* m = gst_buffer_iterate_meta(b, &state))
    if (!only_sent || sent_by_encoder(m)) out.push_back(m);
  return out;
}

std::string printed(const GValue* v) {
  gchar* s = gst_value_serialize(v);
  std::string out = s ? s : "(unserializable)";
  g_free(s);
  if (out.size() > 200) out = out.substr(0, 200) + "...";
  return std::string("(") + G_VALUE_TYPE_NAME(v) + ")" + out;
}

// ---- comparing metas ----

bool same_structure(const GstStructure* a, const GstStructure* b, const std::string& at,
                    std::string* why, bool named);

bool same_float(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

// Equal values of the same GType, compared through containers.
bool same_value(const GValue* a, const GValue* b, const std::string& at, std::string* why) {
  const GType t = G_VALUE_TYPE(a);
  if (t != G_VALUE_TYPE(b)) {
    *why = at + ": " + printed(a) + " came back as " + printed(b);
    return false;
  }
  bool same;
  if (t == G_TYPE_INT) {
    same = g_value_get_int(a) == g_value_get_int(b);
  } else if (t == G_TYPE_UINT) {
    same = g_value_get_uint(a) == g_value_get_uint(b);
  } else if (t == G_TYPE_INT64) {
    same = g_value_get_int64(a) == g_value_get_int64(b);
  } else if (t == G_TYPE_UINT64) {
    same = g_value_get_uint64(a) == g_value_get_uint64(b);
  } else if (t == G_TYPE_FLOAT) {
    same = same_float(g_value_get_float(a), g_value_get_float(b));
  } else if (t == G_TYPE_DOUBLE) {
    same = same_float(g_value_get_double(a), g_value_get_double(b));
  } else if (t == G_TYPE_BOOLEAN) {
    same = !g_value_get_boolean(a) == !g_value_get_boolean(b);
  } else if (t == G_TYPE_STRING) {
    const char *x = g_value_get_string(a), *y = g_value_get_string(b);
    same = (!x && !y) || (x && y && std::strcmp(x, y) == 0);
  } else if (t == G_TYPE_BYTES) {
    const auto* x = static_cast<GBytes*>(g_value_get_boxed(a));
    const auto* y = static_cast<GBytes*>(g_value_get_boxed(b));
    same = (!x && !y) || (x && y && g_bytes_equal(x, y));
  } else if (t == GST_TYPE_FRACTION) {
    same = gst_value_get_fraction_numerator(a) == gst_value_get_fraction_numerator(b) &&
           gst_value_get_fraction_denominator(a) == gst_value_get_fraction_denominator(b);
  } else if (t == GST_TYPE_STRUCTURE) {
    const GstStructure *x = gst_value_get_structure(a), *y = gst_value_get_structure(b);
    if (!x || !y) {
      same = !x && !y;
    } else {
      return same_structure(x, y, at, why, true);
    }
  } else if (t == GST_TYPE_ARRAY || t == GST_TYPE_LIST) {
    const bool array = t == GST_TYPE_ARRAY;
    const guint n = array ? gst_value_array_get_size(a) : gst_value_list_get_size(a);
    const guint m = array ? gst_value_array_get_size(b) : gst_value_list_get_size(b);
    if (n != m) {
      *why = at + ": " + std::to_string(n) + " elements came back as " + std::to_string(m);
      return false;
    }
    for (guint i = 0; i < n; ++i) {
      const GValue* x = array ? gst_value_array_get_value(a, i) : gst_value_list_get_value(a, i);
      const GValue* y = array ? gst_value_array_get_value(b, i) : gst_value_list_get_value(b, i);
      if (!same_value(x, y, at + "[" + std::to_string(i) + "]", why)) return false;
    }
    return true;
  } else {
    // Any other GType a peer may name: GStreamer's own comparison, or else its text.
    same = gst_value_compare(a, b) == GST_VALUE_EQUAL || printed(a) == printed(b);
  }
  if (!same) *why = at + ": " + printed(a) + " came back as " + printed(b);
  return same;
}

// `named`: the structures' names must match too (a custom meta's record carries the meta's name,
// which is its structure's name unless the meta came from GStreamer's own deserializer).
bool same_structure(const GstStructure* a, const GstStructure* b, const std::string& at,
                    std::string* why, bool named) {
  if (named && std::strcmp(gst_structure_get_name(a), gst_structure_get_name(b)) != 0) {
    *why = at + ": structure '" + gst_structure_get_name(a) + "' came back as '" +
           gst_structure_get_name(b) + "'";
    return false;
  }
  const int n = gst_structure_n_fields(a);
  if (n != gst_structure_n_fields(b)) {
    gchar *x = gst_structure_to_string(a), *y = gst_structure_to_string(b);
    *why = at + ": " + std::to_string(n) + " fields came back as " +
           std::to_string(gst_structure_n_fields(b)) + " (" + x + " -> " + y + ")";
    g_free(x), g_free(y);
    return false;
  }
  for (int i = 0; i < n; ++i) {
    const char* name = gst_structure_nth_field_name(a, static_cast<guint>(i));
    const char* other = gst_structure_nth_field_name(b, static_cast<guint>(i));
    if (std::strcmp(name, other) != 0) {
      *why = at + ": field " + std::to_string(i) + " '" + name + "' came back as '" + other + "'";
      return false;
    }
    if (!same_value(gst_structure_get_value(a, name), gst_structure_get_value(b, name),
                    at + "." + name, why))
      return false;
  }
  return true;
}

// Caps compared structure by structure (GStreamer's own comparison calls NaN unequal to itself).
bool same_caps(const GstCaps* a, const GstCaps* b, std::string* why) {
  bool same = a && b && gst_caps_is_any(a) == gst_caps_is_any(b) &&
              gst_caps_get_size(a) == gst_caps_get_size(b);
  for (guint i = 0; same && i < gst_caps_get_size(a); ++i) {
    same = gst_caps_features_is_equal(gst_caps_get_features(a, i), gst_caps_get_features(b, i)) &&
           same_structure(gst_caps_get_structure(a, i), gst_caps_get_structure(b, i), "caps", why,
                          true);
  }
  if (!same) {
    gchar* p = a ? gst_caps_to_string(a) : nullptr;
    gchar* q = b ? gst_caps_to_string(b) : nullptr;
    *why = std::string("caps ") + (p ? p : "NULL") + " -> " + (q ? q : "NULL") + ": " + *why;
    g_free(p), g_free(q);
  }
  return same;
}

#ifdef FUZZ_ANALYTICS
std::string quark_text(GQuark q) {
  return q ? g_quark_to_string(q) : "";  // the records carry no "no label": it reads as ""
}

#ifdef FUZZ_SEGMENTATION
// As the encoder reads it (analytics_records.cpp): the mtd's data begins with its type.
int segmentation_type(GstAnalyticsMtd* mtd) {
  const auto* data = static_cast<const GstSegmentationType*>(
      gst_analytics_relation_meta_get_mtd_data(mtd->meta, mtd->id));
  return data ? static_cast<int>(*data) : -1;
}

bool same_mask(GstAnalyticsMtd* a, GstAnalyticsMtd* b, std::string* why) {
  auto* sa = reinterpret_cast<GstAnalyticsSegmentationMtd*>(a);
  auto* sb = reinterpret_cast<GstAnalyticsSegmentationMtd*>(b);
  gint ax = 0, ay = 0, bx = 0, by = 0;
  guint aw = 0, ah = 0, bw = 0, bh = 0;
  GstBuffer* ma = gst_analytics_segmentation_mtd_get_mask(sa, &ax, &ay, &aw, &ah);
  GstBuffer* mb = gst_analytics_segmentation_mtd_get_mask(sb, &bx, &by, &bw, &bh);
  bool same = ma && mb && ax == bx && ay == by && aw == bw && ah == bh &&
              segmentation_type(a) == segmentation_type(b);
  if (!same) *why = "segmentation location or type";
  const gsize regions = gst_analytics_segmentation_mtd_get_region_count(sa);
  if (same && regions != gst_analytics_segmentation_mtd_get_region_count(sb)) {
    same = false;
    *why = "segmentation region count";
  }
  for (gsize i = 0; same && i < regions; ++i)
    if (gst_analytics_segmentation_mtd_get_region_id(sa, i) !=
        gst_analytics_segmentation_mtd_get_region_id(sb, i)) {
      same = false;
      *why = "segmentation region " + std::to_string(i);
    }
  if (same) {
    GstVideoMeta* va = gst_buffer_get_video_meta(ma);
    GstVideoMeta* vb = gst_buffer_get_video_meta(mb);
    same = va && vb && va->format == vb->format && va->width == vb->width &&
           va->height == vb->height && va->stride[0] == vb->stride[0];
    if (!same) *why = "segmentation mask's video meta";
    GstMapInfo x, y;
    if (same && gst_buffer_map(ma, &x, GST_MAP_READ)) {
      if (gst_buffer_map(mb, &y, GST_MAP_READ)) {
        // The record carries plane 0's rows: stride * height bytes from its offset.
        const gsize bytes = static_cast<gsize>(va->stride[0]) * va->height;
        same = va->offset[0] + bytes <= x.size && vb->offset[0] + bytes <= y.size &&
               std::memcmp(x.data + va->offset[0], y.data + vb->offset[0], bytes) == 0;
        if (!same) *why = "segmentation mask bytes";
        gst_buffer_unmap(mb, &y);
      }
      gst_buffer_unmap(ma, &x);
    }
  }
  if (ma) gst_buffer_unref(ma);
  if (mb) gst_buffer_unref(mb);
  return same;
}
#endif

bool same_mtd(GstAnalyticsMtd* a, GstAnalyticsMtd* b, std::string* why) {
  const GstAnalyticsMtdType type = gst_analytics_mtd_get_mtd_type(a);
  if (type != gst_analytics_mtd_get_mtd_type(b)) return (*why = "mtd type", false);
  if (type == gst_analytics_od_mtd_get_mtd_type()) {
    auto* x = reinterpret_cast<GstAnalyticsODMtd*>(a);
    auto* y = reinterpret_cast<GstAnalyticsODMtd*>(b);
    gint l[4] = {}, r[4] = {};
    gfloat lc = 0, rc = 0, lr = 0, rr = 0;
#if GST_CHECK_VERSION(1, 26, 0)
    gst_analytics_od_mtd_get_oriented_location(x, &l[0], &l[1], &l[2], &l[3], &lr, &lc);
    gst_analytics_od_mtd_get_oriented_location(y, &r[0], &r[1], &r[2], &r[3], &rr, &rc);
#else
    gst_analytics_od_mtd_get_location(x, &l[0], &l[1], &l[2], &l[3], &lc);
    gst_analytics_od_mtd_get_location(y, &r[0], &r[1], &r[2], &r[3], &rc);
#endif
    if (std::memcmp(l, r, sizeof l) != 0 || !same_float(lc, rc) || !same_float(lr, rr))
      return (*why = "object detection location", false);
    if (quark_text(gst_analytics_od_mtd_get_obj_type(x)) !=
        quark_text(gst_analytics_od_mtd_get_obj_type(y)))
      return (*why = "object detection label", false);
    return true;
  }
  if (type == gst_analytics_cls_mtd_get_mtd_type()) {
    auto* x = reinterpret_cast<GstAnalyticsClsMtd*>(a);
    auto* y = reinterpret_cast<GstAnalyticsClsMtd*>(b);
    const gsize n = gst_analytics_cls_mtd_get_length(x);
    if (n != gst_analytics_cls_mtd_get_length(y)) return (*why = "class count", false);
    for (gsize i = 0; i < n; ++i)
      if (!same_float(gst_analytics_cls_mtd_get_level(x, i),
                      gst_analytics_cls_mtd_get_level(y, i)) ||
          quark_text(gst_analytics_cls_mtd_get_quark(x, i)) !=
              quark_text(gst_analytics_cls_mtd_get_quark(y, i)))
        return (*why = "class " + std::to_string(i), false);
    return true;
  }
  if (type == gst_analytics_tracking_mtd_get_mtd_type()) {
    guint64 li = 0, ri = 0;
    GstClockTime lf = 0, rf = 0, ll = 0, rl = 0;
    gboolean lx = FALSE, rx = FALSE;
    gst_analytics_tracking_mtd_get_info(reinterpret_cast<GstAnalyticsTrackingMtd*>(a), &li, &lf,
                                        &ll, &lx);
    gst_analytics_tracking_mtd_get_info(reinterpret_cast<GstAnalyticsTrackingMtd*>(b), &ri, &rf,
                                        &rl, &rx);
    if (li != ri || lf != rf || ll != rl || !lx != !rx) return (*why = "tracking info", false);
    return true;
  }
#ifdef FUZZ_SEGMENTATION
  if (type == gst_analytics_segmentation_mtd_get_mtd_type()) return same_mask(a, b, why);
#endif
  return (*why = std::string("mtd of type ") + gst_analytics_mtd_type_get_name(type), false);
}

bool same_analytics(GstMeta* ma, GstMeta* mb, std::string* why) {
  auto* a = reinterpret_cast<GstAnalyticsRelationMeta*>(ma);
  auto* b = reinterpret_cast<GstAnalyticsRelationMeta*>(mb);
  std::vector<GstAnalyticsMtd> x, y;
  gpointer state = nullptr;
  GstAnalyticsMtd mtd;
  while (gst_analytics_relation_meta_iterate(a, &state, GST_ANALYTICS_MTD_TYPE_ANY, &mtd))
    x.push_back(mtd);
  state = nullptr;
  while (gst_analytics_relation_meta_iterate(b, &state, GST_ANALYTICS_MTD_TYPE_ANY, &mtd))
    y.push_back(mtd);
  if (x.size() != y.size()) {
    *why = std::to_string(x.size()) + " mtds came back as " + std::to_string(y.size());
    return false;
  }
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::string w;
    if (!same_mtd(&x[i], &y[i], &w)) {
      *why = "mtd " + std::to_string(i) + ": " + w;
      return false;
    }
  }
  for (std::size_t i = 0; i < x.size(); ++i)
    for (std::size_t j = 0; j < x.size(); ++j) {
      const auto r = gst_analytics_relation_meta_get_relation(a, x[i].id, x[j].id);
      const auto s = gst_analytics_relation_meta_get_relation(b, y[i].id, y[j].id);
      if (r != s) {
        *why = "relation " + std::to_string(i) + " -> " + std::to_string(j) + ": " +
               std::to_string(r) + " came back as " + std::to_string(s);
        return false;
      }
    }
  return true;
}
#endif

#ifdef FUZZ_TENSORS
bool same_tensors(GstMeta* ma, GstMeta* mb, std::string* why) {
  auto* a = reinterpret_cast<GstTensorMeta*>(ma);
  auto* b = reinterpret_cast<GstTensorMeta*>(mb);
  if (a->num_tensors != b->num_tensors) return (*why = "tensor count", false);
  for (gsize i = 0; i < a->num_tensors; ++i) {
    const GstTensor* x = a->tensors[i];
    const GstTensor* y = b->tensors[i];
    const std::string at = "tensor " + std::to_string(i) + ": ";
    if (x->id != y->id || x->data_type != y->data_type || x->dims_order != y->dims_order ||
        x->layout != y->layout || x->num_dims != y->num_dims)
      return (*why = at + "description", false);
    for (gsize k = 0; k < x->num_dims; ++k)
      if (x->dims[k] != y->dims[k]) return (*why = at + "dims", false);
    if (!x->data || !y->data) return (*why = at + "no data buffer", false);
    GstMapInfo p, q;
    if (!gst_buffer_map(x->data, &p, GST_MAP_READ)) return (*why = at + "unmappable", false);
    bool same = false;
    if (gst_buffer_map(y->data, &q, GST_MAP_READ)) {
      same = p.size == q.size && (p.size == 0 || std::memcmp(p.data, q.data, p.size) == 0);
      gst_buffer_unmap(y->data, &q);
    }
    gst_buffer_unmap(x->data, &p);
    if (!same) return (*why = at + "data", false);
  }
  return true;
}
#endif

#ifdef FUZZ_SERIALIZED
Bytes serialized(GstMeta* m) {
  GByteArray* a = g_byte_array_new();
  Bytes out;
  if (gst_meta_serialize_simple(m, a)) out.assign(a->data, a->data + a->len);
  g_byte_array_unref(a);
  return out;
}
#endif

bool same_meta(GstMeta* a, GstMeta* b, std::string* why) {
  if (a->info->api != b->info->api || a->info->type != b->info->type) {
    *why = std::string(g_type_name(a->info->type)) + " came back as " + g_type_name(b->info->type);
    return false;
  }
  const GType api = a->info->api;
  const char* name = g_type_name(a->info->type);
  std::string w;
  bool same = true;
  if (gst_meta_info_is_custom(a->info)) {
    same = same_structure(gst_custom_meta_get_structure(reinterpret_cast<GstCustomMeta*>(a)),
                          gst_custom_meta_get_structure(reinterpret_cast<GstCustomMeta*>(b)), name,
                          &w, false);
  } else if (api == GST_REFERENCE_TIMESTAMP_META_API_TYPE) {
    auto* x = reinterpret_cast<GstReferenceTimestampMeta*>(a);
    auto* y = reinterpret_cast<GstReferenceTimestampMeta*>(b);
    if (x->timestamp != y->timestamp || x->duration != y->duration) {
      same = false, w = "timestamp or duration";
    } else {
      same = same_caps(x->reference, y->reference, &w);
    }
#ifdef FUZZ_ANALYTICS
  } else if (api == GST_ANALYTICS_RELATION_META_API_TYPE) {
    same = same_analytics(a, b, &w);
#endif
#ifdef FUZZ_TENSORS
  } else if (api == gst_tensor_meta_api_get_type()) {
    same = same_tensors(a, b, &w);
#endif
  } else {
#ifdef FUZZ_SERIALIZED
    same = serialized(a) == serialized(b);
    w = "serialized bytes";
#endif
  }
  if (!same) *why = std::string(name) + ": " + w;
  return same;
}

void expect_same_metas(const std::vector<GstMeta*>& want, GstBuffer* got, const char* what) {
  const std::vector<GstMeta*> have = metas_of(got, false);
  if (want.size() != have.size())
    fail(std::string(what) + ": " + std::to_string(want.size()) + " metas came back as " +
         std::to_string(have.size()));
  for (std::size_t i = 0; i < want.size(); ++i) {
    std::string why;
    if (!same_meta(want[i], have[i], &why))
      fail(std::string(what) + ": meta " + std::to_string(i) + " differs: " + why);
  }
}

// encode_metas into `area`; fails on anything the encoder left out when room was not short.
std::uint32_t encode(GstBuffer* b, std::uint8_t* area, std::size_t capacity, EncodeCounts* c) {
  const char* oversized = nullptr;
  return cudaipc::gst::encode_metas(b, MetaFilter(), area, static_cast<std::uint32_t>(capacity), c,
                                    &oversized);
}

// Decodes our own encoder's area: every record must become its meta again.
Buffer decode_own(const std::uint8_t* area, std::uint32_t size, std::uint32_t sent,
                  const char* what) {
  Buffer b(gst_buffer_new());
  DecodeCounts c;
  std::string error;
  cudaipc::gst::decode_metas(area, size, MetaFilter(), b.get(), &c, &error);
  if (c.bad || c.unknown || c.filtered || c.received != sent)
    fail(std::string(what) + ": the encoder's own area decoded to " + std::to_string(c.received) +
         " metas of " + std::to_string(sent) + " (" + std::to_string(c.bad) + " bad, " +
         std::to_string(c.unknown) + " unknown): " + error);
  return b;
}

// ---- direction A: a peer's area ----

void from_area(Input& in) {
  const Bytes bytes = in.rest(kMaxArea);
  Area area(bytes.size());
  if (!bytes.empty()) std::memcpy(area.data(), bytes.data(), bytes.size());

  Buffer first(gst_buffer_new());
  DecodeCounts c;
  std::string error;
  cudaipc::gst::decode_metas(area.data(), static_cast<std::uint32_t>(bytes.size()), MetaFilter(),
                             first.get(), &c, &error);
  const std::vector<GstMeta*> attached = metas_of(first.get(), false);
  if (attached.size() != c.received)
    fail(std::to_string(c.received) + " metas counted received, " +
         std::to_string(attached.size()) + " on the buffer");
  if (c.bad && error.empty()) fail("a bad record without a reason");

  static Area again(kEncodeCapacity), third(kEncodeCapacity);
  EncodeCounts e;
  const std::uint32_t size = encode(first.get(), again.data(), kEncodeCapacity, &e);
  const std::vector<GstMeta*> sent = metas_of(first.get(), true);
  if (e.sent != sent.size() || e.oversized || e.unsupported)
    fail("re-encoding " + std::to_string(sent.size()) + " decoded metas sent " +
         std::to_string(e.sent) + " (" + std::to_string(e.oversized) + " oversized, " +
         std::to_string(e.unsupported) + " unsupported)");
  Buffer second = decode_own(again.data(), size, e.sent, "decoded, encoded, decoded");
  expect_same_metas(sent, second.get(), "decoded, encoded, decoded");

  EncodeCounts e3;
  const std::uint32_t size3 = encode(second.get(), third.data(), kEncodeCapacity, &e3);
  if (size3 != size || std::memcmp(third.data(), again.data(), size) != 0)
    fail("the second encoding differs from the first (" + std::to_string(size) + " -> " +
         std::to_string(size3) + " bytes)");

  // An area that gave nothing but malformed records is a rejection; anything attached (or an
  // empty area) is an accepted input.
  if (c.received == 0 && c.bad) throw Error(Errc::protocol, "malformed area: " + error);
}

// ---- direction B: metas built from the input ----

enum class Kind {
  i32,
  u32,
  i64,
  u64,
  f32,
  f64,
  boolean,
  string,
  bytes,
  fraction,
  structure,
  array,
  list
};

// Every GType a custom meta's field keeps through its record (docs/metas.md, kind 4), at every
// level of nesting.
constexpr Kind kKinds[] = {Kind::i32,   Kind::u32,      Kind::i64,       Kind::u64,
                           Kind::f32,   Kind::f64,      Kind::boolean,   Kind::string,
                           Kind::bytes, Kind::fraction, Kind::structure, Kind::array,
                           Kind::list};
// A reference timestamp's caps cross as GStreamer's text, whose nested values (structures in
// brackets, arrays of empty arrays) do not always parse back in GStreamer 1.28: plain values only.
constexpr Kind kCapsKinds[] = {Kind::i32, Kind::u32,     Kind::i64,    Kind::u64,     Kind::f32,
                               Kind::f64, Kind::boolean, Kind::string, Kind::fraction};

// Valid UTF-8 with control characters, quotes, separators and multi-byte characters.
std::string make_string(Input& in, std::size_t max) {
  const std::size_t n = in.u8() % (max + 1);
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t b = in.u8();
    if (b == 0) {
      s += "<\",;=\\ >";
    } else if (b < 0x80) {
      s += static_cast<char>(b);
    } else {
      static const char* const multi[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9d\x84\x9e"};
      s += multi[b % 3];
    }
  }
  return s;
}

// A name GstStructure accepts: a letter, then letters, digits and its punctuation.
std::string make_name(Input& in, char first) {
  static const char kChars[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/+";
  std::string s(1, first);
  for (std::size_t n = in.u8() % 6; n > 0; --n) s += kChars[in.u8() % (sizeof kChars - 1)];
  return s;
}

Kind pick_kind(Input& in, int depth, bool caps);
void make_value(Input& in, int depth, Kind k, GValue* v);

GstStructure* make_structure(Input& in, const std::string& name, int depth, std::size_t max,
                             bool caps) {
  GstStructure* s = gst_structure_new_empty(name.c_str());
  const std::size_t n = in.u8() % (max + 1);
  for (std::size_t i = 0; i < n; ++i) {
    GValue v = G_VALUE_INIT;
    make_value(in, depth, pick_kind(in, depth, caps), &v);
    // Distinct names, so every field built is one the structure keeps.
    gst_structure_take_value(s, ("f" + std::to_string(i) + make_name(in, '_')).c_str(), &v);
  }
  return s;
}

Kind pick_kind(Input& in, int depth, bool caps) {
  const std::uint8_t pick = in.u8();
  const Kind k = caps ? kCapsKinds[pick % std::size(kCapsKinds)] : kKinds[pick % std::size(kKinds)];
  if (depth >= kMaxDepth && (k == Kind::structure || k == Kind::array || k == Kind::list))
    return Kind::string;
  return k;
}

void make_value(Input& in, int depth, Kind k, GValue* v) {
  switch (k) {
    case Kind::i32:
      g_value_init(v, G_TYPE_INT);
      g_value_set_int(v, static_cast<gint>(in.u32()));
      break;
    case Kind::u32:
      g_value_init(v, G_TYPE_UINT);
      g_value_set_uint(v, in.u32());
      break;
    case Kind::i64:
      g_value_init(v, G_TYPE_INT64);
      g_value_set_int64(v, static_cast<gint64>(in.u64()));
      break;
    case Kind::u64:
      g_value_init(v, G_TYPE_UINT64);
      g_value_set_uint64(v, in.u64());
      break;
    case Kind::f32: {
      const std::uint32_t bits = in.u32();
      float f;
      std::memcpy(&f, &bits, sizeof f);
      g_value_init(v, G_TYPE_FLOAT);
      g_value_set_float(v, f);
      break;
    }
    case Kind::f64: {
      const std::uint64_t bits = in.u64();
      double d;
      std::memcpy(&d, &bits, sizeof d);
      g_value_init(v, G_TYPE_DOUBLE);
      g_value_set_double(v, d);
      break;
    }
    case Kind::boolean:
      g_value_init(v, G_TYPE_BOOLEAN);
      g_value_set_boolean(v, in.u8() & 1);
      break;
    case Kind::string:
      g_value_init(v, G_TYPE_STRING);
      g_value_take_string(v, g_strdup(make_string(in, 24).c_str()));
      break;
    case Kind::bytes: {
      Bytes b(in.u8() % 17);
      for (auto& x : b) x = in.u8();
      g_value_init(v, G_TYPE_BYTES);
      g_value_take_boxed(v, g_bytes_new(b.data(), b.size()));
      break;
    }
    case Kind::fraction: {
      // GStreamer takes numerators and denominators from -G_MAXINT up, denominators not 0.
      gint num = static_cast<gint>(in.u32());
      if (num == G_MININT) num = -G_MAXINT;
      const gint den = static_cast<gint>(in.u32() % static_cast<guint>(G_MAXINT)) + 1;
      g_value_init(v, GST_TYPE_FRACTION);
      gst_value_set_fraction(v, num, den);
      break;
    }
    case Kind::structure:
      g_value_init(v, GST_TYPE_STRUCTURE);
      g_value_take_boxed(v, make_structure(in, make_name(in, 's'), depth + 1, 3, false));
      break;
    case Kind::array:
    case Kind::list: {
      // GStreamer's arrays and lists hold values of one type; a container of containers holds
      // one, as GStreamer also compares the inner ones' elements.
      const bool array = k == Kind::array;
      g_value_init(v, array ? GST_TYPE_ARRAY : GST_TYPE_LIST);
      const Kind inner = pick_kind(in, depth + 1, false);
      const bool nested = inner == Kind::structure || inner == Kind::array || inner == Kind::list;
      for (std::size_t n = nested ? in.u8() % 2 : in.u8() % 5; n > 0; --n) {
        GValue e = G_VALUE_INIT;
        make_value(in, depth + 1, inner, &e);
        if (array)
          gst_value_array_append_and_take_value(v, &e);
        else
          gst_value_list_append_and_take_value(v, &e);
      }
      break;
    }
  }
}

void add_custom_metas(Input& in, GstBuffer* b) {
  for (std::size_t n = in.u8() % 4; n > 0; --n) {
    const char* name = kCustomNames[in.u8() % std::size(kCustomNames)];
    GstCustomMeta* m = gst_buffer_add_custom_meta(b, name);
    GstStructure* s = gst_custom_meta_get_structure(m);
    for (std::size_t i = 0, fields = in.u8() % 12; i < fields; ++i) {
      GValue v = G_VALUE_INIT;
      make_value(in, 0, pick_kind(in, 0, false), &v);
      gst_structure_take_value(s, ("f" + std::to_string(i) + make_name(in, '_')).c_str(), &v);
    }
  }
}

void add_reference_timestamps(Input& in, GstBuffer* b) {
  static const char* const kNames[] = {"timestamp/x-ntp", "timestamp/x-ptp", "timestamp/x-unix",
                                       "timestamp/x-cudaipc-fuzz"};  // the last is not sent
  for (std::size_t n = in.u8() % 3; n > 0; --n) {
    GstCaps* caps = gst_caps_new_full(
        make_structure(in, kNames[in.u8() % std::size(kNames)], 0, 3, true), nullptr);
    // GStreamer takes any timestamp but GST_CLOCK_TIME_NONE.
    const GstClockTime ts = in.u64() >> 1, duration = in.u64();
    gst_buffer_add_reference_timestamp_meta(b, caps, ts, duration);
    gst_caps_unref(caps);
  }
}

#ifdef FUZZ_ANALYTICS
void add_analytics(Input& in, GstBuffer* b) {
  if (!(in.u8() & 1)) return;
  GstAnalyticsRelationMeta* rmeta = gst_buffer_add_analytics_relation_meta(b);
  std::vector<guint> ids;
  for (std::size_t n = in.u8() % 7; n > 0; --n) {
    GstAnalyticsMtd out;
    gboolean ok = FALSE;
    switch (in.u8() % 4) {
      case 0: {
        const GQuark label = in.u8() % 8 ? g_quark_from_string(make_string(in, 8).c_str()) : 0;
        const gint x = static_cast<gint>(in.u32()), y = static_cast<gint>(in.u32());
        const gint w = static_cast<gint>(in.u32()), h = static_cast<gint>(in.u32());
        const std::uint32_t cbits = in.u32();
        gfloat conf;
        std::memcpy(&conf, &cbits, sizeof conf);
#if GST_CHECK_VERSION(1, 26, 0)
        if (in.u8() & 1) {
          const gfloat r = static_cast<gfloat>(in.u16()) / 1000.f;
          ok = gst_analytics_relation_meta_add_oriented_od_mtd(
              rmeta, label, x, y, w, h, r, conf, reinterpret_cast<GstAnalyticsODMtd*>(&out));
          break;
        }
#endif
        ok = gst_analytics_relation_meta_add_od_mtd(rmeta, label, x, y, w, h, conf,
                                                    reinterpret_cast<GstAnalyticsODMtd*>(&out));
        break;
      }
      case 1: {
        // A classification of no classes too (GStreamer wants its arrays even then).
        const std::size_t classes = in.u8() % 5;
        std::vector<gfloat> levels(classes + 1);
        std::vector<GQuark> quarks(classes + 1);
        for (std::size_t i = 0; i < classes; ++i) {
          levels[i] = static_cast<gfloat>(in.u16()) / 65535.f;
          quarks[i] = g_quark_from_string(make_string(in, 8).c_str());
        }
        ok = gst_analytics_relation_meta_add_cls_mtd(rmeta, classes, levels.data(), quarks.data(),
                                                     reinterpret_cast<GstAnalyticsClsMtd*>(&out));
        break;
      }
      case 2: {
        auto* t = reinterpret_cast<GstAnalyticsTrackingMtd*>(&out);
        const guint64 id = in.u64();
        const GstClockTime first = in.u64(), last = in.u64();
        ok = gst_analytics_relation_meta_add_tracking_mtd(rmeta, id, first, t);
        if (ok) gst_analytics_tracking_mtd_update_last_seen(t, last);
        if (ok && (in.u8() & 1)) gst_analytics_tracking_mtd_set_lost(t);
        break;
      }
      case 3: {
#ifdef FUZZ_SEGMENTATION
        // The mask formats GStreamer takes.
        static const GstVideoFormat kFormats[] = {
            GST_VIDEO_FORMAT_GRAY8, GST_VIDEO_FORMAT_GRAY16_LE, GST_VIDEO_FORMAT_GRAY16_BE};
        const GstVideoFormat format = kFormats[in.u8() % std::size(kFormats)];
        const guint width = 1 + in.u8() % 8, height = 1 + in.u8() % 8;
        GstVideoInfo vinfo;
        gst_video_info_set_format(&vinfo, format, width, height);
        const gint stride = GST_VIDEO_INFO_PLANE_STRIDE(&vinfo, 0) + in.u8() % 4;
        const gsize bytes = static_cast<gsize>(stride) * height;
        GstBuffer* mask = gst_buffer_new_allocate(nullptr, bytes, nullptr);
        GstMapInfo map;
        gst_buffer_map(mask, &map, GST_MAP_WRITE);
        for (gsize i = 0; i < bytes; ++i) map.data[i] = in.u8();
        gst_buffer_unmap(mask, &map);
        gsize offsets[GST_VIDEO_MAX_PLANES] = {0};
        gint strides[GST_VIDEO_MAX_PLANES] = {stride};
        gst_buffer_add_video_meta_full(mask, GST_VIDEO_FRAME_FLAG_NONE, format, width, height, 1,
                                       offsets, strides);
        std::vector<guint> regions(in.u8() % 4);
        for (auto& r : regions) r = in.u32();
        const auto type =
            in.u8() & 1 ? GST_SEGMENTATION_TYPE_INSTANCE : GST_SEGMENTATION_TYPE_SEMANTIC;
        const gint x = static_cast<gint>(in.u16()), y = static_cast<gint>(in.u16());
        const guint w = in.u16(), h = in.u16();
        ok = gst_analytics_relation_meta_add_segmentation_mtd(
            rmeta, mask, type, regions.size(), regions.data(), x, y, w, h,
            reinterpret_cast<GstAnalyticsSegmentationMtd*>(&out));
        if (!ok) gst_buffer_unref(mask);
#endif
        break;
      }
    }
    if (ok) ids.push_back(out.id);
  }
  static const GstAnalyticsRelTypes kRelations[] = {
      GST_ANALYTICS_REL_TYPE_IS_PART_OF, GST_ANALYTICS_REL_TYPE_CONTAIN,
      GST_ANALYTICS_REL_TYPE_RELATE_TO,
      static_cast<GstAnalyticsRelTypes>(GST_ANALYTICS_REL_TYPE_IS_PART_OF |
                                        GST_ANALYTICS_REL_TYPE_RELATE_TO)};
  for (std::size_t n = ids.size() < 2 ? 0 : in.u8() % 6; n > 0; --n) {
    const guint from = ids[in.u8() % ids.size()], to = ids[in.u8() % ids.size()];
    if (from != to)
      gst_analytics_relation_meta_set_relation(rmeta, kRelations[in.u8() % std::size(kRelations)],
                                               from, to);
  }
}
#endif

#ifdef FUZZ_TENSORS
void add_tensors(Input& in, GstBuffer* b) {
  if (!(in.u8() & 1)) return;
  // GstTensorDataType's values this GStreamer has, by the names docs/metas.md gives them.
  static const char* const kTypes[] = {
    "int4",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint4",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "bfloat16",
#if GST_CHECK_VERSION(1, 28, 0)
    "string",
    "bool",
    "complex64",
    "complex128",
    "float8e4m3fn",
    "float8e4m3fnuz",
    "float8e5m2",
    "float8e5m2fnuz",
#endif
  };
  const std::size_t n = in.u8() % 4;
  GstTensor** tensors = g_new0(GstTensor*, n ? n : 1);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t dims = in.u8() % 5;
    GstTensor* t = gst_tensor_alloc(dims);
    t->id = g_quark_from_string(make_name(in, 't').c_str());
    t->layout = GST_TENSOR_LAYOUT_CONTIGUOUS;
    t->data_type = static_cast<GstTensorDataType>(in.u8() % std::size(kTypes));
    t->dims_order = in.u8() & 1 ? GST_TENSOR_DIM_ORDER_COL_MAJOR : GST_TENSOR_DIM_ORDER_ROW_MAJOR;
    std::size_t elements = 1;
    for (std::size_t k = 0; k < dims; ++k) elements *= (t->dims[k] = in.u8() % 5);
    // A valid tensor's data is its dims' worth of elements (data types without a fixed size, as
    // strings, any length).
    const std::uint32_t bits = metas::tensor_dtype_bits(kTypes[t->data_type]);
    const std::size_t bytes = bits ? (elements * bits + 7) / 8 : in.u8() % 65;
    Bytes data(bytes);
    for (auto& d : data) d = in.u8();
    t->data = bytes ? gst_buffer_new_memdup(data.data(), bytes) : gst_buffer_new();
    tensors[i] = t;
  }
  gst_tensor_meta_set(gst_buffer_add_tensor_meta(b), static_cast<guint>(n), tensors);
}
#endif

#ifdef FUZZ_SERIALIZED
void add_serialized(Input& in, GstBuffer* b) {
  for (std::size_t n = in.u8() % 3; n > 0; --n) {
    auto* m = reinterpret_cast<FuzzMeta*>(gst_buffer_add_meta(b, fuzz_meta_info(), nullptr));
    m->size = static_cast<guint8>(in.u8() % (kFuzzPayload + 1));
    for (guint8 i = 0; i < m->size; ++i) m->data[i] = in.u8();
  }
}
#endif

Buffer build(Input& in) {
  Buffer b(gst_buffer_new());
  // Kinds interleave in an order the input picks, so records of every kind follow each other.
  for (std::size_t rounds = 1 + in.u8() % 3; rounds > 0; --rounds) {
    switch (in.u8() % 5) {
      case 0:
        add_custom_metas(in, b.get());
        break;
      case 1:
        add_reference_timestamps(in, b.get());
        break;
      case 2:
#ifdef FUZZ_ANALYTICS
        add_analytics(in, b.get());
#endif
        break;
      case 3:
#ifdef FUZZ_TENSORS
        add_tensors(in, b.get());
#endif
        break;
      case 4:
#ifdef FUZZ_SERIALIZED
        add_serialized(in, b.get());
#endif
        break;
    }
  }
  return b;
}

void from_metas(Input& in) {
  const std::size_t small = in.u16();
  Buffer built = build(in);
  const std::vector<GstMeta*> sent = metas_of(built.get(), true);

  static Area area(kEncodeCapacity);
  EncodeCounts e;
  const std::uint32_t size = encode(built.get(), area.data(), kEncodeCapacity, &e);
  if (e.sent != sent.size() || e.oversized || e.unsupported)
    fail("encoding " + std::to_string(sent.size()) + " metas sent " + std::to_string(e.sent) +
         " (" + std::to_string(e.oversized) + " oversized, " + std::to_string(e.unsupported) +
         " unsupported)");
  Buffer back = decode_own(area.data(), size, e.sent, "built, encoded, decoded");
  expect_same_metas(sent, back.get(), "built, encoded, decoded");

  // Into an area too small for everything: what fits is sent and decodes cleanly. (A frame
  // without a meta area, capacity 0, counts nothing.)
  if (small == 0) return;
  EncodeCounts es;
  const std::uint32_t small_size = encode(built.get(), area.data(), small, &es);
  if (small_size > small) fail("the encoder wrote past its area");
  if (es.sent + es.oversized != sent.size() || es.unsupported)
    fail("a small area: " + std::to_string(es.sent) + " sent, " + std::to_string(es.oversized) +
         " oversized of " + std::to_string(sent.size()));
  decode_own(area.data(), small_size, es.sent, "built, encoded small, decoded");
}

void one_input(Input& in) {
  if (in.u8() & 1)
    from_area(in);
  else
    from_metas(in);
}

// ---- seeds ----

Bytes area_seed(const std::function<void(metas::AreaWriter&)>& write) {
  Area area(kMaxArea);
  metas::AreaWriter w(area.data(), kMaxArea);
  write(w);
  return SeedBuilder().u8(1).bytes(Bytes(area.data(), area.data() + w.size())).done();
}

// A custom record, as a peer's writer lays it out, with one field of any type and text.
void custom_record(metas::AreaWriter& w, std::string_view name, std::string_view field,
                   std::string_view type, std::string_view text) {
  std::uint8_t* body = w.begin_record(metas::RecordKind::custom, name, text.size() + 256);
  if (!body) fail("a seed's record does not fit");
  metas::CustomWriter cw(body, text.size() + 256);
  cw.add_other(field, type, text);
  w.commit_record(cw.finish());
}

// A normal buffer's metas, encoded by the real encoder: direction A's seed of every kind.
Bytes encoded_seed(Input& in) {
  Buffer b = build(in);
  Area area(kMaxArea);
  EncodeCounts e;
  const std::uint32_t size = encode(b.get(), area.data(), kMaxArea, &e);
  return SeedBuilder().u8(1).bytes(Bytes(area.data(), area.data() + size)).done();
}

std::vector<Bytes> seeds() {
  init_once();  // the seeds are made by GStreamer and the real encoders
  std::vector<Bytes> out;
  // Direction B: inputs that build metas of each kind (the byte after the mode picks the small
  // area, then rounds and kinds), and all of them.
  for (std::uint8_t kind = 0; kind < 5; ++kind) {
    Bytes b = SeedBuilder().u8(0).u16(300).u8(0).u8(kind).done();
    for (int i = 0; i < 200; ++i) b.push_back(static_cast<std::uint8_t>(i * 37 + kind * 11 + 1));
    out.push_back(b);
  }
  Bytes all = SeedBuilder().u8(0).u16(4000).u8(2).done();
  for (int i = 0; i < 600; ++i) all.push_back(static_cast<std::uint8_t>(i * 13 + 7));
  out.push_back(all);

  // Direction A: what the encoder writes for those buffers.
  for (std::size_t i = 0; i < out.size() && i < 6; ++i) {
    Input in(out[i].data() + 1, out[i].size() - 1);
    in.u16();
    out.push_back(encoded_seed(in));
  }
  // Records written by hand, as docs/metas.md lays them out: custom fields of type `other` that
  // the source parses (enums, flags, bitmasks, dates) and that it keeps as text (fractions, arrays
  // and structures as text: they cross typed now), and a reference timestamp.
  out.push_back(area_seed([](metas::AreaWriter& w) {
    custom_record(w, "cudaipc-fuzz-a", "e", "GstState", "playing");
    custom_record(w, "cudaipc-fuzz-a", "g", "GstBufferFlags", "live+discont");
    custom_record(w, "cudaipc-fuzz-a", "m", "GstBitmask", "0x00000000000000ff");
    custom_record(w, "cudaipc-fuzz-a", "t", "GstDateTime", "2026-11-26T05:00:00Z");
    custom_record(w, "cudaipc-fuzz-a", "d", "GDate", "2026-11-26");
    custom_record(w, "cudaipc-fuzz-a", "f", "GstFraction", "1/2");
    custom_record(w, "cudaipc-fuzz-b", "a", "GstValueArray", "< (int)1, (int)2 >");
    custom_record(w, "cudaipc-fuzz-b", "s", "GstStructure", "s, x=(int)1;");
    if (std::uint8_t* b = w.begin_record(metas::RecordKind::reference_timestamp,
                                         "GstReferenceTimestampMetaAPI", 128))
      w.commit_record(metas::write_reference_timestamp(
          b, 128, metas::ReferenceTimestamp{1, 2, "timestamp/x-ntp, host=(string)a"}));
  }));
#ifdef FUZZ_SERIALIZED
  // GStreamer's own serialization of each meta it can serialize, in a serialized record: the
  // decoder hands those bytes to gst_meta_deserialize.
  {
    Buffer b(gst_buffer_new());
    gst_buffer_add_video_meta(b.get(), GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_FORMAT_RGBA, 4, 4);
    GstCaps* caps = gst_caps_from_string("timestamp/x-ptp, domain=(int)0");
    gst_buffer_add_reference_timestamp_meta(b.get(), caps, 5, 6);
    gst_caps_unref(caps);
    GstCustomMeta* cm = gst_buffer_add_custom_meta(b.get(), kCustomNames[0]);
    gst_structure_set(gst_custom_meta_get_structure(cm), "n", G_TYPE_INT, 3, "s", G_TYPE_STRING,
                      "x", nullptr);
    auto* fm = reinterpret_cast<FuzzMeta*>(gst_buffer_add_meta(b.get(), fuzz_meta_info(), nullptr));
    fm->size = 4;
    std::memcpy(fm->data, "abcd", 4);
    out.push_back(area_seed([&](metas::AreaWriter& w) {
      for (GstMeta* m : metas_of(b.get(), false)) {
        const Bytes s = serialized(m);
        if (s.empty() || !w.add_record(metas::RecordKind::serialized, g_type_name(m->info->api),
                                       s.data(), s.size()))
          fail("a serialized seed record was not written");
      }
    }));
  }
#endif
  // A model's reply as the core's writer lays it out for Python's detections=, classifications=
  // and tracks= (each tied to its detection): on a GStreamer without analytics metas (1.22) it
  // becomes a CudaipcAnalyticsMeta, which is sent on as an analytics record again.
  out.push_back(area_seed([](metas::AreaWriter& w) {
    std::uint8_t* b =
        w.begin_record(metas::RecordKind::analytics, "GstAnalyticsRelationMetaAPI", 1024);
    if (!b) fail("the analytics seed does not fit");
    metas::AnalyticsWriter aw(b, 1024, 5);
    metas::ObjectDetection ball, cube;
    ball.x = 10, ball.y = 20, ball.w = 30, ball.h = 40, ball.confidence = 0.75f;
    ball.label = "ball";
    cube.x = 1, cube.y = 2, cube.w = 3, cube.h = 4, cube.confidence = 0.5f, cube.label = "cube";
    cube.oriented = true, cube.r = 0.25f;
    aw.add_object_detection(0, ball);
    aw.add_object_detection(1, cube);
    const metas::ClassEntry colours[] = {{0.875f, "red"}, {0.125f, "blue"}};
    aw.add_classification(2, colours, 2);
    metas::Tracking t;
    t.tracking_id = 42, t.first_seen = 1, t.last_seen = 2;
    aw.add_tracking(3, t);
    aw.add_tracking(4, t);
    aw.add_relation(0, 2, 4);
    aw.add_relation(2, 0, 2);
    aw.add_relation(0, 3, 8);
    w.commit_record(aw.finish());
  }));
  // The hostile records of issue #28, each beside a normal record (the frame's other metas must
  // still arrive): a value nested 30 000 levels deep, names GStreamer refuses, GTypes that cannot
  // hold a value.
  const std::string deep(30000, '<');
  const auto hostile = [&](const std::function<void(metas::AreaWriter&)>& bad) {
    return area_seed([&](metas::AreaWriter& w) {
      custom_record(w, "cudaipc-fuzz-a", "ok", "GstFraction", "3/4");
      bad(w);
    });
  };
  out.push_back(hostile([&](metas::AreaWriter& w) {
    custom_record(w, "cudaipc-fuzz-a", "deep", "GstValueArray", deep);
  }));
  out.push_back(hostile(
      [](metas::AreaWriter& w) { custom_record(w, "bad name!", "f", "GstFraction", "1/2"); }));
  out.push_back(
      hostile([](metas::AreaWriter& w) { custom_record(w, "9lives", "f", "GstFraction", "1/2"); }));
  out.push_back(
      hostile([](metas::AreaWriter& w) { custom_record(w, "cudaipc-fuzz-b", "v", "void", "1"); }));
  out.push_back(hostile(
      [](metas::AreaWriter& w) { custom_record(w, "cudaipc-fuzz-b", "i", "GInterface", "1"); }));
  // What this target found after those were refused (docs/fuzzing.md, Known): a serialized meta
  // whose header's total is under 10 bytes with a long name; reference timestamps at
  // GST_CLOCK_TIME_NONE and with caps of no structure; a classification of no classes; masks of
  // a format GStreamer does not know or does not take for a segmentation.
  out.push_back(hostile([](metas::AreaWriter& w) {
    std::uint8_t body[16] = {5, 0, 0, 0, 0, 0, 1, 0};  // total 5, name_len 65536
    w.add_record(metas::RecordKind::serialized, "GstVideoMetaAPI", body, sizeof body);
  }));
  for (const char* caps : {"timestamp/x-ntp", "EMPTY", "ANY"}) {
    out.push_back(hostile([&](metas::AreaWriter& w) {
      const GstClockTime ts = std::strcmp(caps, "timestamp/x-ntp") == 0 ? GST_CLOCK_TIME_NONE : 1;
      if (std::uint8_t* b = w.begin_record(metas::RecordKind::reference_timestamp,
                                           "GstReferenceTimestampMetaAPI", 128))
        w.commit_record(
            metas::write_reference_timestamp(b, 128, metas::ReferenceTimestamp{ts, 0, caps}));
    }));
  }
  out.push_back(hostile([](metas::AreaWriter& w) {
    if (std::uint8_t* b =
            w.begin_record(metas::RecordKind::analytics, "GstAnalyticsRelationMetaAPI", 256)) {
      metas::AnalyticsWriter aw(b, 256, 1);
      aw.add_classification(0, nullptr, 0);
      w.commit_record(aw.finish());
    }
  }));
  for (std::uint32_t format : {std::uint32_t{GST_VIDEO_FORMAT_RGBA}, std::uint32_t{0x7fff}}) {
    out.push_back(hostile([&](metas::AreaWriter& w) {
      if (std::uint8_t* b =
              w.begin_record(metas::RecordKind::analytics, "GstAnalyticsRelationMetaAPI", 512)) {
        std::uint8_t mask[64] = {1, 2, 3};
        metas::Segmentation seg;
        seg.w = seg.h = 4, seg.mask_width = 4, seg.mask_height = 4, seg.mask_stride = 16;
        seg.mask_format = format, seg.mask = mask;
        metas::AnalyticsWriter aw(b, 512, 1);
        aw.add_segmentation(0, seg);
        w.commit_record(aw.finish());
      }
    }));
  }
  return out;
}

}  // namespace

const Target& target() {
  static const Target t{"gst_metas", init, one_input, seeds, {Errc::protocol}};
  return t;
}

}  // namespace cudaipc::fuzz
