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
//     taken that path into its slot (upstream wrote in place, or the sink copied it); with
//     --expect-device-id D the sink's CUDA context (its slots) must be on device D.
//     --stamp: each buffer entering the sink gets a reference timestamp (CLOCK_MONOTONIC) for
//     `latency` to read in the consumer. --format-first: the sink must have announced a format
//     (its stats' format-generation) before its first buffer reached it.
//
// Two GPUs (a model process on its own GPU, issue #30):
//   cudaipc-gst-verify gpus
//     "gpus: N peer-0-1: yes|no peer-1-0: yes|no" (CUDA's own count and peer access between
//     devices 0 and 1; "gpus: 0 (why)" without a driver). Always exits 0.
//   compare ... --expect-device-id D
//     As --expect-device, and every buffer's tensor meta names device D (where the source read).
//   cudaipc-gst-verify serve --socket P --model-device D --frames N [--timeout-s S]
//     A model process (cudaipc::Server) reading cudaipcfilter's CUDA requests on device D: each
//     frame's visible bytes copied down plane by plane, answered with a custom meta
//     "xgpu-result" {pts, digest, device}. Prints "serving" once it serves; exits 0 when it has
//     answered N requests on device D, the pipeline has sent EOS, and no read failed. D = -1:
//     host-memory requests, read in place (the --host run proves the model and the checker).
//   cudaipc-gst-verify filter --reference '... ! appsink name=out' --frames N --model-device D
//                             --consumer '... ! cudaipcfilter name=x ... ! ... ! appsink name=out'
//     Every frame leaving the filter must carry its own answer (its pts, device D, and the
//     digest of the reference frame of that index) and be equal to that reference frame.
//     --expect-path in-place|copied: every frame sent took that path into its slot (the filter's
//     stats: upstream wrote into a slot the filter lent it, or the filter copied the frame).
//     --hold-every K --hold-for L: every K-th buffer out is kept (its sample: with CUDA caps at
//     the appsink, the slot the filter lent) until L more frames came, then must still equal its
//     reference frame: no later frame was written into a slot still held downstream.
//     --allow-unanswered K: up to K frames may pass without an answer (a model killed and
//     replaced meanwhile), each still equal to its reference. --fds-check: the filter holds no
//     slot once every buffer is freed, and this process has as many sockets and memfds once the
//     pipeline is gone as before it (a buffer never freed would keep the channel open).
//     (serve --at-least: --frames is a minimum, for a model that takes over.)
//   cudaipc-gst-verify latency --consumer 'cudaipcsrc name=src ... ! appsink name=out'
//                              --frames N [--warmup K]
//     Reads a producer run with --stamp: per frame, the producer's sink entry to the source's push
//     (after the frame's CUDA memory has landed), frames after the first K; every frame must come,
//     in order, stamped. Prints the p50 and p99 on its "verify: OK" line.
//   cudaipc-gst-verify bench [--frames N] [--warmup K] [--formats RGBA,NV12] [--width W]
//                            [--height H] [--io-modes copy,import] [--ipc-mode host]
//     Both processes (this program run as the producer): 60 fps live frames from device 0 into
//     a consumer on device 0 (the same-GPU baseline) and on device 1, per format and io-mode; a
//     table of the latency p50/p99. Cross-GPU rows need 2 GPUs: "not run" says why.
//     --ipc-mode host: the same-machine rows in host memory (no GPU needed).
//
// Prints one line "verify: OK ..." or "verify: FAILED ..." and exits 0 or 1.
#include <dirent.h>
#include <fcntl.h>
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gst/cuda/cuda-gst.h>
#include <gst/cuda/gstcudacontext.h>
#include <gst/cuda/gstcudaloader.h>
#include <gst/cuda/gstcudamemory.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cudaipc/metas.hpp"
#include "cudaipc/server.hpp"
#include "gst/cudaipc/gstcudaipcmeta.h"
#include "pattern.hpp"

namespace {

struct Options {
  std::string reference, consumer, socket, dims = "3:224:224", type = "float32", ipc_mode = "auto",
                                           pipeline, expect_path;
  int frames = 100;
  int timeout_s = 60;
  bool expect_device = false;
  int expect_device_id = -1;  // >= 0: the device every consumer buffer must be on
  int model_device = -1;      // serve / filter: the model's device
  bool stamp = false;         // produce: stamp each buffer at the sink for `latency`
  bool format_first = false;  // produce: the sink announced its format before its first buffer
  int warmup = 30;
  int hold_every = 0, hold_for = 0;  // filter: keep every K-th buffer out for L more frames
  int allow_unanswered = 0;          // filter: frames that may pass without an answer
  bool fds_check = false;            // filter: as many sockets and memfds after the run as before
  bool at_least = false;             // serve: --frames is a minimum (a successor model)
  int width = 1920, height = 1080;
  std::string formats = "RGBA,NV12", io_modes;  // bench
};

// FNV-1a, fed in the order the bytes are visible (plane by plane, row by row).
struct Fnv {
  std::uint64_t h = 1469598103934665603ull;
  void mix(const std::uint8_t* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
};

std::uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// The unix sockets the CUDA driver opens for the process (abstract names "@cuda-...", e.g. UVM's
// "@cuda-uvmfd-..."), by inode: the driver's, kept for the process's life, not a channel's.
std::vector<unsigned long> cuda_driver_sockets() {
  std::vector<unsigned long> out;
  if (FILE* f = std::fopen("/proc/net/unix", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f)) {
      unsigned long inode = 0;
      char path[256] = "";
      if (std::sscanf(line, "%*s %*s %*s %*s %*s %*s %lu %255s", &inode, path) == 2 &&
          !std::strncmp(path, "@cuda-", 6))
        out.push_back(inode);
    }
    std::fclose(f);
  }
  return out;
}

// This process's sockets and memfds: what a channel holds open (its socket, connections, control
// block and host slots). Device files and sockets the CUDA driver opens once for the process are
// left out.
long channel_fds(bool say = false) {
  const std::vector<unsigned long> driver = cuda_driver_sockets();
  long n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (const dirent* e = readdir(d)) {
    char target[256];
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t len = readlink(link.c_str(), target, sizeof target - 1);
    if (len <= 0) continue;
    target[len] = '\0';
    unsigned long inode = 0;
    if (std::sscanf(target, "socket:[%lu]", &inode) == 1 &&
        std::find(driver.begin(), driver.end(), inode) != driver.end())
      continue;
    if (!std::strncmp(target, "socket:", 7) || !std::strncmp(target, "/memfd:", 7)) {
      ++n;
      if (say) {
        std::printf("  fd %s -> %s\n", e->d_name, target);
        // A unix socket's line in /proc/net/unix: its path, where it has one (a listener's).
        if (inode) {
          if (FILE* f = std::fopen("/proc/net/unix", "r")) {
            char line[512];
            const std::string tag = " " + std::to_string(inode);
            while (std::fgets(line, sizeof line, f))
              if (std::strstr(line, tag.c_str())) std::printf("    %s", line);
            std::fclose(f);
          }
        }
      }
    }
  }
  closedir(d);
  return n;
}

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
  Fnv fnv;
  auto mix = [&fnv](const std::uint8_t* p, std::size_t n) { fnv.mix(p, n); };
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
  return fnv.h;
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

// The digest of every frame of the reference pipeline, and their caps; "" or what went wrong.
std::string run_reference(const Options& o, std::vector<std::uint64_t>* want,
                          std::string* want_caps) {
  Pipeline ref(o.reference);
  if (!ref.play()) return "reference: " + ref.error;
  while (GstSample* s = ref.pull(o.timeout_s)) {
    want->push_back(digest(s, want_caps));
    gst_sample_unref(s);
  }
  if (!ref.error.empty()) return "reference: " + ref.error;
  if (static_cast<int>(want->size()) != o.frames)
    return "reference made " + std::to_string(want->size()) + " frames, not " +
           std::to_string(o.frames);
  return "";
}

int compare(const Options& o) {
  std::vector<std::uint64_t> want;
  std::string want_caps, caps;
  if (const std::string e = run_reference(o, &want, &want_caps); !e.empty()) return fail(e);
  Pipeline con(o.consumer);
  SrcRecord rec;
  if (!watch_src(con, &rec) || !con.play()) return fail("consumer: " + con.error);
  int got = 0, bad = 0, on_device = 0, elsewhere = 0, last_device = -1;
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
    if (o.expect_device_id >= 0 && seen.second != o.expect_device_id) ++elsewhere;
    last_device = seen.second;
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
  if (elsewhere)
    return fail(std::to_string(elsewhere) + " buffers were not read on CUDA device " +
                std::to_string(o.expect_device_id) + " (the last on " +
                std::to_string(last_device) + ")");
  std::printf(
      "verify: OK %d frames equal to the reference (%s), %d in CUDA memory%s\n", got, caps.c_str(),
      on_device,
      o.expect_device_id >= 0 ? (" of device " + std::to_string(o.expect_device_id)).c_str() : "");
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

// The latency stamp: not timestamp/x-cudaipc-*, which the source makes anew (docs/metas.md).
GstCaps* stamp_caps() {
  static GstCaps* caps = gst_caps_new_empty_simple("timestamp/x-verify-monotonic");
  return caps;
}

GstPadProbeReturn stamp_buffer(GstPad*, GstPadProbeInfo* info, gpointer) {
  GstBuffer* buf = gst_buffer_make_writable(GST_PAD_PROBE_INFO_BUFFER(info));
  GST_PAD_PROBE_INFO_DATA(info) = buf;
  gst_buffer_add_reference_timestamp_meta(buf, stamp_caps(), monotonic_ns(), GST_CLOCK_TIME_NONE);
  return GST_PAD_PROBE_OK;
}

// The sink's stats field `name` (0 where absent).
guint64 sink_stat(GstElement* sink, const char* name) {
  GstStructure* stats = nullptr;
  g_object_get(sink, "stats", &stats, nullptr);
  const guint64 v = stat(stats, name);
  if (stats) gst_structure_free(stats);
  return v;
}

// --format-first: the format generation the sink had announced when its first buffer arrived.
struct FirstBuffer {
  GstElement* sink;
  bool seen = false;
  guint64 generation = 0;
};

GstPadProbeReturn note_first_buffer(GstPad*, GstPadProbeInfo*, gpointer data) {
  auto* first = static_cast<FirstBuffer*>(data);
  first->seen = true;
  first->generation = sink_stat(first->sink, "format-generation");
  return GST_PAD_PROBE_REMOVE;
}

// The device of the sink's CUDA context, which its slots live on (-1: it has none), as the sink
// answers a neighbour's context query.
int sink_device(GstElement* sink) {
  GstQuery* q = gst_query_new_context(GST_CUDA_CONTEXT_TYPE);
  GstPad* pad = gst_element_get_static_pad(sink, "sink");
  int device = -1;
  if (gst_pad_query(pad, q)) {
    GstContext* ctx = nullptr;
    gst_query_parse_context(q, &ctx);
    guint id = 0;
    if (ctx && gst_structure_get_uint(gst_context_get_structure(ctx), "cuda-device-id", &id))
      device = static_cast<int>(id);
  }
  gst_object_unref(pad);
  gst_query_unref(q);
  return device;
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
  GstPad* sink_pad = gst_element_get_static_pad(sink, "sink");
  if (o.stamp)
    gst_pad_add_probe(sink_pad, GST_PAD_PROBE_TYPE_BUFFER, stamp_buffer, nullptr, nullptr);
  FirstBuffer first{sink};
  if (o.format_first)
    gst_pad_add_probe(sink_pad, GST_PAD_PROBE_TYPE_BUFFER, note_first_buffer, &first, nullptr);
  gst_object_unref(sink_pad);
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
  const int device = sink_device(sink);  // before NULL: stop() lets the context go
  GstStructure* stats = nullptr;
  g_object_get(sink, "stats", &stats, nullptr);
  const guint64 published = stat(stats, "published"), in_place = stat(stats, "in-place"),
                copied = stat(stats, "copied"), generation = stat(stats, "format-generation");
  if (stats) gst_structure_free(stats);
  gst_object_unref(sink);
  gst_element_set_state(pipe, GST_STATE_NULL);
  gst_object_unref(pipe);
  std::printf("producer: published=%" G_GUINT64_FORMAT " in-place=%" G_GUINT64_FORMAT
              " copied=%" G_GUINT64_FORMAT " device=%d formats=%" G_GUINT64_FORMAT,
              published, in_place, copied, device, generation);
  if (o.format_first)
    std::printf(" (%" G_GUINT64_FORMAT " before the first buffer)", first.generation);
  std::printf("\n");
  if (!error.empty()) return fail("producer: " + error);
  if (o.format_first && (!first.seen || first.generation == 0))
    return fail("producer: the sink announced no format before its first buffer");
  if (o.expect_device_id >= 0 && device != o.expect_device_id)
    return fail("producer: the slots are on device " + std::to_string(device) + ", not " +
                std::to_string(o.expect_device_id));
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

// ---- Two GPUs: a model process on its own GPU (issue #30) ------------------------------------

std::string cuda_error(CUresult r) {
  const char* name = nullptr;
  CuGetErrorName(r, &name);
  return name ? name : std::to_string(static_cast<int>(r));
}

// CUDA's own count of this process's devices, the ordinals cuda-device-id names; -1 and why when
// CUDA cannot be used at all.
int cuda_device_count(std::string* why) {
  if (!gst_cuda_load_library()) {
    *why = "libcuda.so.1 could not be loaded (no NVIDIA driver)";
    return -1;
  }
  if (const CUresult r = CuInit(0); r != CUDA_SUCCESS) {
    *why = "cuInit failed: " + cuda_error(r);
    return -1;
  }
  int n = 0;
  if (const CUresult r = CuDeviceGetCount(&n); r != CUDA_SUCCESS) {
    *why = "cuDeviceGetCount failed: " + cuda_error(r);
    return -1;
  }
  return n;
}

// Whether device `from` can read device `to`'s memory: a consumer on `from` of a producer on `to`
// needs it (the core refuses the channel otherwise).
const char* peer_access(int from, int to) {
  CUdevice a = 0, b = 0;
  int can = 0;
  if (CuDeviceGet(&a, from) != CUDA_SUCCESS || CuDeviceGet(&b, to) != CUDA_SUCCESS ||
      CuDeviceCanAccessPeer(&can, a, b) != CUDA_SUCCESS)
    return "unknown";
  return can ? "yes" : "no";
}

int gpus() {
  std::string why;
  const int n = cuda_device_count(&why);
  if (n < 0)
    std::printf("gpus: 0 (%s)\n", why.c_str());
  else if (n < 2)
    std::printf("gpus: %d\n", n);
  else
    std::printf("gpus: %d peer-0-1: %s peer-1-0: %s\n", n, peer_access(0, 1), peer_access(1, 0));
  return 0;
}

// The model's answer to a request: which frame (pts), what it read (digest) and where (device).
std::vector<std::uint8_t> xgpu_result(std::uint64_t pts, std::uint64_t digest, int device) {
  std::vector<std::uint8_t> area(512);
  cudaipc::metas::AreaWriter w(area.data(), area.size());
  if (std::uint8_t* b = w.begin_record(cudaipc::metas::RecordKind::custom, "xgpu-result", 256)) {
    cudaipc::metas::CustomWriter cw(b, 256);
    cw.add_uint64("pts", pts);
    cw.add_uint64("digest", digest);
    cw.add_int64("device", device);
    w.commit_record(cw.finish());
  }
  area.resize(w.size());
  return area;
}

// A request's visible bytes, plane by plane through the slot's own offsets and pitches, digested
// as digest() digests a frame: CUDA requests copied down on `ctx` (the model's GPU), host ones
// read where they are (ctx null).
bool request_digest(GstCudaContext* ctx, const GstVideoInfo& info, const cudaipc::Frame& f,
                    std::uint64_t* out, std::string* why) {
  const cudaipc::TensorDesc& t = f.desc().tensor;
  const guint planes = GST_VIDEO_INFO_N_PLANES(&info);
  if (t.num_planes != planes) {
    *why = "a request of " + std::to_string(t.num_planes) + " planes for caps of " +
           std::to_string(planes);
    return false;
  }
  if (ctx && !gst_cuda_context_push(ctx)) {
    *why = "could not make the model's CUDA context current";
    return false;
  }
  Fnv fnv;
  std::vector<std::uint8_t> host;
  bool ok = true;
  for (guint p = 0; p < planes && ok; ++p) {
    gint comp[GST_VIDEO_MAX_COMPONENTS];
    gst_video_format_info_component(info.finfo, p, comp);
    const std::size_t rows = GST_VIDEO_INFO_COMP_HEIGHT(&info, comp[0]);
    const std::size_t row_bytes =
        static_cast<std::size_t>(GST_VIDEO_INFO_COMP_WIDTH(&info, comp[0])) *
        GST_VIDEO_INFO_COMP_PSTRIDE(&info, comp[0]);
    const std::uintptr_t plane = f.slot_address() + t.planes[p].offset;
    if (!ctx) {
      for (std::size_t r = 0; r < rows; ++r)
        fnv.mix(reinterpret_cast<const std::uint8_t*>(plane + r * t.planes[p].pitch), row_bytes);
      continue;
    }
    host.resize(rows * row_bytes);
    CUDA_MEMCPY2D c{};
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = static_cast<CUdeviceptr>(plane);
    c.srcPitch = t.planes[p].pitch;
    c.dstMemoryType = CU_MEMORYTYPE_HOST;
    c.dstHost = host.data();
    c.dstPitch = row_bytes;
    c.WidthInBytes = row_bytes;
    c.Height = rows;
    if (const CUresult r = CuMemcpy2D(&c); r != CUDA_SUCCESS) {
      *why = "copying plane " + std::to_string(p) + " down: " + cuda_error(r);
      ok = false;
    } else {
      fnv.mix(host.data(), host.size());  // dense rows: the same bytes in the same order
    }
  }
  if (ctx) gst_cuda_context_pop(nullptr);
  *out = fnv.h;
  return ok;
}

// --model-device -1: host-memory requests (the CI proves this program and the script with them).
int serve(const Options& o) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // "serving" must reach the script at once
  GstCudaContext* ctx = nullptr;
  if (o.model_device >= 0) {
    std::string why;
    const int n = cuda_device_count(&why);
    if (n <= o.model_device)
      return fail("serve: no CUDA device " + std::to_string(o.model_device) + " (" +
                  (n < 0 ? why : std::to_string(n) + " devices") + ")");
    ctx = gst_cuda_context_new(static_cast<guint>(o.model_device));
    if (!ctx) return fail("serve: no CUDA context on device " + std::to_string(o.model_device));
  }
  int answered = 0, bad = 0, device = -1;
  bool eos = false;
  std::string first_bad, caps_text;
  GstVideoInfo info;
  bool have_info = false;
  try {
    cudaipc::ServerOptions so;
    so.path = o.socket;
    so.cuda.device = o.model_device;
    so.cuda.context = ctx ? gst_cuda_context_get_handle(ctx) : nullptr;
    // The CPU waits for each request's bytes at acquire: the synchronous copies below read them
    // landed, and the reply may hand the slot back at once.
    so.cuda.cpu_wait = true;
    cudaipc::Server server(so);
    std::printf("serving\n");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
    while (!(eos && answered >= o.frames) && std::chrono::steady_clock::now() < deadline) {
      cudaipc::ServerEvent e = server.next(std::chrono::milliseconds(50));
      if (e.type == cudaipc::ServerEventType::format) {
        // The channel's stream header: the caps on its first line, then `tags=` where upstream
        // sent tags (a decoder does).
        caps_text = e.format.caps.substr(0, e.format.caps.find('\n'));
        GstCaps* caps = gst_caps_from_string(caps_text.c_str());
        have_info = caps && gst_video_info_from_caps(&info, caps);
        if (caps) gst_caps_unref(caps);
      } else if (e.type == cudaipc::ServerEventType::eos) {
        eos = true;
      } else if (e.type == cudaipc::ServerEventType::request) {
        device = e.request.cuda_device();
        std::uint64_t d = 0;
        std::string err;
        if (!have_info)
          err = "a request whose caps are not video: " + caps_text;
        else if (!ctx && e.request.cuda_device() >= 0)
          err = "a CUDA request, and no --model-device to read it on";
        else if (device != o.model_device)
          err = "a request read on device " + std::to_string(device);
        else
          request_digest(ctx, info, e.request.frame, &d, &err);
        if (!err.empty() && ++bad == 1) first_bad = err;
        const std::vector<std::uint8_t> r = xgpu_result(e.request.frame.desc().pts, d, device);
        if (server.reply(e.request, r.data(), static_cast<std::uint32_t>(r.size())))
          ++answered;
        else if (++bad == 1)
          first_bad = "a reply was refused (the filter holds every reply slot)";
      }
    }
  } catch (const std::exception& e) {
    if (ctx) gst_object_unref(ctx);
    return fail(std::string("serve: ") + e.what());
  }
  if (ctx) gst_object_unref(ctx);
  std::printf("model: %d requests answered, read on device %d, EOS %s\n", answered, device,
              eos ? "seen" : "not seen");
  if (bad) return fail("serve: " + std::to_string(bad) + " requests not read; first: " + first_bad);
  if ((o.at_least ? answered < o.frames : answered != o.frames) || !eos)
    return fail("serve: " + std::to_string(answered) + " of " + std::to_string(o.frames) +
                " requests answered" + (eos ? "" : ", no EOS"));
  return 0;
}

// What left the filter, in order: the answer a buffer carries, if any.
struct Answer {
  bool found = false;
  std::uint64_t buffer_pts = 0, pts = 0, digest = 0;
  gint64 device = -1;
};

struct AnswerRecord {
  std::mutex mu;
  std::deque<Answer> seen;
};

GstPadProbeReturn on_filter_out(GstPad*, GstPadProbeInfo* info, gpointer data) {
  auto* rec = static_cast<AnswerRecord*>(data);
  GstBuffer* buf = GST_PAD_PROBE_INFO_BUFFER(info);
  Answer a;
  a.buffer_pts = GST_BUFFER_PTS(buf);
  gpointer state = nullptr;
  while (GstMeta* m = gst_buffer_iterate_meta(buf, &state)) {
    if (!gst_meta_info_is_custom(m->info)) continue;
    GstStructure* s = gst_custom_meta_get_structure(reinterpret_cast<GstCustomMeta*>(m));
    Answer b = a;
    if (gst_structure_get_uint64(s, "pts", &b.pts) &&
        gst_structure_get_uint64(s, "digest", &b.digest) &&
        gst_structure_get_int64(s, "device", &b.device)) {
      b.found = true;
      a = b;
    }
  }
  std::lock_guard<std::mutex> lock(rec->mu);
  rec->seen.push_back(a);
  return GST_PAD_PROBE_OK;
}

int filter(const Options& o) {
  std::vector<std::uint64_t> want;
  std::string want_caps, caps;
  if (const std::string e = run_reference(o, &want, &want_caps); !e.empty()) return fail(e);
  // Before the pipeline exists: its buses hold descriptors of their own until it is gone.
  const long fds_before = channel_fds();
  Pipeline con(o.consumer);
  if (!con.error.empty()) return fail("pipeline: " + con.error);
  GstElement* x = gst_bin_get_by_name(GST_BIN(con.pipe), "x");
  if (!x) return fail("no element named x (the cudaipcfilter) in the pipeline");
  AnswerRecord rec;
  GstPad* pad = gst_element_get_static_pad(x, "src");
  gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, on_filter_out, &rec, nullptr);
  gst_object_unref(pad);
  // The filter's stats once every frame is out: the path frames took into its slots.
  auto filter_stats = [&con] {
    GstElement* f = gst_bin_get_by_name(GST_BIN(con.pipe), "x");
    GstStructure* st = nullptr;
    g_object_get(f, "stats", &st, nullptr);
    gst_object_unref(f);
    const guint64 sent = stat(st, "sent"), in_place = stat(st, "in-place"),
                  copied = stat(st, "copied");
    guint held = 0;
    if (st) gst_structure_get_uint(st, "slots-held", &held);
    if (st) gst_structure_free(st);
    return std::array<guint64, 4>{sent, in_place, copied, held};
  };
  gst_object_unref(x);
  if (!con.play()) return fail("pipeline: " + con.error);
  int got = 0, unanswered = 0, bad = 0, overwritten = 0, kept_most = 0;
  std::string first_bad, first_overwritten;
  std::deque<std::pair<int, GstSample*>> kept;  // (frame index from 1, its sample)
  // Lets go of the kept samples up to frame `upto`, each checked against its reference again.
  auto release_kept = [&](int upto) {
    while (!kept.empty() && kept.front().first <= upto) {
      std::string ignored;
      const int i = kept.front().first;
      if (i > static_cast<int>(want.size()) || digest(kept.front().second, &ignored) != want[i - 1])
        if (++overwritten == 1)
          first_overwritten = "frame " + std::to_string(i) + " was overwritten while held";
      gst_sample_unref(kept.front().second);
      kept.pop_front();
    }
  };
  while (GstSample* s = con.pull(o.timeout_s)) {
    const std::uint64_t d = digest(s, &caps);
    if (o.hold_every > 0 && (got + 1) % o.hold_every == 0)
      kept.emplace_back(got + 1, s);
    else
      gst_sample_unref(s);
    release_kept(got + 1 - o.hold_for);
    kept_most = std::max(kept_most, static_cast<int>(kept.size()));
    Answer a;
    {
      std::lock_guard<std::mutex> lock(rec.mu);
      if (!rec.seen.empty()) {
        a = rec.seen.front();
        rec.seen.pop_front();
      }
    }
    ++got;
    const bool known = got <= static_cast<int>(want.size());
    const std::uint64_t w = known ? want[got - 1] : 0;
    std::string why;
    // A frame may pass unanswered only within --allow-unanswered, and still as its reference.
    const bool matches = known && d == w && caps == want_caps;
    if (!a.found)
      why = ++unanswered > o.allow_unanswered ? "no answer"
            : matches                         ? ""
                      : "the frame (passed unanswered) differs from the reference";
    else if (a.pts != a.buffer_pts)
      why = "another frame's answer (pts " + std::to_string(a.pts) + ")";
    else if (a.device != o.model_device)
      why = "read on device " + std::to_string(a.device);
    else if (!known || a.digest != w)
      why = "the model read other bytes";
    else if (!matches)
      why = "the frame differs from the reference";
    if (!why.empty() && ++bad == 1) first_bad = "frame " + std::to_string(got) + ": " + why;
  }
  release_kept(got);
  if (!con.error.empty())
    return fail("pipeline after " + std::to_string(got) + " frames: " + con.error);
  if (got != o.frames)
    return fail("got " + std::to_string(got) + " of " + std::to_string(o.frames));
  if (overwritten)
    return fail(std::to_string(overwritten) + " of the frames kept downstream (up to " +
                std::to_string(kept_most) + " at once) changed; first: " + first_overwritten);
  if (bad)
    return fail(std::to_string(bad) + " frames without their own answer (" +
                std::to_string(unanswered) + " unanswered); first: " + first_bad);
  const auto [sent, in_place, copied, held_now] = filter_stats();
  guint64 held = held_now;
  if (o.fds_check) {
    // appsink keeps the last sample it handed out (one slot) until it is disposed.
    for (int i = 0; i < 100 && held > 1; ++i) {
      usleep(10000);
      held = filter_stats()[3];
    }
    const long fds_during = channel_fds();
    // Gone, not only stopped: appsink keeps the last sample it handed out until disposed.
    gst_element_set_state(con.pipe, GST_STATE_NULL);
    gst_clear_object(&con.pipe);
    gst_clear_object(&con.sink);
    const long fds_after = channel_fds();
    std::printf(
        "filter: sockets and memfds %ld before, %ld while it ran, %ld after; slots held at the "
        "end %" G_GUINT64_FORMAT "\n",
        fds_before, fds_during, fds_after, held);
    if (held > 1) return fail("the filter still holds " + std::to_string(held) + " slots");
    if (fds_during <= fds_before) return fail("the channel's descriptors were not seen");
    if (fds_after != fds_before) {
      channel_fds(true);  // which, for whoever reads the failure
      return fail("descriptors: " + std::to_string(fds_before) + " before the pipeline, " +
                  std::to_string(fds_after) + " once it is gone");
    }
  }
  std::printf("filter: sent=%" G_GUINT64_FORMAT " in-place=%" G_GUINT64_FORMAT
              " copied=%" G_GUINT64_FORMAT "\n",
              sent, in_place, copied);
  const guint64 taken = o.expect_path == "in-place" ? in_place
                        : o.expect_path == "copied" ? copied
                                                    : in_place + copied;
  if (!o.expect_path.empty() && (sent == 0 || taken != sent))
    return fail("filter: " + std::to_string(taken) + " of " + std::to_string(sent) +
                " frames took the " + o.expect_path + " path");
  std::printf(
      "verify: OK %d frames equal to the reference (%s), each answered by the model on "
      "device %d from its own bytes; in-place %" G_GUINT64_FORMAT " copied %" G_GUINT64_FORMAT
      ", up to %d kept downstream unchanged, %d unanswered\n",
      got, caps.c_str(), o.model_device, in_place, copied, kept_most, unanswered);
  return 0;
}

// Producer sink entry -> consumer push, per frame, from the --stamp stamps.
struct LatencyRecord {
  std::mutex mu;
  int frames = 0, warmup = 0, unstamped = 0, out_of_order = 0;
  std::vector<double> us;
};

GstPadProbeReturn on_latency(GstPad*, GstPadProbeInfo* info, gpointer data) {
  auto* rec = static_cast<LatencyRecord*>(data);
  GstBuffer* buf = GST_PAD_PROBE_INFO_BUFFER(info);
#if GST_CHECK_VERSION(1, 24, 0)
  // 1.24+: an imported or copied frame may still be on its way on the source's stream; the
  // latency ends when it can be read. (1.22's source copies synchronously.)
  for (guint i = 0; i < gst_buffer_n_memory(buf); ++i) {
    GstMemory* mem = gst_buffer_peek_memory(buf, i);
    if (gst_is_cuda_memory(mem)) gst_cuda_memory_sync(GST_CUDA_MEMORY_CAST(mem));
  }
#endif
  const std::uint64_t now = monotonic_ns();
  const GstReferenceTimestampMeta* m = gst_buffer_get_reference_timestamp_meta(buf, stamp_caps());
  const GstCudaIpcTensorMeta* t = gst_buffer_get_cuda_ipc_tensor_meta(buf);
  std::lock_guard<std::mutex> lock(rec->mu);
  ++rec->frames;
  if (!t || t->seq != static_cast<std::uint64_t>(rec->frames)) ++rec->out_of_order;
  if (!m)
    ++rec->unstamped;
  else if (rec->frames > rec->warmup)
    rec->us.push_back(static_cast<double>(now - m->timestamp) / 1000.0);
  return GST_PAD_PROBE_OK;
}

struct Latency {
  std::string error;
  double p50 = 0, p99 = 0;
  std::size_t measured = 0;
};

Latency measure_latency(const std::string& consumer, int frames, int warmup, int timeout_s) {
  Latency l;
  Pipeline con(consumer);
  if (!con.error.empty()) return Latency{"consumer: " + con.error};
  GstElement* src = gst_bin_get_by_name(GST_BIN(con.pipe), "src");
  if (!src) return Latency{"no element named src in the consumer pipeline"};
  LatencyRecord rec;
  rec.warmup = warmup;
  GstPad* pad = gst_element_get_static_pad(src, "src");
  gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, on_latency, &rec, nullptr);
  gst_object_unref(pad);
  gst_object_unref(src);
  if (!con.play()) return Latency{"consumer: " + con.error};
  int got = 0;
  while (GstSample* s = con.pull(timeout_s)) {
    ++got;
    gst_sample_unref(s);
  }
  if (!con.error.empty())
    return Latency{"consumer after " + std::to_string(got) + " frames: " + con.error};
  std::lock_guard<std::mutex> lock(rec.mu);
  if (got != frames || rec.out_of_order || rec.unstamped)
    return Latency{"got " + std::to_string(got) + " of " + std::to_string(frames) + " frames, " +
                   std::to_string(rec.out_of_order) + " out of order, " +
                   std::to_string(rec.unstamped) + " without the producer's stamp"};
  std::sort(rec.us.begin(), rec.us.end());
  l.measured = rec.us.size();
  if (l.measured) {
    l.p50 = rec.us[l.measured / 2];
    l.p99 = rec.us[std::min(l.measured - 1, l.measured * 99 / 100)];
  }
  return l;
}

int latency(const Options& o) {
  const Latency l = measure_latency(o.consumer, o.frames, o.warmup, o.timeout_s);
  if (!l.error.empty()) return fail(l.error);
  std::printf(
      "verify: OK %d frames in order, each with the producer's stamp; latency over %zu: "
      "p50 %.1f us, p99 %.1f us\n",
      o.frames, l.measured, l.p50, l.p99);
  return 0;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// One row: this program as the producer on `pdev` (a child process: CUDA IPC needs two), the
// consumer here on `cdev`.
Latency bench_row(const Options& o, const std::string& dir, const std::string& format,
                  const std::string& io, int pdev, int cdev) {
  static int row = 0;
  const std::string sock = dir + "/row" + std::to_string(++row) + ".sock";
  const int total = o.frames + o.warmup;
  const std::string dev = std::to_string(pdev);
  const bool host = o.ipc_mode == "host";
  const std::string words =
      "videotestsrc is-live=true pattern=ball num-buffers=" + std::to_string(total) +
      " ! video/x-raw,format=" + format + ",width=" + std::to_string(o.width) +
      ",height=" + std::to_string(o.height) + ",framerate=60/1 ! " +
      (host ? "cudaipcringsink name=sink ipc-mode=host"
            : "cudaupload cuda-device-id=" + dev +
                  " ! cudaipcringsink name=sink cuda-device-id=" + dev);
  const std::string timeout = std::to_string(o.timeout_s);
  std::vector<std::string> args = {
      "cudaipc-gst-verify", "produce", "--stamp",  "--timeout-s", timeout,
      "--pipeline-words",   words,     "--socket", sock};
  std::vector<char*> argv;  // made before the fork: the child only execs
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) return Latency{"fork failed"};
  if (pid == 0) {
    const int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 1);  // its "producer:" line would break the table
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  const std::string consumer =
      "cudaipcringsrc name=src mode=every-frame io-mode=" + io + " socket-path=" + sock +
      (host ? ""
            : " cuda-device-id=" + std::to_string(cdev) + " ! video/x-raw(memory:CUDAMemory)") +
      " ! appsink name=out";
  Latency l = measure_latency(consumer, total, o.warmup, o.timeout_s);
  int status = 0;
  pid_t done = 0;  // the producer ends at its EOS: 10 s for it
  for (int i = 0; i < 100 && (done = waitpid(pid, &status, WNOHANG)) == 0; ++i) usleep(100000);
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    if (l.error.empty()) l.error = "the producer did not end";
  } else if (l.error.empty() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    l.error = "the producer failed";
  }
  return l;
}

// --ipc-mode host: the same rows in host memory, on any machine (the --host run proves the
// program with them).
int bench(const Options& o) {
  const bool host = o.ipc_mode == "host";
  std::string why;
  const int n = host ? 1 : cuda_device_count(&why);
  if (n < 1) {
    std::printf("cross-GPU bench not run: %s\n", n < 0 ? why.c_str() : "no CUDA device");
    return 0;
  }
  char tmpl[] = "/tmp/cudaipc-verify-bench-XXXXXX";
  if (!mkdtemp(tmpl)) return fail("mkdtemp in /tmp");
  const std::string dir = tmpl;
  const std::string io_modes = !o.io_modes.empty()                    ? o.io_modes
                               : GST_CHECK_VERSION(1, 24, 0) && !host ? "copy,import"
                                                                      : "copy";
  // The core refuses a consumer on GPU 1 of slots on GPU 0 without peer access.
  const std::string cross = host    ? "host memory"
                            : n < 2 ? "1 CUDA device"
                            : std::strcmp(peer_access(1, 0), "yes") != 0
                                ? "GPU 1 has no peer access to GPU 0"
                                : "";
  if (!cross.empty()) std::printf("cross-GPU rows not run: %s\n", cross.c_str());
  std::printf(
      "\ncudaipcsink on GPU 0 -> cudaipcsrc on GPU 0 or 1, %dx%d at 60 fps live, %d frames "
      "after %d; latency from the sink's entry to the source's push, the frame readable on "
      "the consumer's GPU (GStreamer %d.%d)\n\n",
      o.width, o.height, o.frames, o.warmup, GST_VERSION_MAJOR, GST_VERSION_MINOR);
  std::printf(
      "| producer GPU -> consumer GPU | format | io-mode | latency p50 us | p99 us | "
      "frames |\n|---|---|---|---|---|---|\n");
  int failed = 0;
  for (const std::string& format : split_list(o.formats)) {
    for (const std::string& io : split_list(io_modes)) {
      for (int cdev : {0, 1}) {
        const std::string name = cdev == 0 ? "0 -> 0 (same GPU)" : "0 -> 1";
        if (cdev == 1 && !cross.empty()) {
          std::printf("| %s | %s | %s | not run: %s | | |\n", name.c_str(), format.c_str(),
                      io.c_str(), cross.c_str());
          continue;
        }
        const Latency l = bench_row(o, dir, format, io, 0, cdev);
        if (!l.error.empty()) {
          ++failed;
          std::printf("| %s | %s | %s | FAILED: %s | | |\n", name.c_str(), format.c_str(),
                      io.c_str(), l.error.c_str());
        } else {
          std::printf("| %s | %s | %s | %.1f | %.1f | %zu |\n", name.c_str(), format.c_str(),
                      io.c_str(), l.p50, l.p99, l.measured);
        }
      }
    }
  }
  rmdir(dir.c_str());  // the sockets went with their producers
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  gst_init(&argc, &argv);
  // A decoder's caps carry multiview-flags as a GstVideoMultiviewFlagsSet, which the text parser
  // (serve reads the channel's caps as text) finds only once the type is registered.
  g_type_ensure(gst_video_multiview_flagset_get_type());
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s compare|produce-tensors|check-tensors|produce|gpus|serve|filter|"
                 "latency|bench [options]\n",
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
    else if (a == "--expect-device-id")
      o.expect_device_id = std::atoi(next().c_str());
    else if (a == "--model-device")
      o.model_device = std::atoi(next().c_str());
    else if (a == "--format-first")
      o.format_first = true;
    else if (a == "--stamp")
      o.stamp = true;
    else if (a == "--warmup")
      o.warmup = std::atoi(next().c_str());
    else if (a == "--hold-every")
      o.hold_every = std::atoi(next().c_str());
    else if (a == "--hold-for")
      o.hold_for = std::atoi(next().c_str());
    else if (a == "--allow-unanswered")
      o.allow_unanswered = std::atoi(next().c_str());
    else if (a == "--fds-check")
      o.fds_check = true;
    else if (a == "--at-least")
      o.at_least = true;
    else if (a == "--width")
      o.width = std::atoi(next().c_str());
    else if (a == "--height")
      o.height = std::atoi(next().c_str());
    else if (a == "--formats")
      o.formats = next();
    else if (a == "--io-modes")
      o.io_modes = next();
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
  if (cmd == "gpus") return gpus();
  if (cmd == "serve") return serve(o);
  if (cmd == "filter") return filter(o);
  if (cmd == "latency") return latency(o);
  if (cmd == "bench") return bench(o);
  std::fprintf(stderr, "unknown command %s\n", cmd.c_str());
  return 2;
}
