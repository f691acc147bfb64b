#include "elements/element_stats.h"

#include <algorithm>

namespace cudaipc::gst {

GstStructure* sink_stats(const ProducerStats& ps, const SinkCounts& counts) {
  // A consumer that left or was evicted while frames it leased are still held is listed (with
  // connected=false) until it lets them go, but it is no consumer of the stream any more.
  const auto connected = static_cast<guint>(std::count_if(
      ps.consumers.begin(), ps.consumers.end(), [](const ConsumerStats& c) { return !c.evicted; }));
  GstStructure* s = gst_structure_new(
      "cudaipcsink-stats", "published", G_TYPE_UINT64, static_cast<guint64>(ps.published),
      "dropped", G_TYPE_UINT64, static_cast<guint64>(ps.dropped), "consumers", G_TYPE_UINT,
      connected, "in-place", G_TYPE_UINT64, counts.in_place, "copied", G_TYPE_UINT64, counts.copied,
      "metas-sent", G_TYPE_UINT64, counts.metas_sent, "metas-oversized", G_TYPE_UINT64,
      counts.metas_oversized, "metas-unsupported", G_TYPE_UINT64, counts.metas_unsupported,
      "format-generation", G_TYPE_UINT64, static_cast<guint64>(ps.generation), nullptr);
  GValue list = G_VALUE_INIT;
  g_value_init(&list, GST_TYPE_ARRAY);
  for (const auto& c : ps.consumers) {
    GstStructure* cs = gst_structure_new(
        "consumer", "pid", G_TYPE_INT, static_cast<gint>(c.pid), "mode", G_TYPE_STRING,
        c.mode == ConsumeMode::latest ? "latest" : "every-frame", "delivered", G_TYPE_UINT64,
        static_cast<guint64>(c.delivered), "skipped", G_TYPE_UINT64,
        static_cast<guint64>(c.skipped), "connected", G_TYPE_BOOLEAN, !c.evicted, nullptr);
    GValue v = G_VALUE_INIT;
    g_value_init(&v, GST_TYPE_STRUCTURE);
    gst_value_set_structure(&v, cs);
    gst_structure_free(cs);
    gst_value_array_append_and_take_value(&list, &v);
  }
  // Absent while there is none: an empty array has no member type, and GStreamer prints one as
  // "(int)< >".
  if (ps.consumers.empty())
    g_value_unset(&list);
  else
    gst_structure_take_value(s, "consumer-stats", &list);
  return s;
}

GstStructure* source_stats(const ConsumerCounters& c, bool connected, const SourceMetaCounts& m) {
  return gst_structure_new(
      "cudaipcsrc-stats", "connected", G_TYPE_BOOLEAN, connected, "delivered", G_TYPE_UINT64,
      static_cast<guint64>(c.delivered), "skipped", G_TYPE_UINT64, static_cast<guint64>(c.skipped),
      "producer-published", G_TYPE_UINT64, static_cast<guint64>(c.producer_published),
      "producer-dropped", G_TYPE_UINT64, static_cast<guint64>(c.producer_dropped), "gpu-waits",
      G_TYPE_UINT64, static_cast<guint64>(c.gpu_waits), "gpu-releases", G_TYPE_UINT64,
      static_cast<guint64>(c.gpu_releases), "metas-received", G_TYPE_UINT64, m.received,
      "metas-unknown", G_TYPE_UINT64, m.unknown, "metas-bad", G_TYPE_UINT64, m.bad,
      "metas-filtered", G_TYPE_UINT64, m.filtered, nullptr);
}

}  // namespace cudaipc::gst
