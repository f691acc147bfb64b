// The GPU suite's checker, run on the device machine (no meson, no gtest there):
//
//   cudaipc-gst-verify compare --reference 'PIPELINE ... ! appsink name=out'
//                              --consumer 'cudaipcsrc name=src ... ! ... ! appsink name=out'
//                              --frames N [--timeout-s S] [--expect-device]
//     Runs the reference pipeline in this process and keeps a digest of every frame's visible
//     bytes (per plane, row by row, so layouts may differ), then runs the consumer pipeline and
//     checks that it delivers exactly frames 1..N (the tensor meta's seq, read on cudaipcsrc's
//     src pad), each equal to the reference frame of that index, with the reference's caps.
//     --expect-device: cudaipcsrc's buffers must be CUDA memory (tensor meta device_id >= 0).
//
//   cudaipc-gst-verify produce-tensors --socket P --frames N --dims D --type T [--ipc-mode M]
//     appsrc ! cudaipcsink: other/tensors frames whose bytes are the test pattern of seq=i+1.
//
//   cudaipc-gst-verify check-tensors --consumer 'cudaipcsrc ... ! appsink name=out' --frames N
//     Every frame's bytes must be the pattern of its seq.
//
//   cudaipc-gst-verify produce [--expect-path in-place|copied] --pipeline-words WORD... --socket P
//     Runs the producer pipeline given by the words up to --socket (its cudaipcsink named "sink")
//     until EOS, then prints the sink's stats; with --expect-path every published frame must have
//     taken that path into its slot (upstream wrote in place, or the sink copied it).
//
// Prints one line "verify: OK ..." or "verify: FAILED ..." and exits 0 or 1.
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gst/gst.h>
#include <gst/video/video.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "gst/cudaipc/gstcudaipcmeta.h"
#include "pattern.hpp"

namespace {

struct Options {
  std::string reference, consumer, socket, dims = "3:224:224", type = "float32", ipc_mode = "auto",
                                           pipeline, expect_path;
  int frames = 100;
  int timeout_s = 60;
  bool expect_device = false;
};

// FNV-1a over the visible bytes of every plane (or all bytes for non-video caps).
std::uint64_t digest(GstSample* sample, std::string* caps_text) {
  GstBuffer* buf = gst_sample_get_buffer(sample);
  GstCaps* caps = gst_sample_get_caps(sample);
  GstCaps* plain = gst_caps_copy(caps);
  gst_caps_set_features(plain, 0, nullptr);
  gchar* text = gst_caps_to_string(plain);
  *caps_text = text;
  g_free(text);
  gst_caps_unref(plain);
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const std::uint8_t* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  GstVideoInfo info;
  if (gst_video_info_from_caps(&info, caps)) {
    GstVideoFrame frame;
    if (!gst_video_frame_map(&frame, &info, buf, GST_MAP_READ)) return 0;
    for (guint p = 0; p < GST_VIDEO_FRAME_N_PLANES(&frame); ++p) {
      gint comp[GST_VIDEO_MAX_COMPONENTS];
      gst_video_format_info_component(info.finfo, p, comp);
      const int rows = GST_VIDEO_FRAME_COMP_HEIGHT(&frame, comp[0]);
      const int row_bytes = GST_VIDEO_FRAME_COMP_WIDTH(&frame, comp[0]) *
                            GST_VIDEO_FRAME_COMP_PSTRIDE(&frame, comp[0]);
      const auto* base = static_cast<const std::uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(&frame, p));
      for (int r = 0; r < rows; ++r)
        mix(base + static_cast<std::size_t>(r) * GST_VIDEO_FRAME_PLANE_STRIDE(&frame, p),
            static_cast<std::size_t>(row_bytes));
    }
    gst_video_frame_unmap(&frame);
  } else {
    GstMapInfo map;
    if (!gst_buffer_map(buf, &map, GST_MAP_READ)) return 0;
    mix(map.data, map.size);
    gst_buffer_unmap(buf, &map);
  }
  return h;
}

struct Pipeline {
  GstElement* pipe = nullptr;
  GstAppSink* sink = nullptr;
  std::string error;

  explicit Pipeline(const std::string& desc) {
    GError* err = nullptr;
    pipe = gst_parse_launch(desc.c_str(), &err);
    if (!pipe || err) {  // a missing element still returns a partial pipeline
      error = std::string("cannot build '") + desc + "': " + (err ? err->message : "?");
      g_clear_error(&err);
      return;
    }
    g_clear_error(&err);
    GstElement* out = gst_bin_get_by_name(GST_BIN(pipe), "out");
    if (!out) {
      error = "no appsink named out in '" + desc + "'";
      return;
    }
    sink = GST_APP_SINK(out);
    g_object_set(out, "sync", FALSE, "max-buffers", 8u, nullptr);
  }
  ~Pipeline() {
    if (pipe) {
      gst_element_set_state(pipe, GST_STATE_NULL);
      gst_object_unref(pipe);
    }
    if (sink) gst_object_unref(sink);
  }
  bool play() {
    if (!error.empty()) return false;
    if (gst_element_set_state(pipe, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
      error = "could not start: " + bus_error();
      return false;
    }
    return true;
  }
  std::string bus_error() {
    GstBus* bus = gst_element_get_bus(pipe);
    GstMessage* m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
    gst_object_unref(bus);
    if (!m) return "";
    GError* err = nullptr;
    gchar* dbg = nullptr;
    gst_message_parse_error(m, &err, &dbg);
    std::string s = std::string(GST_OBJECT_NAME(GST_MESSAGE_SRC(m))) + ": " +
                    (err ? err->message : "?") + " (" + (dbg ? dbg : "") + ")";
    g_clear_error(&err);
    g_free(dbg);
    gst_message_unref(m);
    return s;
  }
  // Next sample or nullptr at EOS / error / timeout (error set).
  GstSample* pull(int timeout_s) {
    GstSample* s =
        gst_app_sink_try_pull_sample(sink, static_cast<GstClockTime>(timeout_s) * GST_SECOND);
    if (!s && !gst_app_sink_is_eos(sink)) {
      std::string e = bus_error();
      error = e.empty() ? "timed out waiting for a frame" : e;
    }
    return s;
  }
};

// What cudaipcsrc pushed, in order: seq and device id from the tensor meta.
struct SrcRecord {
  std::mutex mu;
  std::deque<std::pair<std::uint64_t, int>> seen;
  int missing_meta = 0;
};

GstPadProbeReturn on_src_buffer(GstPad*, GstPadProbeInfo* info, gpointer data) {
  auto* rec = static_cast<SrcRecord*>(data);
  GstBuffer* buf = GST_PAD_PROBE_INFO_BUFFER(info);
  const GstCudaIpcTensorMeta* m = gst_buffer_get_cuda_ipc_tensor_meta(buf);
  std::lock_guard<std::mutex> lock(rec->mu);
  if (!m)
    ++rec->missing_meta;
  else
    rec->seen.emplace_back(m->seq, m->device_id);
  return GST_PAD_PROBE_OK;
}

bool watch_src(Pipeline& p, SrcRecord* rec) {
  GstElement* src = gst_bin_get_by_name(GST_BIN(p.pipe), "src");
  if (!src) {
    p.error = "no element named src (the cudaipcsrc) in the consumer pipeline";
    return false;
  }
  GstPad* pad = gst_element_get_static_pad(src, "src");
  gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, on_src_buffer, rec, nullptr);
  gst_object_unref(pad);
  gst_object_unref(src);
  return true;
}

int fail(const std::string& why) {
  std::printf("verify: FAILED %s\n", why.c_str());
  return 1;
}

int compare(const Options& o) {
  std::vector<std::uint64_t> want;
  std::string want_caps, caps;
  {
    Pipeline ref(o.reference);
    if (!ref.play()) return fail("reference: " + ref.error);
    while (GstSample* s = ref.pull(o.timeout_s)) {
      want.push_back(digest(s, &want_caps));
      gst_sample_unref(s);
    }
    if (!ref.error.empty()) return fail("reference: " + ref.error);
  }
  if (static_cast<int>(want.size()) != o.frames)
    return fail("reference made " + std::to_string(want.size()) + " frames, not " +
                std::to_string(o.frames));
  Pipeline con(o.consumer);
  SrcRecord rec;
  if (!watch_src(con, &rec) || !con.play()) return fail("consumer: " + con.error);
  int got = 0, bad = 0, on_device = 0;
  std::string first_bad;
  while (GstSample* s = con.pull(o.timeout_s)) {
    const std::uint64_t d = digest(s, &caps);
    gst_sample_unref(s);
    std::pair<std::uint64_t, int> seen{0, -1};
    {
      std::lock_guard<std::mutex> lock(rec.mu);
      if (!rec.seen.empty()) {
        seen = rec.seen.front();
        rec.seen.pop_front();
      }
    }
    ++got;
    if (seen.second >= 0) ++on_device;
    const std::uint64_t seq = seen.first;
    const bool ok = seq == static_cast<std::uint64_t>(got) && seq >= 1 && seq <= want.size() &&
                    want[seq - 1] == d && caps == want_caps;
    if (!ok && ++bad == 1)
      first_bad = "frame " + std::to_string(got) + " (seq " + std::to_string(seq) + ") differs" +
                  (caps != want_caps ? " in caps: " + caps + " vs " + want_caps : "");
  }
  if (!con.error.empty())
    return fail("consumer after " + std::to_string(got) + " frames: " + con.error);
  if (rec.missing_meta)
    return fail(std::to_string(rec.missing_meta) + " buffers had no tensor meta");
  if (got != o.frames)
    return fail("got " + std::to_string(got) + " of " + std::to_string(o.frames));
  if (bad) return fail(std::to_string(bad) + " bad frames; first: " + first_bad);
  if (o.expect_device && on_device != got)
    return fail(std::to_string(got - on_device) + " buffers were not CUDA memory");
  std::printf("verify: OK %d frames equal to the reference (%s), %d in CUDA memory\n", got,
              caps.c_str(), on_device);
  return 0;
}

std::string tensor_caps(const Options& o) {
  return "other/tensors,format=static,num_tensors=1,types=" + o.type + ",dimensions=(string)" +
         o.dims + ",framerate=30/1";
}

gsize tensor_bytes(const Options& o) {
  gsize n = 1;
  for (const char* p = o.dims.c_str(); *p;) {
    char* end = nullptr;
    n *= std::strtoull(p, &end, 10);
    p = *end ? end + 1 : end;
  }
  const std::map<std::string, gsize> sizes{
      {"uint8", 1}, {"int8", 1},    {"uint16", 2}, {"int16", 2}, {"float16", 2}, {"uint32", 4},
      {"int32", 4}, {"float32", 4}, {"uint64", 8}, {"int64", 8}, {"float64", 8}};
  auto it = sizes.find(o.type);
  return it == sizes.end() ? 0 : n * it->second;
}

int produce_tensors(const Options& o) {
  const std::string desc = "appsrc name=in format=time caps=\"" + tensor_caps(o) +
                           "\" ! cudaipcringsink name=sink wait-for-consumer=true sync=false "
                           "ipc-mode=" +
                           o.ipc_mode + " socket-path=" + o.socket;
  GError* err = nullptr;
  GstElement* pipe = gst_parse_launch(desc.c_str(), &err);
  if (!pipe) return fail(std::string("producer: ") + (err ? err->message : "?"));
  GstElement* in = gst_bin_get_by_name(GST_BIN(pipe), "in");
  gst_element_set_state(pipe, GST_STATE_PLAYING);
  const gsize bytes = tensor_bytes(o);
  for (int i = 0; i < o.frames; ++i) {
    GstBuffer* buf = gst_buffer_new_allocate(nullptr, bytes, nullptr);
    GstMapInfo map;
    gst_buffer_map(buf, &map, GST_MAP_WRITE);
    cudaipc::testing::fill_pattern(map.data, map.size, static_cast<std::uint64_t>(i) + 1);
    gst_buffer_unmap(buf, &map);
    GST_BUFFER_PTS(buf) = static_cast<GstClockTime>(i) * GST_SECOND / 30;
    GST_BUFFER_DURATION(buf) = GST_SECOND / 30;
    if (gst_app_src_push_buffer(GST_APP_SRC(in), buf) != GST_FLOW_OK) break;
  }
  gst_app_src_end_of_stream(GST_APP_SRC(in));
  GstBus* bus = gst_element_get_bus(pipe);
  GstMessage* m =
      gst_bus_timed_pop_filtered(bus, static_cast<GstClockTime>(o.timeout_s) * GST_SECOND,
                                 static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  int rc = m && GST_MESSAGE_TYPE(m) == GST_MESSAGE_EOS ? 0 : 1;
  if (m) gst_message_unref(m);
  gst_object_unref(bus);
  gst_object_unref(in);
  gst_element_set_state(pipe, GST_STATE_NULL);
  gst_object_unref(pipe);
  std::printf("producer: %d tensors of %s pushed, %s\n", o.frames, tensor_caps(o).c_str(),
              rc == 0 ? "EOS" : "error or timeout");
  return rc;
}

guint64 stat(const GstStructure* s, const char* field) {
  guint64 v = 0;
  if (s) gst_structure_get_uint64(s, field, &v);
  return v;
}

int produce(const Options& o) {
  GError* err = nullptr;
  GstElement* pipe = gst_parse_launch(o.pipeline.c_str(), &err);
  if (!pipe || err) {
    std::string e = err ? err->message : "?";
    g_clear_error(&err);
    if (pipe) gst_object_unref(pipe);
    return fail("producer: cannot build '" + o.pipeline + "': " + e);
  }
  GstElement* sink = gst_bin_get_by_name(GST_BIN(pipe), "sink");
  if (!sink) {
    gst_object_unref(pipe);
    return fail("producer: no element named sink (the cudaipcsink)");
  }
  g_object_set(sink, "socket-path", o.socket.c_str(), "wait-for-consumer", TRUE, "sync", FALSE,
               nullptr);
  gst_element_set_state(pipe, GST_STATE_PLAYING);
  GstBus* bus = gst_element_get_bus(pipe);
  GstMessage* m =
      gst_bus_timed_pop_filtered(bus, static_cast<GstClockTime>(o.timeout_s) * GST_SECOND,
                                 static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  std::string error;
  if (!m) {
    error = "no EOS within " + std::to_string(o.timeout_s) + " s";
  } else if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR) {
    GError* e = nullptr;
    gst_message_parse_error(m, &e, nullptr);
    error = std::string(GST_OBJECT_NAME(GST_MESSAGE_SRC(m))) + ": " + (e ? e->message : "?");
    g_clear_error(&e);
  }
  if (m) gst_message_unref(m);
  gst_object_unref(bus);
  GstStructure* stats = nullptr;
  g_object_get(sink, "stats", &stats, nullptr);
  const guint64 published = stat(stats, "published"), in_place = stat(stats, "in-place"),
                copied = stat(stats, "copied");
  if (stats) gst_structure_free(stats);
  gst_object_unref(sink);
  gst_element_set_state(pipe, GST_STATE_NULL);
  gst_object_unref(pipe);
  std::printf("producer: published=%" G_GUINT64_FORMAT " in-place=%" G_GUINT64_FORMAT
              " copied=%" G_GUINT64_FORMAT "\n",
              published, in_place, copied);
  if (!error.empty()) return fail("producer: " + error);
  const guint64 taken = o.expect_path == "in-place" ? in_place
                        : o.expect_path == "copied" ? copied
                                                    : in_place + copied;
  if (!o.expect_path.empty() && (published == 0 || taken != published))
    return fail("producer: " + std::to_string(taken) + " of " + std::to_string(published) +
                " frames took the " + o.expect_path + " path");
  return 0;
}

int check_tensors(const Options& o) {
  Pipeline con(o.consumer);
  SrcRecord rec;
  if (!watch_src(con, &rec) || !con.play()) return fail("consumer: " + con.error);
  int got = 0, bad = 0, on_device = 0;
  while (GstSample* s = con.pull(o.timeout_s)) {
    std::pair<std::uint64_t, int> seen{0, -1};
    {
      std::lock_guard<std::mutex> lock(rec.mu);
      if (!rec.seen.empty()) {
        seen = rec.seen.front();
        rec.seen.pop_front();
      }
    }
    ++got;
    if (seen.second >= 0) ++on_device;
    GstBuffer* buf = gst_sample_get_buffer(s);
    GstMapInfo map;
    if (!gst_buffer_map(buf, &map, GST_MAP_READ) || seen.first != static_cast<std::uint64_t>(got) ||
        cudaipc::testing::check_pattern(map.data, map.size, seen.first) != map.size ||
        map.size != tensor_bytes(o))
      ++bad;
    gst_buffer_unmap(buf, &map);
    gst_sample_unref(s);
  }
  if (!con.error.empty()) return fail("consumer: " + con.error);
  if (got != o.frames || bad)
    return fail("got " + std::to_string(got) + " of " + std::to_string(o.frames) + ", " +
                std::to_string(bad) + " bad");
  if (o.expect_device && on_device != got) return fail("tensors not in CUDA memory");
  std::printf("verify: OK %d tensors byte-exact, %d in CUDA memory\n", got, on_device);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gst_init(&argc, &argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s compare|produce-tensors|check-tensors|produce [options]\n",
                 argv[0]);
    return 2;
  }
  Options o;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--reference")
      o.reference = next();
    else if (a == "--consumer")
      o.consumer = next();
    else if (a == "--socket")
      o.socket = next();
    else if (a == "--dims")
      o.dims = next();
    else if (a == "--type")
      o.type = next();
    else if (a == "--ipc-mode")
      o.ipc_mode = next();
    else if (a == "--frames")
      o.frames = std::atoi(next().c_str());
    else if (a == "--timeout-s")
      o.timeout_s = std::atoi(next().c_str());
    else if (a == "--expect-device")
      o.expect_device = true;
    else if (a == "--expect-path")
      o.expect_path = next();
    else if (a == "--pipeline-words") {
      // Everything up to --socket: the pipeline, as the shell split it.
      while (i + 1 < argc && std::string(argv[i + 1]) != "--socket")
        o.pipeline += (o.pipeline.empty() ? "" : " ") + std::string(argv[++i]);
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const std::string cmd = argv[1];
  if (cmd == "compare") return compare(o);
  if (cmd == "produce-tensors") return produce_tensors(o);
  if (cmd == "check-tensors") return check_tensors(o);
  if (cmd == "produce") return produce(o);
  std::fprintf(stderr, "unknown command %s\n", cmd.c_str());
  return 2;
}
