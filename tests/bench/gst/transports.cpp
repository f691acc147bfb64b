// The pipelines of every transport, as gst_parse_launch descriptions. Producers are as fast as
// videotestsrc goes (not live, no framerate, sync=false); consumers end in fakesink. The element
// a probe goes on is named: "sink" in a producer, "src" in a consumer.
#include <cstdio>
#include <stdexcept>

#include "gst_bench.hpp"

namespace gstbench {
namespace {

std::string quoted(const std::string& path) {
  return "\"" + path + "\"";
}

std::string raw_caps(const RunSpec& s) {
  return "video/x-raw,format=" + s.format + ",width=" + std::to_string(s.width) +
         ",height=" + std::to_string(s.height) + ",framerate=" + std::to_string(s.live_fps) + "/1";
}

// The row's format and size in CUDA memory.
std::string cuda_caps(const RunSpec& s) {
  return "video/x-raw(memory:CUDAMemory),format=" + s.format + ",width=" + std::to_string(s.width) +
         ",height=" + std::to_string(s.height);
}

std::string source(const RunSpec& s) {
  if (s.upstream == "nvdec")
    // The clip has more than total() frames; the roles let total() out of "limit"
    // (limit_buffers()).
    return "filesrc location=" + quoted(s.clip) +
           " ! h264parse ! nvh264dec ! video/x-raw(memory:CUDAMemory) ! identity name=limit";
  char fg[16];
  std::snprintf(fg, sizeof fg, "0x%08x", kForeground);
  const std::string vsrc = std::string("videotestsrc name=vsrc is-live=") +
                           (s.live_fps ? "true" : "false") +
                           " pattern=solid-color foreground-color=" + std::string(fg) +
                           " num-buffers=" + std::to_string(s.total());
  if (s.upstream == "convert")
    return vsrc + " ! video/x-raw,format=I420,width=1280,height=720 ! cudaupload ! " +
           "cudaconvertscale ! " + cuda_caps(s);
  std::string d = vsrc + " ! " + raw_caps(s);
  if (s.cuda) d += " ! cudaupload ! video/x-raw(memory:CUDAMemory)";
  return d;
}

// The feed's frames are made once; what pushes them is an appsrc whose caps are the frames'.
std::string feed_source() {
  return "appsrc name=feed is-live=false format=time block=true max-bytes=0 max-buffers=4";
}

std::uint64_t frame_bytes(const RunSpec& s) {
  GstVideoInfo info;
  gst_video_info_set_format(&info, gst_video_format_from_string(s.format.c_str()),
                            static_cast<guint>(s.width), static_cast<guint>(s.height));
  return GST_VIDEO_INFO_SIZE(&info);
}

// Whether `factory`'s elements have `prop` (unixfdsink's wait-for-connection is 1.26+).
bool has_property(const char* factory, const char* prop) {
  GstElementFactory* f = gst_element_factory_find(factory);
  if (!f) return false;
  auto* loaded = GST_ELEMENT_FACTORY(gst_plugin_feature_load(GST_PLUGIN_FEATURE(f)));
  gst_object_unref(f);
  if (!loaded) return false;
  const GType type = gst_element_factory_get_element_type(loaded);
  gst_object_unref(loaded);
  gpointer klass = g_type_class_ref(type);
  const bool has = g_object_class_find_property(G_OBJECT_CLASS(klass), prop) != nullptr;
  g_type_class_unref(klass);
  return has;
}

}  // namespace

std::string producer_launch(const RunSpec& s) {
  const std::string sock = quoted(s.path("sock"));
  std::string sink;
  if (s.transport == "cudaipc-host")
    sink = s.sink_factory + " ipc-mode=host socket-path=" + sock + " wait-for-consumer=true";
  else if (s.transport == "cudaipc-cuda")
    sink = s.sink_factory + " socket-path=" + sock + " wait-for-consumer=true";
  else if (s.transport == "shm")
    // Room for four frames plus shmsink's per-block alignment.
    sink = "shmsink socket-path=" + sock +
           " shm-size=" + std::to_string(4 * frame_bytes(s) + (1u << 20)) +
           " wait-for-connection=true";
  else if (s.transport == "unixfd")
    sink = "unixfdsink socket-path=" + sock +
           (has_property("unixfdsink", "wait-for-connection") ? " wait-for-connection=true" : "");
  else if (s.transport == "nvcodec")
    sink = s.sink_factory + " address=" + sock;
  else
    throw std::runtime_error("no producer for transport " + s.transport);
  return (s.feed ? feed_source() : source(s)) + " ! " + sink + " name=sink sync=false";
}

std::string consumer_launch(const RunSpec& s) {
  const std::string sock = quoted(s.path("sock"));
  const std::string connect_timeout =
      std::to_string(static_cast<std::uint64_t>(s.timeout_s) * GST_SECOND);
  std::string src;
  if (s.transport == "cudaipc-host")
    src = s.src_factory + " name=src socket-path=" + sock +
          " mode=every-frame reconnect=false connect-timeout=" + connect_timeout;
  else if (s.transport == "cudaipc-cuda")
    src =
        s.src_factory + " name=src socket-path=" + sock + " mode=every-frame io-mode=" + s.io_mode +
        " reconnect=false connect-timeout=" + connect_timeout + " ! video/x-raw(memory:CUDAMemory)";
  else if (s.transport == "shm")
    src = "shmsrc name=src socket-path=" + sock + " is-live=true ! " + raw_caps(s);
  else if (s.transport == "unixfd")
    src = "unixfdsrc name=src socket-path=" + sock;
  else if (s.transport == "nvcodec")
    src = s.src_factory + " name=src address=" + sock;
  else
    throw std::runtime_error("no consumer for transport " + s.transport);
  // The app's queue is short, as an app that keeps up would hold it: the source waits on it.
  // Live rows have an app too, taking each frame as it comes (latency ends at the appsink's pad).
  if (s.appsink || s.live_fps) return src + " ! appsink name=app sync=false max-buffers=2";
  return src + " ! fakesink name=sink sync=false";
}

std::string baseline_launch(const RunSpec& s) {
  // Live: the sink's clock wait alone (its handoff comes after the wait), in one process.
  if (s.live_fps) return source(s) + " ! fakesink name=sink sync=true signal-handoffs=true";
  return (s.feed ? feed_source() : source(s)) + " ! fakesink name=sink sync=false";
}

std::string feed_frames_launch(const RunSpec& s) {
  // A framerate: at 0/1 videotestsrc sends one frame of a moving pattern, then EOS.
  std::string d =
      "videotestsrc is-live=false horizontal-speed=16 num-buffers=" + std::to_string(kFeedFrames) +
      " ! video/x-raw,format=" + s.format + ",width=" + std::to_string(s.width) +
      ",height=" + std::to_string(s.height) + ",framerate=30/1";
  if (s.cuda) d += " ! cudaupload ! video/x-raw(memory:CUDAMemory)";
  return d + " ! appsink name=out sync=false";
}

}  // namespace gstbench
