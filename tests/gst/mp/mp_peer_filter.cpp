// Filter role: appsrc ! cudaipcfilter ipc-mode=host ! (appsink | cudaipcsink) in this process, the
// frames carrying their ids (frame_pattern.hpp) so a model process reads each frame's id from its
// pixels and answers with it (filter_model.hpp). At the appsink every frame is checked: its bytes,
// its place in the input order, and the result it carries, which must be its own. With --lend the
// source is a live videotestsrc writing into the slots the filter lends (a probe stamps each
// frame's id into the slot), and a fakesink's handoff checks the frames, keeping some of them
// (--hold-every, --hold-for) and checking them again when it lets them go.
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gst/video/video.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

#include "element_names.hpp"
#include "filter_model.hpp"
#include "frame_pattern.hpp"
#include "mp_peer_args.hpp"

namespace gstmp_peer {

namespace {

using Clock = std::chrono::steady_clock;
using cudaipc::testing::gstmp::kResultField;
using cudaipc::testing::gstmp::kResultMeta;

// What the appsink saw, frame by frame, against the ids pushed in order.
struct Checker {
  std::uint64_t next_id = 0;
  std::chrono::milliseconds delay{0};
  bool verbose = false;
  std::mutex mu;
  std::uint64_t frames = 0, bad = 0, order_errors = 0, with_results = 0, wrong_results = 0;
  std::atomic<bool> first_out{false};
  // Frames kept downstream: every hold_every-th for hold_for frames, then checked again.
  std::uint64_t hold_every = 0, hold_for = 0, held_bad = 0, held_most = 0;
  std::deque<std::pair<std::uint64_t, GstBuffer*>> held;
  // Open descriptors once frame fds_at_id went by (a model serving), -1 before.
  std::uint64_t fds_at_id = 0;
  long fds = -1;

  // Lets go of kept frames up to `id`, each checked: still its own bytes.
  void release_held(std::uint64_t id) {
    while (!held.empty() && held.front().first <= id) {
      GstMapInfo map;
      GstBuffer* b = held.front().second;
      bool ok = false;
      if (gst_buffer_map(b, &map, GST_MAP_READ)) {
        ok = cudaipc::testing::gstmp::frame_intact(map.data, map.size) &&
             cudaipc::testing::gstmp::frame_id(map.data) == held.front().first;
        gst_buffer_unmap(b, &map);
      }
      if (!ok) ++held_bad;
      gst_buffer_unref(b);
      held.pop_front();
    }
  }
  void release_all() {
    std::lock_guard<std::mutex> lock(mu);
    release_held(~std::uint64_t{0});
  }

  void take(GstBuffer* buf) {
    GstMapInfo map;
    bool ok = false;
    std::uint64_t id = 0;
    if (gst_buffer_map(buf, &map, GST_MAP_READ)) {
      ok = cudaipc::testing::gstmp::frame_intact(map.data, map.size);
      if (map.size >= cudaipc::testing::gstmp::kIdBytes)
        id = cudaipc::testing::gstmp::frame_id(map.data);
      gst_buffer_unmap(buf, &map);
    }
    int results = 0;
    gint64 result = -1;
    bool wrong = false;
    gpointer state = nullptr;
    while (GstMeta* meta = gst_buffer_iterate_meta(buf, &state)) {
      if (!gst_meta_info_is_custom(meta->info)) continue;
      auto* cm = reinterpret_cast<GstCustomMeta*>(meta);
      if (!gst_custom_meta_has_name(cm, kResultMeta)) continue;
      gint64 v = -1;
      gst_structure_get_int64(gst_custom_meta_get_structure(cm), kResultField, &v);
      if (results++ == 0) result = v;
      wrong = wrong || v != static_cast<gint64>(id);
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      if (id != next_id) ++order_errors;
      next_id = id + 1;
      ++frames;
      if (!ok) ++bad;
      if (results) ++with_results;
      if (wrong || results > 1) ++wrong_results;
      if (hold_every) {
        if (id >= hold_for) release_held(id - hold_for);
        if (id % hold_every == 0) held.emplace_back(id, gst_buffer_ref(buf));
        held_most = std::max<std::uint64_t>(held_most, held.size());
      }
      if (id == fds_at_id) fds = open_fds();
    }
    if (verbose)
      std::printf("out id=%llu ok=%d results=%d result=%lld\n", static_cast<unsigned long long>(id),
                  ok ? 1 : 0, results, static_cast<long long>(result));
    first_out = true;
    // A slow downstream: this streaming thread (the filter's) is held per frame.
    if (delay.count()) std::this_thread::sleep_for(delay);
  }

  static long open_fds() {
    std::error_code ec;
    long n = 0;
    for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
         it.increment(ec))
      ++n;
    return ec ? -1 : n;
  }

  static void on_handoff(GstElement*, GstBuffer* buf, GstPad*, gpointer data) {
    static_cast<Checker*>(data)->take(buf);
  }

  static GstFlowReturn on_sample(GstAppSink* sink, gpointer data) {
    GstSample* sample = gst_app_sink_pull_sample(sink);
    if (!sample) return GST_FLOW_EOS;
    static_cast<Checker*>(data)->take(gst_sample_get_buffer(sample));
    gst_sample_unref(sample);
    return GST_FLOW_OK;
  }
};

std::string clock_text(GstClockTime t) {
  return GST_CLOCK_TIME_IS_VALID(t) ? std::to_string(t) : std::string("none");
}

// The pipeline's latency, as an application (or a sink at PLAYING) asks for it.
void print_latency(GstElement* pipeline) {
  GstQuery* q = gst_query_new_latency();
  const gboolean answered = gst_element_query(pipeline, q);
  gboolean live = FALSE;
  GstClockTime min = 0, max = GST_CLOCK_TIME_NONE;
  if (answered) gst_query_parse_latency(q, &live, &min, &max);
  gst_query_unref(q);
  std::printf("latency answered=%d live=%d min=%s max=%s\n", answered ? 1 : 0, live ? 1 : 0,
              clock_text(min).c_str(), clock_text(max).c_str());
}

// Waits for EOS or ERROR on the bus; true on EOS (an error stays on the bus to be reported).
bool wait_eos(GstElement* pipeline, Clock::time_point deadline) {
  GstBus* bus = gst_element_get_bus(pipeline);
  bool eos = false;
  while (Clock::now() < deadline) {
    GstMessage* msg = gst_bus_timed_pop_filtered(
        bus, 50 * GST_MSECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
    if (!msg) continue;
    eos = GST_MESSAGE_TYPE(msg) == GST_MESSAGE_EOS;
    if (eos)
      gst_message_unref(msg);
    else
      gst_bus_post(bus, msg);
    break;
  }
  gst_object_unref(bus);
  return eos;
}

// Upstream's write into the slot it was lent: the frame's id and pattern, and whether the buffer is
// a lent slot (slot_pool.cpp's qdata on its memory).
struct Stamper {
  std::uint64_t next_id = 0;
  std::atomic<std::uint64_t> lent{0};
  static GstPadProbeReturn stamp(GstPad*, GstPadProbeInfo* info, gpointer data) {
    auto* self = static_cast<Stamper*>(data);
    GstBuffer* buf = GST_PAD_PROBE_INFO_BUFFER(info);
    static const GQuark slot = g_quark_from_static_string("cudaipc-write-slot");
    if (gst_buffer_n_memory(buf) == 1 &&
        gst_mini_object_get_qdata(GST_MINI_OBJECT(gst_buffer_peek_memory(buf, 0)), slot))
      ++self->lent;
    GstMapInfo map;
    if (gst_buffer_map(buf, &map, GST_MAP_WRITE)) {
      cudaipc::testing::gstmp::fill_frame(map.data, map.size, self->next_id++);
      gst_buffer_unmap(buf, &map);
    }
    return GST_PAD_PROBE_OK;
  }
};

std::string description(const Args& a) {
  const std::uint64_t fps = a.num("fps", 0);
  std::string d = "appsrc name=src format=time block=true max-buffers=1";
  if (a.flag("lend"))
    d = "videotestsrc name=src is-live=true num-buffers=" + std::to_string(a.num("count", 100)) +
        " ! capsfilter";
  // Live: stamped with the running time at push, as a camera would.
  if (a.flag("live"))
    d += " is-live=true do-timestamp=true min-latency=0 max-latency=" +
         (a.flag("src-max-latency-ms") ? std::to_string(a.num("src-max-latency-ms") * GST_MSECOND)
                                       : std::string("-1"));
  d += " caps=video/x-raw,format=GRAY8,width=" + std::to_string(a.num("width", 64)) +
       ",height=" + std::to_string(a.num("height", 48)) +
       ",framerate=" + std::to_string(fps ? fps : 30) + "/1";
  d += " ! cudaipcfilter name=filter ipc-mode=host socket-path=" + a.str("socket") +
       " timeout=" + std::to_string(a.num("timeout-ms", 1000) * GST_MSECOND) +
       " on-missing=" + a.str("on-missing", "pass") +
       " max-inflight=" + std::to_string(a.num("max-inflight", 4));
  if (a.flag("downstream-buffers"))
    d += " downstream-buffers=" + std::to_string(a.num("downstream-buffers"));
  if (a.flag("out-socket")) {
    d += " ! " + cudaipc::testing::gstmp::sink_factory() +
         " ipc-mode=host wait-for-consumer=true socket-path=" + a.str("out-socket");
  } else if (a.flag("sync")) {
    // A video sink's lateness: a frame later than its running time plus the pipeline's latency
    // by more than 20 ms is dropped.
    d += " ! appsink name=out sync=true max-lateness=20000000 qos=true";
  } else if (a.flag("lend")) {
    // Not appsink, which keeps the last buffer it handed out until it is disposed.
    d += " ! fakesink name=out sync=false enable-last-sample=false signal-handoffs=true";
  } else {
    d += " ! appsink name=out sync=false";
  }
  return d;
}

}  // namespace

int filter(const Args& a) {
  if (cudaipc::testing::gstmp::sink_factory().empty()) {
    std::printf("skip: no cudaipcsink of this project is registered\n");
    return 77;
  }
  const auto deadline = Clock::now() + std::chrono::seconds(a.num("timeout-s", 60));
  const std::uint64_t count = a.num("count", 100);
  const std::uint64_t fps = a.num("fps", 0);
  const std::uint64_t first_id = a.num("first-id", 1);
  const std::size_t bytes = a.num("width", 64) * a.num("height", 48);

  GError* err = nullptr;
  GstElement* pipeline = gst_parse_launch(description(a).c_str(), &err);
  if (err) {
    std::printf("error: %s\n", err->message);
    g_error_free(err);
    if (pipeline) gst_object_unref(pipeline);
    return 1;
  }
  Checker checker;
  checker.next_id = first_id;
  checker.delay = std::chrono::milliseconds(a.num("delay-ms", 0));
  checker.verbose = a.flag("verbose");
  checker.hold_every = a.num("hold-every", 0);
  checker.hold_for = a.num("hold-for", 0);
  checker.fds_at_id = first_id + a.num("fds-at", 20);
  const bool lend = a.flag("lend");
  Stamper stamper;
  stamper.next_id = first_id;
  if (GstElement* out = gst_bin_get_by_name(GST_BIN(pipeline), "out")) {
    if (GST_IS_APP_SINK(out)) {
      GstAppSinkCallbacks cb{};
      cb.new_sample = &Checker::on_sample;
      gst_app_sink_set_callbacks(GST_APP_SINK(out), &cb, &checker, nullptr);
    } else {
      g_signal_connect(out, "handoff", G_CALLBACK(&Checker::on_handoff), &checker);
    }
    gst_object_unref(out);
  }
  GstElement* src = gst_bin_get_by_name(GST_BIN(pipeline), "src");
  GstElement* filter_element = gst_bin_get_by_name(GST_BIN(pipeline), "filter");
  if (lend) {
    GstPad* pad = gst_element_get_static_pad(src, "src");
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, &Stamper::stamp, &stamper, nullptr);
    gst_object_unref(pad);
    // The channel opens at READY: a live source's first frames then find the model there.
    gst_element_set_state(pipeline, GST_STATE_READY);
  }
  auto finish = [&](int rc) {
    gst_element_set_state(pipeline, GST_STATE_NULL);
    gst_object_unref(filter_element);
    gst_object_unref(src);
    gst_object_unref(pipeline);
    return rc;
  };
  auto wait_model = [&] {
    bool serving = false;
    while (!serving && Clock::now() < deadline) {
      GstStructure* stats = nullptr;
      g_object_get(filter_element, "stats", &stats, nullptr);
      gboolean connected = FALSE;
      serving =
          stats && gst_structure_get_boolean(stats, "model-connected", &connected) && connected;
      if (stats) gst_structure_free(stats);
      if (!serving) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!serving) std::printf("error: no model process served the filter\n");
    return serving;
  };
  if (lend && a.flag("wait-model") && !wait_model()) return finish(3);
  if (gst_element_set_state(pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    if (!report_bus_error(pipeline)) std::printf("error: the pipeline did not start\n");
    return finish(2);
  }
  const auto t0 = Clock::now();
  // CLOCK_MONOTONIC, as the model's lines: how soon the filter found a model that already served.
  std::printf(
      "playing at_ns=%lld\n",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count()));
  // A test that needs its first frames answered: frames that come before the model process has
  // connected pass without results (on-missing=pass), as they should.
  if (!lend && a.flag("wait-model") && !wait_model()) return finish(3);
  bool latency_printed = false;
  for (std::uint64_t i = 0; i < count && !lend; ++i) {
    if (fps) std::this_thread::sleep_until(t0 + std::chrono::microseconds(i * 1000000 / fps));
    GstBuffer* buf = gst_buffer_new_allocate(nullptr, bytes, nullptr);
    GstMapInfo map;
    gst_buffer_map(buf, &map, GST_MAP_WRITE);
    cudaipc::testing::gstmp::fill_frame(map.data, map.size, first_id + i);
    gst_buffer_unmap(buf, &map);
    if (!a.flag("live")) {
      const GstClockTime duration = GST_SECOND / (fps ? fps : 30);
      GST_BUFFER_PTS(buf) = i * duration;
      GST_BUFFER_DURATION(buf) = duration;
    }
    const GstFlowReturn ret = gst_app_src_push_buffer(GST_APP_SRC(src), buf);
    if (ret != GST_FLOW_OK) {
      if (!report_bus_error(pipeline))
        std::printf("error: push returned %s\n", gst_flow_get_name(ret));
      return finish(2);
    }
    // Asked once frames flow through the filter, as a sink does when the pipeline plays.
    if (a.flag("query-latency") && !latency_printed && checker.first_out) {
      print_latency(pipeline);
      latency_printed = true;
    }
    if (report_bus_error(pipeline)) return finish(2);
    if (Clock::now() >= deadline) {
      std::printf("timeout: pushed %llu of %llu\n", static_cast<unsigned long long>(i),
                  static_cast<unsigned long long>(count));
      return finish(3);
    }
  }
  if (a.flag("query-latency") && !latency_printed) print_latency(pipeline);
  if (!lend) gst_app_src_end_of_stream(GST_APP_SRC(src));  // videotestsrc ends after --count
  const bool eos = wait_eos(pipeline, deadline);
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
  // Every kept frame let go (and checked): the filter's stats then show no slot held.
  checker.release_all();
  const long fds_end = Checker::open_fds();
  GstStructure* stats = nullptr;
  g_object_get(filter_element, "stats", &stats, nullptr);
  gchar* text = stats ? gst_structure_to_string(stats) : g_strdup("none");
  std::printf("stats %s\n", text);
  g_free(text);
  if (stats) gst_structure_free(stats);
  {
    std::lock_guard<std::mutex> lock(checker.mu);
    std::printf(
        "filtered {\"frames\":%llu,\"bad\":%llu,\"order_errors\":%llu,\"with_results\":%llu,"
        "\"wrong_results\":%llu,\"eos\":%s,\"elapsed_ms\":%lld,\"lent\":%llu,"
        "\"held_most\":%llu,\"held_bad\":%llu,\"fds_mid\":%ld,\"fds_end\":%ld}\n",
        static_cast<unsigned long long>(checker.frames),
        static_cast<unsigned long long>(checker.bad),
        static_cast<unsigned long long>(checker.order_errors),
        static_cast<unsigned long long>(checker.with_results),
        static_cast<unsigned long long>(checker.wrong_results), eos ? "true" : "false",
        static_cast<long long>(elapsed.count()), static_cast<unsigned long long>(stamper.lent),
        static_cast<unsigned long long>(checker.held_most),
        static_cast<unsigned long long>(checker.held_bad), checker.fds, fds_end);
  }
  if (!eos) {
    if (report_bus_error(pipeline)) return finish(2);
    std::printf("timeout: no EOS\n");
    return finish(3);
  }
  return finish(0);
}

}  // namespace gstmp_peer
