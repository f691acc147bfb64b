// The child processes: producer, consumer and the one-process baseline. Each builds its pipeline
// with gst_parse_launch, measures in pad probes and reports through files in the run's
// directory. The two processes meet through files too: the producer prerolls (its sink has
// created the socket), the consumer connects and says "ready", then the producer plays. Every
// wait ends at the run's deadline.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

#include "detector_metas.hpp"
#include "gst_bench.hpp"
#include "pipeline.hpp"
// The plugin's public, header-only tensor meta, read as an application reads it. By path: the
// benchmark's build target does not have gst/include on its include path.
#include "gst/cudaipc/gstcudaipcmeta.h"

namespace gstbench {
namespace {

constexpr const char* kDoneMessage = "gst-bench-done";
// After the producer has finished, a consumer that has had no frame for this long has had
// every frame it will get (nvcodec's source, for one, has no every-frame mode).
constexpr std::uint64_t kIdleAfterProducerNs = 1'000'000'000;

// Frames nothing writes a stamp into: the feed's (shared buffers) and a decoder's (its own
// surfaces). Their index is the tensor meta's seq - 1.
bool unstamped(const RunSpec& s) {
  return s.feed || s.upstream == "nvdec";
}

struct MiniObjectDeleter {
  void operator()(gpointer p) const { gst_mini_object_unref(GST_MINI_OBJECT_CAST(p)); }
};
template <typename T>
using MiniRef = std::unique_ptr<T, MiniObjectDeleter>;

// The feed's frames, made once per process: what the producer pushes and the consumer compares.
struct Frames {
  std::vector<MiniRef<GstBuffer>> bufs;
  MiniRef<GstCaps> caps;
  MiniRef<GstContext> cuda;  // the frames' GstCudaContext; null for system memory
};

Frames make_frames(const RunSpec& s) {
  const std::string desc = feed_frames_launch(s);
  Frames f;
  Pipeline pipe = launch(desc);
  Ref<GstElement> out(gst_bin_get_by_name(GST_BIN(pipe.get()), "out"));
  if (gst_element_set_state(pipe.get(), GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE)
    throw std::runtime_error(desc + ": could not play");
  while (f.bufs.size() < kFeedFrames) {
    GstSample* sample = nullptr;
    g_signal_emit_by_name(out.get(), "try-pull-sample", 10 * GST_SECOND, &sample);
    if (!sample)
      throw std::runtime_error(desc + ": " + std::to_string(f.bufs.size()) + " of " +
                               std::to_string(kFeedFrames) + " frames");
    if (!f.caps) f.caps.reset(gst_caps_ref(gst_sample_get_caps(sample)));
    // Our own copies: the pool of the pipeline that made them goes away with it.
    GstBuffer* copy = gst_buffer_copy_deep(gst_sample_get_buffer(sample));
    gst_sample_unref(sample);
    if (!copy) throw std::runtime_error(desc + ": could not copy a frame");
    if (s.metas) benchmetas::add_detector_output(copy, 100, 10240, static_cast<int>(f.bufs.size()));
    f.bufs.emplace_back(copy);
  }
  f.cuda.reset(cuda_context_of(f.bufs[0].get()));
  if (s.cuda && !f.cuda) throw std::runtime_error(desc + ": the frames are not in CUDA memory");
  return f;
}

// Pushes the frames round-robin into the appsrc "feed", as fast as it takes them, from its own
// thread; then EOS. Each push is a new GstBuffer sharing the frame's memory (the timestamps
// differ; a buffer still in flight cannot be changed). Declare it before the pipeline: the
// pipeline's teardown unblocks a push, and only then can the thread be joined.
class Feeder {
 public:
  Feeder(GstElement* pipe, const Frames& frames) : frames_(&frames) {
    if (frames.cuda) gst_element_set_context(pipe, frames.cuda.get());
    src_.reset(gst_bin_get_by_name(GST_BIN(pipe), "feed"));
    if (!src_) throw std::runtime_error("no appsrc named feed");
    g_object_set(src_.get(), "caps", frames.caps.get(), nullptr);
  }
  Feeder(const Feeder&) = delete;
  Feeder& operator=(const Feeder&) = delete;
  ~Feeder() {
    if (thread_.joinable()) thread_.join();
  }
  void start(std::uint64_t count) {
    thread_ = std::thread([this, count] { push(count); });
  }

 private:
  void push(std::uint64_t count) {
    const auto& bufs = frames_->bufs;
    for (std::uint64_t i = 0; i < count; ++i) {
      GstBuffer* b = gst_buffer_copy(bufs[i % bufs.size()].get());
      GST_BUFFER_PTS(b) = i * GST_MSECOND;
      GST_BUFFER_DURATION(b) = GST_MSECOND;
      GstFlowReturn ret = GST_FLOW_OK;
      g_signal_emit_by_name(src_.get(), "push-buffer", b, &ret);
      gst_buffer_unref(b);
      if (ret != GST_FLOW_OK) return;  // flushing: the pipeline is going down
    }
    GstFlowReturn ret = GST_FLOW_OK;
    g_signal_emit_by_name(src_.get(), "end-of-stream", &ret);
  }

  const Frames* frames_;
  Ref<GstElement> src_;
  std::thread thread_;
};

enum class BusEnd { eos, done, error, deadline, idle };

// Waits up to `timeout` for EOS, our "done" message or an error; nothing when none came.
std::optional<BusEnd> pop_bus(GstBus* bus, GstClockTime timeout, std::string* error) {
  for (;;) {
    GstMessage* msg = gst_bus_timed_pop_filtered(
        bus, timeout,
        static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR | GST_MESSAGE_APPLICATION));
    if (!msg) return std::nullopt;
    BusEnd end = BusEnd::eos;
    bool stop = true;
    if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
      *error = describe_error(msg);
      end = BusEnd::error;
    } else if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_APPLICATION) {
      stop = gst_structure_has_name(gst_message_get_structure(msg), kDoneMessage);
      end = BusEnd::done;
    }
    gst_message_unref(msg);
    if (stop) return end;
  }
}

// Pops the bus until EOS, our "done" message, an error, the deadline, or `idle()` says stop.
template <typename Idle>
BusEnd run_bus(GstElement* pipe, std::uint64_t deadline, std::string* error, Idle idle) {
  Ref<GstBus> bus(gst_element_get_bus(pipe));
  for (;;) {
    if (auto end = pop_bus(bus.get(), 20 * GST_MSECOND, error)) return *end;
    if (idle()) return BusEnd::idle;
    if (mono_ns() >= deadline) {
      *error = "timed out";
      return BusEnd::deadline;
    }
  }
}

std::uint64_t deadline_of(const RunSpec& s) {
  return mono_ns() + static_cast<std::uint64_t>(s.timeout_s) * 1'000'000'000u;
}

// Stamps every frame at the probed pad (a sink's sink pad) and measures from frame `warmup`
// (producer) to EOS, or from frame warmup-1 to the last frame (baseline). `probe_cpu` is this
// probe's own CPU time inside that window, which the report takes out of the process's.
struct SenderProbe {
  explicit SenderProbe(const RunSpec& s)
      : spec(&s), fc(FrameCheck::from(s)), stamp(!unstamped(s)) {}
  const RunSpec* spec;
  FrameCheck fc;
  bool stamp;  // the feed's buffers share their memory: they are counted, never written
  bool baseline = false;
  // Live: the probe sits on the live source's pad (system memory, before any upload) and stamps
  // the moment `sink` will render the frame: base time + running time + its latency, which is
  // CLOCK_MONOTONIC with the pipeline's system clock.
  GstElement* pipe = nullptr;
  GstBaseSink* sink = nullptr;
  std::uint32_t next = 0;
  std::uint64_t t0 = 0, t1 = 0, cpu0 = 0, cpu1 = 0, probe_cpu = 0;
  std::uint64_t copies = 0, stamp_failures = 0, bad = 0;
  std::string ref0, ref1, bad_why;
};

GstPadProbeReturn sender_probe(GstPad*, GstPadProbeInfo* info, gpointer data) {
  auto* p = static_cast<SenderProbe*>(data);
  const std::uint64_t total = p->spec->total();
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM) {
    if (GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info)) == GST_EVENT_EOS && !p->baseline) {
      p->t1 = mono_ns();
      p->cpu1 = cpu_rusage_ns();
    }
    return GST_PAD_PROBE_OK;
  }
  const std::uint32_t index = p->next++;
  if (!p->baseline && index == p->spec->warmup) {
    p->t0 = mono_ns();
    p->cpu0 = cpu_rusage_ns();
  }
  const std::uint64_t tc0 = thread_cpu_ns();
  GstBuffer* buf = GST_PAD_PROBE_INFO_BUFFER(info);
  if (p->baseline && index == 0 && p->stamp) {
    // The colour consumers expect, read at the last pixel (the stamp takes the first).
    if (!pixel_groups(buf, p->fc, &p->ref0, &p->ref1)) ++p->bad;
    p->fc.ref[0] = unhex(p->ref0);
    p->fc.ref[1] = unhex(p->ref1);
    std::string why;
    if (!check_solid(buf, p->fc, &why)) {
      ++p->bad;
      p->bad_why = why;
    }
  }
  bool copied = false;
  std::uint64_t when = mono_ns();
  if (p->sink && GST_BUFFER_PTS_IS_VALID(buf))
    when = gst_element_get_base_time(p->pipe) + GST_BUFFER_PTS(buf) +
           gst_base_sink_get_latency(p->sink);
  if (p->stamp && !write_stamp(&buf, p->fc, Stamp{when, index, kStampMagic}, &copied))
    ++p->stamp_failures;
  if (copied) ++p->copies;
  GST_PAD_PROBE_INFO_DATA(info) = buf;
  if (index >= p->spec->warmup) p->probe_cpu += thread_cpu_ns() - tc0;
  if (p->baseline && index + 1 == p->spec->warmup) {
    p->t0 = mono_ns();
    p->cpu0 = cpu_rusage_ns();
  } else if (p->baseline && index + 1 == total) {
    p->t1 = mono_ns();
    p->cpu1 = cpu_rusage_ns();
  }
  return GST_PAD_PROBE_OK;
}

// Reads the stamp (and our sink's chain-time meta) of every frame at the source's src pad and
// checks the content. The window runs from the end of frame warmup-1's probe to the end of the
// last frame's; `probe_cpu` is the probe's own CPU time inside it.
struct ReceiverProbe {
  explicit ReceiverProbe(const RunSpec& s) : spec(&s), fc(FrameCheck::from(s)) {}
  const RunSpec* spec;
  FrameCheck fc;
  GstElement* src = nullptr;
  GstCaps* chain_caps = nullptr;
  GstCaps* publish_caps = nullptr;
  GstCaps* acquire_caps = nullptr;
  std::uint64_t pushed = 0;  // live: when the source pushed the frame now arriving
  std::vector<std::uint64_t> lat, meta;
  // Live, by frame index: arrival at the appsink, and our source's times (0 where absent).
  std::vector<std::uint64_t> arrive, chain, publish, acquire, pushed_at;
  std::optional<Frames> refs;  // feed runs: the frames the producer pushes, made here again
  std::uint64_t received = 0, counted = 0, checked = 0, bad = 0, tensors = 0;
  std::int64_t last_index = -1;
  bool started = false, finished = false;
  std::uint64_t t0 = 0, t_last = 0, cpu0 = 0, cpu1 = 0, probe_cpu = 0;
  std::string bad_why;
  std::atomic<std::uint64_t> last_arrival{0};
};

void note_bad(ReceiverProbe* p, const std::string& why) {
  if (p->bad++ == 0) p->bad_why = why;
}

// Reading a CUDA frame's stamp waits for the frame on the GPU and copies 16 bytes back: done on
// every frame it would pace the consumer to the GPU's round trip. CUDA frames are read during
// warm-up, then every 16th arrival and the last; our source's meta times every frame anyway.
constexpr std::uint64_t kCudaStampEvery = 16;

bool reads_stamp(const RunSpec& s, std::uint64_t arrival) {
  if (unstamped(s)) return false;
  if (s.live_fps) return true;  // a frame every 16 ms leaves time for the read
  return !s.cuda || arrival < s.warmup || arrival % kCudaStampEvery == 0 ||
         arrival + 1 == s.total();
}

// Whether frame `index`'s pixels are compared. CUDA frames are downloaded for that, which takes
// milliseconds and would hold back the frames behind: only warm-up frames and the last one.
bool checks_content(const RunSpec& s, std::uint64_t index) {
  return !s.cuda || index < s.warmup || index + 1 == s.total();
}

// A feed frame's index is its tensor meta's seq - 1 (the sink numbers published frames from 1).
bool feed_index(ReceiverProbe* p, GstBuffer* buf, std::uint64_t arrival, std::uint64_t* index) {
  const GstCudaIpcTensorMeta* m = gst_buffer_get_cuda_ipc_tensor_meta(buf);
  if (!m || m->seq == 0 || m->seq > p->spec->total()) {
    note_bad(p, "frame " + std::to_string(arrival) + " has no tensor meta with a valid seq");
    return false;
  }
  *index = m->seq - 1;
  if (static_cast<std::int64_t>(*index) <= p->last_index)
    note_bad(p,
             "frame " + std::to_string(*index) + " after frame " + std::to_string(p->last_index));
  p->last_index = static_cast<std::int64_t>(*index);
  return true;
}

// What an app does with a frame before handing it on: takes the tensor from the meta.
void read_tensor(ReceiverProbe* p, GstBuffer* buf) {
  const GstCudaIpcTensorMeta* m = gst_buffer_get_cuda_ipc_tensor_meta(buf);
  const bool ok = m && m->version == GST_CUDA_IPC_TENSOR_META_VERSION && m->data != 0 &&
                  m->rank > 0 && m->size > 0 && (m->device_id >= 0) == p->spec->cuda;
  if (!ok) {
    note_bad(p, "sample " + std::to_string(p->received) + " has no valid tensor meta");
    return;
  }
  ++p->tensors;
}

std::uint64_t reference_time(GstBuffer* buf, GstCaps* caps) {
  GstReferenceTimestampMeta* m = gst_buffer_get_reference_timestamp_meta(buf, caps);
  return m ? m->timestamp : 0;
}

// Live: when frame `index` arrived, and our elements' times for it; latency and the budget are
// worked out against the producer's send times (run_pair).
void note_live(ReceiverProbe* p, GstBuffer* buf, std::uint64_t index, std::uint64_t now) {
  if (index >= p->arrive.size()) return;
  p->arrive[index] = now;
  p->chain[index] = reference_time(buf, p->chain_caps);
  p->publish[index] = reference_time(buf, p->publish_caps);
  p->acquire[index] = reference_time(buf, p->acquire_caps);
  p->pushed_at[index] = p->pushed;
}

// One frame at the consumer, arrived at `now`: its stamp or seq, meta latency, content, window.
void receive(ReceiverProbe* p, GstBuffer* buf, std::uint64_t now) {
  const std::uint64_t tc0 = thread_cpu_ns();
  const std::uint64_t total = p->spec->total();
  const std::uint64_t arrival = p->received++;
  p->last_arrival.store(now, std::memory_order_relaxed);
  // Without a stamp read the arrival count stands in for the index: every-frame transports
  // deliver frame n as arrival n, and a lossy one only ends up with fewer frames.
  std::uint64_t index = arrival;
  if (unstamped(*p->spec) && !feed_index(p, buf, arrival, &index)) return;
  // --metas: the detector's output crossed with the frame (its custom meta names the frame).
  if (p->spec->metas && !gst_buffer_get_custom_meta(buf, "bench-meta")) {
    note_bad(p, "frame " + std::to_string(arrival) + " arrived without its metas");
    return;
  }
  if (reads_stamp(*p->spec, arrival)) {
    Stamp st;
    if (!read_stamp(buf, p->fc, &st) || st.magic != kStampMagic || st.index >= total) {
      note_bad(p, "frame " + std::to_string(arrival) + " has no valid stamp");
      return;
    }
    if (static_cast<std::int64_t>(st.index) <= p->last_index)
      note_bad(
          p, "frame " + std::to_string(st.index) + " after frame " + std::to_string(p->last_index));
    p->last_index = st.index;
    index = st.index;
    if (p->spec->live_fps)
      note_live(p, buf, index, now);
    else if (index >= p->spec->warmup)
      p->lat.push_back(now - st.mono_ns);
  }
  if (index >= p->spec->warmup)
    if (GstReferenceTimestampMeta* m = gst_buffer_get_reference_timestamp_meta(buf, p->chain_caps))
      p->meta.push_back(now - m->timestamp);
  if (checks_content(*p->spec, index)) {
    ++p->checked;
    std::string why;
    const bool same = p->refs
                          ? check_same(buf, p->refs->bufs[index % kFeedFrames].get(), p->fc, &why)
                          : check_solid(buf, p->fc, &why);
    if (!same) note_bad(p, "frame " + std::to_string(index) + ": " + why);
  }
  const bool last = index + 1 == total;
  if (!p->started && (index + 1 >= p->spec->warmup || last)) {
    p->started = true;
    p->t0 = now;
    p->cpu0 = cpu_rusage_ns();
  } else if (p->started) {
    ++p->counted;
    p->t_last = now;
    p->probe_cpu += thread_cpu_ns() - tc0;
  }
  if (last && !p->finished) {
    p->finished = true;
    p->cpu1 = cpu_rusage_ns();
    gst_element_post_message(
        p->src,
        gst_message_new_application(GST_OBJECT(p->src), gst_structure_new_empty(kDoneMessage)));
  }
}

GstPadProbeReturn receiver_probe(GstPad*, GstPadProbeInfo* info, gpointer data) {
  receive(static_cast<ReceiverProbe*>(data), GST_PAD_PROBE_INFO_BUFFER(info), mono_ns());
  return GST_PAD_PROBE_OK;
}

// Live producer: the moment each frame enters the sink, in order.
GstPadProbeReturn sent_probe(GstPad*, GstPadProbeInfo*, gpointer data) {
  static_cast<std::vector<std::uint64_t>*>(data)->push_back(mono_ns());
  return GST_PAD_PROBE_OK;
}

// Live: the source's push, in the same streaming thread just before the appsink's probe.
GstPadProbeReturn pushed_probe(GstPad*, GstPadProbeInfo*, gpointer data) {
  static_cast<ReceiverProbe*>(data)->pushed = mono_ns();
  return GST_PAD_PROBE_OK;
}

// Live baseline: fakesink's handoff comes from render(), after its clock wait.
void live_handoff(GstElement*, GstBuffer* buf, GstPad*, gpointer data) {
  auto* p = static_cast<ReceiverProbe*>(data);
  const std::uint64_t now = mono_ns();
  Stamp st;
  if (!read_stamp(buf, p->fc, &st) || st.magic != kStampMagic) {
    note_bad(p, "frame " + std::to_string(p->received) + " has no valid stamp");
    return;
  }
  if (st.index >= p->spec->warmup) p->lat.push_back(now > st.mono_ns ? now - st.mono_ns : 0);
  ++p->received;
}

// The appsink consumer: an app's loop pulling samples and reading each one's tensor meta,
// measured where the app gets the frame. Ends as run_bus does.
// `measure` false (live rows): the app only takes each sample and drops it; the appsink's pad
// probe measured it on arrival.
template <typename Idle>
BusEnd pull_samples(GstElement* pipe, ReceiverProbe* p, bool measure, std::uint64_t deadline,
                    std::string* error, Idle idle) {
  Ref<GstBus> bus(gst_element_get_bus(pipe));
  Ref<GstElement> app(gst_bin_get_by_name(GST_BIN(pipe), "app"));
  if (!app) throw std::runtime_error("no appsink named app");
  for (;;) {
    GstSample* sample = nullptr;
    g_signal_emit_by_name(app.get(), "try-pull-sample", 20 * GST_MSECOND, &sample);
    if (sample) {
      const std::uint64_t now = mono_ns();
      GstBuffer* buf = gst_sample_get_buffer(sample);
      if (measure) {
        read_tensor(p, buf);
        receive(p, buf, now);
      }
      gst_sample_unref(sample);
      if (p->finished) return BusEnd::done;
    }
    if (auto end = pop_bus(bus.get(), 0, error)) return *end;
    if (sample) continue;
    if (idle()) return BusEnd::idle;
    if (mono_ns() >= deadline) {
      *error = "timed out";
      return BusEnd::deadline;
    }
  }
}

// Answers the allocation query with nothing, so upstream allocates in its own (system) memory.
// shmsink would offer an allocator in its shm area, and videotestsrc's pool, which never
// shrinks, would then keep the whole area to itself as soon as the consumer lags: shmsink's next
// copy waits for space that never comes (a deadlock, seen with GStreamer 1.22).
GstPadProbeReturn hide_allocator(GstPad*, GstPadProbeInfo* info, gpointer) {
  GstQuery* q = GST_PAD_PROBE_INFO_QUERY(info);
  return GST_QUERY_TYPE(q) == GST_QUERY_ALLOCATION ? GST_PAD_PROBE_HANDLED : GST_PAD_PROBE_OK;
}

const char* end_name(BusEnd e) {
  switch (e) {
    case BusEnd::eos:
      return "eos";
    case BusEnd::done:
      return "last-frame";
    case BusEnd::error:
      return "error";
    case BusEnd::deadline:
      return "timeout";
    case BusEnd::idle:
      return "idle-after-producer";
  }
  return "?";
}

}  // namespace

int producer_role(const RunSpec& s) {
  die_with_parent();
  const std::uint64_t deadline = deadline_of(s);
  SenderProbe probe(s);
  Kv kv;
  std::string error;
  BusEnd end = BusEnd::error;
  std::optional<Frames> frames;
  if (s.feed) frames = make_frames(s);
  std::optional<Feeder> feeder;
  Pipeline pipe = launch(producer_launch(s));
  if (s.upstream == "nvdec") limit_buffers(pipe.get(), "limit", s.total());
  if (frames) feeder.emplace(pipe.get(), *frames);
  // Live: each frame is numbered in system memory at the source (before any upload), and the
  // moment it enters the sink is kept here, so nothing is written into GPU memory on the way.
  std::vector<std::uint64_t> sent;
  sent.reserve(s.total());
  {
    Ref<GstPad> pad =
        s.live_fps ? pad_of(pipe.get(), "vsrc", "src") : pad_of(pipe.get(), "sink", "sink");
    gst_pad_add_probe(pad.get(),
                      static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER |
                                                   GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM),
                      sender_probe, &probe, nullptr);
  }
  {
    Ref<GstPad> pad = pad_of(pipe.get(), "sink", "sink");
    if (s.live_fps)
      gst_pad_add_probe(pad.get(), GST_PAD_PROBE_TYPE_BUFFER, sent_probe, &sent, nullptr);
    if (s.transport == "shm")
      gst_pad_add_probe(pad.get(), GST_PAD_PROBE_TYPE_QUERY_DOWNSTREAM, hide_allocator, nullptr,
                        nullptr);
  }
  // PAUSED starts the sink (its start() runs before set_state returns), so it listens on its
  // socket once "producer.ready" is there; the socket file alone can come before the listen().
  if (set_state(pipe.get(), GST_STATE_PAUSED, &error)) {
    touch(s.path("producer.ready"));
    if (!wait_for_file(s.path("consumer.ready"), deadline))
      error = "the consumer never became ready";
    else if (set_state(pipe.get(), GST_STATE_PLAYING, &error)) {
      if (feeder) feeder->start(s.total());
      end = run_bus(pipe.get(), deadline, &error, [] { return false; });
    }
  }
  const bool ok = end == BusEnd::eos && probe.t1 > probe.t0;
  kv["ok"] = ok ? "1" : "0";
  kv["error"] = error;
  kv["pushed"] = std::to_string(probe.next);
  kv["elapsed_ns"] = std::to_string(ok ? probe.t1 - probe.t0 : 0);
  kv["cpu_ns"] = std::to_string(ok ? probe.cpu1 - probe.cpu0 : 0);
  kv["probe_cpu_ns"] = std::to_string(probe.probe_cpu);
  kv["window_frames"] = std::to_string(probe.next > s.warmup ? probe.next - s.warmup : 0);
  kv["stamp_copies"] = std::to_string(probe.copies);
  kv["stamp_failures"] = std::to_string(probe.stamp_failures);
  read_stats(pipe.get(), "sink", {"dropped", "published", "in-place", "copied"}, "sink_", &kv);
  write_samples(s.path("sent.u64"), sent);
  write_kv(s.path("producer.kv"), kv);
  // The sink stays up until the consumer has all it will get: some transports lose what is
  // still in flight when the sink goes away.
  if (ok) wait_for_file(s.path("consumer.kv"), deadline);
  pipe.reset();
  if (!ok)
    std::fprintf(stderr, "gst-bench producer (%s): %s\n", s.transport.c_str(), error.c_str());
  return ok ? 0 : 1;
}

int consumer_role(const RunSpec& s) {
  die_with_parent();
  const std::uint64_t deadline = deadline_of(s);
  ReceiverProbe probe(s);
  probe.chain_caps = gst_caps_from_string("timestamp/x-cudaipc-sink-chain");
  probe.publish_caps = gst_caps_from_string("timestamp/x-cudaipc-publish");
  probe.acquire_caps = gst_caps_from_string("timestamp/x-cudaipc-acquire");
  probe.lat.reserve(s.frames);
  if (s.live_fps)
    for (auto* v : {&probe.arrive, &probe.chain, &probe.publish, &probe.acquire, &probe.pushed_at})
      v->assign(s.total(), 0);
  probe.meta.reserve(s.frames);
  if (s.feed) {
    RunSpec host = s;  // the same frames in system memory, to compare downloads with
    host.cuda = false;
    probe.refs = make_frames(host);
  }
  std::string error;
  BusEnd end = BusEnd::error;
  Pipeline pipe;
  Kv src_stats;
  if (!wait_for_file(s.path("producer.ready"), deadline)) {
    error = "the producer never started its sink";
  } else {
    pipe = launch(consumer_launch(s));
    probe.src = gst_bin_get_by_name(GST_BIN(pipe.get()), "src");
    if (s.live_fps) {
      Ref<GstPad> pushed = pad_of(pipe.get(), "src", "src");
      gst_pad_add_probe(pushed.get(), GST_PAD_PROBE_TYPE_BUFFER, pushed_probe, &probe, nullptr);
      Ref<GstPad> arrived = pad_of(pipe.get(), "app", "sink");
      gst_pad_add_probe(arrived.get(), GST_PAD_PROBE_TYPE_BUFFER, receiver_probe, &probe, nullptr);
    } else if (!s.appsink) {
      Ref<GstPad> pad = pad_of(pipe.get(), "src", "src");
      gst_pad_add_probe(pad.get(), GST_PAD_PROBE_TYPE_BUFFER, receiver_probe, &probe, nullptr);
    }
    if (set_state(pipe.get(), GST_STATE_PLAYING, &error)) {
      touch(s.path("consumer.ready"));
      std::uint64_t producer_done = 0;
      auto idle = [&] {
        if (!producer_done && file_exists(s.path("producer.kv"))) producer_done = mono_ns();
        if (!producer_done) return false;
        const std::uint64_t last =
            std::max(probe.last_arrival.load(std::memory_order_relaxed), producer_done);
        return mono_ns() - last > kIdleAfterProducerNs;
      };
      end = s.appsink || s.live_fps
                ? pull_samples(pipe.get(), &probe, !s.live_fps, deadline, &error, idle)
                : run_bus(pipe.get(), deadline, &error, idle);
    }
    // Where the last frame never came, the window ends here, before the teardown's own work.
    const std::uint64_t end_cpu = cpu_rusage_ns();
    read_stats(pipe.get(), "src", {"gpu-waits", "gpu-releases"}, "src_", &src_stats);
    pipe.reset();  // joins the streaming thread: the probe's state is ours from here
    gst_object_unref(probe.src);
    if (probe.started && !probe.finished) probe.cpu1 = end_cpu;
  }
  // An error after the last frame is the producer going away (shmsrc reports it as one).
  const bool ok = probe.finished || end == BusEnd::eos || end == BusEnd::idle;
  Kv kv = src_stats;
  kv["ok"] = ok ? "1" : "0";
  kv["end"] = end_name(end);
  kv["error"] = error;
  kv["received"] = std::to_string(probe.received);
  kv["window_frames"] = std::to_string(probe.counted);
  kv["elapsed_ns"] = std::to_string(probe.t_last > probe.t0 ? probe.t_last - probe.t0 : 0);
  kv["cpu_ns"] = std::to_string(probe.cpu1 - probe.cpu0);
  kv["probe_cpu_ns"] = std::to_string(probe.probe_cpu);
  kv["checked"] = std::to_string(probe.checked);
  kv["tensors"] = std::to_string(probe.tensors);
  kv["bad"] = std::to_string(probe.bad);
  kv["bad_why"] = one_line(probe.bad_why);
  write_samples(s.path("lat.u64"), probe.lat);
  write_samples(s.path("meta.u64"), probe.meta);
  write_samples(s.path("arrive.u64"), probe.arrive);
  write_samples(s.path("chain.u64"), probe.chain);
  write_samples(s.path("publish.u64"), probe.publish);
  write_samples(s.path("acquire.u64"), probe.acquire);
  write_samples(s.path("pushed.u64"), probe.pushed_at);
  gst_caps_unref(probe.chain_caps);
  gst_caps_unref(probe.publish_caps);
  gst_caps_unref(probe.acquire_caps);
  write_kv(s.path("consumer.kv"), kv);
  if (!ok)
    std::fprintf(stderr, "gst-bench consumer (%s): %s\n", s.transport.c_str(), error.c_str());
  return ok ? 0 : 1;
}

// Live baseline: one process, the live source into fakesink sync=true; "latency" is how late the
// sink's clock wait lets render() run, the floor every live row above stands on.
int live_baseline_role(const RunSpec& s) {
  const std::uint64_t deadline = deadline_of(s);
  SenderProbe probe(s);
  probe.baseline = true;  // takes the colour consumers expect from the first frame
  ReceiverProbe handoffs(s);
  std::string error;
  BusEnd end = BusEnd::error;
  Pipeline pipe = launch(baseline_launch(s));
  Ref<GstElement> sink(gst_bin_get_by_name(GST_BIN(pipe.get()), "sink"));
  probe.pipe = pipe.get();
  probe.sink = GST_BASE_SINK(sink.get());
  {
    Ref<GstPad> pad = pad_of(pipe.get(), "vsrc", "src");
    gst_pad_add_probe(pad.get(), GST_PAD_PROBE_TYPE_BUFFER, sender_probe, &probe, nullptr);
  }
  g_signal_connect(sink.get(), "handoff", G_CALLBACK(live_handoff), &handoffs);
  if (set_state(pipe.get(), GST_STATE_PLAYING, &error))
    end = run_bus(pipe.get(), deadline, &error, [] { return false; });
  pipe.reset();
  const bool ok = end == BusEnd::eos && handoffs.bad == 0 && handoffs.received == s.total();
  Kv kv;
  kv["ok"] = ok ? "1" : "0";
  kv["error"] = error;
  kv["received"] = std::to_string(handoffs.received);
  kv["window_frames"] = std::to_string(s.frames);
  kv["bad"] = std::to_string(handoffs.bad);
  kv["bad_why"] = one_line(handoffs.bad_why);
  kv["ref0"] = probe.ref0;
  kv["ref1"] = probe.ref1;
  write_samples(s.path("lat.u64"), handoffs.lat);
  write_kv(s.path("baseline.kv"), kv);
  if (!ok) std::fprintf(stderr, "gst-bench live baseline: %s\n", error.c_str());
  return ok ? 0 : 1;
}

int baseline_role(const RunSpec& s) {
  die_with_parent();
  if (s.live_fps) return live_baseline_role(s);
  const std::uint64_t deadline = deadline_of(s);
  SenderProbe probe(s);
  probe.baseline = true;
  std::string error;
  BusEnd end = BusEnd::error;
  std::optional<Frames> frames;
  if (s.feed) frames = make_frames(s);
  std::optional<Feeder> feeder;
  Pipeline pipe = launch(baseline_launch(s));
  if (s.upstream == "nvdec") limit_buffers(pipe.get(), "limit", s.total());
  if (frames) feeder.emplace(pipe.get(), *frames);
  {
    Ref<GstPad> pad = pad_of(pipe.get(), "sink", "sink");
    gst_pad_add_probe(pad.get(), GST_PAD_PROBE_TYPE_BUFFER, sender_probe, &probe, nullptr);
  }
  if (set_state(pipe.get(), GST_STATE_PLAYING, &error)) {
    if (feeder) feeder->start(s.total());
    end = run_bus(pipe.get(), deadline, &error, [] { return false; });
  }
  pipe.reset();
  feeder.reset();
  const bool ok = end == BusEnd::eos && probe.next == s.total() && probe.t1 > probe.t0;
  Kv kv;
  kv["ok"] = ok ? "1" : "0";
  kv["error"] = error;
  kv["received"] = std::to_string(probe.next);
  kv["window_frames"] = std::to_string(s.frames);
  kv["elapsed_ns"] = std::to_string(ok ? probe.t1 - probe.t0 : 0);
  kv["cpu_ns"] = std::to_string(ok ? probe.cpu1 - probe.cpu0 : 0);
  kv["probe_cpu_ns"] = std::to_string(probe.probe_cpu);
  kv["ref0"] = probe.ref0;
  kv["ref1"] = probe.ref1;
  kv["bad"] = std::to_string(probe.bad);
  kv["bad_why"] = one_line(probe.bad_why);
  kv["stamp_copies"] = std::to_string(probe.copies);
  kv["stamp_failures"] = std::to_string(probe.stamp_failures);
  write_kv(s.path("baseline.kv"), kv);
  if (!ok) std::fprintf(stderr, "gst-bench baseline: %s\n", error.c_str());
  return ok ? 0 : 1;
}

}  // namespace gstbench
