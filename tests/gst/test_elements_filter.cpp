// cudaipcfilter (ipc-mode=host) with a model served by cudaipc::Server on a thread of this process:
// every frame comes out in input order with its own bytes, and with the result the model computed
// from that frame's content (a custom meta naming the frame index read from its pixels). Replies
// out of order, duplicated, for frames never sent, from another run or malformed are counted and
// never attached; each on-missing policy with no model, a silent model and a model that leaves and
// comes back; EOS drains the frames in flight, a flushing seek drops them; the filter's channel is
// one a server takes, a cudaipcsink's one it refuses.
#include <gst/app/gstappsrc.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/metas.hpp"
#include "cudaipc/server.hpp"
#include "element_harness.hpp"
#include "hostile_records.hpp"

namespace cudaipc::testing::gst {
namespace {

constexpr Ms kWait{10000};
constexpr int kW = 16, kH = 4;
const char* kCaps = "video/x-raw,format=GRAY8,width=16,height=4,framerate=30/1";

// Frame i: its index in the first 4 bytes, then bytes that differ per frame.
GstBuffer* frame(int i) {
  GstBuffer* b = gst_buffer_new_allocate(nullptr, kW * kH, nullptr);
  GstMapInfo m;
  gst_buffer_map(b, &m, GST_MAP_WRITE);
  for (gsize k = 0; k < m.size; ++k) m.data[k] = static_cast<guint8>(i * 7 + k * 3);
  std::uint32_t idx = static_cast<std::uint32_t>(i);
  std::memcpy(m.data, &idx, 4);
  gst_buffer_unmap(b, &m);
  GST_BUFFER_PTS(b) = i * GST_MSECOND * 33;
  GST_BUFFER_DURATION(b) = GST_MSECOND * 33;
  return b;
}

std::string check_bytes(const std::vector<std::uint8_t>& bytes, int i) {
  if (bytes.size() != static_cast<std::size_t>(kW * kH))
    return "size " + std::to_string(bytes.size());
  std::uint32_t idx;
  std::memcpy(&idx, bytes.data(), 4);
  if (idx != static_cast<std::uint32_t>(i)) return "frame index " + std::to_string(idx);
  for (std::size_t k = 4; k < bytes.size(); ++k)
    if (bytes[k] != static_cast<std::uint8_t>(i * 7 + k * 3)) return "byte " + std::to_string(k);
  return "";
}

// The model's result for a frame: a meta area with one custom meta, "filter-result", whose
// "index" is what the model read from the frame's first bytes.
std::vector<std::uint8_t> result_for(std::uint32_t index) {
  std::vector<std::uint8_t> area(512);
  metas::AreaWriter w(area.data(), area.size());
  if (std::uint8_t* b = w.begin_record(metas::RecordKind::custom, "filter-result", 128)) {
    metas::CustomWriter cw(b, 128);
    cw.add_int64("index", index);
    w.commit_record(cw.finish());
  }
  area.resize(w.size());
  return area;
}

// A detector's result for a frame: "filter-result" as above, and a detection whose box's x is
// the frame's index (an analytics record, as Python's detections= writes it).
std::vector<std::uint8_t> detection_for(std::uint32_t index) {
  std::vector<std::uint8_t> area(1024);
  metas::AreaWriter w(area.data(), area.size());
  if (std::uint8_t* b = w.begin_record(metas::RecordKind::custom, "filter-result", 128)) {
    metas::CustomWriter cw(b, 128);
    cw.add_int64("index", index);
    w.commit_record(cw.finish());
  }
  if (std::uint8_t* b =
          w.begin_record(metas::RecordKind::analytics, "GstAnalyticsRelationMetaAPI", 512)) {
    metas::AnalyticsWriter aw(b, 512, 1);
    metas::ObjectDetection od;
    od.x = static_cast<std::int32_t>(index), od.y = 1, od.w = 2, od.h = 3, od.label = "ball";
    aw.add_object_detection(0, od);
    w.commit_record(aw.finish());
  }
  area.resize(w.size());
  return area;
}

// A hostile model's result for a frame: "filter-result" as above, then an analytics record whose
// mtd_count is 0xFFFFFFFF and a serialized meta of a type no process registered.
std::vector<std::uint8_t> hostile_records_for(std::uint32_t index) {
  std::vector<std::uint8_t> area(1024);
  metas::AreaWriter w(area.data(), area.size());
  if (std::uint8_t* b = w.begin_record(metas::RecordKind::custom, "filter-result", 128)) {
    metas::CustomWriter cw(b, 128);
    cw.add_int64("index", index);
    w.commit_record(cw.finish());
  }
  std::uint8_t analytics[64] = {};
  const std::uint32_t all_ones = 0xFFFFFFFFu;
  std::memcpy(analytics, &all_ones, 4);
  w.add_record(metas::RecordKind::analytics, "GstAnalyticsRelationMetaAPI", analytics,
               sizeof analytics);
  const std::vector<std::uint8_t> serialized = unregistered_serialized_meta();
  w.add_record(metas::RecordKind::serialized, "NoSuchMetaOfAnyProcess", serialized.data(),
               serialized.size());
  area.resize(w.size());
  return area;
}

enum class Behaviour {
  answer,      // each request at once
  swap_pairs,  // requests 2k+1 answered before 2k
  noisy,       // each answered, then again, plus replies naming no frame of this run
  later,       // each answered through Server::reply_after (the GPU path's queue; no stream)
  silent,      // never answers
  detect,      // each request at once, with detection_for()
  hostile,     // each request at once, with hostile_records_for()
};

// A model process's loop on a thread: cudaipc::Server, answering per `Behaviour`.
class Model {
 public:
  Model(const std::string& path, Behaviour b) : behaviour_(b) {
    ServerOptions o;
    o.path = path;
    server_ = std::make_unique<Server>(o);
    thread_ = std::thread([this] { run(); });
  }
  ~Model() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    server_.reset();  // the reply channel closes: the filter sees the model leave
  }
  int requests() const { return requests_.load(); }

 private:
  void answer(Request& req) {
    const Frame& f = req.frame;
    std::uint32_t idx;
    std::memcpy(&idx, f.data(), 4);
    const std::vector<std::uint8_t> r = behaviour_ == Behaviour::detect ? detection_for(idx)
                                        : behaviour_ == Behaviour::hostile
                                            ? hostile_records_for(idx)
                                            : result_for(idx);
    if (behaviour_ == Behaviour::noisy) {
      // The same answer twice, one naming a frame far ahead, one another run's, one malformed.
      // A server's reply channel drops what its filter has no room for; these wait for room.
      auto patiently = [](auto publish) {
        for (int i = 0; i < 5000 && publish() != cudaipc::PublishStatus::published; ++i)
          std::this_thread::sleep_for(std::chrono::microseconds(200));
      };
      server_->with_reply_channel(req, [&](cudaipc::Producer& p) {
        const auto size = static_cast<std::uint32_t>(r.size());
        FrameDesc fake = f.desc();
        patiently([&] { return publish_reply(p, fake, r.data(), size); });
        fake.seq += 1000;
        patiently([&] { return publish_reply(p, fake, r.data(), size); });
        fake = f.desc();
        fake.publish_time_ns += 1;
        patiently([&] { return publish_reply(p, fake, r.data(), size); });
        const std::uint8_t junk[5] = {1, 2, 3, 4, 5};
        FrameInfo info;
        info.user_meta = junk;
        info.user_meta_size = sizeof junk;
        const std::uint8_t byte = 0;
        patiently([&] { return p.publish(&byte, 1, info); });
        // The answer itself after them, as patiently: every one is counted by the test.
        patiently([&] { return publish_reply(p, f.desc(), r.data(), size); });
      });
      req = Request{};
      return;
    }
    if (behaviour_ == Behaviour::later) {
      server_->reply_after(req, nullptr, [r](std::uint8_t* area, std::uint32_t capacity) {
        if (r.size() > capacity) throw cudaipc::Error(cudaipc::Errc::invalid_argument, "too big");
        std::memcpy(area, r.data(), r.size());
        return static_cast<std::uint32_t>(r.size());
      });
      return;
    }
    server_->reply(req, r.data(), static_cast<std::uint32_t>(r.size()));
  }

  void run() {
    std::deque<Request> held;
    while (!stop_) {
      ServerEvent e = server_->next(std::chrono::milliseconds(10));
      if (e.type != ServerEventType::request) continue;
      ++requests_;
      if (behaviour_ == Behaviour::silent) continue;  // released unanswered
      if (behaviour_ == Behaviour::swap_pairs) {
        held.push_back(std::move(e.request));
        if (held.size() == 2) {
          answer(held[1]);
          answer(held[0]);
          held.clear();
        }
        continue;
      }
      answer(e.request);
    }
  }

  Behaviour behaviour_;
  std::unique_ptr<Server> server_;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

// The kernel's first struct sched_attr (48 bytes), which glibc < 2.41 lacks: for the default
// policy, sched_runtime is a thread's own time slice (Linux 6.12+; 0 before).
struct SchedAttrV0 {
  std::uint32_t size = 48, policy = SCHED_OTHER;
  std::uint64_t flags = 0;
  std::int32_t nice = 0;
  std::uint32_t priority = 0;
  std::uint64_t runtime = 0, deadline = 0, period = 0;
};
static_assert(sizeof(SchedAttrV0) == 48, "SCHED_ATTR_SIZE_VER0");

std::uint64_t slice_of(pid_t tid) {
  SchedAttrV0 a;
  if (syscall(SYS_sched_getattr, tid, &a, sizeof a, 0u) != 0) return 0;
  return a.runtime;
}

// appsrc ! cudaipcfilter ! appsink, the results read off each buffer as it arrives.
struct Out {
  std::vector<std::uint8_t> bytes;
  int results = 0;     // filter-result metas on the buffer
  gint64 result = -1;  // the first one's index
  gint box_x = -1;     // GStreamer 1.22: the CudaipcAnalyticsMeta's first object's x
  GstClockTime pts = GST_CLOCK_TIME_NONE;
  pid_t pusher = 0;  // the thread that pushed it, and its scheduling then
  int policy = -1, priority = -1, nice = 100;
  std::uint64_t slice = 0;
};

class FilterPipeline {
 public:
  FilterPipeline(const std::string& path, const std::string& props,
                 const std::string& src_props = "")
      : pipe_("appsrc name=in format=time is-live=false " + src_props + " caps=\"" +
              std::string(kCaps) + "\" ! cudaipcfilter name=f ipc-mode=host " + props +
              " ! appsink name=out sync=false emit-signals=false") {
    g_object_set(pipe_.element("f"), "socket-path", path.c_str(), nullptr);
    GstAppSinkCallbacks cb{};
    cb.new_sample = &FilterPipeline::on_sample;
    cb.eos = &FilterPipeline::on_eos;
    gst_app_sink_set_callbacks(GST_APP_SINK(pipe_.element("out")), &cb, this, nullptr);
    // A seekable appsrc seeks (to the start) when it starts too: the frames are pushed anyway.
    GstAppSrcCallbacks src_cb{};
    src_cb.seek_data = [](GstAppSrc*, guint64, gpointer) -> gboolean { return TRUE; };
    gst_app_src_set_callbacks(GST_APP_SRC(pipe_.element("in")), &src_cb, nullptr, nullptr);
  }
  ~FilterPipeline() { pipe_.stop(); }
  bool start() { return pipe_.set_state(GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE; }
  bool push(int i) {
    return gst_app_src_push_buffer(GST_APP_SRC(pipe_.element("in")), frame(i)) == GST_FLOW_OK;
  }
  void end() { gst_app_src_end_of_stream(GST_APP_SRC(pipe_.element("in"))); }
  // A flushing seek to the start (src_props stream-type=seekable): every element flushes.
  bool seek_to_start() {
    return gst_element_seek_simple(pipe_.get(), GST_FORMAT_TIME, GST_SEEK_FLAG_FLUSH, 0);
  }
  // The same from the thread that pushes frame `index` downstream, as an application's pad probe
  // or callback may: the frame is dropped, the seek's result kept for wait_seeked().
  void seek_from_push_at(int index) {
    seek_at_ = index;
    GstPad* pad = gst_element_get_static_pad(pipe_.element("out"), "sink");
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, &FilterPipeline::on_probe, this, nullptr);
    gst_object_unref(pad);
  }
  // Whether the seek ran, and succeeded, within `t`.
  bool wait_seeked(Ms t = kWait) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, t, [&] { return seeked_; }) && seek_ok_;
  }
  bool wait(std::size_t n, Ms t = kWait) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, t, [&] { return out_.size() >= n; });
  }
  bool wait_eos(Ms t = kWait) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, t, [&] { return eos_; });
  }
  std::vector<Out> out() {
    std::lock_guard<std::mutex> lock(mu_);
    return out_;
  }
  guint64 stat(const char* field) {
    GstStructure* s = nullptr;
    g_object_get(pipe_.element("f"), "stats", &s, nullptr);
    guint64 v = 0;
    gboolean b = FALSE;
    if (s && !gst_structure_get_uint64(s, field, &v) && gst_structure_get_boolean(s, field, &b))
      v = b;
    if (s) gst_structure_free(s);
    return v;
  }
  Pipeline& pipeline() { return pipe_; }

 private:
  static GstFlowReturn on_sample(GstAppSink* sink, gpointer data) {
    auto* self = static_cast<FilterPipeline*>(data);
    Ptr<GstSample> sample(gst_app_sink_pull_sample(sink));
    GstBuffer* buf = gst_sample_get_buffer(sample.get());
    Out o;
    o.pts = GST_BUFFER_PTS(buf);
    o.pusher = gettid();
    sched_param sp{};
    if (pthread_getschedparam(pthread_self(), &o.policy, &sp) == 0) o.priority = sp.sched_priority;
    o.nice = getpriority(PRIO_PROCESS, static_cast<id_t>(o.pusher));
    o.slice = slice_of(o.pusher);
    GstMapInfo m;
    if (gst_buffer_map(buf, &m, GST_MAP_READ)) {
      o.bytes.assign(m.data, m.data + m.size);
      gst_buffer_unmap(buf, &m);
    }
    gpointer state = nullptr;
    while (GstMeta* meta = gst_buffer_iterate_meta(buf, &state)) {
      if (!gst_meta_info_is_custom(meta->info)) continue;
      auto* cm = reinterpret_cast<GstCustomMeta*>(meta);
      if (!gst_custom_meta_has_name(cm, "filter-result")) continue;
      gint64 idx = -1;
      gst_structure_get_int64(gst_custom_meta_get_structure(cm), "index", &idx);
      if (o.results++ == 0) o.result = idx;
    }
    if (GstCustomMeta* cm = gst_buffer_get_custom_meta(buf, "CudaipcAnalyticsMeta")) {
      const GValue* objects = gst_structure_get_value(gst_custom_meta_get_structure(cm), "objects");
      if (objects && gst_value_array_get_size(objects) == 1)
        gst_structure_get_int(gst_value_get_structure(gst_value_array_get_value(objects, 0)), "x",
                              &o.box_x);
    }
    {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->out_.push_back(std::move(o));
    }
    self->cv_.notify_all();
    return GST_FLOW_OK;
  }
  static GstPadProbeReturn on_probe(GstPad*, GstPadProbeInfo* info, gpointer data) {
    auto* self = static_cast<FilterPipeline*>(data);
    std::uint32_t idx = 0;
    if (gst_buffer_extract(GST_PAD_PROBE_INFO_BUFFER(info), 0, &idx, 4) != 4 ||
        static_cast<int>(idx) != self->seek_at_)
      return GST_PAD_PROBE_OK;
    const bool ok = self->seek_to_start();
    {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->seeked_ = true;
      self->seek_ok_ = ok;
    }
    self->cv_.notify_all();
    return GST_PAD_PROBE_DROP;  // flushed
  }
  static void on_eos(GstAppSink*, gpointer data) {
    auto* self = static_cast<FilterPipeline*>(data);
    {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->eos_ = true;
    }
    self->cv_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Out> out_;
  bool eos_ = false;
  int seek_at_ = -1;
  bool seeked_ = false, seek_ok_ = false;
  Pipeline pipe_;
};

// Waits until the filter sees a model (its reply channel connected and the model on the frames').
bool wait_model(FilterPipeline& p, bool connected = true) {
  const auto until = Clock::now() + kWait;
  while (Clock::now() < until) {
    // Gone means both: no model reads the frames, and the filter has seen its reply channel go
    // (a model that leaves disconnects its requests first; a loaded machine shows the gap).
    if (connected ? p.stat("model-connected") != 0
                  : p.stat("model-connected") == 0 && p.stat("model-replying") == 0)
      return true;
    // The filter learns of a model from its reply channel's format, sent once it connects.
    std::this_thread::sleep_for(Ms(5));
  }
  return false;
}

class FilterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    init_gst();
    if (!element_exists("cudaipcfilter")) GTEST_SKIP() << "the cudaipc plugin was not found";
  }
  TempDir dir_;
  std::string path_ = dir_.file("model");
};

// The outputs are exactly `frames` (their indices, in order), each with its own bytes and exactly
// one result, its own.
void expect_answered_frames(const std::vector<Out>& out, const std::vector<int>& frames) {
  ASSERT_EQ(out.size(), frames.size());
  for (std::size_t k = 0; k < frames.size(); ++k) {
    const int i = frames[k];
    EXPECT_EQ(check_bytes(out[k].bytes, i), "") << "output " << k;
    EXPECT_EQ(out[k].results, 1) << "frame " << i;
    EXPECT_EQ(out[k].result, i) << "frame " << i << " carries another frame's result";
  }
}

// Every frame in order, its bytes intact and exactly one result: the one for its own content.
void expect_answered(const std::vector<Out>& out, int n) {
  std::vector<int> frames(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) frames[static_cast<std::size_t>(i)] = i;
  expect_answered_frames(out, frames);
  for (std::size_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(out[i].pts, i * GST_MSECOND * 33) << "frame " << i;
}

TEST_F(FilterTest, EveryFrameComesBackWithItsOwnResult) {
  FilterPipeline p(path_, "max-inflight=4");
  ASSERT_TRUE(p.start());
  Model model(path_, Behaviour::answer);
  ASSERT_TRUE(wait_model(p)) << p.pipeline().errors();
  constexpr int kN = 120;
  for (int i = 0; i < kN; ++i) ASSERT_TRUE(p.push(i));
  p.end();
  ASSERT_TRUE(p.wait_eos()) << p.pipeline().errors();
  expect_answered(p.out(), kN);
  for (const char* f : {"timeouts", "replies-stale", "replies-unknown", "replies-duplicate",
                        "replies-foreign", "replies-malformed", "model-lost", "not-sent"})
    EXPECT_EQ(p.stat(f), 0u) << f;
  EXPECT_EQ(p.stat("answered"), static_cast<guint64>(kN));
  EXPECT_EQ(p.stat("passed"), 0u);
  EXPECT_EQ(model.requests(), kN);
}

// The thread of this process whose name is `name` (15 characters at most); 0 when none is.
pid_t thread_named(const std::string& name) {
  GDir* dir = g_dir_open("/proc/self/task", 0, nullptr);
  if (!dir) return 0;
  pid_t found = 0;
  while (const gchar* tid = g_dir_read_name(dir)) {
    std::ifstream comm(std::string("/proc/self/task/") + tid + "/comm");
    std::string line;
    if (std::getline(comm, line) && line == name) found = static_cast<pid_t>(std::atoi(tid));
  }
  g_dir_close(dir);
  return found;
}

// Whether this process may put a thread on SCHED_FIFO at `priority` (root, CAP_SYS_NICE or
// RLIMIT_RTPRIO), and give one a negative nice value (CAP_SYS_NICE or RLIMIT_NICE).
bool may_use_fifo(int priority) {
  int rc = -1;
  std::thread([&rc, priority] {
    sched_param p{};
    p.sched_priority = priority;
    rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &p);
  }).join();
  return rc == 0;
}
bool may_lower_nice(int nice) {
  int rc = -1;
  std::thread([&rc, nice] {
    rc = setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), nice);
  }).join();
  return rc == 0;
}

// A thread's scheduling: its policy (the reset-on-fork flag apart), priority, nice value and slice.
struct Sched {
  pid_t tid = 0;
  int policy = -1, priority = -1, nice = 100;
  bool reset_on_fork = false;
  std::uint64_t slice = 0;
};
Sched sched_of(pid_t tid) {
  Sched s;
  s.tid = tid;
  const int policy = sched_getscheduler(tid);
  s.policy = policy < 0 ? policy : policy & ~SCHED_RESET_ON_FORK;
  s.reset_on_fork = policy >= 0 && (policy & SCHED_RESET_ON_FORK);
  sched_param sp{};
  if (sched_getparam(tid, &sp) == 0) s.priority = sp.sched_priority;
  s.nice = getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  s.slice = slice_of(tid);
  return s;
}

// The slice a new thread starts with (the kernel's default, or one this process inherited).
std::uint64_t default_slice() {
  std::uint64_t slice = 0;
  std::thread([&slice] { slice = slice_of(gettid()); }).join();
  return slice;
}

// Asks a new thread for `runtime` (0: the kernel's default) and reads back what it got.
std::uint64_t slice_given_for(std::uint64_t runtime) {
  std::uint64_t slice = 0;
  std::thread([&slice, runtime] {
    SchedAttrV0 a;
    a.runtime = runtime;
    a.nice = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
    if (syscall(SYS_sched_setattr, 0, &a, 0u) == 0) slice = slice_of(gettid());
  }).join();
  return slice;
}

// Whether this kernel keeps a thread's own slice (Linux 6.12+: set, it reads back; 0 before).
bool kernel_keeps_slices() {
  return slice_given_for(300'000) == 300'000;
}

// The filter's source pad task's ENTER and LEAVE, as its own thread posts them: that thread and
// its scheduling then (the filter raises it before the message goes on, and gives it back first).
struct TaskThreads {
  GstElement* filter = nullptr;
  std::mutex mu;
  std::vector<Sched> entered, left;
  static GstBusSyncReply on_message(GstBus*, GstMessage* m, gpointer data) {
    auto* self = static_cast<TaskThreads*>(data);
    if (GST_MESSAGE_TYPE(m) != GST_MESSAGE_STREAM_STATUS) return GST_BUS_PASS;
    GstStreamStatusType type;
    GstElement* owner = nullptr;
    gst_message_parse_stream_status(m, &type, &owner);
    if (owner != self->filter) return GST_BUS_PASS;
    const Sched now = sched_of(gettid());
    std::lock_guard<std::mutex> lock(self->mu);
    if (type == GST_STREAM_STATUS_TYPE_ENTER) self->entered.push_back(now);
    if (type == GST_STREAM_STATUS_TYPE_LEAVE) self->left.push_back(now);
    return GST_BUS_PASS;
  }
};

// A filter whose pushing threads are raised by properties set in READY, where the reply reader
// ("cudaipc-replies") already runs with the settings it had (none): the two threads found while
// frames flow, every frame answered and pushed by one of them, the warnings, and the pooled task
// thread's scheduling as it leaves.
class RaisedFilter {
 public:
  static constexpr int kN = 120;
  explicit RaisedFilter(const std::string& path) : path_(path), p_(path, "max-inflight=4") {
    tasks_.filter = p_.pipeline().element("f");
    bus_.reset(gst_element_get_bus(p_.pipeline().get()));
    gst_bus_set_sync_handler(bus_.get(), &TaskThreads::on_message, &tasks_, nullptr);
  }
  ~RaisedFilter() { gst_bus_set_sync_handler(bus_.get(), nullptr, nullptr, nullptr); }
  GstElement* filter() { return tasks_.filter; }

  // READY, `set` the properties, PLAYING with a model answering: half the frames through.
  void start(const std::function<void(GstElement*)>& set) {
    ASSERT_NE(p_.pipeline().set_state(GST_STATE_READY), GST_STATE_CHANGE_FAILURE);
    std::this_thread::sleep_for(Ms(200));  // the reader has started and taken what it had
    set(tasks_.filter);
    ASSERT_TRUE(p_.start());
    model_ = std::make_unique<Model>(path_, Behaviour::answer);
    ASSERT_TRUE(wait_model(p_)) << p_.pipeline().errors();
    for (int i = 0; i < kN / 2; ++i) ASSERT_TRUE(p_.push(i));
    ASSERT_TRUE(p_.wait(kN / 2));
    reader = thread_named("cudaipc-replies");
    ASSERT_NE(reader, 0) << "no reply reader thread";
    std::lock_guard<std::mutex> lock(tasks_.mu);
    ASSERT_EQ(tasks_.entered.size(), 1u) << "the source pad's task entered its thread once";
    entered = tasks_.entered[0];
    task = entered.tid;
  }

  // The other half and the end of the stream: every frame answered, by one of the two threads.
  void finish(std::vector<Out>* out) {
    for (int i = kN / 2; i < kN; ++i) ASSERT_TRUE(p_.push(i));
    p_.end();
    ASSERT_TRUE(p_.wait_eos()) << p_.pipeline().errors();
    *out = p_.out();
    expect_answered(*out, kN);
    for (const Out& o : *out)
      EXPECT_TRUE(o.pusher == reader || o.pusher == task) << "pushed by thread " << o.pusher;
  }

  // Each warning posted: its message and its debug text.
  std::vector<std::pair<std::string, std::string>> warnings() {
    std::vector<std::pair<std::string, std::string>> all;
    while (Ptr<GstMessage> m = p_.pipeline().pop(GST_MESSAGE_WARNING, Ms(0))) {
      GError* err = nullptr;
      gchar* debug = nullptr;
      gst_message_parse_warning(m.get(), &err, &debug);
      Ptr<GError> e(err);
      Ptr<gchar> d(debug);
      all.emplace_back(e->message, d ? d.get() : "");
    }
    return all;
  }

  // Stopped: the task's thread as it left, once.
  void stop(Sched* left) {
    p_.pipeline().stop();
    gst_bus_set_sync_handler(bus_.get(), nullptr, nullptr, nullptr);
    std::lock_guard<std::mutex> lock(tasks_.mu);
    ASSERT_EQ(tasks_.left.size(), 1u) << "the source pad's task left its thread once";
    EXPECT_EQ(tasks_.left[0].tid, task);
    *left = tasks_.left[0];
  }

  pid_t reader = 0, task = 0;
  Sched entered;

 private:
  std::string path_;
  TaskThreads tasks_;
  FilterPipeline p_;
  Ptr<GstBus> bus_;
  std::unique_ptr<Model> model_;
};

// rt-priority and nice: the two threads run at SCHED_FIFO and that nice value while the pipeline
// plays, flagged so that threads they start do not inherit it, and the task's thread, which
// GStreamer's pool lends to other tasks afterwards, leaves with the scheduling it came with.
// Where this process may not have either, one warning names the properties and every frame is
// answered with what the threads had.
TEST_F(FilterTest, RtPriorityAndNiceRaiseThePushingThreadsAndThePooledOneIsGivenBack) {
  const bool fifo = may_use_fifo(7), nice_ok = may_lower_nice(-5);
  const int base_nice = getpriority(PRIO_PROCESS, 0);
  std::cout << "SCHED_FIFO " << (fifo ? "allowed" : "refused") << ", nice -5 "
            << (nice_ok ? "allowed" : "refused") << " here" << std::endl;
  RaisedFilter f(path_);
  ASSERT_NO_FATAL_FAILURE(
      f.start([](GstElement* e) { g_object_set(e, "rt-priority", 7u, "nice", -5, nullptr); }));
  EXPECT_EQ(f.entered.policy, fifo ? SCHED_FIFO : SCHED_OTHER);
  EXPECT_EQ(f.entered.nice, nice_ok ? -5 : base_nice);
  for (pid_t t : {f.reader, f.task}) {
    const Sched s = sched_of(t);
    EXPECT_EQ(s.policy, fifo ? SCHED_FIFO : SCHED_OTHER) << "thread " << t;
    EXPECT_EQ(s.priority, fifo ? 7 : 0) << "thread " << t;
    EXPECT_EQ(s.nice, nice_ok ? -5 : base_nice) << "thread " << t;
    EXPECT_EQ(s.reset_on_fork, fifo || nice_ok) << "thread " << t;
  }
  std::vector<Out> out;
  ASSERT_NO_FATAL_FAILURE(f.finish(&out));
  for (const Out& o : out) {
    EXPECT_EQ(o.policy & ~SCHED_RESET_ON_FORK, fifo ? SCHED_FIFO : SCHED_OTHER);
    EXPECT_EQ(o.priority, fifo ? 7 : 0);
    EXPECT_EQ(o.nice, nice_ok ? -5 : base_nice);
  }
  const auto warnings = f.warnings();
  for (const auto& [message, debug] : warnings) {
    EXPECT_NE(message.find("rt-priority 7, nice -5"), std::string::npos) << message;
    // The debug text names what was refused.
    EXPECT_EQ(debug.find("SCHED_FIFO") != std::string::npos, !fifo) << debug;
    EXPECT_EQ(debug.find("nice -5") != std::string::npos, !nice_ok) << debug;
  }
  EXPECT_EQ(warnings.size(), fifo && nice_ok ? 0u : 1u);
  Sched left;
  ASSERT_NO_FATAL_FAILURE(f.stop(&left));
  EXPECT_EQ(left.policy, SCHED_OTHER);
  EXPECT_EQ(left.priority, 0);
  EXPECT_EQ(left.nice, base_nice);
}

// time-slice with nice: the two threads run with that slice and nice value while the pipeline
// plays, flagged so that threads they start begin with the defaults, every frame is pushed at that
// slice, and the pooled task thread leaves with the kernel's default slice. Before Linux 6.12 (no
// slice of a thread's own) one warning names time-slice and the threads keep the kernel's.
TEST_F(FilterTest, TimeSliceShortensThePushingThreadsSliceBesideNiceAndThePooledOneIsGivenBack) {
  // A process may inherit a slice of its own, which new threads start with. The filter only
  // shortens a slice, and gives the pooled thread the kernel's default back (it cannot tell an
  // inherited slice from its own), so the slice asked for is under the first, apart from both.
  const std::uint64_t base_slice = default_slice(), kernel_slice = slice_given_for(0);
  const bool slices = kernel_keeps_slices(), nice_ok = may_lower_nice(-5);
  const int base_nice = getpriority(PRIO_PROCESS, 0);
  std::cout << "a thread's own slice " << (slices ? "kept" : "not kept (Linux < 6.12)")
            << " here, a new thread's " << base_slice << " ns, the kernel's default "
            << kernel_slice << " ns; nice -5 " << (nice_ok ? "allowed" : "refused") << std::endl;
  std::uint64_t asked = 200'000;
  for (std::uint64_t s : {200'000u, 150'000u, 100'000u}) {
    if (s < base_slice && s != kernel_slice) {
      asked = s;
      break;
    }
  }
  const bool shortened = slices && asked < base_slice;
  if (slices && !shortened)
    std::cout << "threads start with a slice of " << base_slice
              << " ns: the filter cannot shorten it" << std::endl;
  const std::uint64_t want = shortened ? asked : base_slice;
  RaisedFilter f(path_);
  ASSERT_NO_FATAL_FAILURE(f.start([&](GstElement* e) {
    g_object_set(e, "nice", -5, "time-slice", static_cast<guint64>(asked), nullptr);
    guint64 read_back = 0;
    g_object_get(e, "time-slice", &read_back, nullptr);
    EXPECT_EQ(read_back, asked);
  }));
  EXPECT_EQ(f.entered.slice, want);
  for (pid_t t : {f.reader, f.task}) {
    const Sched s = sched_of(t);
    EXPECT_EQ(s.policy, SCHED_OTHER) << "thread " << t;
    EXPECT_EQ(s.nice, nice_ok ? -5 : base_nice) << "thread " << t;
    EXPECT_EQ(s.slice, want) << "thread " << t;
    EXPECT_EQ(s.reset_on_fork, shortened || nice_ok) << "thread " << t;
  }
  std::vector<Out> out;
  ASSERT_NO_FATAL_FAILURE(f.finish(&out));
  for (const Out& o : out) {
    EXPECT_EQ(o.slice, want);
    EXPECT_EQ(o.nice, nice_ok ? -5 : base_nice);
  }
  const auto warnings = f.warnings();
  for (const auto& [message, debug] : warnings) {
    EXPECT_NE(message.find("nice -5, time-slice " + std::to_string(asked) + " ns"),
              std::string::npos)
        << message;
    EXPECT_EQ(debug.find("time-slice") != std::string::npos, !slices) << debug;
    EXPECT_EQ(debug.find("nice -5") != std::string::npos, !nice_ok) << debug;
  }
  EXPECT_EQ(warnings.size(), slices && nice_ok ? 0u : 1u);
  Sched left;
  ASSERT_NO_FATAL_FAILURE(f.stop(&left));
  EXPECT_EQ(left.nice, base_nice);
  EXPECT_EQ(left.slice, shortened ? kernel_slice : base_slice);
}

// GStreamer 1.22 has no analytics metas: a model's detections arrive as the CudaipcAnalyticsMeta
// custom meta, each on its own frame, and the filter says so in one warning (docs/metas.md). On
// 1.24+ nothing of this: they are analytics metas, without a warning.
TEST_F(FilterTest, DetectionsWithoutAnalyticsMetasArriveAsACustomMetaWithOneWarning) {
#ifdef CUDAIPC_HAVE_ANALYTICS
  constexpr bool kAsCustom = false;
#else
  constexpr bool kAsCustom = true;
#endif
  FilterPipeline p(path_, "max-inflight=4");
  ASSERT_TRUE(p.start());
  Model model(path_, Behaviour::detect);
  ASSERT_TRUE(wait_model(p)) << p.pipeline().errors();
  constexpr int kN = 30;
  for (int i = 0; i < kN; ++i) ASSERT_TRUE(p.push(i));
  p.end();
  ASSERT_TRUE(p.wait_eos()) << p.pipeline().errors();
  const std::vector<Out> out = p.out();
  expect_answered(out, kN);
  for (int i = 0; i < kN; ++i) EXPECT_EQ(out[i].box_x, kAsCustom ? i : -1) << "frame " << i;
  EXPECT_EQ(p.stat("metas-received"), 2u * kN);
  EXPECT_EQ(p.stat("metas-unknown"), 0u);
  std::vector<std::string> warnings;
  while (Ptr<GstMessage> m = p.pipeline().pop(GST_MESSAGE_WARNING, Ms(0))) {
    GError* err = nullptr;
    gst_message_parse_warning(m.get(), &err, nullptr);
    warnings.push_back(err ? err->message : "");
    g_clear_error(&err);
  }
  if (!kAsCustom) {
    EXPECT_TRUE(warnings.empty()) << warnings[0];
    return;
  }
  ASSERT_EQ(warnings.size(), 1u);
  for (const char* part :
       {"GStreamer 1.", "has no analytics metas", "\"CudaipcAnalyticsMeta\"", "docs/metas.md"})
    EXPECT_NE(warnings[0].find(part), std::string::npos) << part << " in: " << warnings[0];
}

// Issue #38: every record a model sends is counted in exactly one of metas-received, -bad and
// -unknown, on every version: a hostile analytics record is bad, a serialized meta no process
// registered is unknown, and each frame still gets its own result.
TEST_F(FilterTest, EveryRecordOfAHostileModelIsCountedOnce) {
  FilterPipeline p(path_, "max-inflight=4");
  ASSERT_TRUE(p.start());
  Model model(path_, Behaviour::hostile);
  ASSERT_TRUE(wait_model(p)) << p.pipeline().errors();
  constexpr int kN = 20;
  for (int i = 0; i < kN; ++i) ASSERT_TRUE(p.push(i));
  p.end();
  ASSERT_TRUE(p.wait_eos()) << p.pipeline().errors();
  expect_answered(p.out(), kN);
  EXPECT_EQ(p.stat("metas-received"), static_cast<guint64>(kN));
  EXPECT_EQ(p.stat("metas-bad"), static_cast<guint64>(kN));
  EXPECT_EQ(p.stat("metas-unknown"), static_cast<guint64>(kN));
  EXPECT_EQ(p.stat("metas-filtered"), 0u);
  // Told once on the bus that a result was malformed (and on 1.22, that analytics come as a custom
  // meta): the test's warnings are its own.
  while (p.pipeline().pop(GST_MESSAGE_WARNING, Ms(0))) {
  }
}

// The queue of replies computed on the GPU (reply_after), here with nothing to wait for: every
// frame still gets its own result, none lost, under a window as wide as the filter allows.
// The filter's channel says it holds requests, so a model server takes it; a cudaipcsink's says
// it holds a producer's frames, and a server pointed at it refuses it, naming the path and what
// to do, instead of answering frames no filter sent.
TEST_F(FilterTest, ChannelIsARequestChannelAndASinksIsRefused) {
  FilterPipeline p(path_, "");
  ASSERT_TRUE(p.start()) << p.pipeline().errors();
  ConsumerOptions co;
  co.path = path_;
  co.reconnect = false;
  co.role = ChannelRole::requests;
  EXPECT_NO_THROW(cudaipc::Consumer c(co));

  const std::string cam = dir_.file("cam0");
  Pipeline sink("appsrc caps=\"" + std::string(kCaps) +
                "\" ! cudaipcsink name=s ipc-mode=host socket-path=" + cam);
  ASSERT_NE(sink.set_state(GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE) << sink.errors();
  ServerOptions so;
  so.path = cam;
  try {
    Server server(so);
    ADD_FAILURE() << "a server took a cudaipcsink's channel";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("'" + cam + "' is a cudaipcsink's channel"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("point the server at the filter's socket-path"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(FilterTest, RepliesSentLaterEachReachTheirFrame) {
  FilterPipeline p(path_, "max-inflight=16");
  ASSERT_TRUE(p.start());
  Model model(path_, Behaviour::later);
  ASSERT_TRUE(wait_model(p));
  constexpr int kN = 300;
  for (int i = 0; i < kN; ++i) ASSERT_TRUE(p.push(i));
  p.end();
  ASSERT_TRUE(p.wait_eos()) << p.pipeline().errors();
  expect_answered(p.out(), kN);
  EXPECT_EQ(p.stat("timeouts"), 0u);
}

TEST_F(FilterTest, RepliesOutOfOrderLeaveInInputOrder) {
  FilterPipeline p(path_, "max-inflight=4");
  ASSERT_TRUE(p.start());
  Model model(path_, Behaviour::swap_pairs);
  ASSERT_TRUE(wait_model(p));
  constexpr int kN = 40;
  for (int i = 0; i < kN; ++i) ASSERT_TRUE(p.push(i));
  p.end();
  ASSERT_TRUE(p.wait_eos()) << p.pipeline().errors();
  expect_answered(p.out(), kN);
}

TEST_F(FilterTest, RepliesThatAnswerNoFrameAreCountedNeverAttached) {
  FilterPipeline p(path_, "max-inflight=2");
  ASSERT_TRUE(p.start());
  Model model(path_, Behaviour::noisy);
  ASSERT_TRUE(wait_model(p));
  constexpr int kN = 20;
  for (int i = 0; i < kN; ++i) ASSERT_TRUE(p.push(i));
  p.end();
  ASSERT_TRUE(p.wait_eos()) << p.pipeline().errors();
  expect_answered(p.out(), kN);
  // Each frame's second answer and the one with another run's publish time are duplicate and
  // foreign while the frame waits, stale once it left; none of them reached a buffer (above). The
  // last frame's may still be on their way after EOS.
  const auto until = Clock::now() + kWait;
  auto late = [&] {
    return p.stat("replies-duplicate") + p.stat("replies-foreign") + p.stat("replies-stale");
  };
  while ((p.stat("replies-malformed") < kN || late() < 2u * kN) && Clock::now() < until)
    std::this_thread::sleep_for(Ms(5));
  EXPECT_EQ(p.stat("replies-duplicate") + p.stat("replies-foreign") + p.stat("replies-stale"),
            2u * kN);
  EXPECT_EQ(p.stat("replies-unknown"), static_cast<guint64>(kN));
  EXPECT_EQ(p.stat("replies-malformed"), static_cast<guint64>(kN));
}

TEST_F(FilterTest, PassWithoutModelGoesOnAtOnce) {
  // With nobody serving, no frame waits for the (long) timeout.
  FilterPipeline p(path_, "on-missing=pass timeout=30000000000");
  ASSERT_TRUE(p.start());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(p.push(i));
  p.end();
  ASSERT_TRUE(p.wait_eos(Ms(15000))) << p.pipeline().errors();
  const std::vector<Out> out = p.out();
  ASSERT_EQ(out.size(), 20u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(check_bytes(out[i].bytes, i), "");
    EXPECT_EQ(out[i].results, 0);
  }
  EXPECT_EQ(p.stat("no-model"), 20u);
  EXPECT_EQ(p.stat("passed"), 20u);
}

TEST_F(FilterTest, DropWithoutModelDropsAndStillEnds) {
  FilterPipeline p(path_, "on-missing=drop");
  ASSERT_TRUE(p.start());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(p.push(i));
  p.end();
  ASSERT_TRUE(p.wait_eos()) << p.pipeline().errors();
  EXPECT_TRUE(p.out().empty());
  EXPECT_EQ(p.stat("dropped"), 20u);
}

TEST_F(FilterTest, WaitGivesAMissingModelOneTimeoutThenFramesPass) {
  FilterPipeline p(path_, "on-missing=wait timeout=100000000 max-inflight=2");
  ASSERT_TRUE(p.start());
  const auto t0 = Clock::now();
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(p.push(i));
  p.end();
  ASSERT_TRUE(p.wait_eos()) << p.pipeline().errors();
  const auto waited = std::chrono::duration_cast<Ms>(Clock::now() - t0);
  const std::vector<Out> out = p.out();
  ASSERT_EQ(out.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(check_bytes(out[i].bytes, i), "");
  // The first frame waits its 100 ms for a model; the others pass at once (docs/elements.md).
  EXPECT_EQ(p.stat("timeouts"), 1u);
  EXPECT_EQ(p.stat("no-model"), 6u);
  EXPECT_GE(waited.count(), 90);
  EXPECT_LT(waited.count(), 1000);
}

TEST_F(FilterTest, SilentModelTimesOutPerPolicy) {
  for (const char* policy : {"pass", "drop"}) {
    SCOPED_TRACE(policy);
    TempDir d;
    const std::string path = d.file("model");
    FilterPipeline p(path, std::string("timeout=50000000 on-missing=") + policy);
    ASSERT_TRUE(p.start());
    Model model(path, Behaviour::silent);
    // Silent: it never replies, so the filter knows it only from its reply channel's format.
    ASSERT_TRUE(wait_model(p));
    for (int i = 0; i < 8; ++i) ASSERT_TRUE(p.push(i));
    p.end();
    ASSERT_TRUE(p.wait_eos()) << p.pipeline().errors();
    EXPECT_EQ(p.stat("timeouts"), 8u);
    const std::vector<Out> out = p.out();
    if (std::string(policy) == "pass") {
      ASSERT_EQ(out.size(), 8u);
      for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(check_bytes(out[i].bytes, i), "");
        EXPECT_EQ(out[i].results, 0);
      }
    } else {
      EXPECT_TRUE(out.empty());
      EXPECT_EQ(p.stat("dropped"), 8u);
    }
  }
}

TEST_F(FilterTest, ModelThatLeavesIsReplacedWithoutRestartingThePipeline) {
  FilterPipeline p(path_, "timeout=200000000");
  ASSERT_TRUE(p.start());
  int next = 0;
  auto push_answered = [&](int n) {
    for (int k = 0; k < n; ++k) ASSERT_TRUE(p.push(next++));
  };
  {
    Model first(path_, Behaviour::answer);
    ASSERT_TRUE(wait_model(p));
    push_answered(10);
    ASSERT_TRUE(p.wait(10));
  }
  ASSERT_TRUE(wait_model(p, false));
  const int gap_start = next;
  push_answered(5);  // nobody serves: they pass without results
  ASSERT_TRUE(p.wait(15));
  Model second(path_, Behaviour::answer);
  ASSERT_TRUE(wait_model(p));
  const int back = next;
  push_answered(10);
  p.end();
  ASSERT_TRUE(p.wait_eos()) << p.pipeline().errors();
  const std::vector<Out> out = p.out();
  ASSERT_EQ(out.size(), static_cast<std::size_t>(next));
  for (int i = 0; i < next; ++i) {
    EXPECT_EQ(check_bytes(out[i].bytes, i), "") << i;
    if (out[i].results) {
      EXPECT_EQ(out[i].result, i) << "frame " << i << " has another's result";
    }
    const bool served = i < gap_start || i >= back;
    EXPECT_EQ(out[i].results, served ? 1 : 0) << "frame " << i;
  }
}

// A flushing seek while a frame waits for its reply: that frame is dropped with the flush, nothing
// waits for it, and the frames after the seek come back each with its own result.
TEST_F(FilterTest, AFlushingSeekDropsTheFrameInFlightAndTheNextOnesAreAnswered) {
  FilterPipeline p(path_, "max-inflight=4", "stream-type=seekable");
  ASSERT_TRUE(p.start()) << p.pipeline().errors();
  Model model(path_, Behaviour::swap_pairs);  // frame 2k's answer waits for frame 2k+1
  ASSERT_TRUE(wait_model(p));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(p.push(i));
  ASSERT_TRUE(p.wait(4)) << p.pipeline().errors();  // frame 4 waits for its pair
  // ...once the model holds it: a seek that came first would flush frame 4 out of appsrc's queue
  // before the filter sent it (a loaded machine showed it), and the pairs after would shift.
  ASSERT_TRUE(poll_until([&] { return model.requests() >= 5; }, kWait));
  ASSERT_TRUE(p.seek_to_start()) << p.pipeline().errors();
  // The model pairs frame 4 with frame 100 (whose answer still reaches it), then 101-108 in pairs.
  for (int i = 100; i < 109; ++i) ASSERT_TRUE(p.push(i));
  p.end();
  ASSERT_TRUE(p.wait_eos()) << p.pipeline().errors();
  expect_answered_frames(p.out(), {0, 1, 2, 3, 100, 101, 102, 103, 104, 105, 106, 107, 108});
  EXPECT_EQ(p.stat("answered"), 13u);
  EXPECT_EQ(p.stat("passed"), 0u);
  EXPECT_EQ(p.stat("timeouts"), 0u);
  EXPECT_EQ(model.requests(), 14);
}

// The same seek from inside the filter's own push of frame 2 (a probe downstream, on whichever of
// its threads pushes): the flush cannot wait for that push, and the frames after it come back
// answered.
TEST_F(FilterTest, ASeekFromInsideItsOwnPushFlushesAndTheNextFramesAreAnswered) {
  FilterPipeline p(path_, "max-inflight=4", "stream-type=seekable");
  p.seek_from_push_at(2);
  ASSERT_TRUE(p.start()) << p.pipeline().errors();
  Model model(path_, Behaviour::answer);
  ASSERT_TRUE(wait_model(p));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(p.push(i));
  ASSERT_TRUE(p.wait_seeked()) << p.pipeline().errors();
  for (int i = 100; i < 105; ++i) ASSERT_TRUE(p.push(i));
  p.end();
  ASSERT_TRUE(p.wait_eos()) << p.pipeline().errors();
  // Frame 2 dropped by the probe that seeked.
  expect_answered_frames(p.out(), {0, 1, 100, 101, 102, 103, 104});
  EXPECT_EQ(p.stat("timeouts"), 0u);
}

TEST_F(FilterTest, CapsChangeMidStreamCrosses) {
  FilterPipeline p(path_, "");
  ASSERT_TRUE(p.start());
  Model model(path_, Behaviour::answer);
  ASSERT_TRUE(wait_model(p));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(p.push(i));
  g_object_set(p.pipeline().element("in"), "caps",
               caps_from("video/x-raw,format=GRAY8,width=8,height=8,framerate=30/1").get(),
               nullptr);
  for (int i = 5; i < 10; ++i) ASSERT_TRUE(p.push(i));  // the same 64 bytes, as 8x8
  p.end();
  ASSERT_TRUE(p.wait_eos()) << p.pipeline().errors();
  expect_answered(p.out(), 10);
}

}  // namespace
}  // namespace cudaipc::testing::gst
