// What an object detector's output looks like on a buffer, for the benchmarks that measure what
// carrying metas costs (cudaipc-gst-meta-bench, cudaipc-gst-bench --metas): `boxes` detections
// and, on 1.26+, the raw output as a four-tensor GstTensorMeta of about `tensor_bytes`, plus a
// custom meta. Returns what it attached, for the table's title.
#pragma once

#include <gst/gst.h>

#include <string>

#ifdef CUDAIPC_HAVE_ANALYTICS
#include <gst/analytics/analytics.h>
#endif

namespace benchmetas {

inline std::string add_detector_output(GstBuffer* buf, int boxes, std::size_t tensor_bytes,
                                       int frame) {
  std::string what;
#ifdef CUDAIPC_HAVE_ANALYTICS
  GstAnalyticsRelationMeta* rmeta = gst_buffer_add_analytics_relation_meta(buf);
  const GQuark ball = g_quark_from_static_string("ball");
  for (int i = 0; i < boxes; ++i) {
    GstAnalyticsODMtd od;
    gst_analytics_relation_meta_add_od_mtd(rmeta, ball, i + frame % 7, 2 * i, 16, 16, 0.9f, &od);
  }
  what = std::to_string(boxes) + " detections";
#if GST_CHECK_VERSION(1, 26, 0)
  const std::size_t quarter = tensor_bytes / 4 / 4 * 4;
  const char* names[] = {"boxes", "classes", "scores", "count"};
  GstTensor** tensors = g_new0(GstTensor*, 4);
  for (int t = 0; t < 4; ++t) {
    gsize dims[] = {quarter / 4};
    tensors[t] =
        gst_tensor_new_simple(g_quark_from_static_string(names[t]), GST_TENSOR_DATA_TYPE_FLOAT32,
                              gst_buffer_new_allocate(nullptr, quarter, nullptr),
                              GST_TENSOR_DIM_ORDER_ROW_MAJOR, 1, dims);
  }
  gst_tensor_meta_set(gst_buffer_add_tensor_meta(buf), 4, tensors);
  what += " + a 4-tensor meta of " + std::to_string(4 * quarter) + " bytes";
#else
  (void)tensor_bytes;
#endif
#else
  (void)boxes, (void)tensor_bytes;
  what = "no analytics library: a custom meta only";
#endif
  const gchar* tags[] = {nullptr};
  if (!gst_meta_get_info("bench-meta"))
    gst_meta_register_custom("bench-meta", tags, nullptr, nullptr, nullptr);
  GstCustomMeta* c = gst_buffer_add_custom_meta(buf, "bench-meta");
  gst_structure_set(gst_custom_meta_get_structure(c), "frame", G_TYPE_INT, frame, nullptr);
  return what + " + a custom meta";
}

}  // namespace benchmetas
