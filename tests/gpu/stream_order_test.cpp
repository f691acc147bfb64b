// Reading and writing a CUDA channel on a stream of the caller's own (what bindings do with torch's
// or cupy's current stream): Frame::order_reads / order_release_after on the consumer side,
// Producer::write_after / order_after_writes / written on the producer side. Each race is set up
// so that it would be lost without the ordering: a slow GPU write before an early read, a slow GPU
// read before an early rewrite, a slow render before an early publish. Every byte is checked on
// the GPU, and the other end is a real process (cudaipc-gpu-peer).
#include <sys/wait.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "c_channel.hpp"
#include "channel_helpers.hpp"
#include "cudaipc/consumer.hpp"
#include "cudaipc/cudaipc.h"
#include "cudaipc/producer.hpp"
#include "gpu_support.hpp"
#include "peer_process.hpp"
#include "temp_dir.hpp"

namespace cudaipc {
namespace {

using gputest::Kernels;
using Peer = testing::PeerProcess;
using namespace std::chrono_literals;

constexpr std::uint64_t kSize = (1u << 20) + 13;
constexpr std::uint64_t kMs = 1'000'000;  // ns

class StreamOrder : public ::testing::Test {
 protected:
  void SetUp() override {
    CUDAIPC_REQUIRE_GPU();
    kernels_ = std::make_unique<Kernels>();
    path_ = dir_.file("channel");
  }

  CUstream own() const { return kernels_->own_stream(); }

  // A producer peer publishing frames 1..n (pts = key), each written by a kernel that spins
  // `slow_fill_ns` first.
  std::unique_ptr<Peer> producer_peer(std::uint64_t n, std::uint32_t slots,
                                      std::uint64_t slow_fill_ns) {
    return std::make_unique<Peer>(std::vector<std::string>{
        "produce", "--path", path_, "--size", std::to_string(kSize), "--frames", std::to_string(n),
        "--slots", std::to_string(slots), "--slow-fill-ns", std::to_string(slow_fill_ns),
        "--consumers", "1"});
  }

  std::unique_ptr<Consumer> consumer(ConsumeMode mode) {
    ConsumerOptions o;
    o.path = path_;
    o.mode = mode;
    return std::make_unique<Consumer>(o);
  }

  std::unique_ptr<Producer> producer(std::uint32_t slots) {
    ProducerOptions o;
    o.path = path_;
    o.slots = slots;
    o.memory = MemoryKind::cuda;
    o.block_timeout = 10s;
    auto p = std::make_unique<Producer>(o);
    p->set_format(testing::pattern_format(kSize));
    return p;
  }

  std::unique_ptr<Peer> consumer_peer(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"consume", "--path", path_};
    args.insert(args.end(), extra.begin(), extra.end());
    auto peer = std::make_unique<Peer>(args);
    EXPECT_TRUE(peer->wait_for("READY", 60s)) << peer->transcript();
    return peer;
  }

  // A peer's RESULT line once it exited well.
  std::string finished(Peer& peer) {
    const auto line = peer.wait_for("RESULT", 120s);
    const auto status = peer.wait_exit(30s);
    EXPECT_TRUE(line && status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
        << "peer output:\n"
        << peer.transcript();
    return line.value_or("");
  }

  // Reads every frame until the end of stream: `read` queues the reads on our own stream, and
  // `order_release` (by default: after our stream) orders the frame's release after them.
  template <typename Read, typename OrderRelease>
  std::uint64_t read_all(Consumer& c, Read&& read, OrderRelease&& order_release) {
    std::uint64_t frames = 0;
    for (;;) {
      Event ev = c.next(30s);
      if (ev.type == EventType::eos) return frames;
      EXPECT_NE(ev.type, EventType::timeout) << "after " << frames << " frames";
      EXPECT_NE(ev.type, EventType::disconnected) << ev.message;
      if (ev.type == EventType::timeout || ev.type == EventType::disconnected) return frames;
      if (ev.type != EventType::frame) continue;
      ev.frame.order_reads(own());
      read(ev.frame);
      order_release(ev.frame);
      ev.frame.release();  // at once: only the GPU keeps the slot from the producer now
      ++frames;
    }
  }
  template <typename Read>
  std::uint64_t read_all(Consumer& c, Read&& read) {
    return read_all(c, read, [&](const Frame& f) { f.order_release_after(own()); });
  }

  // read_all as a model's loop releases: after an event recorded behind the reads (`wait_first`:
  // once the CPU waited for it, as the loop waits for its answer through it).
  template <typename Read>
  std::uint64_t read_all_after_events(Consumer& c, bool wait_first, Read&& read) {
    const cuda::Driver& d = cuda::driver();
    cuda::ScopedContext current(kernels_->context()->get());
    CUevent raw = nullptr;
    cuda::check(d.cuEventCreate(&raw, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    const cuda::Event read_done(kernels_->context(), raw);
    return read_all(c, read, [&](const Frame& f) {
      cuda::check(d.cuEventRecord(read_done.get(), own()), "cuEventRecord");
      if (wait_first) cuda::check(d.cuEventSynchronize(read_done.get()), "cuEventSynchronize");
      f.order_release_after_event(read_done.get());
    });
  }

  // Each frame read on our stream, then again after a 2 ms spin, and released at once by
  // `read_all_frames` (its ordering of the release under test); with two slots the producer
  // rewrites a slot as soon as it may. Both reads must see the same frame, and the releases came
  // while the reads were still queued: the consumer's stream wrote them (all of them, unless this
  // thread slept through a read).
  template <typename ReadAll>
  void expect_slow_reads_held(ReadAll&& read_all_frames) {
    const std::uint64_t n = gputest::frame_count(200);
    auto peer = producer_peer(n, 2, 0);
    ASSERT_TRUE(peer->wait_for("READY", 60s)) << peer->transcript();
    auto c = consumer(ConsumeMode::every_frame);
    const std::function<void(const Frame&)> read = [&](const Frame& f) {
      kernels_->slow_read(own(), reinterpret_cast<CUdeviceptr>(f.data()), f.size(), f.desc().pts,
                          2 * kMs);
    };
    EXPECT_EQ(read_all_frames(*c, read), n);
    const gputest::Counters k = kernels_->counters(own());
    EXPECT_EQ(k.bad, 0u);
    EXPECT_EQ(k.changed, 0u);
    EXPECT_GE(c->counters().gpu_releases, n * 9 / 10) << "of " << n << " frames";
    c.reset();  // the peer finishes once its consumer has gone
    finished(*peer);
  }

  testing::TempDir dir_;
  std::unique_ptr<Kernels> kernels_;
  std::string path_;
};

// The producer's kernel spins 1 ms before it writes each frame, which is published at once; we read
// on our own stream, which the channel knows nothing of. order_reads must make it wait on the GPU.
TEST_F(StreamOrder, ReadsOnTheCallersStreamWaitForASlowWrite) {
  const std::uint64_t n = gputest::frame_count(200);
  auto peer = producer_peer(n, 4, kMs);
  ASSERT_TRUE(peer->wait_for("READY", 60s)) << peer->transcript();
  auto c = consumer(ConsumeMode::every_frame);
  const std::uint64_t frames = read_all(*c, [&](const Frame& f) {
    kernels_->verify(own(), reinterpret_cast<CUdeviceptr>(f.data()), f.size(), f.desc().pts);
  });
  EXPECT_EQ(frames, n);
  EXPECT_EQ(kernels_->counters(own()).bad, 0u);
  // Each frame was taken while its 1 ms fill still ran: the acquires queued GPU waits, and the
  // counters say so (the first may have landed before we woke).
  EXPECT_GE(c->counters().gpu_waits, n / 2) << "of " << n << " frames";
  c.reset();  // the peer finishes once its consumer has gone
  finished(*peer);
}

// Our kernel reads each frame, spins 2 ms and reads it again; the frame is released on the CPU at
// once and, with two slots, the producer rewrites that slot right away. order_release_after must
// hold its write on the GPU until our second read: both reads see the same frame.
TEST_F(StreamOrder, ReleaseAfterTheCallersStreamHoldsTheSlotFromTheProducer) {
  expect_slow_reads_held([&](Consumer& c, const auto& read) { return read_all(c, read); });
}

// The model's loop: its answer waited for through an event after its reads. Released after that
// event, a frame needs one query and a CPU store, no GPU work; every frame is checked on the GPU.
TEST_F(StreamOrder, ReleaseAfterACompletedEventIsACpuStore) {
  const std::uint64_t n = gputest::frame_count(100);
  auto peer = producer_peer(n, 2, 0);
  ASSERT_TRUE(peer->wait_for("READY", 60s)) << peer->transcript();
  auto c = consumer(ConsumeMode::every_frame);
  const std::uint64_t frames = read_all_after_events(*c, true, [&](const Frame& f) {
    kernels_->verify(own(), reinterpret_cast<CUdeviceptr>(f.data()), f.size(), f.desc().pts);
  });
  EXPECT_EQ(frames, n);
  EXPECT_EQ(kernels_->counters(own()).bad, 0u);
  EXPECT_EQ(c->counters().gpu_releases, 0u);
  c.reset();
  finished(*peer);
}

// Released at once after an event its 2 ms read has not reached yet: the slot must stay the
// reader's on the GPU until then, with two slots and a producer rewriting as soon as it may.
TEST_F(StreamOrder, ReleaseAfterAnEventHoldsTheSlotFromTheProducer) {
  expect_slow_reads_held(
      [&](Consumer& c, const auto& read) { return read_all_after_events(c, false, read); });
}

// No event is a mistake named at once, the frame still the caller's to release.
TEST_F(StreamOrder, ReleaseAfterNoEventIsRefused) {
  auto peer = producer_peer(1, 2, 0);
  ASSERT_TRUE(peer->wait_for("READY", 60s)) << peer->transcript();
  auto c = consumer(ConsumeMode::every_frame);
  Event ev = c->next(30s);
  while (ev.type == EventType::format) ev = c->next(30s);
  ASSERT_EQ(ev.type, EventType::frame) << ev.message;
  try {
    ev.frame.order_release_after_event(nullptr);
    ADD_FAILURE() << "a null event was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("event"), std::string::npos) << e.what();
  }
  ev.frame.release();
  c.reset();
  finished(*peer);
}

// A consumer that never asked for its stream releases without asking the driver whether the stream
// is idle (nobody else can queue work there). Half way, we ask for it and read each frame on it
// with a 2 ms spin, releasing at once without naming a stream: from then on every release must
// follow those reads, so with two slots the producer's rewrites wait on the GPU.
TEST_F(StreamOrder, ReadsOnTheConsumersStreamAskedForLateHoldTheSlot) {
  const std::uint64_t n = gputest::frame_count(200);
  auto peer = producer_peer(n, 2, 0);
  ASSERT_TRUE(peer->wait_for("READY", 60s)) << peer->transcript();
  auto c = consumer(ConsumeMode::every_frame);
  std::uint64_t frames = 0, late = 0;
  CUstream theirs = nullptr;
  for (;;) {
    Event ev = c->next(30s);
    if (ev.type == EventType::eos) break;
    ASSERT_NE(ev.type, EventType::timeout) << "after " << frames << " frames";
    ASSERT_NE(ev.type, EventType::disconnected) << ev.message;
    if (ev.type != EventType::frame) continue;
    const auto data = reinterpret_cast<CUdeviceptr>(ev.frame.data());
    if (++frames <= n / 2) {
      ev.frame.order_reads(own());
      kernels_->verify(own(), data, ev.frame.size(), ev.frame.desc().pts);
      ev.frame.order_release_after(own());
    } else {
      if (!theirs) theirs = static_cast<CUstream>(c->cuda_stream());
      ASSERT_EQ(ev.frame.cuda_stream(), theirs);
      kernels_->slow_read(theirs, data, ev.frame.size(), ev.frame.desc().pts, 2 * kMs);
      ++late;
    }
    ev.frame.release();
  }
  EXPECT_EQ(frames, n);
  ASSERT_NE(theirs, nullptr);
  kernels_->counters(own());  // the first half's checks have run too (one set of counters)
  const gputest::Counters k = kernels_->counters(theirs);
  EXPECT_EQ(k.bad, 0u);
  EXPECT_EQ(k.changed, 0u) << "a slot was rewritten under a read queued on the consumer's stream";
  EXPECT_GE(c->counters().gpu_releases, late * 9 / 10) << "of " << late << " late frames";
  c.reset();  // the peer finishes once its consumer has gone
  finished(*peer);
}

// A model reading CUDA requests through the C API on the stream cudaipc_request_format names: it
// is the server's own (the frame's says the same), and each request's release, at once, follows
// the 2 ms read queued there: with two slots the producer's rewrites wait on the GPU.
TEST_F(StreamOrder, ARequestsStreamThroughTheCApiIsTheServersAndHoldsTheSlot) {
  ProducerOptions po;
  po.path = path_;
  po.slots = 2;
  po.memory = MemoryKind::cuda;
  po.role = ChannelRole::requests;
  po.block_timeout = 10s;
  Producer p(po);
  p.set_format(testing::pattern_format(kSize));
  const auto server = testing::c_server({path_});
  ASSERT_TRUE(server);
  cudaipc_server* s = server.get();
  ASSERT_TRUE(testing::wait_consumers(p, 1, 60s));
  CUstream first = nullptr;
  const std::uint64_t n = gputest::frame_count(50);
  for (std::uint64_t key = 1; key <= n; ++key) {
    ASSERT_EQ(gputest::publish_pattern(p, *kernels_, key, kSize), PublishStatus::published);
    cudaipc_request_view v{};
    std::uint32_t count = 0;
    ASSERT_EQ(cudaipc_server_batch(s, 1, 0, 10'000'000'000ull, &v, &count, nullptr), CUDAIPC_OK)
        << cudaipc_last_error();
    ASSERT_EQ(count, 1u);
    cudaipc_frame* f = v.frame.frame;
    void* stream = nullptr;
    ASSERT_EQ(cudaipc_request_format(f, nullptr, nullptr, &stream), CUDAIPC_OK);
    ASSERT_NE(stream, nullptr) << "request " << key;
    EXPECT_EQ(stream, cudaipc_frame_cuda_stream(f));
    if (!first) first = static_cast<CUstream>(stream);
    EXPECT_EQ(static_cast<CUstream>(stream), first);
    kernels_->slow_read(static_cast<CUstream>(stream), static_cast<CUdeviceptr>(v.frame.data),
                        v.frame.size, v.frame.pts, 2 * kMs);
    cudaipc_frame_release(f);
  }
  ASSERT_NE(first, nullptr);
  const gputest::Counters k = kernels_->counters(first);
  EXPECT_EQ(k.bad, 0u);
  EXPECT_EQ(k.changed, 0u) << "a slot was rewritten under a read queued on the server's stream";
}

// We render each frame on our own stream behind a 1 ms spin into one of four device buffers and
// publish it (a copy) at once: write_after must make the copy wait for the render, and
// order_after_writes must keep the next render into a buffer behind the copy that reads it.
TEST_F(StreamOrder, PublishCopiesAfterTheCallersStream) {
  auto p = producer(4);
  auto peer = consumer_peer();
  ASSERT_TRUE(testing::wait_consumers(*p, 1, 60s));
  std::vector<cuda::DeviceAllocation> buffers;
  for (int i = 0; i < 4; ++i)
    buffers.push_back(cuda::make_device_allocation(kernels_->context(), kSize));
  const std::uint64_t n = gputest::frame_count(200);
  std::uint64_t last = 0;
  for (std::uint64_t key = 1; key <= n; ++key) {
    const CUdeviceptr buf = buffers[key % buffers.size()].get();
    p->order_after_writes(own());  // the copies still reading `buf` come first
    kernels_->slow_fill(own(), buf, kSize, key, kMs);
    p->write_after(own());
    FrameInfo info;
    info.pts = key;
    ASSERT_EQ(p->publish(reinterpret_cast<const void*>(buf), kSize, info, true),
              PublishStatus::published);
    last = p->last_seq();
  }
  p->end_of_stream();
  const std::string r = finished(*peer);
  EXPECT_EQ(testing::field(r, "frames"), static_cast<long long>(n)) << r;
  EXPECT_EQ(testing::field(r, "bad"), 0) << r;
  // Once the consumer has read them all, every copy has run.
  EXPECT_TRUE(p->written(last));
}

// A borrowed slot rendered on our own stream: order_after_writes keeps the render behind the slow
// reads of the slot's previous frame (the consumer spins 1 ms between two reads), write_after keeps
// the commit behind the render (which spins 1 ms before writing).
TEST_F(StreamOrder, RenderIntoABorrowedSlotOnTheCallersStream) {
  auto p = producer(2);
  auto peer = consumer_peer({"--slow-read-ns", std::to_string(kMs)});
  ASSERT_TRUE(testing::wait_consumers(*p, 1, 60s));
  const std::uint64_t n = gputest::frame_count(200);
  for (std::uint64_t key = 1; key <= n; ++key) {
    PublishStatus st;
    WriteSlot ws = p->begin_frame(&st);
    ASSERT_TRUE(ws) << "frame " << key;
    p->order_after_writes(own());
    kernels_->slow_fill(own(), ws.address(), kSize, key, kMs);
    p->write_after(own());
    FrameInfo info;
    info.pts = key;
    p->commit(ws, info);
  }
  p->end_of_stream();
  const std::string r = finished(*peer);
  EXPECT_EQ(testing::field(r, "frames"), static_cast<long long>(n)) << r;
  EXPECT_EQ(testing::field(r, "bad"), 0) << r;
  EXPECT_EQ(testing::field(r, "changed"), 0) << r;
}

// The producer publishes frame 1 at once and writes it 300 ms later; it is killed in between. The
// death releases the consumer's GPU wait (its stream drains), and the frame says it was never
// written, where before the kill it could not know.
TEST_F(StreamOrder, AFrameTheProducerDiedBeforeWritingSaysSo) {
  auto peer = producer_peer(4, 4, 300 * kMs);
  ASSERT_TRUE(peer->wait_for("READY", 60s)) << peer->transcript();
  auto c = consumer(ConsumeMode::every_frame);
  Event ev;
  for (int i = 0; i < 100 && ev.type != EventType::frame; ++i) ev = c->next(30s);
  ASSERT_EQ(ev.type, EventType::frame);
  ASSERT_EQ(ev.frame.seq(), 1u);
  EXPECT_TRUE(ev.frame.written());  // nothing says otherwise while the producer lives
  peer->kill_hard();
  ASSERT_TRUE(peer->wait_exit(30s));
  // A CPU wait on the consumer's stream: it ends once the death watch has released the wait.
  kernels_->counters(static_cast<CUstream>(c->cuda_stream()));
  EXPECT_FALSE(ev.frame.written());
  ev.frame.release();
  EXPECT_FALSE(ev.frame.written());
}

// An idle stream needs no ordering: nothing is queued (the producer's stream stays idle too), and
// written() follows the producer's own stream.
TEST_F(StreamOrder, IdleStreamsQueueNothing) {
  auto p = producer(2);
  kernels_->counters(own());  // drains our stream
  p->write_after(own());
  p->order_after_writes(own());
  {
    cuda::ScopedContext current(kernels_->context()->get());
    EXPECT_EQ(cuda::driver().cuStreamQuery(static_cast<CUstream>(p->cuda_stream())), CUDA_SUCCESS);
  }
  EXPECT_EQ(p->last_seq(), 0u);
  EXPECT_TRUE(p->written(0));
  ASSERT_EQ(gputest::publish_pattern(*p, *kernels_, 1, kSize, 20 * kMs), PublishStatus::published);
  EXPECT_EQ(p->last_seq(), 1u);
  EXPECT_FALSE(p->written(1));  // the fill spins 20 ms on the producer's stream
  for (int i = 0; i < 2000 && !p->written(1); ++i) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(p->written(1));
}

}  // namespace
}  // namespace cudaipc
