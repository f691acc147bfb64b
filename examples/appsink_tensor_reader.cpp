// Reads a cudaipc channel through `cudaipcsrc ! appsink` and prints, per frame, what an
// application needs to hand it to PyTorch, TensorRT or its own CUDA code: the
// GstCudaIpcTensorMeta's shape, dtype, strides, pointer and sequence number. Host-memory frames
// also get an FNV-1a checksum of their elements (cudaipc-appsrc-tensor-producer prints the same
// checksum for what it sent, so the two outputs can be compared line by line).
//   cudaipc-appsink-tensor-reader [--frames N] [--mode latest|every-frame] [--system-memory]
//                                 [--connect-timeout SECONDS] SOCKET
#include <gst/app/gstappsink.h>
#include <gst/cudaipc/gstcudaipcmeta.h>
#include <gst/gst.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace {

struct ObjectUnref {
  void operator()(gpointer p) const { gst_object_unref(p); }
};
struct SampleUnref {
  void operator()(GstSample* s) const { gst_sample_unref(s); }
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
using SamplePtr = std::unique_ptr<GstSample, SampleUnref>;
using MessagePtr = std::unique_ptr<GstMessage, MessageUnref>;
using CharPtr = std::unique_ptr<gchar, GFree>;
using ErrorPtr = std::unique_ptr<GError, ErrorFree>;

// Sets the pipeline to NULL on every way out, so the source releases its leases and socket.
struct StopOnExit {
  GstElement* pipeline;
  ~StopOnExit() { gst_element_set_state(pipeline, GST_STATE_NULL); }
};

const char* dtype_name(GstCudaIpcDType t) {
  switch (t) {
    case GST_CUDA_IPC_DTYPE_INT8:
      return "int8";
    case GST_CUDA_IPC_DTYPE_INT16:
      return "int16";
    case GST_CUDA_IPC_DTYPE_INT32:
      return "int32";
    case GST_CUDA_IPC_DTYPE_INT64:
      return "int64";
    case GST_CUDA_IPC_DTYPE_UINT8:
      return "uint8";
    case GST_CUDA_IPC_DTYPE_UINT16:
      return "uint16";
    case GST_CUDA_IPC_DTYPE_UINT32:
      return "uint32";
    case GST_CUDA_IPC_DTYPE_UINT64:
      return "uint64";
    case GST_CUDA_IPC_DTYPE_FLOAT16:
      return "float16";
    case GST_CUDA_IPC_DTYPE_FLOAT32:
      return "float32";
    case GST_CUDA_IPC_DTYPE_FLOAT64:
      return "float64";
    case GST_CUDA_IPC_DTYPE_BFLOAT16:
      return "bfloat16";
    case GST_CUDA_IPC_DTYPE_BOOL:
      return "bool";
    default:
      return "invalid";
  }
}

std::size_t dtype_size(GstCudaIpcDType t) {
  switch (t) {
    case GST_CUDA_IPC_DTYPE_INT8:
    case GST_CUDA_IPC_DTYPE_UINT8:
    case GST_CUDA_IPC_DTYPE_BOOL:
      return 1;
    case GST_CUDA_IPC_DTYPE_INT16:
    case GST_CUDA_IPC_DTYPE_UINT16:
    case GST_CUDA_IPC_DTYPE_FLOAT16:
    case GST_CUDA_IPC_DTYPE_BFLOAT16:
      return 2;
    case GST_CUDA_IPC_DTYPE_INT32:
    case GST_CUDA_IPC_DTYPE_UINT32:
    case GST_CUDA_IPC_DTYPE_FLOAT32:
      return 4;
    case GST_CUDA_IPC_DTYPE_INT64:
    case GST_CUDA_IPC_DTYPE_UINT64:
    case GST_CUDA_IPC_DTYPE_FLOAT64:
      return 8;
    default:
      return 0;
  }
}

std::string dims_text(const gint64* v, guint rank) {
  std::string s = "[";
  for (guint i = 0; i < rank; ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

constexpr std::uint64_t kFnvOffset = 14695981039346656037ull;
constexpr std::uint64_t kFnvPrime = 1099511628211ull;

// Walks the elements through the strides rather than hashing `size` bytes: video rows are often
// padded, and the padding is not part of the tensor.
void hash_elements(const guint8* base, const GstCudaIpcTensorMeta* m, guint dim, std::size_t item,
                   std::uint64_t* h) {
  for (gint64 i = 0; i < m->shape[dim]; ++i) {
    const guint8* p = base + i * m->strides[dim];
    if (dim + 1 < m->rank) {
      hash_elements(p, m, dim + 1, item, h);
      continue;
    }
    for (std::size_t b = 0; b < item; ++b) *h = (*h ^ p[b]) * kFnvPrime;
  }
}

std::uint64_t element_checksum(const GstCudaIpcTensorMeta* m) {
  std::uint64_t h = kFnvOffset;
  const std::size_t item = dtype_size(m->dtype);
  if (m->rank == 0) {
    const auto* p = reinterpret_cast<const guint8*>(m->data);
    for (std::size_t b = 0; b < item; ++b) h = (h ^ p[b]) * kFnvPrime;
    return h;
  }
  hash_elements(reinterpret_cast<const guint8*>(m->data), m, 0, item, &h);
  return h;
}

void print_frame(GstSample* sample, guint64 n) {
  GstBuffer* buf = gst_sample_get_buffer(sample);
  const GstCudaIpcTensorMeta* m = buf ? gst_buffer_get_cuda_ipc_tensor_meta(buf) : nullptr;
  if (!m) {
    std::printf("frame %" G_GUINT64_FORMAT ": no GstCudaIpcTensorMeta\n", n);
    return;
  }
  std::printf("seq %" G_GUINT64_FORMAT " pts %" GST_TIME_FORMAT " %s shape %s strides %s", m->seq,
              GST_TIME_ARGS(GST_BUFFER_PTS(buf)), dtype_name(m->dtype),
              dims_text(m->shape, m->rank).c_str(), dims_text(m->strides, m->rank).c_str());
  if (m->device_id >= 0) {
    // A CUdeviceptr: only CUDA work may read it, ordered after the buffer's stream (1.24+).
    std::printf(" cuda:%d ptr 0x%" G_GINT64_MODIFIER "x\n", m->device_id,
                static_cast<guint64>(m->data));
    return;
  }
  // The meta's pointer is valid while the buffer lives; the sample holds the buffer.
  std::printf(" host ptr 0x%" G_GINT64_MODIFIER "x fnv1a %016" PRIx64 "\n",
              static_cast<guint64>(m->data), element_checksum(m));
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

// Reports every error and warning waiting on the bus; true when there was an error.
bool drain_bus(GstBus* bus) {
  bool failed = false;
  while (MessagePtr msg{gst_bus_pop_filtered(
      bus, static_cast<GstMessageType>(GST_MESSAGE_ERROR | GST_MESSAGE_WARNING))})
    failed = report(msg.get()) || failed;
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  gint frames = 0;
  gchar* mode_raw = nullptr;
  gboolean system_memory = FALSE;
  gdouble connect_timeout = 10.0;
  GOptionEntry entries[] = {
      {"frames", 'n', 0, G_OPTION_ARG_INT, &frames, "Stop after N frames (0: at end of stream)",
       "N"},
      {"mode", 'm', 0, G_OPTION_ARG_STRING, &mode_raw, "latest or every-frame (default)", "MODE"},
      {"system-memory", 's', 0, G_OPTION_ARG_NONE, &system_memory,
       "Ask for system memory, so CUDA frames are downloaded and checksummed", nullptr},
      {"connect-timeout", 't', 0, G_OPTION_ARG_DOUBLE, &connect_timeout,
       "Seconds to wait for a producer (0: for ever; default 10)", "SECONDS"},
      {nullptr, 0, 0, G_OPTION_ARG_NONE, nullptr, nullptr, nullptr}};
  GOptionContext* ctx = g_option_context_new("SOCKET - print the tensor meta of each frame");
  g_option_context_add_main_entries(ctx, entries, nullptr);
  g_option_context_add_group(ctx, gst_init_get_option_group());
  GError* parse_raw = nullptr;
  const gboolean parsed = g_option_context_parse(ctx, &argc, &argv, &parse_raw);
  g_option_context_free(ctx);
  const ErrorPtr parse_error(parse_raw);
  const CharPtr mode_text(mode_raw);
  if (!parsed) {
    std::fprintf(stderr, "%s\n", parse_error->message);
    return 2;
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s [OPTION...] SOCKET (--help for options)\n", argv[0]);
    return 2;
  }
  const std::string mode = mode_text ? mode_text.get() : "every-frame";
  if (mode != "latest" && mode != "every-frame") {
    std::fprintf(stderr, "--mode must be latest or every-frame, not %s\n", mode.c_str());
    return 2;
  }
  if (connect_timeout < 0) {
    std::fprintf(stderr, "--connect-timeout must not be negative\n");
    return 2;
  }

  // Without a filter appsink takes CUDA memory where the channel has it; the filter makes
  // cudaipcsrc download instead.
  const std::string filter = system_memory ? " ! video/x-raw;other/tensors" : "";
  // cudaipcringsrc is this plugin's cudaipcsrc under a name of its own: GStreamer 1.24+'s nvcodec
  // also has a cudaipcsrc, and a process that loads nvcodec may get that one by the plain name
  // (docs/coexistence.md).
  const std::string description =
      "cudaipcringsrc name=src mode=" + mode + " connect-timeout=" +
      std::to_string(static_cast<guint64>(connect_timeout * static_cast<double>(GST_SECOND))) +
      filter + " ! appsink name=sink sync=false";
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
  g_object_set(src.get(), "socket-path", argv[1], nullptr);
  BusPtr bus(gst_element_get_bus(pipeline.get()));
  StopOnExit stop{pipeline.get()};

  if (gst_element_set_state(pipeline.get(), GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    // The reason is on the bus.
    if (MessagePtr msg{gst_bus_pop_filtered(bus.get(), GST_MESSAGE_ERROR)}) report(msg.get());
    std::fprintf(stderr, "the pipeline would not start\n");
    return 1;
  }

  std::string last_caps_text;
  guint64 received = 0;
  for (;;) {
    // Polled between pulls so an error is reported even when no sample ever comes.
    if (drain_bus(bus.get())) return 1;
    SamplePtr sample(gst_app_sink_try_pull_sample(GST_APP_SINK(sink.get()), 100 * GST_MSECOND));
    if (!sample) {
      // A source that fails posts its error and then sends EOS: look at the bus once more.
      if (gst_app_sink_is_eos(GST_APP_SINK(sink.get()))) {
        if (drain_bus(bus.get())) return 1;
        break;
      }
      continue;
    }
    if (GstCaps* caps = gst_sample_get_caps(sample.get())) {
      const CharPtr text(gst_caps_to_string(caps));
      if (last_caps_text != text.get()) {
        last_caps_text = text.get();
        std::printf("caps %s\n", last_caps_text.c_str());
      }
    }
    print_frame(sample.get(), received);
    std::fflush(stdout);
    ++received;
    if (frames > 0 && received >= static_cast<guint64>(frames)) break;
  }

  GstStructure* stats = nullptr;
  g_object_get(src.get(), "stats", &stats, nullptr);
  if (stats) {
    const CharPtr text(gst_structure_to_string(stats));
    std::printf("received %" G_GUINT64_FORMAT " frames; %s\n", received, text.get());
    gst_structure_free(stats);
  }
  return 0;
}
