// cudaipcfilter lends its ring's slots upstream (ipc-mode=host): videotestsrc takes the filter's
// pool from the allocation query, so each frame is written straight into the slot the model reads
// (a pad probe stamps the frame's id and pattern into the buffer videotestsrc filled, which must
// be a lent slot), and the filter pushes that same buffer on. Downstream keeps some of them for
// many frames: each must still hold its own bytes after the ring published dozens of later frames
// (a held slot is never written again until its buffer is freed), while the model, in this
// process, checks every frame's bytes and answers with the id it read. Without a model, lent
// frames pass and the pool keeps lending. Downstream keeping more buffers than the ring has slots
// slows the filter (each frame waits `timeout` for a slot) but never deadlocks it.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cudaipc/metas.hpp"
#include "cudaipc/server.hpp"
#include "element_harness.hpp"
#include "mp/frame_pattern.hpp"

namespace cudaipc::testing::gst {
namespace {

using gstmp::fill_frame;
using gstmp::frame_id;
using gstmp::frame_intact;

constexpr Ms kWait{20000};
constexpr int kW = 64, kH = 48;  // GRAY8: rows of 64 bytes, no padding

// The model: every frame's bytes checked, and answered with a custom meta "filter-result" whose
// "index" is the id read from the frame, -1 when the frame was not intact.
class Model {
 public:
  explicit Model(const std::string& path) {
    ServerOptions o;
    o.path = path;
    server_ = std::make_unique<Server>(o);
    thread_ = std::thread([this] { run(); });
  }
  ~Model() {
    stop_ = true;
    thread_.join();
  }
  int requests() const { return requests_.load(); }
  int torn() const { return torn_.load(); }

 private:
  void run() {
    while (!stop_) {
      ServerEvent e = server_->next(std::chrono::milliseconds(10));
      if (e.type != ServerEventType::request) continue;
      ++requests_;
      const Frame& f = e.request.frame;
      const bool intact = f.size() == kW * kH && frame_intact(f.data(), f.size());
      if (!intact) ++torn_;
      std::uint8_t area[256];
      metas::AreaWriter w(area, sizeof area);
      if (std::uint8_t* b = w.begin_record(metas::RecordKind::custom, "filter-result", 128)) {
        metas::CustomWriter cw(b, 128);
        cw.add_int64("index", intact ? static_cast<std::int64_t>(frame_id(f.data())) : -1);
        w.commit_record(cw.finish());
      }
      server_->reply(e.request, area, static_cast<std::uint32_t>(w.size()));
    }
  }

  std::unique_ptr<Server> server_;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0}, torn_{0};
  std::thread thread_;
};

// The memory of a buffer lent by a slot pool carries its slot (slot_pool.cpp's qdata).
bool is_lent_slot(GstBuffer* buf) {
  static const GQuark q = g_quark_from_static_string("cudaipc-write-slot");
  return gst_buffer_n_memory(buf) == 1 &&
         gst_mini_object_get_qdata(GST_MINI_OBJECT(gst_buffer_peek_memory(buf, 0)), q);
}

gint64 result_of(GstBuffer* buf, int* count) {
  gint64 idx = -1;
  *count = 0;
  gpointer state = nullptr;
  while (GstMeta* meta = gst_buffer_iterate_meta(buf, &state)) {
    if (!gst_meta_info_is_custom(meta->info)) continue;
    auto* cm = reinterpret_cast<GstCustomMeta*>(meta);
    if (!gst_custom_meta_has_name(cm, "filter-result")) continue;
    if ((*count)++ == 0) gst_structure_get_int64(gst_custom_meta_get_structure(cm), "index", &idx);
  }
  return idx;
}

std::string bytes_problem(GstBuffer* buf, std::uint64_t id) {
  GstMapInfo m;
  if (!gst_buffer_map(buf, &m, GST_MAP_READ)) return "unmappable";
  std::string why;
  if (m.size != static_cast<gsize>(kW * kH))
    why = "size " + std::to_string(m.size);
  else if (frame_id(m.data) != id)
    why = "holds frame " + std::to_string(frame_id(m.data));
  else if (!frame_intact(m.data, m.size))
    why = "torn";
  gst_buffer_unmap(buf, &m);
  return why;
}

// videotestsrc ! cudaipcfilter ! fakesink, the test taking (and holding) every buffer itself:
// fakesink's handoff hands each over and waits until the test took the one before (appsink would
// keep the last buffer it handed out until it is disposed).
class LendPipeline {
 public:
  LendPipeline(const std::string& path, int frames, const std::string& props)
      : frames_(frames),
        pipe_("videotestsrc name=src num-buffers=" + std::to_string(frames) +
              " ! video/x-raw,format=GRAY8,width=" + std::to_string(kW) + ",height=" +
              std::to_string(kH) + ",framerate=30/1 ! cudaipcfilter name=f ipc-mode=host " + props +
              " ! fakesink name=out sync=false enable-last-sample=false signal-handoffs=true") {
    g_object_set(pipe_.element("f"), "socket-path", path.c_str(), nullptr);
    Ptr<GstPad> pad(gst_element_get_static_pad(pipe_.element("src"), "src"));
    gst_pad_add_probe(pad.get(), GST_PAD_PROBE_TYPE_BUFFER, &LendPipeline::stamp, this, nullptr);
    g_signal_connect(pipe_.element("out"), "handoff", G_CALLBACK(&LendPipeline::handoff), this);
  }
  ~LendPipeline() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    pipe_.stop();
  }
  bool start() { return pipe_.set_state(GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE; }
  // The next buffer out; null once every frame came, or after kWait.
  Ptr<GstBuffer> pull() {
    std::unique_lock<std::mutex> lock(mu_);
    if (taken_ == frames_ || !cv_.wait_for(lock, kWait, [&] { return next_ != nullptr; }))
      return nullptr;
    ++taken_;
    Ptr<GstBuffer> b(std::exchange(next_, nullptr));
    cv_.notify_all();
    return b;
  }
  guint64 stat(const char* field) {
    GstStructure* s = nullptr;
    g_object_get(pipe_.element("f"), "stats", &s, nullptr);
    guint64 v = 0;
    guint u = 0;
    gboolean b = FALSE;
    if (s && !gst_structure_get_uint64(s, field, &v)) {
      if (gst_structure_get_uint(s, field, &u))
        v = u;
      else if (gst_structure_get_boolean(s, field, &b))
        v = b;
    }
    if (s) gst_structure_free(s);
    return v;
  }
  int lent() const { return lent_.load(); }
  Pipeline& pipeline() { return pipe_; }

 private:
  static void handoff(GstElement*, GstBuffer* buf, GstPad*, gpointer data) {
    auto* self = static_cast<LendPipeline*>(data);
    std::unique_lock<std::mutex> lock(self->mu_);
    self->cv_.wait(lock, [&] { return self->next_ == nullptr || self->stopping_; });
    if (self->stopping_) return;
    self->next_ = gst_buffer_ref(buf);
    self->cv_.notify_all();
  }

  // Upstream's write: the frame's id and pattern into the buffer videotestsrc just filled.
  static GstPadProbeReturn stamp(GstPad*, GstPadProbeInfo* info, gpointer data) {
    auto* self = static_cast<LendPipeline*>(data);
    GstBuffer* buf = GST_PAD_PROBE_INFO_BUFFER(info);
    if (is_lent_slot(buf)) ++self->lent_;
    GstMapInfo m;
    if (gst_buffer_map(buf, &m, GST_MAP_WRITE)) {
      fill_frame(m.data, m.size, static_cast<std::uint64_t>(self->next_id_++));
      gst_buffer_unmap(buf, &m);
    }
    return GST_PAD_PROBE_OK;
  }

  const int frames_;
  std::mutex mu_;
  std::condition_variable cv_;
  GstBuffer* next_ = nullptr;  // handed over, not yet taken
  int taken_ = 0;
  bool stopping_ = false;
  Pipeline pipe_;
  std::atomic<int> next_id_{0}, lent_{0};
};

bool wait_model(LendPipeline& p) {
  const auto until = Clock::now() + kWait;
  while (Clock::now() < until) {
    if (p.stat("model-connected")) return true;
    std::this_thread::sleep_for(Ms(5));
  }
  return false;
}

class FilterLendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    init_gst();
    if (!element_exists("cudaipcfilter")) GTEST_SKIP() << "the cudaipc plugin was not found";
    for (const char* e : {"videotestsrc", "fakesink", "capsfilter"})
      if (!element_exists(e)) GTEST_SKIP() << "element " << e << " is not installed";
  }
  TempDir dir_;
  std::string path_ = dir_.file("model");
};

// Every frame written by upstream into a lent slot, answered with its own id, and pushed on as
// that same buffer; every 8th buffer is kept downstream for 40 more frames (five at a time, in a
// ring of 4 + 2 + 8 slots that the model's frames go round three times meanwhile): its bytes are
// still its own when released, so no later frame was written into its slot.
TEST_F(FilterLendTest, UpstreamWritesIntoTheSlotAndHeldSlotsAreNeverOverwritten) {
  constexpr int kN = 240, kEvery = 8, kHoldFor = 40;
  LendPipeline p(path_, kN, "max-inflight=4 downstream-buffers=8");
  Model model(path_);
  // The channel opens at READY: the model is there before the first frame.
  ASSERT_EQ(p.pipeline().set_state(GST_STATE_READY), GST_STATE_CHANGE_SUCCESS);
  ASSERT_TRUE(wait_model(p)) << p.pipeline().errors();
  ASSERT_TRUE(p.start());

  struct Held {
    int id;
    Ptr<GstBuffer> buf;
  };
  std::deque<Held> held;
  int out = 0, kept_most = 0;
  auto release_older_than = [&](int id) {
    while (!held.empty() && held.front().id <= id) {
      EXPECT_EQ(bytes_problem(held.front().buf.get(), held.front().id), "")
          << "frame " << held.front().id << " kept downstream was overwritten";
      held.pop_front();
    }
  };
  while (Ptr<GstBuffer> s = p.pull()) {
    GstBuffer* b = s.get();
    EXPECT_EQ(bytes_problem(b, out), "") << "frame " << out;
    EXPECT_TRUE(is_lent_slot(b)) << "frame " << out << " is not the slot upstream wrote into";
    int results = 0;
    EXPECT_EQ(result_of(b, &results), out) << "frame " << out << ": the model read other bytes";
    EXPECT_EQ(results, 1) << "frame " << out;
    release_older_than(out - kHoldFor);
    if (out % kEvery == 0) held.push_back(Held{out, std::move(s)});
    kept_most = std::max(kept_most, static_cast<int>(held.size()));
    ++out;
  }
  release_older_than(kN);
  EXPECT_EQ(out, kN) << p.pipeline().errors();
  EXPECT_EQ(kept_most, kHoldFor / kEvery);
  EXPECT_EQ(p.lent(), kN) << "upstream got buffers that were not slots";
  EXPECT_EQ(p.stat("in-place"), static_cast<guint64>(kN));
  EXPECT_EQ(p.stat("copied"), 0u);
  EXPECT_EQ(p.stat("answered"), static_cast<guint64>(kN));
  EXPECT_EQ(p.stat("not-sent"), 0u);
  EXPECT_EQ(p.stat("timeouts"), 0u);
  EXPECT_EQ(model.torn(), 0);
  EXPECT_EQ(model.requests(), kN);
  // Every buffer freed (fakesink lets go of the last one once its handoff returned): no slot
  // stays out of the ring.
  EXPECT_TRUE(poll_until([&] { return p.stat("slots-held") == 0; }, kWait)) << p.stat("slots-held");
}

// Nobody serves: each lent frame passes unsent, its slot held while downstream keeps it, and the
// pool keeps lending (an unsent lend does not leave the ring's one borrowed slot taken).
TEST_F(FilterLendTest, WithoutAModelLentFramesPassAndThePoolKeepsLending) {
  constexpr int kN = 60, kHoldFor = 20;
  LendPipeline p(path_, kN, "on-missing=pass downstream-buffers=4");
  ASSERT_TRUE(p.start());
  std::deque<Ptr<GstBuffer>> held;
  int out = 0;
  while (Ptr<GstBuffer> s = p.pull()) {
    GstBuffer* b = s.get();
    EXPECT_EQ(bytes_problem(b, out), "") << "frame " << out;
    int results = 0;
    result_of(b, &results);
    EXPECT_EQ(results, 0);
    if (out % 10 == 0) held.push_back(std::move(s));
    if (held.size() > kHoldFor / 10) {
      GstBuffer* old = held.front().get();
      EXPECT_EQ(bytes_problem(old, out - kHoldFor), "") << "a kept frame was overwritten";
      held.pop_front();
    }
    ++out;
  }
  EXPECT_EQ(out, kN) << p.pipeline().errors();
  EXPECT_EQ(p.lent(), kN);
  EXPECT_EQ(p.stat("passed"), static_cast<guint64>(kN));
  EXPECT_EQ(p.stat("in-place") + p.stat("copied"), 0u);
  held.clear();
  EXPECT_TRUE(poll_until([&] { return p.stat("slots-held") == 0; }, kWait)) << p.stat("slots-held");
}

// Downstream keeps every buffer, more than the ring has slots (1 + 2 + 0): once they are all
// held, upstream's acquire waits `timeout` for a slot and gets ordinary memory, whose copy finds no
// slot either (not sent), and the frame passes: slower, never stuck, nothing overwritten.
TEST_F(FilterLendTest, DownstreamKeepingMoreThanTheRingNeverDeadlocks) {
  constexpr int kN = 10;
  LendPipeline p(path_, kN, "max-inflight=1 downstream-buffers=0 timeout=100000000");
  Model model(path_);
  ASSERT_EQ(p.pipeline().set_state(GST_STATE_READY), GST_STATE_CHANGE_SUCCESS);
  ASSERT_TRUE(wait_model(p)) << p.pipeline().errors();
  ASSERT_TRUE(p.start());
  std::vector<Ptr<GstBuffer>> kept;
  while (Ptr<GstBuffer> b = p.pull()) {
    EXPECT_EQ(bytes_problem(b.get(), static_cast<int>(kept.size())), "") << "frame " << kept.size();
    kept.push_back(std::move(b));
  }
  ASSERT_EQ(kept.size(), static_cast<std::size_t>(kN)) << p.pipeline().errors();
  for (int i = 0; i < kN; ++i) EXPECT_EQ(bytes_problem(kept[i].get(), i), "") << "frame " << i;
  EXPECT_GT(p.stat("not-sent"), 0u) << "the ring was never exhausted";
  EXPECT_EQ(p.stat("in-place") + p.stat("not-sent") + p.stat("copied"), static_cast<guint64>(kN));
  EXPECT_EQ(model.torn(), 0);
  kept.clear();
  EXPECT_TRUE(poll_until([&] { return p.stat("slots-held") == 0; }, kWait)) << p.stat("slots-held");
}

}  // namespace
}  // namespace cudaipc::testing::gst
