// Shared helpers for the in-process element suites (tests/gst/test_elements_*.cpp): producing
// pipelines (appsrc ! cudaipcsink ipc-mode=host) and consuming ones (cudaipcsrc ! appsink) in one
// process, a collector that copies every consumer buffer out at once (so its slot lease ends),
// and the frame layouts and byte patterns the tests send and then check byte for byte.
#pragma once

#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gst/cudaipc/gstcudaipcmeta.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pattern.hpp"
#include "poll_until.hpp"
#include "temp_dir.hpp"

namespace cudaipc::testing::gst {

using Ms = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

struct Unref {
  void operator()(GstElement* e) const { gst_object_unref(e); }
  void operator()(GstBus* b) const { gst_object_unref(b); }
  void operator()(GstPad* p) const { gst_object_unref(p); }
  void operator()(GstElementFactory* f) const { gst_object_unref(f); }
  void operator()(GstCaps* c) const { gst_caps_unref(c); }
  void operator()(GstMessage* m) const { gst_message_unref(m); }
  void operator()(GstStructure* s) const { gst_structure_free(s); }
  void operator()(GstSample* s) const { gst_sample_unref(s); }
  void operator()(GstBuffer* b) const { gst_buffer_unref(b); }
  void operator()(GstTagList* t) const { gst_tag_list_unref(t); }
  void operator()(GError* e) const { g_error_free(e); }
  void operator()(gchar* s) const { g_free(s); }
};
template <typename T>
using Ptr = std::unique_ptr<T, Unref>;

// Caps shared between the collector's records (GstCaps are immutable once shared).
using CapsRef = std::shared_ptr<GstCaps>;
inline CapsRef share_caps(GstCaps* caps) {
  if (caps) gst_caps_ref(caps);
  return CapsRef(caps, [](GstCaps* c) {
    if (c) gst_caps_unref(c);
  });
}

inline std::string text_of(const GstCaps* caps) {
  if (!caps) return "(null)";
  Ptr<gchar> s(gst_caps_to_string(caps));
  return s.get();
}
inline std::string text_of(const GstStructure* s) {
  if (!s) return "(null)";
  Ptr<gchar> t(gst_structure_to_string(s));
  return t.get();
}
inline Ptr<GstCaps> caps_from(const std::string& text) {
  return Ptr<GstCaps>(gst_caps_from_string(text.c_str()));
}

// GLib criticals and warnings (a g_return_if_fail in GStreamer, a bad property) fail the test
// that logged them; they are counted here and checked by ElementTest::TearDown.
inline std::atomic<int>& glib_complaints() {
  static std::atomic<int> n{0};
  return n;
}

inline void count_complaints(const gchar* domain, GLogLevelFlags level, const gchar* message,
                             gpointer data) {
  g_log_default_handler(domain, level, message, data);
  if (level & (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING | G_LOG_LEVEL_ERROR)) ++glib_complaints();
}

inline void init_gst() {
  static std::once_flag once;
  std::call_once(once, [] {
    gst_init(nullptr, nullptr);
    g_log_set_default_handler(count_complaints, nullptr);
  });
}

inline bool element_exists(const char* factory) {
  Ptr<GstElementFactory> f(gst_element_factory_find(factory));
  return f != nullptr;
}

// GStreamer 1.24+'s nvcodec registers elements named cudaipcsink/cudaipcsrc too (on a machine
// where CUDA loads); the cudaipcring* aliases always name ours. Returns the plain name when it is
// ours, else the alias, or nullptr when the plugin did not load.
inline const char* pick_factory(const char* name, const char* alias, const char* type_name) {
  for (const char* candidate : {name, alias}) {
    GstElement* e = gst_element_factory_make(candidate, nullptr);
    if (!e) continue;
    const bool ours = std::strcmp(G_OBJECT_TYPE_NAME(e), type_name) == 0;
    gst_object_unref(gst_object_ref_sink(e));
    if (ours) {
      if (candidate == alias)
        std::printf("note: %s is not cudaipc's element here; testing through %s\n", name, alias);
      return candidate;
    }
  }
  return nullptr;
}
inline const char* sink_factory() {
  static const char* name = pick_factory("cudaipcsink", "cudaipcringsink", "GstCudaIpcRingSink");
  return name;
}
inline const char* src_factory() {
  static const char* name = pick_factory("cudaipcsrc", "cudaipcringsrc", "GstCudaIpcRingSrc");
  return name;
}

// A top-level pipeline from a gst-launch description; set to NULL and freed on destruction.
class Pipeline {
 public:
  explicit Pipeline(const std::string& description) : description_(description) {
    GError* error = nullptr;
    GstElement* p = gst_parse_launch(description.c_str(), &error);
    Ptr<GError> owned(error);
    if (p && !GST_IS_PIPELINE(p)) {
      // A single element: wrap it so every test talks to a pipeline.
      GstElement* bin = gst_pipeline_new(nullptr);
      gst_bin_add(GST_BIN(bin), p);
      p = bin;
    }
    pipeline_.reset(p);
    if (owned) ADD_FAILURE() << "gst_parse_launch(" << description << "): " << owned->message;
    if (pipeline_) bus_.reset(gst_element_get_bus(pipeline_.get()));
  }
  ~Pipeline() { stop(); }
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  bool ok() const { return pipeline_ != nullptr; }
  GstElement* get() const { return pipeline_.get(); }
  const std::string& description() const { return description_; }

  // A named element; the pipeline keeps it alive.
  GstElement* element(const char* name) const {
    if (!pipeline_) return nullptr;
    GstElement* e = gst_bin_get_by_name(GST_BIN(pipeline_.get()), name);
    if (e) gst_object_unref(e);
    return e;
  }

  GstStateChangeReturn set_state(GstState state) {
    return pipeline_ ? gst_element_set_state(pipeline_.get(), state) : GST_STATE_CHANGE_FAILURE;
  }
  // Waits (bounded) for a state change to complete; the current state, or VOID_PENDING.
  GstState wait_state(Ms timeout) {
    GstState current = GST_STATE_VOID_PENDING, pending;
    if (!pipeline_) return current;
    if (gst_element_get_state(pipeline_.get(), &current, &pending, timeout.count() * GST_MSECOND) ==
        GST_STATE_CHANGE_FAILURE)
      return GST_STATE_VOID_PENDING;
    return current;
  }
  void stop() {
    if (pipeline_) gst_element_set_state(pipeline_.get(), GST_STATE_NULL);
  }

  // The next message of one of `types`, within `timeout`; null when none came.
  Ptr<GstMessage> pop(GstMessageType types, Ms timeout) {
    if (!bus_) return nullptr;
    return Ptr<GstMessage>(
        gst_bus_timed_pop_filtered(bus_.get(), timeout.count() * GST_MSECOND, types));
  }

  // Every ERROR message on the bus now, as "source: message (debug)" lines; empty when none.
  std::string errors() {
    std::string all;
    while (Ptr<GstMessage> m = pop(GST_MESSAGE_ERROR, Ms(0))) all += describe_error(m.get()) + "\n";
    return all;
  }

  static std::string describe_error(GstMessage* m) {
    GError* err = nullptr;
    gchar* debug = nullptr;
    gst_message_parse_error(m, &err, &debug);
    Ptr<GError> e(err);
    Ptr<gchar> d(debug);
    std::string s = GST_MESSAGE_SRC_NAME(m) ? GST_MESSAGE_SRC_NAME(m) : "?";
    s += ": ";
    s += e ? e->message : "?";
    if (d) s += std::string(" (") + d.get() + ")";
    return s;
  }

 private:
  std::string description_;
  Ptr<GstElement> pipeline_;
  Ptr<GstBus> bus_;
};

// One buffer as an appsink received it, copied out so the slot's lease ends at once.
struct Received {
  CapsRef caps;
  std::vector<std::uint8_t> bytes;  // the whole buffer
  guint flags = 0;                  // GstBufferFlags
  guint64 offset = 0;               // GST_BUFFER_OFFSET: the producer's seq
  bool has_video_meta = false;
  GstVideoFormat video_format = GST_VIDEO_FORMAT_UNKNOWN;
  guint width = 0, height = 0, n_planes = 0;
  gsize plane_offset[GST_VIDEO_MAX_PLANES] = {};
  gint plane_stride[GST_VIDEO_MAX_PLANES] = {};
  bool has_tensor_meta = false;
  GstCudaIpcTensorMeta tensor{};
  std::int64_t data_offset = -1;  // the tensor meta's data minus the mapped buffer start

  guint64 seq() const { return has_tensor_meta ? tensor.seq : 0; }
  bool discont() const { return (flags & GST_BUFFER_FLAG_DISCONT) != 0; }
};

// What crossed the appsink's pad, in order: events and buffers (by seq).
struct Step {
  enum Kind { caps, tag, eos, buffer, other } kind;
  std::string text;   // caps text, tag list text, or the event name
  std::string title;  // tag events: GST_TAG_TITLE
  guint64 seq = 0;
};

// Records an appsink's samples (new-sample callback) and the pad's events and buffers (probe).
// Outlives the pipeline it is attached to (Consumer orders its members for that).
class Collector {
 public:
  void attach(GstElement* appsink) {
    GstAppSinkCallbacks callbacks{};
    callbacks.new_sample = &Collector::on_sample;
    gst_app_sink_set_callbacks(GST_APP_SINK(appsink), &callbacks, this, nullptr);
    Ptr<GstPad> pad(gst_element_get_static_pad(appsink, "sink"));
    gst_pad_add_probe(pad.get(),
                      static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM |
                                                   GST_PAD_PROBE_TYPE_BUFFER),
                      &Collector::on_probe, this, nullptr);
  }

  std::size_t count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return frames_.size();
  }
  std::vector<Received> frames() const {
    std::lock_guard<std::mutex> lock(mu_);
    return frames_;
  }
  std::vector<Step> steps() const {
    std::lock_guard<std::mutex> lock(mu_);
    return steps_;
  }
  bool eos() const {
    std::lock_guard<std::mutex> lock(mu_);
    return eos_;
  }
  bool wait_frames(std::size_t n, Ms timeout) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return frames_.size() >= n; });
  }
  bool wait_eos(Ms timeout) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return eos_; });
  }
  template <typename Pred>
  bool wait_until(Pred pred, Ms timeout) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(frames_); });
  }

 private:
  static GstFlowReturn on_sample(GstAppSink* sink, gpointer data) {
    auto* self = static_cast<Collector*>(data);
    Ptr<GstSample> sample(gst_app_sink_pull_sample(sink));
    if (!sample) return GST_FLOW_ERROR;
    Received r = copy_out(sample.get());
    {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->frames_.push_back(std::move(r));
    }
    self->cv_.notify_all();
    return GST_FLOW_OK;
  }

 public:
  // The sample's caps, bytes, flags and metas, copied out (its buffer may be freed after).
  static Received copy_out(GstSample* sample) {
    Received r;
    r.caps = share_caps(gst_sample_get_caps(sample));
    GstBuffer* buf = gst_sample_get_buffer(sample);
    r.flags = GST_BUFFER_FLAGS(buf);
    r.offset = GST_BUFFER_OFFSET(buf);
    GstMapInfo map;
    if (gst_buffer_map(buf, &map, GST_MAP_READ)) {
      r.bytes.assign(map.data, map.data + map.size);
      if (GstCudaIpcTensorMeta* m = gst_buffer_get_cuda_ipc_tensor_meta(buf)) {
        r.has_tensor_meta = true;
        r.tensor = *m;
        r.data_offset = static_cast<std::int64_t>(m->data) -
                        static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(map.data));
      }
      gst_buffer_unmap(buf, &map);
    }
    if (GstVideoMeta* v = gst_buffer_get_video_meta(buf)) {
      r.has_video_meta = true;
      r.video_format = v->format;
      r.width = v->width;
      r.height = v->height;
      r.n_planes = v->n_planes;
      for (guint p = 0; p < GST_VIDEO_MAX_PLANES; ++p) {
        r.plane_offset[p] = v->offset[p];
        r.plane_stride[p] = v->stride[p];
      }
    }
    return r;
  }

 private:
  static GstPadProbeReturn on_probe(GstPad*, GstPadProbeInfo* info, gpointer data) {
    auto* self = static_cast<Collector*>(data);
    Step step{Step::other, {}, {}, 0};
    if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
      GstBuffer* buf = GST_PAD_PROBE_INFO_BUFFER(info);
      step.kind = Step::buffer;
      if (GstCudaIpcTensorMeta* m = gst_buffer_get_cuda_ipc_tensor_meta(buf)) step.seq = m->seq;
    } else {
      GstEvent* ev = GST_PAD_PROBE_INFO_EVENT(info);
      step.text = GST_EVENT_TYPE_NAME(ev);
      switch (GST_EVENT_TYPE(ev)) {
        case GST_EVENT_CAPS: {
          GstCaps* caps = nullptr;
          gst_event_parse_caps(ev, &caps);
          step.kind = Step::caps;
          step.text = text_of(caps);
          break;
        }
        case GST_EVENT_TAG: {
          GstTagList* tags = nullptr;
          gst_event_parse_tag(ev, &tags);
          step.kind = Step::tag;
          Ptr<gchar> t(gst_tag_list_to_string(tags));
          step.text = t.get();
          gchar* title = nullptr;
          if (gst_tag_list_get_string(tags, GST_TAG_TITLE, &title)) step.title = title;
          g_free(title);
          break;
        }
        case GST_EVENT_EOS:
          step.kind = Step::eos;
          break;
        default:
          break;
      }
    }
    {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->steps_.push_back(step);
      if (step.kind == Step::eos) self->eos_ = true;
    }
    self->cv_.notify_all();
    return GST_PAD_PROBE_OK;
  }

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<Received> frames_;
  std::vector<Step> steps_;
  bool eos_ = false;
};

// cudaipcsrc [props] ! [between !] appsink name=out, recording what the appsink receives.
class Consumer {
 public:
  Consumer(const std::string& socket, const std::string& src_props = "mode=every-frame",
           const std::string& between = "")
      : pipeline_(std::string(src_factory()) + " name=src " + src_props + " ! " +
                  (between.empty() ? "" : between + " ! ") + "appsink name=out sync=false") {
    if (GstElement* s = src()) g_object_set(s, "socket-path", socket.c_str(), nullptr);
    if (GstElement* out = pipeline_.element("out")) collector_.attach(out);
  }
  bool start() { return pipeline_.set_state(GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE; }
  GstElement* src() const { return pipeline_.element("src"); }
  Pipeline& pipeline() { return pipeline_; }
  Collector& collector() { return collector_; }
  Ptr<GstStructure> stats() const {
    GstStructure* s = nullptr;
    g_object_get(src(), "stats", &s, nullptr);
    return Ptr<GstStructure>(s);
  }

 private:
  Collector collector_;  // declared first: outlives the pipeline's callbacks
  Pipeline pipeline_;
};

// A consumer whose app pulls samples itself, so the test decides when a buffer is freed.
class PullingConsumer {
 public:
  PullingConsumer(const std::string& socket, const std::string& src_props)
      : pipeline_(std::string(src_factory()) + " name=src mode=every-frame " + src_props +
                  " ! appsink name=out sync=false max-buffers=1") {
    g_object_set(pipeline_.element("src"), "socket-path", socket.c_str(), nullptr);
  }
  bool start() { return pipeline_.set_state(GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE; }
  Ptr<GstSample> pull() {
    return Ptr<GstSample>(
        gst_app_sink_try_pull_sample(GST_APP_SINK(pipeline_.element("out")), 5 * GST_SECOND));
  }
  Pipeline& pipeline() { return pipeline_; }
  Ptr<GstStructure> stats() const {
    GstStructure* s = nullptr;
    g_object_get(pipeline_.element("src"), "stats", &s, nullptr);
    return Ptr<GstStructure>(s);
  }

 private:
  Pipeline pipeline_;
};

inline std::string sink_element(const std::string& props) {
  return std::string(sink_factory()) + " name=sink ipc-mode=host sync=false " + props;
}

// appsrc name=in ! [between !] cudaipcsink ipc-mode=host [props].
class Producer {
 public:
  Producer(const std::string& socket, const std::string& sink_props = "",
           const std::string& between = "", const std::string& appsrc_props = "")
      : pipeline_("appsrc name=in format=time " + appsrc_props + " ! " +
                  (between.empty() ? "" : between + " ! ") + sink_element(sink_props)) {
    if (GstElement* s = sink()) g_object_set(s, "socket-path", socket.c_str(), nullptr);
  }
  bool start() { return pipeline_.set_state(GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE; }
  GstElement* appsrc() const { return pipeline_.element("in"); }
  GstElement* sink() const { return pipeline_.element("sink"); }
  Pipeline& pipeline() { return pipeline_; }

  void set_caps(GstCaps* caps) { g_object_set(appsrc(), "caps", caps, nullptr); }
  // Takes `buf`; timestamps it as frame `index` of a 30 fps stream.
  GstFlowReturn push(GstBuffer* buf, std::uint64_t index) {
    stamp(buf, index);
    return gst_app_src_push_buffer(GST_APP_SRC(appsrc()), buf);
  }
  // Takes `buf`; new caps reach the sink before it.
  GstFlowReturn push(GstCaps* caps, GstBuffer* buf, std::uint64_t index) {
    stamp(buf, index);
    Ptr<GstSample> sample(gst_sample_new(buf, caps, nullptr, nullptr));
    gst_buffer_unref(buf);
    return gst_app_src_push_sample(GST_APP_SRC(appsrc()), sample.get());
  }
  GstFlowReturn end_of_stream() { return gst_app_src_end_of_stream(GST_APP_SRC(appsrc())); }

  Ptr<GstStructure> stats() const {
    GstStructure* s = nullptr;
    g_object_get(sink(), "stats", &s, nullptr);
    return Ptr<GstStructure>(s);
  }
  guint consumers() const {
    guint n = 0;
    Ptr<GstStructure> s = stats();
    if (s) gst_structure_get_uint(s.get(), "consumers", &n);
    return n;
  }
  guint64 published() const {
    guint64 n = 0;
    Ptr<GstStructure> s = stats();
    if (s) gst_structure_get_uint64(s.get(), "published", &n);
    return n;
  }
  bool wait_consumers(guint n, Ms timeout) const {
    return poll_until([&] { return consumers() >= n; }, timeout);
  }

  static constexpr GstClockTime kFrame = GST_SECOND / 30;

 private:
  static void stamp(GstBuffer* buf, std::uint64_t index) {
    GST_BUFFER_PTS(buf) = index * kFrame;
    GST_BUFFER_DURATION(buf) = kFrame;
  }
  Pipeline pipeline_;
};

// ---- Frames: layouts, contents, expected tensor descriptions ----

struct ExpectedTensor {
  GstCudaIpcDType dtype = GST_CUDA_IPC_DTYPE_INVALID;
  std::vector<gint64> shape;     // outermost first
  std::vector<gint64> strides;   // bytes
  guint64 size = 0;              // bytes from element 0
  std::int64_t data_offset = 0;  // element 0 from the buffer's start
};

// Empty when the meta says what `want` says (and the frame number), else what differs.
inline std::string check_tensor_meta(const Received& r, const ExpectedTensor& want, guint64 seq) {
  if (!r.has_tensor_meta) return "no GstCudaIpcTensorMeta";
  const GstCudaIpcTensorMeta& m = r.tensor;
  std::string why;
  auto expect = [&why](bool ok, const std::string& what) {
    if (!ok) why += what + "; ";
  };
  expect(m.version == GST_CUDA_IPC_TENSOR_META_VERSION, "version " + std::to_string(m.version));
  expect(m.dtype == want.dtype,
         "dtype " + std::to_string(m.dtype) + " want " + std::to_string(want.dtype));
  expect(m.rank == want.shape.size(),
         "rank " + std::to_string(m.rank) + " want " + std::to_string(want.shape.size()));
  for (guint i = 0; i < want.shape.size() && i < m.rank; ++i) {
    expect(m.shape[i] == want.shape[i], "shape[" + std::to_string(i) + "] " +
                                            std::to_string(m.shape[i]) + " want " +
                                            std::to_string(want.shape[i]));
    expect(m.strides[i] == want.strides[i], "strides[" + std::to_string(i) + "] " +
                                                std::to_string(m.strides[i]) + " want " +
                                                std::to_string(want.strides[i]));
  }
  expect(m.size == want.size,
         "size " + std::to_string(m.size) + " want " + std::to_string(want.size));
  expect(m.device_id == -1, "device_id " + std::to_string(m.device_id) + " want -1");
  expect(m.seq == seq, "seq " + std::to_string(m.seq) + " want " + std::to_string(seq));
  expect(r.data_offset == want.data_offset, "data at buffer byte " + std::to_string(r.data_offset) +
                                                " want " + std::to_string(want.data_offset));
  return why;
}

// A video frame's memory layout: plane offsets and strides, maybe not GStreamer's defaults.
struct VideoLayout {
  GstVideoInfo info{};
  gsize offset[GST_VIDEO_MAX_PLANES] = {};
  gint stride[GST_VIDEO_MAX_PLANES] = {};
  gsize size = 0;         // bytes a buffer holds
  bool with_meta = true;  // describe the layout with a GstVideoMeta (else it is the default)

  guint n_planes() const { return GST_VIDEO_INFO_N_PLANES(&info); }
  GstVideoFormat format() const { return GST_VIDEO_INFO_FORMAT(&info); }
  gint component(guint plane) const {
    gint comp[GST_VIDEO_MAX_COMPONENTS];
    gst_video_format_info_component(info.finfo, plane, comp);
    return comp[0];
  }
  gsize rows(guint plane) const {
    return static_cast<gsize>(GST_VIDEO_INFO_COMP_HEIGHT(&info, component(plane)));
  }
  gsize row_bytes(guint plane) const {
    const gint c = component(plane);
    return static_cast<gsize>(GST_VIDEO_INFO_COMP_WIDTH(&info, c)) *
           static_cast<gsize>(GST_VIDEO_INFO_COMP_PSTRIDE(&info, c));
  }
  gsize plane_end(guint plane) const {
    return offset[plane] + static_cast<gsize>(stride[plane]) * (rows(plane) - 1) + row_bytes(plane);
  }
};

inline GstVideoInfo video_info(GstVideoFormat format, gint width, gint height) {
  GstVideoInfo info;
  gst_video_info_set_format(&info, format, static_cast<guint>(width), static_cast<guint>(height));
  GST_VIDEO_INFO_FPS_N(&info) = 30;
  GST_VIDEO_INFO_FPS_D(&info) = 1;
  return info;
}

// GStreamer's default layout, sent without a GstVideoMeta.
inline VideoLayout default_layout(GstVideoFormat format, gint width, gint height) {
  VideoLayout l;
  l.info = video_info(format, width, height);
  for (guint p = 0; p < GST_VIDEO_MAX_PLANES; ++p) {
    l.offset[p] = GST_VIDEO_INFO_PLANE_OFFSET(&l.info, p);
    l.stride[p] = GST_VIDEO_INFO_PLANE_STRIDE(&l.info, p);
  }
  l.size = GST_VIDEO_INFO_SIZE(&l.info);
  l.with_meta = false;
  return l;
}

// A non-default layout: plane 0 starts `lead` bytes in, every row has `row_pad` bytes of padding
// and planes are `gap` bytes apart (growing by 16 per plane unless `evenly_spaced`), then a tail.
inline VideoLayout padded_layout(GstVideoFormat format, gint width, gint height, gsize lead,
                                 gint row_pad, gsize gap, bool evenly_spaced) {
  VideoLayout l;
  l.info = video_info(format, width, height);
  gsize at = lead;
  for (guint p = 0; p < l.n_planes(); ++p) {
    l.stride[p] = GST_VIDEO_INFO_PLANE_STRIDE(&l.info, p) + row_pad;
    l.offset[p] = at;
    at += static_cast<gsize>(l.stride[p]) * l.rows(p) + gap + (evenly_spaced ? 0 : 16 * p);
  }
  l.size = at + 24;
  l.with_meta = true;
  return l;
}

inline Ptr<GstCaps> caps_of(const VideoLayout& l) {
  return Ptr<GstCaps>(gst_video_info_to_caps(&l.info));
}

// A buffer of the layout's size, every byte from the pattern of `seed`, with a GstVideoMeta
// describing the layout when it is not the default.
inline GstBuffer* video_buffer(const VideoLayout& l, std::uint64_t seed) {
  GstBuffer* buf = gst_buffer_new_allocate(nullptr, l.size, nullptr);
  GstMapInfo map;
  gst_buffer_map(buf, &map, GST_MAP_WRITE);
  fill_pattern(map.data, map.size, seed);
  gst_buffer_unmap(buf, &map);
  if (l.with_meta)
    gst_buffer_add_video_meta_full(buf, GST_VIDEO_FRAME_FLAG_NONE, l.format(),
                                   GST_VIDEO_INFO_WIDTH(&l.info), GST_VIDEO_INFO_HEIGHT(&l.info),
                                   l.n_planes(), const_cast<gsize*>(l.offset),
                                   const_cast<gint*>(l.stride));
  return buf;
}

// How cudaipc describes a video frame as a tensor (docs/caps.md), worked out from the layout.
inline ExpectedTensor video_tensor_of(const VideoLayout& l) {
  ExpectedTensor t;
  const gint64 h = GST_VIDEO_INFO_HEIGHT(&l.info), w = GST_VIDEO_INFO_WIDTH(&l.info);
  const gint64 s0 = l.stride[0];
  t.dtype = GST_CUDA_IPC_DTYPE_UINT8;
  switch (l.format()) {
    case GST_VIDEO_FORMAT_RGBA:
    case GST_VIDEO_FORMAT_BGRA:
    case GST_VIDEO_FORMAT_RGBx:
    case GST_VIDEO_FORMAT_BGRx:
      t.shape = {h, w, 4};
      t.strides = {s0, 4, 1};
      break;
    case GST_VIDEO_FORMAT_RGB:
    case GST_VIDEO_FORMAT_BGR:
      t.shape = {h, w, 3};
      t.strides = {s0, 3, 1};
      break;
    case GST_VIDEO_FORMAT_GRAY16_LE:
    case GST_VIDEO_FORMAT_P010_10LE:
      t.dtype = GST_CUDA_IPC_DTYPE_UINT16;
      t.shape = {h, w};
      t.strides = {s0, 2};
      break;
    case GST_VIDEO_FORMAT_RGBP:
    case GST_VIDEO_FORMAT_BGRP: {
      const gint64 step = static_cast<gint64>(l.offset[1] - l.offset[0]);
      if (static_cast<gint64>(l.offset[2] - l.offset[1]) == step && l.stride[1] == s0 &&
          l.stride[2] == s0) {
        t.shape = {3, h, w};
        t.strides = {step, s0, 1};
      } else {
        t.shape = {h, w};
        t.strides = {s0, 1};
      }
      break;
    }
    default:  // GRAY8, and the luma plane of NV12 and I420
      t.shape = {h, w};
      t.strides = {s0, 1};
      break;
  }
  gsize end = 0;
  for (guint p = 0; p < l.n_planes(); ++p) end = std::max(end, l.plane_end(p));
  t.size = end - l.offset[0];
  t.data_offset = static_cast<std::int64_t>(l.offset[0]);
  return t;
}

// Empty when every visible row of every plane holds the bytes of the frame sent with `seed` (the
// padding is not compared) and the GstVideoMeta describes the sent layout; else what differs.
inline std::string check_video_frame(const Received& r, const VideoLayout& l, std::uint64_t seed) {
  if (!r.has_video_meta) return "no GstVideoMeta";
  if (r.video_format != l.format() ||
      r.width != static_cast<guint>(GST_VIDEO_INFO_WIDTH(&l.info)) ||
      r.height != static_cast<guint>(GST_VIDEO_INFO_HEIGHT(&l.info)) || r.n_planes != l.n_planes())
    return std::string("video meta says ") + gst_video_format_to_string(r.video_format) + " " +
           std::to_string(r.width) + "x" + std::to_string(r.height) + ", " +
           std::to_string(r.n_planes) + " planes";
  for (guint p = 0; p < l.n_planes(); ++p)
    if (r.plane_offset[p] != l.offset[p] || r.plane_stride[p] != l.stride[p])
      return "plane " + std::to_string(p) + " at offset " + std::to_string(r.plane_offset[p]) +
             " stride " + std::to_string(r.plane_stride[p]) + ", sent offset " +
             std::to_string(l.offset[p]) + " stride " + std::to_string(l.stride[p]);
  std::vector<std::uint8_t> sent(l.size);
  fill_pattern(sent.data(), sent.size(), seed);
  for (guint p = 0; p < l.n_planes(); ++p) {
    if (r.bytes.size() < l.plane_end(p))
      return "buffer of " + std::to_string(r.bytes.size()) + " bytes ends before plane " +
             std::to_string(p) + " (" + std::to_string(l.plane_end(p)) + ")";
    for (gsize row = 0; row < l.rows(p); ++row) {
      const gsize at = l.offset[p] + row * static_cast<gsize>(l.stride[p]);
      if (std::memcmp(r.bytes.data() + at, sent.data() + at, l.row_bytes(p)) != 0)
        return "plane " + std::to_string(p) + " row " + std::to_string(row) +
               " differs from frame " + std::to_string(seed);
    }
  }
  return {};
}

// ---- Tensors ----

struct DTypeInfo {
  const char* name;  // NNStreamer's spelling in `types`
  GstCudaIpcDType dtype;
  gint64 size;
};

inline const std::vector<DTypeInfo>& all_dtypes() {
  static const std::vector<DTypeInfo> v = {
      {"int8", GST_CUDA_IPC_DTYPE_INT8, 1},       {"int16", GST_CUDA_IPC_DTYPE_INT16, 2},
      {"int32", GST_CUDA_IPC_DTYPE_INT32, 4},     {"int64", GST_CUDA_IPC_DTYPE_INT64, 8},
      {"uint8", GST_CUDA_IPC_DTYPE_UINT8, 1},     {"uint16", GST_CUDA_IPC_DTYPE_UINT16, 2},
      {"uint32", GST_CUDA_IPC_DTYPE_UINT32, 4},   {"uint64", GST_CUDA_IPC_DTYPE_UINT64, 8},
      {"float16", GST_CUDA_IPC_DTYPE_FLOAT16, 2}, {"float32", GST_CUDA_IPC_DTYPE_FLOAT32, 4},
      {"float64", GST_CUDA_IPC_DTYPE_FLOAT64, 8}, {"bfloat16", GST_CUDA_IPC_DTYPE_BFLOAT16, 2},
      {"bool", GST_CUDA_IPC_DTYPE_BOOL, 1},
  };
  return v;
}

struct TensorFrame {
  DTypeInfo type;
  std::vector<gint64> shape;  // outermost first

  // NNStreamer order: innermost first.
  std::string dimensions() const {
    std::string s;
    for (auto it = shape.rbegin(); it != shape.rend(); ++it)
      s += (s.empty() ? "" : ":") + std::to_string(*it);
    return s;
  }
  ExpectedTensor expected() const {
    ExpectedTensor t;
    t.dtype = type.dtype;
    t.shape = shape;
    t.strides.assign(shape.size(), 0);
    gint64 stride = type.size;
    for (std::size_t i = shape.size(); i-- > 0;) {
      t.strides[i] = stride;
      stride *= shape[i];
    }
    t.size = static_cast<guint64>(stride);
    t.data_offset = 0;
    return t;
  }
  gsize bytes() const { return expected().size; }
  Ptr<GstCaps> caps() const {
    return Ptr<GstCaps>(gst_caps_new_simple(
        "other/tensors", "format", G_TYPE_STRING, "static", "num_tensors", G_TYPE_INT, 1, "types",
        G_TYPE_STRING, type.name, "dimensions", G_TYPE_STRING, dimensions().c_str(), "framerate",
        GST_TYPE_FRACTION, 30, 1, nullptr));
  }
  GstBuffer* buffer(std::uint64_t seed) const {
    GstBuffer* buf = gst_buffer_new_allocate(nullptr, bytes(), nullptr);
    GstMapInfo map;
    gst_buffer_map(buf, &map, GST_MAP_WRITE);
    fill_pattern(map.data, map.size, seed);
    gst_buffer_unmap(buf, &map);
    return buf;
  }
  // Empty when the received bytes from the tensor's start are those sent with `seed`.
  std::string check(const Received& r, std::uint64_t seed) const {
    const gsize n = bytes();
    const std::int64_t at = r.data_offset < 0 ? 0 : r.data_offset;
    if (r.bytes.size() < static_cast<gsize>(at) + n)
      return "buffer of " + std::to_string(r.bytes.size()) + " bytes, tensor needs " +
             std::to_string(n) + " from byte " + std::to_string(at);
    const std::size_t bad = check_pattern(r.bytes.data() + at, n, seed);
    if (bad != n)
      return "byte " + std::to_string(bad) + " differs from frame " + std::to_string(seed);
    return {};
  }
};

inline bool caps_equal(const GstCaps* a, const GstCaps* b) {
  return a && b && gst_caps_is_equal(a, b);
}
inline bool system_memory(const GstCaps* caps) {
  const GstCapsFeatures* f = caps ? gst_caps_get_features(caps, 0) : nullptr;
  return !f || gst_caps_features_is_equal(f, GST_CAPS_FEATURES_MEMORY_SYSTEM_MEMORY);
}

// Base fixture: GStreamer initialized, the plugin present, a private directory for sockets, and
// no GLib critical or warning logged by the test.
class ElementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    init_gst();
    complaints_ = glib_complaints().load();
    ASSERT_NE(sink_factory(), nullptr) << "cudaipc's sink did not load (GST_PLUGIN_PATH_1_0)";
    ASSERT_NE(src_factory(), nullptr) << "cudaipc's src did not load (GST_PLUGIN_PATH_1_0)";
    for (const char* e : {"appsrc", "appsink", "capsfilter"})
      if (!element_exists(e)) GTEST_SKIP() << "element " << e << " is not installed";
  }
  void TearDown() override {
    EXPECT_EQ(glib_complaints().load(), complaints_)
        << "GLib criticals or warnings were logged during the test (see above)";
  }
  std::string socket() const { return dir_.file("s"); }

  TempDir dir_;
  int complaints_ = 0;
};

}  // namespace cudaipc::testing::gst
