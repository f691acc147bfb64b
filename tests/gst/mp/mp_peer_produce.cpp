// Producer role: appsrc ! cudaipcsink ipc-mode=host, every frame stamped with its id, so a
// consumer in another process can check each frame without knowing what was dropped.
#include <gst/app/gstappsrc.h>
#include <gst/video/video.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "element_names.hpp"
#include "frame_pattern.hpp"
#include "mp_peer_args.hpp"

namespace gstmp_peer {

namespace {

using Clock = std::chrono::steady_clock;

GstElement* make_sink(const std::string& factory, const Args& a) {
  GstElement* sink = gst_element_factory_make(factory.c_str(), "sink");
  if (!sink) return nullptr;
  g_object_set(sink, "socket-path", a.str("socket").c_str(), "num-slots",
               static_cast<guint>(a.num("slots", 4)), "block-timeout",
               static_cast<guint64>(a.num("block-timeout-ms", 1000)) * GST_MSECOND,
               "wait-for-consumer", a.flag("wait-for-consumer") ? TRUE : FALSE, "sync", FALSE,
               nullptr);
  gst_util_set_object_arg(G_OBJECT(sink), "ipc-mode", "host");
  gst_util_set_object_arg(G_OBJECT(sink), "policy", a.str("policy", "block").c_str());
  return sink;
}

guint sink_stat_uint(GstElement* sink, const char* field) {
  GstStructure* s = nullptr;
  g_object_get(sink, "stats", &s, nullptr);
  guint v = 0;
  if (s) gst_structure_get_uint(s, field, &v);
  if (s) gst_structure_free(s);
  return v;
}

guint64 sink_stat_u64(GstElement* sink, const char* field) {
  GstStructure* s = nullptr;
  g_object_get(sink, "stats", &s, nullptr);
  guint64 v = 0;
  if (s) gst_structure_get_uint64(s, field, &v);
  if (s) gst_structure_free(s);
  return v;
}

// Waits for EOS or ERROR on the bus; true on EOS.
bool wait_eos(GstElement* pipeline, Clock::time_point deadline) {
  GstBus* bus = gst_element_get_bus(pipeline);
  bool eos = false;
  while (Clock::now() < deadline) {
    GstMessage* msg = gst_bus_timed_pop_filtered(
        bus, 100 * GST_MSECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
    if (!msg) continue;
    const bool is_eos = GST_MESSAGE_TYPE(msg) == GST_MESSAGE_EOS;
    if (!is_eos) {
      // Put it back for report_bus_error.
      gst_bus_post(bus, msg);
    } else {
      gst_message_unref(msg);
    }
    eos = is_eos;
    break;
  }
  gst_object_unref(bus);
  return eos;
}

struct Pipeline {
  GstElement* pipeline = nullptr;
  ~Pipeline() {
    if (pipeline) {
      gst_element_set_state(pipeline, GST_STATE_NULL);
      gst_object_unref(pipeline);
    }
  }
};

}  // namespace

int produce(const Args& a) {
  const std::string sink_name = cudaipc::testing::gstmp::sink_factory();
  if (sink_name.empty()) {
    std::printf("skip: no cudaipcsink of this project is registered\n");
    return 77;
  }
  const auto deadline = Clock::now() + std::chrono::seconds(a.num("timeout-s", 30));
  const std::uint64_t count = a.num("count", 30);
  const std::uint64_t fps = a.num("fps", 0);
  const std::uint64_t first_id = a.num("first-id", 1);
  const bool verbose = a.flag("verbose");

  GstVideoInfo info;
  const GstVideoFormat format = gst_video_format_from_string(a.str("format", "GRAY8").c_str());
  if (format == GST_VIDEO_FORMAT_UNKNOWN ||
      !gst_video_info_set_format(&info, format, static_cast<guint>(a.num("width", 64)),
                                 static_cast<guint>(a.num("height", 48)))) {
    std::printf("error: bad format or size\n");
    return 1;
  }
  GST_VIDEO_INFO_FPS_N(&info) = fps ? static_cast<gint>(fps) : 30;
  GST_VIDEO_INFO_FPS_D(&info) = 1;
  const gsize frame_bytes = GST_VIDEO_INFO_SIZE(&info);
  const GstClockTime duration =
      gst_util_uint64_scale_int(GST_SECOND, 1, GST_VIDEO_INFO_FPS_N(&info));

  Pipeline p;
  p.pipeline = gst_pipeline_new("producer");
  GstElement* src = gst_element_factory_make("appsrc", "src");
  GstElement* sink = make_sink(sink_name, a);
  if (!src || !sink) {
    std::printf("error: could not create appsrc or %s\n", sink_name.c_str());
    return 1;
  }
  GstCaps* caps = gst_video_info_to_caps(&info);
  // One queued buffer at most: a push returns once the sink took the one before, so the time a
  // push takes shows how long the sink was stuck.
  g_object_set(src, "caps", caps, "format", GST_FORMAT_TIME, "block", TRUE, "max-buffers",
               static_cast<guint64>(1), nullptr);
  gst_caps_unref(caps);
  gst_bin_add_many(GST_BIN(p.pipeline), src, sink, nullptr);
  if (!gst_element_link(src, sink)) {
    std::printf("error: could not link appsrc to %s\n", sink_name.c_str());
    return 1;
  }
  if (gst_element_set_state(p.pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    if (!report_bus_error(p.pipeline)) std::printf("error: the pipeline did not start\n");
    return 2;
  }
  // The sink's start() (bind) ran during the synchronous READY->PAUSED of the sink.
  std::printf("listening\n");

  const guint want_consumers = static_cast<guint>(a.num("wait-consumers", 0));
  while (want_consumers && sink_stat_uint(sink, "consumers") < want_consumers) {
    if (report_bus_error(p.pipeline)) return 2;
    if (Clock::now() >= deadline) {
      std::printf("timeout: %u consumer(s) did not connect\n", want_consumers);
      return 3;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (want_consumers) std::printf("consumers %u\n", want_consumers);

  const auto t0 = Clock::now();
  auto last = t0;
  double max_gap_ms = 0;
  std::uint64_t pushed = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    if (fps) std::this_thread::sleep_until(t0 + std::chrono::microseconds(i * 1000000 / fps));
    GstBuffer* buf = gst_buffer_new_allocate(nullptr, frame_bytes, nullptr);
    GstMapInfo map;
    gst_buffer_map(buf, &map, GST_MAP_WRITE);
    cudaipc::testing::gstmp::fill_frame(map.data, map.size, first_id + i);
    gst_buffer_unmap(buf, &map);
    GST_BUFFER_PTS(buf) = i * duration;
    GST_BUFFER_DURATION(buf) = duration;
    const GstFlowReturn ret = gst_app_src_push_buffer(GST_APP_SRC(src), buf);
    const auto now = Clock::now();
    if (i > 0)
      max_gap_ms =
          std::max(max_gap_ms, std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
    if (ret != GST_FLOW_OK) {
      if (!report_bus_error(p.pipeline))
        std::printf("error: push returned %s\n", gst_flow_get_name(ret));
      return 2;
    }
    ++pushed;
    if (verbose) std::printf("pushed %llu\n", static_cast<unsigned long long>(first_id + i));
    if (report_bus_error(p.pipeline)) return 2;
    if (Clock::now() >= deadline) {
      std::printf("timeout: pushed %llu of %llu\n", static_cast<unsigned long long>(pushed),
                  static_cast<unsigned long long>(count));
      return 3;
    }
  }
  gst_app_src_end_of_stream(GST_APP_SRC(src));
  if (!wait_eos(p.pipeline, deadline)) {
    if (report_bus_error(p.pipeline)) return 2;
    std::printf("timeout: no EOS\n");
    return 3;
  }
  std::printf(
      "produced {\"pushed\":%llu,\"published\":%llu,\"dropped\":%llu,\"max_gap_ms\":%.1f}\n",
      static_cast<unsigned long long>(pushed),
      static_cast<unsigned long long>(sink_stat_u64(sink, "published")),
      static_cast<unsigned long long>(sink_stat_u64(sink, "dropped")), max_gap_ms);
  return 0;
}

}  // namespace gstmp_peer
