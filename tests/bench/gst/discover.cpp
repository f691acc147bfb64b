// Which transports this GStreamer has, told apart by the plugin their factories come from, and
// why the others cannot run.
#include <cstring>

#include "gst_bench.hpp"

namespace gstbench {
namespace {

Transport make(std::string id, std::string label, std::string sink, std::string src) {
  Transport t;
  t.id = std::move(id);
  t.label = std::move(label);
  t.sink_factory = std::move(sink);
  t.src_factory = std::move(src);
  return t;
}

// The plugin a factory comes from ("" when there is no such element).
std::string plugin_of(const char* factory) {
  GstElementFactory* f = gst_element_factory_find(factory);
  if (!f) return "";
  const gchar* name = gst_plugin_feature_get_plugin_name(GST_PLUGIN_FEATURE(f));
  std::string s = name ? name : "";
  gst_object_unref(f);
  return s;
}

std::vector<Transport> filter(const std::vector<Transport>& ts,
                              const std::vector<std::string>& only) {
  std::vector<Transport> kept;
  for (const auto& t : ts)
    for (const auto& id : only)
      if (t.id == id) kept.push_back(t);
  return kept;
}

bool has_factories(const char* sink, const char* src) {
  return !plugin_of(sink).empty() && !plugin_of(src).empty();
}

// nvcodec (1.24+) registers cudaipcsink/cudaipcsrc too, and the plugin loaded last owns the
// names: ours have aliases, nvcodec's have none.
std::string nvcodec_unavailable(guint minor) {
  const std::string sink = plugin_of("cudaipcsink"), src = plugin_of("cudaipcsrc");
  if (sink == "nvcodec" && src == "nvcodec") return "";
  if (plugin_file("nvcodec").empty()) return "not available: no nvcodec plugin";
  if (minor < 24)
    return "not available: nvcodec has cudaipcsink/cudaipcsrc from GStreamer 1.24 (running 1." +
           std::to_string(minor) + ")";
  if (plugin_of("cudaupload") != "nvcodec")
    return "not available: nvcodec registered no elements (no CUDA device when the registry "
           "was built)";
  if (sink == "cudaipc" || src == "cudaipc")
    return "not available: the cudaipc plugin, loaded after nvcodec, owns the names "
           "cudaipcsink/cudaipcsrc";
  return "not available: nvcodec registers no cudaipcsink/cudaipcsrc";
}

}  // namespace

std::string plugin_file(const char* plugin) {
  GstPlugin* p = gst_registry_find_plugin(gst_registry_get(), plugin);
  if (!p) return "";
  const gchar* f = gst_plugin_get_filename(p);
  std::string s = f ? f : "";
  gst_object_unref(p);
  return s;
}

std::string producer_key(bool feed, bool cuda, const std::string& upstream) {
  if (feed) return cuda ? "feed-cuda" : "feed";
  if (!upstream.empty()) return upstream;
  return cuda ? "cuda" : "sys";
}

std::vector<Transport> discover(bool gpu, bool live, const std::string& clip,
                                const std::vector<std::string>& only, std::string* ours_missing) {
  std::vector<Transport> ts;
  // Ours, by plugin name: the aliases where this build has them, else the plain names.
  std::string sink, src;
  for (auto [s, r] :
       {std::pair{"cudaipcringsink", "cudaipcringsrc"}, std::pair{"cudaipcsink", "cudaipcsrc"}})
    if (plugin_of(s) == "cudaipc" && plugin_of(r) == "cudaipc") {
      sink = s;
      src = r;
      break;
    }
  if (sink.empty())
    *ours_missing =
        "not available: no cudaipc plugin (set GST_PLUGIN_PATH to the build's gst/, "
        "built for this GStreamer version)";
  Transport host = make("cudaipc-host", "cudaipc host (ipc-mode=host, every-frame)", sink, src);
  host.unavailable = *ours_missing;
  ts.push_back(host);

  Transport shm =
      make("shm", "shmsink/shmsrc (copy into shm-size = 4 frames)", "shmsink", "shmsrc");
  if (!has_factories("shmsink", "shmsrc")) shm.unavailable = "not available: no shm plugin";
  ts.push_back(shm);

  Transport fd = make("unixfd", "unixfdsink/unixfdsrc", "unixfdsink", "unixfdsrc");
  if (!has_factories("unixfdsink", "unixfdsrc"))
    fd.unavailable = "not available: no unixfdsink/unixfdsrc (GStreamer < 1.24)";
  ts.push_back(fd);

  guint major = 0, minor = 0, micro = 0, nano = 0;
  gst_version(&major, &minor, &micro, &nano);
  std::string gpu_why;
  if (!gpu)
    gpu_why = "skipped: CUDA row, run with --gpu";
  else if (std::string why = gpu_unavailable_reason(); !why.empty())
    gpu_why = "skipped: no GPU (" + why + ")";
  auto cuda_row = [&](std::string id, std::string label, const char* mode) {
    Transport t = make(std::move(id), std::move(label), sink, src);
    t.io_mode = mode;
    t.cuda = true;
    t.unavailable = !ours_missing->empty() ? *ours_missing : gpu_why;
    if (t.unavailable.empty() && std::strcmp(mode, "import") == 0 && minor < 24)
      t.unavailable = "not available: io-mode=import needs GStreamer 1.24+ (running 1." +
                      std::to_string(minor) + ")";
    return t;
  };
  for (const char* mode : {"import", "copy"})
    ts.push_back(cuda_row(std::string("cudaipc-cuda-") + mode,
                          std::string("cudaipc CUDA (ipc-mode=auto, io-mode=") + mode + ")", mode));
  Transport nv = make("nvcodec", "nvcodec cudaipcsink/cudaipcsrc", "cudaipcsink", "cudaipcsrc");
  nv.cuda = true;
  nv.every_frame = false;  // its server hands each client the newest frame
  nv.unavailable = nvcodec_unavailable(minor);
  if (nv.unavailable.empty()) nv.unavailable = gpu_why;
  ts.push_back(nv);

  // Live rows are camera-like sources: the appsrc and app-consumer rows measure ceilings.
  if (live) return only.empty() ? ts : filter(ts, only);

  // Past videotestsrc's ceiling: producers pushing pre-made frames through an appsrc.
  Transport feed_host = make("cudaipc-host-appsrc",
                             "cudaipc host, pre-made appsrc producer (every-frame)", sink, src);
  feed_host.feed = true;
  feed_host.unavailable = *ours_missing;
  ts.push_back(feed_host);
  for (const char* mode : {"import", "copy"}) {
    Transport t = cuda_row(
        std::string("cudaipc-cuda-appsrc-") + mode,
        std::string("cudaipc CUDA, pre-uploaded appsrc producer (io-mode=") + mode + ")", mode);
    t.feed = true;
    ts.push_back(t);
  }
  // Other CUDA producers upstream of the sink (issue #14: a CUDA producer is never slowed):
  // cudaconvertscale, and an NVDEC decoder.
  Transport convert =
      cuda_row("cudaipc-cuda-convert",
               "cudaipc CUDA, cudaupload ! cudaconvertscale producer (io-mode=auto)", "auto");
  convert.upstream = "convert";
  if (convert.unavailable.empty() && plugin_of("cudaconvertscale").empty())
    convert.unavailable = "not available: no cudaconvertscale (needs NVRTC)";
  ts.push_back(convert);
  Transport nvdec =
      cuda_row("cudaipc-cuda-nvdec", "cudaipc CUDA, nvh264dec producer (io-mode=auto)", "auto");
  nvdec.upstream = "nvdec";
  if (nvdec.unavailable.empty() && clip.empty())
    nvdec.unavailable = "skipped: no --clip (an H.264 file) to decode";
  else if (nvdec.unavailable.empty() &&
           (plugin_of("nvh264dec").empty() || plugin_of("h264parse").empty()))
    nvdec.unavailable = "not available: no nvh264dec or h264parse";
  ts.push_back(nvdec);
  // An application as the consumer: cudaipcsrc ! appsink, pulling samples, reading tensor metas.
  Transport app_host = make("cudaipc-host-appsink",
                            "cudaipc host, app consumer: appsink pull + tensor meta", sink, src);
  app_host.appsink = true;
  app_host.unavailable = *ours_missing;
  ts.push_back(app_host);
  Transport app_cuda = cuda_row("cudaipc-cuda-appsink-import",
                                "cudaipc CUDA (io-mode=import), app consumer: appsink pull + "
                                "tensor meta",
                                "import");
  app_cuda.appsink = true;
  ts.push_back(app_cuda);
  // The app consumer past videotestsrc's ceiling: pre-uploaded frames, an appsink pulling them.
  Transport app_feed = cuda_row("cudaipc-cuda-appsrc-appsink-import",
                                "cudaipc CUDA, pre-uploaded appsrc producer (io-mode=import), app "
                                "consumer: appsink pull + tensor meta",
                                "import");
  app_feed.appsink = true;
  app_feed.feed = true;
  ts.push_back(app_feed);

  return only.empty() ? ts : filter(ts, only);
}

}  // namespace gstbench
