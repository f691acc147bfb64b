// cudaipc-gst-meta-peer: one end of a channel whose frames carry metas, for the cross-process
// meta tests (GStreamer <-> GStreamer, Python <-> GStreamer; docs/metas.md).
//   cudaipc-gst-meta-peer produce SOCKET FRAMES [sink properties...]
//       appsrc ! cudaipcsink ipc-mode=host wait-for-consumer=true: FRAMES RGBA 16x12 frames, frame
//       i's bytes all i, each with the metas of decorate() below (what this GStreamer version
//       has); prints each frame's metas as one JSON line (describe()).
//   cudaipc-gst-meta-peer consume SOCKET FRAMES [source properties...]
//       cudaipcsrc mode=every-frame ! appsink: prints each frame's metas the same way, after
//       checking its bytes. Exits 1 on a wrong frame, 2 on a pipeline error or timeout.
//   cudaipc-gst-meta-peer ssd-caps WIDTH HEIGHT
//       prints RGBA video caps of that size carrying GStreamer 1.28's `tensors` field for the
//       SSD tensor decoder's four output tensors (ssdtensordec negotiates on it): what a
//       producer without GStreamer declares to feed that decoder.
//   cudaipc-gst-meta-peer describe SOCKET FRAMES [source properties...]
//       the same for any producer (no check of the bytes); CUDAIPC_META_PEER_BETWEEN names
//       elements to put between the source and the appsink (objectdetectionoverlay, say).
// The two outputs are equal line for line when every meta crossed intact.
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gst/gst.h>
#include <gst/video/video.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#ifdef CUDAIPC_HAVE_ANALYTICS
#include <gst/analytics/analytics.h>
#endif

namespace {

constexpr int kWidth = 16, kHeight = 12;

// A quark's string; "" for no quark (a detector without labels gives its boxes none).
[[maybe_unused]] const char* quark_text(GQuark q) {
  const char* s = q ? g_quark_to_string(q) : nullptr;
  return s ? s : "";
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// A field's value as JSON: every integer width as a number (each keeps its GType on the channel),
// other types as GStreamer's text of them.
std::string value_json(const GValue* v) {
  switch (G_TYPE_FUNDAMENTAL(G_VALUE_TYPE(v))) {
    case G_TYPE_INT:
      return std::to_string(g_value_get_int(v));
    case G_TYPE_INT64:
      return std::to_string(g_value_get_int64(v));
    case G_TYPE_UINT:
      return std::to_string(g_value_get_uint(v));
    case G_TYPE_UINT64:
      return std::to_string(g_value_get_uint64(v));
    case G_TYPE_FLOAT:
      return number(g_value_get_float(v));
    case G_TYPE_DOUBLE:
      return number(g_value_get_double(v));
    case G_TYPE_BOOLEAN:
      return g_value_get_boolean(v) ? "true" : "false";
    case G_TYPE_STRING:
      return quote(g_value_get_string(v) ? g_value_get_string(v) : "");
    default: {
      gchar* text = gst_value_serialize(v);
      std::string out = quote(text ? text : "?");
      g_free(text);
      return out;
    }
  }
}

std::string structure_json(const GstStructure* s) {
  std::string out = "{";
  for (gint i = 0; i < gst_structure_n_fields(s); ++i) {
    const gchar* name = gst_structure_nth_field_name(s, i);
    out += std::string(i ? "," : "") + quote(name) + ":" +
           value_json(gst_structure_get_value(s, name));
  }
  return out + "}";
}

[[maybe_unused]] std::string hex(const guint8* data, gsize size) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (gsize i = 0; i < size; ++i) {
    out += digits[data[i] >> 4];
    out += digits[data[i] & 15];
  }
  return out;
}

// Every meta of the kinds that cross, in a fixed order: custom metas, reference timestamps
// (cudaipc's own stamps left out), analytics, tensors.
std::string describe(GstBuffer* buf) {
  std::string custom, refs;
  gpointer state = nullptr;
  while (GstMeta* m = gst_buffer_iterate_meta(buf, &state)) {
    if (gst_meta_info_is_custom(m->info)) {
      custom += std::string(custom.empty() ? "" : ",") + quote(g_type_name(m->info->type)) + ":" +
                structure_json(gst_custom_meta_get_structure(reinterpret_cast<GstCustomMeta*>(m)));
    } else if (m->info->api == GST_REFERENCE_TIMESTAMP_META_API_TYPE) {
      auto* r = reinterpret_cast<GstReferenceTimestampMeta*>(m);
      gchar* caps = gst_caps_to_string(r->reference);
      if (!g_str_has_prefix(caps, "timestamp/x-cudaipc-"))
        refs += std::string(refs.empty() ? "" : ",") + "[" + quote(caps) + "," +
                std::to_string(r->timestamp) + "," + std::to_string(r->duration) + "]";
      g_free(caps);
    }
  }
  std::string out = "{\"custom\":{" + custom + "},\"references\":[" + refs + "]";
#ifdef CUDAIPC_HAVE_ANALYTICS
  if (GstAnalyticsRelationMeta* rmeta = gst_buffer_get_analytics_relation_meta(buf)) {
    const gsize n = gst_analytics_relation_get_length(rmeta);
    std::string mtds;
    for (gsize id = 0; id < n; ++id) {
      GstAnalyticsODMtd od;
      GstAnalyticsClsMtd cls;
      GstAnalyticsTrackingMtd trk;
      std::string one;
      if (gst_analytics_relation_meta_get_od_mtd(rmeta, id, &od)) {
        gint x, y, w, h;
        gfloat r = 0, conf;
#if GST_CHECK_VERSION(1, 26, 0)
        gst_analytics_od_mtd_get_oriented_location(&od, &x, &y, &w, &h, &r, &conf);
#else
        gst_analytics_od_mtd_get_location(&od, &x, &y, &w, &h, &conf);
#endif
        one = "[\"od\"," + quote(quark_text(gst_analytics_od_mtd_get_obj_type(&od))) + "," +
              std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(w) + "," +
              std::to_string(h) + "," + number(r) + "," + number(conf) + "]";
      } else if (gst_analytics_relation_meta_get_cls_mtd(rmeta, id, &cls)) {
        one = "[\"cls\"";
        for (gsize k = 0; k < gst_analytics_cls_mtd_get_length(&cls); ++k)
          one += "," + quote(quark_text(gst_analytics_cls_mtd_get_quark(&cls, k))) + "," +
                 number(gst_analytics_cls_mtd_get_level(&cls, k));
        one += "]";
      } else if (gst_analytics_relation_meta_get_tracking_mtd(rmeta, id, &trk)) {
        guint64 tid;
        GstClockTime first, last;
        gboolean lost;
        gst_analytics_tracking_mtd_get_info(&trk, &tid, &first, &last, &lost);
        one = "[\"track\"," + std::to_string(tid) + "," + std::to_string(first) + "," +
              std::to_string(last) + "," + (lost ? "true" : "false") + "]";
      } else {
        one = "[\"other\"]";
      }
      mtds += std::string(mtds.empty() ? "" : ",") + one;
    }
    std::string rels;
    for (gsize a = 0; a < n; ++a)
      for (gsize b = 0; b < n; ++b)
        if (auto t = gst_analytics_relation_meta_get_relation(rmeta, a, b))
          rels += std::string(rels.empty() ? "" : ",") + "[" + std::to_string(a) + "," +
                  std::to_string(b) + "," + std::to_string(static_cast<int>(t)) + "]";
    out += ",\"mtds\":[" + mtds + "],\"relations\":[" + rels + "]";
  }
#if GST_CHECK_VERSION(1, 26, 0)
  if (GstTensorMeta* tm = gst_buffer_get_tensor_meta(buf)) {
    std::string ts;
    for (gsize t = 0; t < tm->num_tensors; ++t) {
      const GstTensor* x = gst_tensor_meta_get(tm, t);
      std::string dims;
      for (gsize d = 0; d < x->num_dims; ++d)
        dims += std::string(d ? "," : "") + std::to_string(x->dims[d]);
      GstMapInfo map;
      std::string data = "?";
      if (gst_buffer_map(x->data, &map, GST_MAP_READ)) {
        data = hex(map.data, map.size);
        gst_buffer_unmap(x->data, &map);
      }
      ts += std::string(t ? "," : "") + "[" + quote(quark_text(x->id)) + "," +
            std::to_string(static_cast<int>(x->data_type)) + "," +
            std::to_string(static_cast<int>(x->dims_order)) + ",[" + dims + "]," + quote(data) +
            "]";
    }
    out += ",\"tensors\":[" + ts + "]";
  }
#endif
#endif
  return out + "}";
}

// Frame i's metas: a custom meta and a reference timestamp everywhere; on 1.24+ three object
// detections, a classification of the first and a track, related; on 1.26+ an oriented detection
// and a four-tensor meta (SSD-style outputs) holding the same boxes.
void decorate(GstBuffer* buf, int i) {
  const gchar* tags[] = {nullptr};
  if (!gst_meta_get_info("test-frame-meta"))
    gst_meta_register_custom("test-frame-meta", tags, nullptr, nullptr, nullptr);
  GstCustomMeta* c = gst_buffer_add_custom_meta(buf, "test-frame-meta");
  const std::string name = "frame-" + std::to_string(i);
  gst_structure_set(gst_custom_meta_get_structure(c), "index", G_TYPE_INT, i, "name", G_TYPE_STRING,
                    name.c_str(), "ratio", G_TYPE_DOUBLE, i / 4.0, "odd", G_TYPE_BOOLEAN,
                    i % 2 == 1, nullptr);
  GstCaps* caps = gst_caps_new_empty_simple("timestamp/x-test-clock");
  gst_buffer_add_reference_timestamp_meta(buf, caps, 1000000ull * i + 7, 33ull * i);
  gst_caps_unref(caps);
#ifdef CUDAIPC_HAVE_ANALYTICS
  GstAnalyticsRelationMeta* rmeta = gst_buffer_add_analytics_relation_meta(buf);
  const char* labels[] = {"ball", "cube", "cone"};
  GstAnalyticsODMtd od[3];
  for (int k = 0; k < 3; ++k)
    gst_analytics_relation_meta_add_od_mtd(rmeta, g_quark_from_string(labels[k]), 10 * k + i,
                                           5 * k + 2 * i, 20 + k, 30 + k, 0.5f + 0.125f * k,
                                           &od[k]);
  GQuark classes[] = {g_quark_from_string("ball"), g_quark_from_string("background")};
  gfloat levels[] = {0.875f, 0.125f};
  GstAnalyticsClsMtd cls;
  gst_analytics_relation_meta_add_cls_mtd(rmeta, 2, levels, classes, &cls);
  GstAnalyticsTrackingMtd trk;
  gst_analytics_relation_meta_add_tracking_mtd(rmeta, 1000 + i, 5ull * i, &trk);
  gst_analytics_tracking_mtd_update_last_seen(&trk, 6ull * i);
  if (i % 3 == 0) gst_analytics_tracking_mtd_set_lost(&trk);
  gst_analytics_relation_meta_set_relation(rmeta, GST_ANALYTICS_REL_TYPE_IS_PART_OF, cls.id,
                                           od[0].id);
  gst_analytics_relation_meta_set_relation(rmeta, GST_ANALYTICS_REL_TYPE_CONTAIN, od[0].id, cls.id);
  gst_analytics_relation_meta_set_relation(rmeta, GST_ANALYTICS_REL_TYPE_RELATE_TO, od[0].id,
                                           trk.id);
#if GST_CHECK_VERSION(1, 26, 0)
  GstAnalyticsODMtd oriented;
  gst_analytics_relation_meta_add_oriented_od_mtd(rmeta, g_quark_from_string("tilted"), i, i, 8, 4,
                                                  0.25f * i, 0.75f, &oriented);
  const char* names[] = {"boxes", "classes", "scores", "count"};
  GstTensor** tensors = g_new0(GstTensor*, 4);
  for (int t = 0; t < 4; ++t) {
    std::vector<float> v;
    for (int k = 0; k < 3; ++k) {
      if (t == 0) v.insert(v.end(), {10.f * k + i, 5.f * k + 2 * i, 20.f + k, 30.f + k});
      if (t == 1) v.push_back(static_cast<float>(k));
      if (t == 2) v.push_back(0.5f + 0.125f * k);
    }
    if (t == 3) v.push_back(3.f);
    gsize dims[3] = {1, static_cast<gsize>(t == 3 ? 1 : 3), 4};
    const gsize rank = t == 0 ? 3 : t == 3 ? 1 : 2;
    tensors[t] =
        gst_tensor_new_simple(g_quark_from_string(names[t]), GST_TENSOR_DATA_TYPE_FLOAT32,
                              gst_buffer_new_memdup(v.data(), v.size() * sizeof(float)),
                              GST_TENSOR_DIM_ORDER_ROW_MAJOR, rank, t == 3 ? dims + 1 : dims);
  }
  gst_tensor_meta_set(gst_buffer_add_tensor_meta(buf), 4, tensors);
#endif
#endif
}

int fail(const char* what, GstElement* pipeline) {
  std::fprintf(stderr, "cudaipc-gst-meta-peer: %s\n", what);
  if (pipeline) {
    gst_element_set_state(pipeline, GST_STATE_NULL);
    gst_object_unref(pipeline);
  }
  return 2;
}

std::string extra_properties(int argc, char** argv) {
  std::string out;
  for (int i = 4; i < argc; ++i) out += std::string(" ") + argv[i];
  return out;
}

int produce(const char* socket, int frames, const std::string& props) {
  const std::string desc =
      "appsrc name=in format=time caps=video/x-raw,format=RGBA,width=" + std::to_string(kWidth) +
      ",height=" + std::to_string(kHeight) +
      ",framerate=30/1 ! cudaipcringsink ipc-mode=host sync=false "
      "wait-for-consumer=true socket-path=" +
      socket + props;
  GError* err = nullptr;
  GstElement* pipeline = gst_parse_launch(desc.c_str(), &err);
  // A missing element (the plugin did not load) leaves an error and a partial pipeline.
  if (!pipeline || err || !GST_IS_BIN(pipeline))
    return fail(err ? err->message : "bad pipeline", nullptr);
  GstElement* in = gst_bin_get_by_name(GST_BIN(pipeline), "in");
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  for (int i = 1; i <= frames; ++i) {
    GstBuffer* buf = gst_buffer_new_allocate(nullptr, kWidth * kHeight * 4, nullptr);
    gst_buffer_memset(buf, 0, static_cast<guint8>(i), kWidth * kHeight * 4);
    GST_BUFFER_PTS(buf) = (i - 1) * GST_SECOND / 30;
    decorate(buf, i);
    std::printf("%s\n", describe(buf).c_str());
    if (gst_app_src_push_buffer(GST_APP_SRC(in), buf) != GST_FLOW_OK) {
      gst_object_unref(in);
      return fail("push failed", pipeline);
    }
  }
  gst_app_src_end_of_stream(GST_APP_SRC(in));
  gst_object_unref(in);
  GstBus* bus = gst_element_get_bus(pipeline);
  GstMessage* m = gst_bus_timed_pop_filtered(
      bus, 30 * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  const bool ok = m && GST_MESSAGE_TYPE(m) == GST_MESSAGE_EOS;
  if (m) gst_message_unref(m);
  gst_object_unref(bus);
  if (!ok) return fail("no EOS within 30 s, or an error", pipeline);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
  return 0;
}

int consume(const char* socket, int frames, const std::string& props, bool check) {
  const char* between = check ? nullptr : g_getenv("CUDAIPC_META_PEER_BETWEEN");
  const std::string desc =
      std::string("cudaipcringsrc mode=every-frame is-live=false socket-path=") + socket + props +
      " ! " + (between ? std::string(between) + " ! " : "") + "appsink name=out sync=false";
  GError* err = nullptr;
  GstElement* pipeline = gst_parse_launch(desc.c_str(), &err);
  // A missing element (the plugin did not load) leaves an error and a partial pipeline.
  if (!pipeline || err || !GST_IS_BIN(pipeline))
    return fail(err ? err->message : "bad pipeline", nullptr);
  GstElement* out = gst_bin_get_by_name(GST_BIN(pipeline), "out");
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  int rc = 0;
  for (int i = 1; i <= frames && rc == 0; ++i) {
    GstSample* s = gst_app_sink_try_pull_sample(GST_APP_SINK(out), 30 * GST_SECOND);
    if (!s) {
      rc = fail("no frame within 30 s", nullptr);
      break;
    }
    GstBuffer* buf = gst_sample_get_buffer(s);
    // Row by row through the frame's own layout: a copy into CUDA memory has pitched rows.
    GstVideoInfo info;
    GstVideoFrame frame;
    if (check && (!gst_video_info_from_caps(&info, gst_sample_get_caps(s)) ||
                  !gst_video_frame_map(&frame, &info, buf, GST_MAP_READ))) {
      std::fprintf(stderr, "frame %d: cannot map it as video\n", i);
      rc = 1;
    } else if (check) {
      for (int y = 0; y < kHeight && rc == 0; ++y) {
        const guint8* row = static_cast<const guint8*>(GST_VIDEO_FRAME_PLANE_DATA(&frame, 0)) +
                            y * GST_VIDEO_FRAME_PLANE_STRIDE(&frame, 0);
        for (int k = 0; k < kWidth * 4; ++k)
          if (row[k] != static_cast<guint8>(i)) {
            std::fprintf(stderr, "frame %d: row %d byte %d is %u\n", i, y, k, row[k]);
            rc = 1;
            break;
          }
      }
      gst_video_frame_unmap(&frame);
    }
    std::printf("%s\n", describe(buf).c_str());
    std::fflush(stdout);
    gst_sample_unref(s);
  }
  gst_object_unref(out);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
  return rc;
}

#if GST_CHECK_VERSION(1, 28, 0)
// One tensor/strided entry of a tensor group: its id, float32, row-major, `dims` (0 = any).
GstCaps* strided(const char* id, const std::vector<int>& dims) {
  GValue array = G_VALUE_INIT;
  gst_value_array_init(&array, dims.size());
  for (int d : dims) {
    GValue v = G_VALUE_INIT;
    g_value_init(&v, G_TYPE_INT);
    g_value_set_int(&v, d);
    gst_value_array_append_and_take_value(&array, &v);
  }
  GstStructure* s =
      gst_structure_new("tensor/strided", "tensor-id", G_TYPE_STRING, id, "dims-order",
                        G_TYPE_STRING, "row-major", "type", G_TYPE_STRING, "float32", nullptr);
  gst_structure_take_value(s, "dims", &array);
  return gst_caps_new_full(s, nullptr);
}

int ssd_caps(int width, int height) {
  GValue group = G_VALUE_INIT;
  g_value_init(&group, GST_TYPE_UNIQUE_LIST);
  const std::pair<const char*, std::vector<int>> tensors[] = {
      {"generic-variant-1-out-count", {1}},
      {"ssd-mobilenet-v1-variant-1-out-scores", {1, 0}},
      {"ssd-mobilenet-v1-variant-1-out-boxes", {1, 0, 4}},
      {"ssd-mobilenet-v1-variant-1-out-classes", {1, 0}}};
  for (const auto& [id, dims] : tensors) {
    GValue v = G_VALUE_INIT;
    g_value_init(&v, GST_TYPE_CAPS);
    g_value_take_boxed(&v, strided(id, dims));
    gst_value_unique_list_append_and_take_value(&group, &v);
  }
  GstStructure* groups = gst_structure_new_empty("tensorgroups");
  gst_structure_take_value(groups, "ssd-mobilenet-v1-variant-1-out", &group);
  GstCaps* caps = gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, "RGBA", "width",
                                      G_TYPE_INT, width, "height", G_TYPE_INT, height, "framerate",
                                      GST_TYPE_FRACTION, 30, 1, nullptr);
  GValue gv = G_VALUE_INIT;
  g_value_init(&gv, GST_TYPE_STRUCTURE);
  gst_value_set_structure(&gv, groups);
  gst_structure_free(groups);
  gst_caps_set_value(caps, "tensors", &gv);
  g_value_unset(&gv);
  gchar* text = gst_caps_to_string(caps);
  std::printf("%s\n", text);
  g_free(text);
  gst_caps_unref(caps);
  return 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  gst_init(&argc, &argv);
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s produce|consume|describe SOCKET FRAMES [properties...]\n",
                 argv[0]);
    return 2;
  }
  const std::string role = argv[1];
  if (role == "ssd-caps") {
#if GST_CHECK_VERSION(1, 28, 0)
    return ssd_caps(std::atoi(argv[2]), std::atoi(argv[3]));
#else
    std::fprintf(stderr, "the tensors caps field needs GStreamer 1.28\n");
    return 77;
#endif
  }
  const int frames = std::atoi(argv[3]);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (role == "produce") return produce(argv[2], frames, extra_properties(argc, argv));
  if (role == "consume") return consume(argv[2], frames, extra_properties(argc, argv), true);
  if (role == "describe") return consume(argv[2], frames, extra_properties(argc, argv), false);
  std::fprintf(stderr, "unknown role %s\n", role.c_str());
  return 2;
}
