// Publishes float32 tensors of shape (1, 224, 224, 3) through `appsrc ! cudaipcsink`, as an
// inference pre-processing stage would, then sends end-of-stream. Frame n holds
// n + (i % 1000) / 1000 at element i, so a reader can tell frames apart and spot torn ones, and
// each frame's FNV-1a checksum is printed to compare with cudaipc-appsink-tensor-reader's.
// By default the sink holds the frames while no consumer is connected (wait-for-consumer=true,
// checked on every frame), so a reader that leaves early stalls the producer: --no-wait
// publishes whether anyone reads or not.
//   cudaipc-appsrc-tensor-producer [--frames N] [--fps F] [--ipc-mode host|auto|vmm|legacy]
//                                  [--no-wait] SOCKET
#include <gst/app/gstappsrc.h>
#include <gst/gst.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

namespace {

struct ObjectUnref {
  void operator()(gpointer p) const { gst_object_unref(p); }
};
struct MessageUnref {
  void operator()(GstMessage* m) const { gst_message_unref(m); }
};
struct GFree {
  void operator()(gpointer p) const { g_free(p); }
};
struct ErrorFree {
  void operator()(GError* e) const { g_error_free(e); }
};
using ElementPtr = std::unique_ptr<GstElement, ObjectUnref>;
using BusPtr = std::unique_ptr<GstBus, ObjectUnref>;
using MessagePtr = std::unique_ptr<GstMessage, MessageUnref>;
using CharPtr = std::unique_ptr<gchar, GFree>;
using ErrorPtr = std::unique_ptr<GError, ErrorFree>;

// Sets the pipeline to NULL on every way out: the sink then closes the channel and removes its
// socket file.
struct StopOnExit {
  GstElement* pipeline;
  ~StopOnExit() { gst_element_set_state(pipeline, GST_STATE_NULL); }
};

constexpr int kChannels = 3;
constexpr int kWidth = 224;
constexpr int kHeight = 224;
constexpr gsize kElements = static_cast<gsize>(kChannels) * kWidth * kHeight;
// NNStreamer spells dimensions innermost first: this is shape (1, 224, 224, 3) outermost first.
constexpr char kDimensions[] = "3:224:224:1";

constexpr std::uint64_t kFnvOffset = 14695981039346656037ull;
constexpr std::uint64_t kFnvPrime = 1099511628211ull;

std::uint64_t checksum(const guint8* p, gsize n) {
  std::uint64_t h = kFnvOffset;
  for (gsize i = 0; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}

// Prints an error or warning message from the bus; returns true for an error.
bool report(GstMessage* msg) {
  GError* raw = nullptr;
  gchar* debug_raw = nullptr;
  const bool is_error = GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR;
  if (is_error)
    gst_message_parse_error(msg, &raw, &debug_raw);
  else
    gst_message_parse_warning(msg, &raw, &debug_raw);
  ErrorPtr err(raw);
  CharPtr debug(debug_raw);
  std::fprintf(stderr, "%s from %s: %s\n", is_error ? "error" : "warning",
               GST_OBJECT_NAME(GST_MESSAGE_SRC(msg)), err ? err->message : "?");
  if (debug) std::fprintf(stderr, "  (%s)\n", debug.get());
  return is_error;
}

GstBuffer* make_frame(guint64 n, gint fps, std::uint64_t* sum) {
  GstBuffer* buf = gst_buffer_new_allocate(nullptr, kElements * sizeof(float), nullptr);
  GstMapInfo map;
  if (!gst_buffer_map(buf, &map, GST_MAP_WRITE)) {
    gst_buffer_unref(buf);
    return nullptr;
  }
  auto* values = reinterpret_cast<float*>(map.data);
  for (gsize i = 0; i < kElements; ++i)
    values[i] = static_cast<float>(n) + static_cast<float>(i % 1000) / 1000.0f;
  *sum = checksum(map.data, map.size);
  gst_buffer_unmap(buf, &map);
  // Timestamps let the sink pace the frames at --fps, as a camera-driven stage would be paced.
  GST_BUFFER_PTS(buf) = gst_util_uint64_scale_int(n, GST_SECOND, fps);
  GST_BUFFER_DURATION(buf) = gst_util_uint64_scale_int(1, GST_SECOND, fps);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  gint frames = 30;
  gint fps = 30;
  gchar* ipc_mode_raw = nullptr;
  gboolean no_wait = FALSE;
  GOptionEntry entries[] = {
      {"frames", 'n', 0, G_OPTION_ARG_INT, &frames, "Frames to publish before EOS (default 30)",
       "N"},
      {"fps", 'f', 0, G_OPTION_ARG_INT, &fps, "Frames per second (default 30)", "F"},
      {"ipc-mode", 'i', 0, G_OPTION_ARG_STRING, &ipc_mode_raw,
       "cudaipcsink ipc-mode: host (default), auto, vmm or legacy", "MODE"},
      {"no-wait", 0, 0, G_OPTION_ARG_NONE, &no_wait,
       "Start publishing without waiting for a consumer", nullptr},
      {nullptr, 0, 0, G_OPTION_ARG_NONE, nullptr, nullptr, nullptr}};
  GOptionContext* ctx = g_option_context_new("SOCKET - publish float32 tensors, then EOS");
  g_option_context_add_main_entries(ctx, entries, nullptr);
  g_option_context_add_group(ctx, gst_init_get_option_group());
  GError* parse_raw = nullptr;
  const gboolean parsed = g_option_context_parse(ctx, &argc, &argv, &parse_raw);
  g_option_context_free(ctx);
  const ErrorPtr parse_error(parse_raw);
  const CharPtr ipc_mode_text(ipc_mode_raw);
  if (!parsed) {
    std::fprintf(stderr, "%s\n", parse_error->message);
    return 2;
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s [OPTION...] SOCKET (--help for options)\n", argv[0]);
    return 2;
  }
  const std::string ipc_mode = ipc_mode_text ? ipc_mode_text.get() : "host";
  if (ipc_mode != "host" && ipc_mode != "auto" && ipc_mode != "vmm" && ipc_mode != "legacy") {
    std::fprintf(stderr, "--ipc-mode must be host, auto, vmm or legacy, not %s\n",
                 ipc_mode.c_str());
    return 2;
  }
  if (frames < 1 || fps < 1) {
    std::fprintf(stderr, "--frames and --fps must be positive\n");
    return 2;
  }

  const std::string caps = std::string("other/tensors,format=static,num_tensors=1,types=float32,") +
                           "dimensions=" + kDimensions + ",framerate=" + std::to_string(fps) + "/1";
  // cudaipcringsink is this plugin's cudaipcsink under a name of its own: GStreamer 1.24+'s
  // nvcodec also has a cudaipcsink, and a process that loads nvcodec may get that one by the plain
  // name (docs/coexistence.md).
  // block=true with a small max-bytes keeps at most two frames queued in appsrc, so pushing
  // follows the sink's pace instead of filling memory.
  const std::string description = "appsrc name=src format=time block=true max-bytes=" +
                                  std::to_string(2 * kElements * sizeof(float)) + " caps=\"" +
                                  caps + "\" ! cudaipcringsink name=sink ipc-mode=" + ipc_mode +
                                  " wait-for-consumer=" + (no_wait ? "false" : "true");
  GError* launch_raw = nullptr;
  ElementPtr pipeline(gst_parse_launch(description.c_str(), &launch_raw));
  const ErrorPtr launch_error(launch_raw);
  if (launch_error || !pipeline) {
    // A missing element (the plugin not on GST_PLUGIN_PATH) is reported here.
    std::fprintf(stderr, "cannot build '%s': %s\n", description.c_str(),
                 launch_error ? launch_error->message : "?");
    return 1;
  }
  ElementPtr src(gst_bin_get_by_name(GST_BIN(pipeline.get()), "src"));
  ElementPtr sink(gst_bin_get_by_name(GST_BIN(pipeline.get()), "sink"));
  // Set as a property, not in the launch text, so a path needs no quoting.
  g_object_set(sink.get(), "socket-path", argv[1], nullptr);
  BusPtr bus(gst_element_get_bus(pipeline.get()));
  StopOnExit stop{pipeline.get()};

  if (gst_element_set_state(pipeline.get(), GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    // The reason (no CUDA device for ipc-mode=auto, a socket path in use) is on the bus.
    if (MessagePtr msg{gst_bus_pop_filtered(bus.get(), GST_MESSAGE_ERROR)}) report(msg.get());
    std::fprintf(stderr, "the pipeline would not start\n");
    return 1;
  }
  std::printf("publishing %d frames of %s on %s (ipc-mode=%s)\n", frames, caps.c_str(), argv[1],
              ipc_mode.c_str());

  for (gint n = 0; n < frames; ++n) {
    std::uint64_t sum = 0;
    GstBuffer* buf = make_frame(static_cast<guint64>(n), fps, &sum);
    if (!buf) {
      std::fprintf(stderr, "cannot map a new buffer\n");
      return 1;
    }
    // push_buffer takes the buffer; a non-OK return means the pipeline stopped (an error, which
    // the bus below reports).
    if (gst_app_src_push_buffer(GST_APP_SRC(src.get()), buf) != GST_FLOW_OK) break;
    std::printf("frame %d fnv1a %016" PRIx64 "\n", n, sum);
    std::fflush(stdout);
  }
  gst_app_src_end_of_stream(GST_APP_SRC(src.get()));

  // EOS reaches the consumers when it reaches the sink; the EOS message means it has.
  for (;;) {
    MessagePtr msg{gst_bus_timed_pop_filtered(
        bus.get(), GST_CLOCK_TIME_NONE,
        static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR | GST_MESSAGE_WARNING))};
    if (GST_MESSAGE_TYPE(msg.get()) == GST_MESSAGE_EOS) break;
    if (report(msg.get())) return 1;
  }

  GstStructure* stats = nullptr;
  g_object_get(sink.get(), "stats", &stats, nullptr);
  if (stats) {
    const CharPtr text(gst_structure_to_string(stats));
    std::printf("done; %s\n", text.get());
    gst_structure_free(stats);
  }
  return 0;
}
