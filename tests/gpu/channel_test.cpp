// CUDA channels between real processes (this test and cudaipc-gpu-peer): every byte of every frame
// written and checked on the GPU, ordering races both ways, several consumers, killed peers,
// format changes and resource leaks, each for both export modes.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "channel_helpers.hpp"
#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"
#include "gpu_support.hpp"
#include "pattern.hpp"
#include "peer_process.hpp"
#include "proc_stats.hpp"
#include "retire.hpp"
#include "temp_dir.hpp"

namespace cudaipc {
namespace {

using gputest::Kernels;
using Peer = testing::PeerProcess;
using namespace std::chrono_literals;

constexpr std::uint64_t kSize = (1u << 20) + 13;
constexpr std::uint64_t kMs = 1'000'000;  // ns

const char* mode_name(CudaExportMode m) {
  return m == CudaExportMode::vmm ? "vmm" : "legacy";
}

// A peer's "RESULT k=v ..." line, read by key.
struct Result {
  std::string line;
  long long operator[](const char* key) const { return testing::field(line, key); }
};

bool killed_by(const std::optional<int>& status, int sig) {
  return status && WIFSIGNALED(*status) && WTERMSIG(*status) == sig;
}

class Channel : public ::testing::TestWithParam<CudaExportMode> {
 protected:
  void SetUp() override {
    const std::string why = gputest::gpu_unavailable_reason();
    if (!why.empty()) {
      std::fprintf(stderr, "GPU test skipped: %s\n", why.c_str());
      GTEST_SKIP() << "no GPU: " << why;
    }
    kernels_ = std::make_unique<Kernels>();
    path_ = dir_.file("channel");
  }

  std::unique_ptr<Producer> producer(std::uint32_t slots = 4, std::uint64_t bytes = kSize,
                                     std::chrono::nanoseconds lease_timeout = 5s) {
    ProducerOptions o;
    o.path = path_;
    o.slots = slots;
    o.memory = MemoryKind::cuda;
    o.cuda.export_mode = GetParam();
    o.block_timeout = 10s;
    o.lease_timeout = lease_timeout;
    auto p = std::make_unique<Producer>(o);
    p->set_format(testing::pattern_format(bytes));
    return p;
  }

  // A consumer peer, started and connected.
  std::unique_ptr<Peer> consumer(std::vector<std::string> args = {}) {
    args.insert(args.begin(), {"consume", "--path", path_});
    auto peer = std::make_unique<Peer>(args);
    EXPECT_TRUE(peer->wait_for("READY", 60s)) << peer->transcript();
    return peer;
  }

  std::vector<std::string> produce_args(CudaExportMode mode) const {
    return {
        "produce", "--path", path_, "--export", mode_name(mode), "--size", std::to_string(kSize)};
  }

  // A producer peer in the other export mode on the same path, for a consumer that reconnects:
  // 50 frames once one consumer has joined.
  std::unique_ptr<Peer> next_producer() const {
    const CudaExportMode other =
        GetParam() == CudaExportMode::vmm ? CudaExportMode::legacy : CudaExportMode::vmm;
    auto a = produce_args(other);
    a.insert(a.end(), {"--frames", "50", "--consumers", "1"});
    return std::make_unique<Peer>(a);
  }

  void wait_consumers(const Producer& p, std::size_t n) {
    ASSERT_TRUE(testing::wait_consumers(p, n, 60s))
        << p.consumer_count() << " consumers, expected " << n;
  }

  // Publishes frames 1..n (pattern by key), ends the stream, and checks that consumer `c` read
  // every one intact; returns its RESULT.
  Result publish_all_to(Producer& p, Peer& c, std::uint64_t n) {
    for (std::uint64_t key = 1; key <= n; ++key)
      EXPECT_EQ(gputest::publish_pattern(p, *kernels_, key, kSize), PublishStatus::published);
    p.end_of_stream();
    Result r = finished(c);
    EXPECT_EQ(r["frames"], static_cast<long long>(n));
    EXPECT_EQ(r["bad"], 0);
    return r;
  }

  // Checks a peer ended well and returns its RESULT.
  Result finished(Peer& peer, std::chrono::seconds timeout = 120s) {
    const auto line = peer.wait_for("RESULT", timeout);
    const auto status = peer.wait_exit(30s);
    EXPECT_TRUE(line && status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
        << "peer output:\n"
        << peer.transcript();
    return Result{line.value_or("")};
  }

  testing::TempDir dir_;
  std::unique_ptr<Kernels> kernels_;
  std::string path_;
};

// 1. Integrity: every byte of 10 000 frames, through all three write paths (zero-copy GPU fill,
//    host copy, device copy), checked on the GPU in the consumer process.
TEST_P(Channel, IntegrityEveryByteOfEveryFrame) {
  auto p = producer();
  auto c = consumer();
  wait_consumers(*p, 1);
  const std::uint64_t frames = gputest::frame_count(10000);
  std::vector<std::uint8_t> host(kSize);
  cuda::DeviceAllocation src = cuda::make_device_allocation(kernels_->context(), kSize);
  const auto stream = static_cast<CUstream>(p->cuda_stream());
  for (std::uint64_t key = 1; key <= frames; ++key) {
    FrameInfo info;
    info.pts = key;
    PublishStatus st;
    if (key % 16 == 1) {
      testing::fill_pattern(host.data(), kSize, key);
      st = p->publish(host.data(), kSize, info);
    } else if (key % 16 == 2) {
      kernels_->fill(stream, src.get(), kSize, key);
      st = p->publish(reinterpret_cast<const void*>(src.get()), kSize, info, true);
    } else {
      st = gputest::publish_pattern(*p, *kernels_, key, kSize);
    }
    ASSERT_EQ(st, PublishStatus::published) << "frame " << key;
  }
  p->end_of_stream();
  auto r = finished(*c);
  EXPECT_EQ(r["frames"], static_cast<long long>(frames));
  EXPECT_EQ(r["bad"], 0);
  EXPECT_EQ(r["skipped"], 0);
}

// 2a. The producer's kernel spins ~1 ms before it writes and the frame is published at once; the
//     consumers read at once, ordered only by the GPU-side wait (or cpu_wait). Neither may see
//     anything but the complete frame. A third consumer reads on a stream the channel does not
//     order: a control that shows the race is real (reported, not asserted: the GPU's scheduling
//     between processes decides how often it loses).
TEST_P(Channel, ConsumerNeverSeesASlowWriteEarly) {
  auto p = producer();
  auto gpu_wait = consumer();
  auto cpu_wait = consumer({"--cpu-wait"});
  auto unordered = consumer({"--unordered"});
  wait_consumers(*p, 3);
  const std::uint64_t frames = gputest::frame_count(300);
  for (std::uint64_t key = 1; key <= frames; ++key)
    ASSERT_EQ(gputest::publish_pattern(*p, *kernels_, key, kSize, kMs), PublishStatus::published);
  p->end_of_stream();
  for (Peer* peer : {gpu_wait.get(), cpu_wait.get()}) {
    auto r = finished(*peer);
    EXPECT_EQ(r["frames"], static_cast<long long>(frames));
    EXPECT_EQ(r["bad"], 0);
  }
  auto control = finished(*unordered);
  std::printf("control (unordered reads): %llu wrong words over %llu frames\n",
              static_cast<unsigned long long>(control["bad"]),
              static_cast<unsigned long long>(control["frames"]));
  RecordProperty("unordered_control_bad_words", std::to_string(control["bad"]));
}

// 2b. The consumer's kernel reads, spins 2 ms and reads again, and the frame is released at once;
//     with two slots the producer rewrites that slot right away. Its write must wait on the GPU
//     for the read to finish: the second read must see the same frame.
TEST_P(Channel, ProducerNeverOverwritesASlowRead) {
  auto p = producer(2);
  auto c = consumer({"--slow-read-ns", std::to_string(2 * kMs)});
  wait_consumers(*p, 1);
  auto r = publish_all_to(*p, *c, gputest::frame_count(300));
  EXPECT_EQ(r["changed"], 0);
}

// 3. Four consumer processes, one of them slow: all get every frame intact.
TEST_P(Channel, FourConsumersOneSlow) {
  auto p = producer();
  std::vector<std::unique_ptr<Peer>> peers;
  for (int i = 0; i < 3; ++i) peers.push_back(consumer());
  peers.push_back(consumer({"--slow-read-ns", std::to_string(kMs)}));
  wait_consumers(*p, 4);
  const std::uint64_t frames = gputest::frame_count(1000);
  for (std::uint64_t key = 1; key <= frames; ++key)
    ASSERT_EQ(gputest::publish_pattern(*p, *kernels_, key, kSize), PublishStatus::published);
  p->end_of_stream();
  for (auto& peer : peers) {
    auto r = finished(*peer);
    EXPECT_EQ(r["frames"], static_cast<long long>(frames));
    EXPECT_EQ(r["bad"], 0);
    EXPECT_EQ(r["changed"], 0);
  }
}

// Fails the test and ends the process (rather than hanging in the producer's destructor) when the
// producer's stream never drains, as it would if it waited on an event of a dead process forever.
void expect_stream_drains(CUstream s, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  CUresult r = CUDA_ERROR_NOT_READY;
  while ((r = cuda::driver().cuStreamQuery(s)) == CUDA_ERROR_NOT_READY &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  if (r == CUDA_ERROR_NOT_READY) {
    ADD_FAILURE() << "the producer's stream did not drain within " << limit.count() << " s";
    std::fprintf(stderr, "FATAL: producer stream stuck; exiting to avoid a hang\n");
    std::fflush(nullptr);
    std::_Exit(1);
  }
  EXPECT_EQ(r, CUDA_SUCCESS) << cuda::error_text(r);
}

// 4a. kill -9 of a consumer in the middle of its reads: the producer goes on (its leases are
//     reclaimed, its events dropped), its stream keeps draining, the other consumer is unaffected.
TEST_P(Channel, KilledConsumerStallsNothing) {
  auto p = producer();
  auto steady = consumer();
  auto victim = consumer({"--slow-read-ns", std::to_string(5 * kMs)});
  wait_consumers(*p, 2);
  std::uint64_t key = 0;
  for (; key < 200; ++key)
    ASSERT_EQ(gputest::publish_pattern(*p, *kernels_, key + 1, kSize), PublishStatus::published);
  victim->kill_hard();
  EXPECT_TRUE(killed_by(victim->wait_exit(30s), SIGKILL));
  const auto start = std::chrono::steady_clock::now();
  for (; key < 500; ++key)
    ASSERT_EQ(gputest::publish_pattern(*p, *kernels_, key + 1, kSize), PublishStatus::published)
        << "frame " << key + 1 << " after the kill";
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, 20s);
  {
    cuda::ScopedContext current(kernels_->context()->get());
    expect_stream_drains(static_cast<CUstream>(p->cuda_stream()), 30s);
  }
  p->end_of_stream();
  auto r = finished(*steady);
  EXPECT_EQ(r["frames"], 500);
  EXPECT_EQ(r["bad"], 0);
}

// 4b. kill -9 of the producer while this consumer holds a frame: the held frame stays readable
//     and intact; a new producer on the same path (the other export mode) is joined again.
TEST_P(Channel, KilledProducerLeavesHeldFrameReadableThenReconnects) {
  auto first = std::make_unique<Peer>([&] {
    auto a = produce_args(GetParam());
    a.insert(a.end(), {"--forever", "--interval-us", "200"});
    return a;
  }());
  ASSERT_TRUE(first->wait_for("READY", 60s)) << first->transcript();
  ConsumerOptions co;
  co.path = path_;
  co.reconnect = true;
  co.reconnect_interval = 20ms;
  Consumer c(co);
  Frame held;
  std::uint64_t frames = 0;
  while (frames < 50) {
    Event ev = c.next(10s);
    ASSERT_NE(ev.type, EventType::timeout);
    if (ev.type != EventType::frame) continue;
    const auto stream = static_cast<CUstream>(c.cuda_stream());
    kernels_->verify(stream, reinterpret_cast<CUdeviceptr>(ev.frame.data()), ev.frame.size(),
                     ev.frame.desc().pts);
    if (++frames == 50) {
      ASSERT_EQ(kernels_->counters(stream).bad, 0u);
      held = std::move(ev.frame);
    }
  }
  first->kill_hard();
  EXPECT_TRUE(killed_by(first->wait_exit(30s), SIGKILL));
  for (;;) {
    Event ev = c.next(10s);
    ASSERT_NE(ev.type, EventType::timeout) << "no disconnect after the producer died";
    if (ev.type == EventType::disconnected) break;
  }
  // The producer is gone; the memory it exported is still mapped here and still holds the frame.
  kernels_->verify(kernels_->own_stream(), reinterpret_cast<CUdeviceptr>(held.data()), held.size(),
                   held.desc().pts);
  EXPECT_EQ(kernels_->counters(kernels_->own_stream()).bad, 0u);
  held.release();

  auto second = next_producer();
  std::uint64_t after = 0, formats = 0;
  CUstream stream = nullptr;
  for (;;) {
    Event ev = c.next(30s);
    ASSERT_NE(ev.type, EventType::timeout) << "never reconnected:\n" << second->transcript();
    if (ev.type == EventType::eos) break;
    if (ev.type == EventType::format) ++formats;
    if (ev.type != EventType::frame) continue;
    stream = static_cast<CUstream>(c.cuda_stream());
    kernels_->verify(stream, reinterpret_cast<CUdeviceptr>(ev.frame.data()), ev.frame.size(),
                     ev.frame.desc().pts);
    ++after;
  }
  EXPECT_EQ(after, 50u);
  EXPECT_GE(formats, 1u);
  ASSERT_NE(stream, nullptr);
  EXPECT_EQ(kernels_->counters(stream).bad, 0u);
}

// 4c. kill -9 of the producer while its stream still has slow writes queued and this consumer's
//     stream waits for them on the GPU: its stream is let go at once (it would wait for ever on
//     frames that will never be written), the consumer is told `disconnected`, and a new producer
//     is joined with every frame intact. The frames caught in the kill carry whatever the slot
//     held: only the frames before and after it are checked.
TEST_P(Channel, KilledProducerWithWritesQueuedReleasesTheConsumersStream) {
  auto first = std::make_unique<Peer>([&] {
    auto a = produce_args(GetParam());
    a.insert(a.end(), {"--forever", "--slow-fill-ns", std::to_string(20 * kMs)});
    return a;
  }());
  ASSERT_TRUE(first->wait_for("READY", 60s)) << first->transcript();
  // Our own stream, so it outlives the connection and can be watched after the producer dies.
  cuda::Stream mine = cuda::make_stream(kernels_->context());
  ConsumerOptions co;
  co.path = path_;
  co.reconnect = true;
  co.reconnect_interval = 20ms;
  co.cuda.stream = mine.get();
  auto c = std::make_unique<Consumer>(co);
  std::uint64_t frames = 0;
  auto read_one = [&](std::chrono::seconds timeout) {
    Event ev = c->next(timeout);
    if (ev.type == EventType::frame)
      kernels_->verify(mine.get(), reinterpret_cast<CUdeviceptr>(ev.frame.data()), ev.frame.size(),
                       ev.frame.desc().pts);
    return ev.type;
  };
  while (frames < 10) {
    const EventType t = read_one(30s);
    ASSERT_NE(t, EventType::timeout) << first->transcript();
    if (t == EventType::frame) ++frames;
  }
  EXPECT_EQ(kernels_->counters(mine.get()).bad, 0u) << "frames before the kill";
  // Take frames until our stream waits for writes still queued on the producer's.
  bool waiting = false;
  for (int n = 0; n < 100 && !waiting; ++n) {
    ASSERT_NE(read_one(30s), EventType::timeout);
    cuda::ScopedContext current(kernels_->context()->get());
    waiting = cuda::driver().cuStreamQuery(mine.get()) == CUDA_ERROR_NOT_READY;
  }
  ASSERT_TRUE(waiting) << "the consumer's stream never had to wait for a queued write";
  first->kill_hard();
  EXPECT_TRUE(killed_by(first->wait_exit(30s), SIGKILL));
  {
    // Released without another call into cudaipc: a caller blocked in cuStreamSynchronize (a
    // GStreamer element, torch.cuda.synchronize) must be let go by the death alone.
    cuda::ScopedContext current(kernels_->context()->get());
    expect_stream_drains(mine.get(), 10s);
  }
  for (;;) {
    const EventType t = read_one(10s);
    ASSERT_NE(t, EventType::timeout) << "no disconnect after the producer died";
    if (t == EventType::disconnected) break;
  }
  {
    cuda::ScopedContext current(kernels_->context()->get());
    expect_stream_drains(mine.get(), 10s);
  }
  kernels_->reset_counters();

  auto second = next_producer();
  std::uint64_t after = 0;
  for (;;) {
    const EventType t = read_one(30s);
    ASSERT_NE(t, EventType::timeout) << "never reconnected:\n" << second->transcript();
    if (t == EventType::eos) break;
    if (t == EventType::frame) ++after;
  }
  EXPECT_EQ(after, 50u);
  EXPECT_EQ(kernels_->counters(mine.get()).bad, 0u) << "frames from the new producer";
  c.reset();  // the producer waits for its consumers to leave before it reports
  finished(*second);
}

// 4d. A consumer stopped (SIGSTOP) with slow GPU reads queued: its reads still finish on the GPU,
//     it is evicted after lease_timeout like any stalled consumer, and neither the producer's
//     stream nor the other consumer is held up.
TEST_P(Channel, StoppedConsumerWithReadsQueuedIsEvictedWithoutStallingTheGpu) {
  auto owned = producer(4, kSize, 1s);
  Producer& p = *owned;
  auto steady = consumer();
  auto victim = consumer({"--slow-read-ns", std::to_string(5 * kMs)});
  wait_consumers(p, 2);
  std::uint64_t key = 0;
  for (; key < 100; ++key)
    ASSERT_EQ(gputest::publish_pattern(p, *kernels_, key + 1, kSize), PublishStatus::published);
  ASSERT_EQ(::kill(victim->pid(), SIGSTOP), 0);
  const auto start = std::chrono::steady_clock::now();
  for (; key < 400; ++key)
    ASSERT_EQ(gputest::publish_pattern(p, *kernels_, key + 1, kSize), PublishStatus::published)
        << "frame " << key + 1 << " after the stop";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
  EXPECT_EQ(p.consumer_count(), 1u) << "the stopped consumer was not evicted";
  {
    cuda::ScopedContext current(kernels_->context()->get());
    expect_stream_drains(static_cast<CUstream>(p.cuda_stream()), 30s);
  }
  p.end_of_stream();
  auto r = finished(*steady);
  EXPECT_EQ(r["frames"], 400);
  EXPECT_EQ(r["bad"], 0);
  ::kill(victim->pid(), SIGCONT);
  victim->kill_hard();
  victim->wait_exit(30s);
}

// 4e. A live consumer whose GPU reads hold a slot (a 3 s kernel) while its CPU has long released
//     the frame: the producer's stream waits for it only for lease_timeout, then the consumer is
//     evicted, the stream goes on and the other consumer gets every frame intact.
TEST_P(Channel, ConsumerWhoseGpuReadsHoldASlotIsEvicted) {
  auto owned = producer(2, kSize, 1s);
  Producer& p = *owned;
  auto steady = consumer();
  // Only its first read is slow: a failure here must not leave a process spinning the GPU for long.
  auto victim = consumer(
      {"--slow-read-ns", std::to_string(3000 * kMs), "--slow-count", "1", "--no-reconnect"});
  wait_consumers(p, 2);
  const auto start = std::chrono::steady_clock::now();
  for (std::uint64_t key = 1; key <= 30; ++key)
    ASSERT_EQ(gputest::publish_pattern(p, *kernels_, key, kSize), PublishStatus::published);
  {
    cuda::ScopedContext current(kernels_->context()->get());
    expect_stream_drains(static_cast<CUstream>(p.cuda_stream()), 30s);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
  p.end_of_stream();
  auto r = finished(*steady);
  EXPECT_EQ(r["frames"], 30);
  EXPECT_EQ(r["bad"], 0);
  auto v = finished(*victim);
  EXPECT_EQ(v["disconnects"], 1) << victim->transcript();
  EXPECT_NE(victim->transcript().find("GPU reads held a slot"), std::string::npos)
      << victim->transcript();
}

int gpu_count() {
  int n = 0;
  cuda::check(cuda::driver().cuDeviceGetCount(&n), "cuDeviceGetCount");
  return n;
}

// 6a. Producer on GPU 0, consumer process on GPU 1: it reads the slots through peer access and
//     waits on the semaphores through its own mapping of the page; every byte is checked.
TEST_P(Channel, ConsumerOnAnotherGpuReadsEveryFrame) {
  if (gpu_count() < 2) GTEST_SKIP() << "needs two GPUs, this machine has " << gpu_count();
  int can = 0;
  cuda::check(cuda::driver().cuDeviceCanAccessPeer(&can, 1, 0), "cuDeviceCanAccessPeer");
  if (!can) GTEST_SKIP() << "GPU 1 cannot access GPU 0 here (no peer access)";
  auto p = producer();
  auto c = consumer({"--device", "1"});
  wait_consumers(*p, 1);
  publish_all_to(*p, *c, gputest::frame_count(2000));
}

// 6b. A consumer that cannot reach the producer's GPU (here: it is not visible to the consumer
//     at all) is refused with a message that names the GPU and the likely cause, never a crash.
TEST_P(Channel, ConsumerThatCannotReachTheProducersGpuSaysWhy) {
  if (gpu_count() < 2) GTEST_SKIP() << "needs two GPUs, this machine has " << gpu_count();
  auto p = producer();
  // Ordinals here and in the peer count in the same (the driver's default) order.
  ::setenv("CUDA_VISIBLE_DEVICES", "1", 1);
  Peer c({"consume", "--path", path_, "--no-reconnect", "--timeout-ms", "5000"});
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  const auto error = c.wait_for("ERROR", 60s);
  ASSERT_TRUE(error) << c.transcript();
  EXPECT_NE(error->find("is not visible to this process"), std::string::npos) << *error;
  const auto status = c.wait_exit(60s);
  ASSERT_TRUE(status && WIFEXITED(*status)) << c.transcript();
  EXPECT_EQ(WEXITSTATUS(*status), 1) << c.transcript();
  EXPECT_EQ(p->consumer_count(), 0u);
}

// 5. Format changes that grow the slots (a new set) and shrink them (the set is kept).
TEST_P(Channel, FormatChangesGrowAndShrink) {
  const std::vector<std::uint64_t> sizes = {64 << 10, (4 << 20) + 5, (16 << 10) + 3, 8 << 20, 1000};
  auto p = producer(4, sizes[0]);
  auto c = consumer();
  wait_consumers(*p, 1);
  std::uint64_t key = 0;
  for (std::size_t f = 0; f < sizes.size(); ++f) {
    if (f) p->set_format(testing::pattern_format(sizes[f]));
    for (int i = 0; i < 50; ++i)
      ASSERT_EQ(gputest::publish_pattern(*p, *kernels_, ++key, sizes[f]), PublishStatus::published);
  }
  p->end_of_stream();
  auto r = finished(*c);
  EXPECT_EQ(r["frames"], static_cast<long long>(key));
  EXPECT_EQ(r["formats"], static_cast<long long>(sizes.size()));
  EXPECT_EQ(r["bad"], 0);
}

// Two consumers in one process import the same producer: the legacy handle and the event handles
// can be opened once per process, so the second import must share the first.
TEST_P(Channel, TwoConsumersInOneProcess) {
  auto prod = std::make_unique<Peer>([&] {
    auto a = produce_args(GetParam());
    a.insert(a.end(), {"--frames", "200", "--consumers", "2"});
    return a;
  }());
  ASSERT_TRUE(prod->wait_for("READY", 60s)) << prod->transcript();
  ConsumerOptions co;
  co.path = path_;
  co.reconnect = false;
  Consumer a(co), b(co);
  std::uint64_t frames[2] = {0, 0};
  bool done[2] = {false, false};
  while (!done[0] || !done[1]) {
    for (int i = 0; i < 2; ++i) {
      if (done[i]) continue;
      Consumer& c = i ? b : a;
      Event ev = c.next(10s);
      ASSERT_NE(ev.type, EventType::timeout);
      ASSERT_NE(ev.type, EventType::disconnected) << ev.message;
      if (ev.type == EventType::eos) done[i] = true;
      if (ev.type != EventType::frame) continue;
      kernels_->verify(static_cast<CUstream>(c.cuda_stream()),
                       reinterpret_cast<CUdeviceptr>(ev.frame.data()), ev.frame.size(),
                       ev.frame.desc().pts);
      ++frames[i];
    }
  }
  EXPECT_EQ(frames[0], 200u);
  EXPECT_EQ(frames[1], 200u);
  EXPECT_EQ(kernels_->counters(static_cast<CUstream>(a.cuda_stream())).bad, 0u);
  EXPECT_EQ(kernels_->counters(static_cast<CUstream>(b.cuda_stream())).bad, 0u);
}

// 6. Leaks. Device memory (cuMemGetInfo) and this process's open fds after 100 connect/disconnect
//    cycles and 10 000 frames equal their values after the first cycle, and after the producer
//    or consumer is gone, their values before it existed. A leak per cycle would be 100 times its
//    size; the tolerance only absorbs the driver's own pool growth.
constexpr std::uint64_t kMemoryTolerance = 4 << 20;

struct Usage {
  std::size_t fds;
  std::uint64_t free;
};

long long memory_change(const Usage& a, const Usage& b) {
  return static_cast<long long>(a.free) - static_cast<long long>(b.free);
}

// What this process holds and the device has free, once settled: a peer's device memory returns
// when the driver tears its context down, which can trail the peer's exit a little.
Usage usage(const Kernels& k) {
  detail::settle_retired();  // this process's consumers' imports, let go on the retiring thread
  Usage u{testing::open_fd_count(), gputest::free_device_memory(k.context())};
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(100ms);
    const Usage again{testing::open_fd_count(), gputest::free_device_memory(k.context())};
    if (again.free == u.free && again.fds == u.fds) break;
    u = again;
  }
  return u;
}

void expect_same(const Usage& before, const Usage& after, const char* when) {
  EXPECT_EQ(after.fds, before.fds) << when;
  EXPECT_LE(std::llabs(memory_change(before, after)), static_cast<long long>(kMemoryTolerance))
      << when << ": free device memory " << before.free << " -> " << after.free;
  std::printf("%s: fds %zu -> %zu, free device memory %llu -> %llu\n", when, before.fds, after.fds,
              static_cast<unsigned long long>(before.free),
              static_cast<unsigned long long>(after.free));
}

TEST_P(Channel, ProducerSideLeaksNothing) {
  constexpr int kRounds = 25, kPeersPerRound = 4;  // 100 connections
  constexpr std::uint64_t kFramesPerRound = 400;   // 10 000 frames
  auto round = [&](Producer& p, std::uint64_t& key) {
    std::vector<std::unique_ptr<Peer>> peers;
    for (int i = 0; i < kPeersPerRound; ++i)
      peers.push_back(consumer({"--frames", std::to_string(kFramesPerRound)}));
    wait_consumers(p, kPeersPerRound);
    for (std::uint64_t i = 0; i < kFramesPerRound; ++i)
      ASSERT_EQ(gputest::publish_pattern(p, *kernels_, ++key, kSize), PublishStatus::published);
    for (auto& peer : peers) {
      auto r = finished(*peer);
      EXPECT_EQ(r["frames"], static_cast<long long>(kFramesPerRound));
      EXPECT_EQ(r["bad"], 0);
    }
    wait_consumers(p, 0);
  };
  std::uint64_t key = 0;
  {  // warm-up: the driver's one-time state (IPC pools, fds) is not a leak
    auto p = producer();
    round(*p, key);
  }
  const Usage before = usage(*kernels_);
  {
    auto p = producer();
    round(*p, key);
    const Usage first = usage(*kernels_);
    for (int i = 1; i < kRounds && !HasFatalFailure(); ++i) round(*p, key);
    expect_same(first, usage(*kernels_), "producer, after 100 consumer connections");
  }
  expect_same(before, usage(*kernels_), "after the producer is gone");
}

TEST_P(Channel, ConsumerSideLeaksNothing) {
  constexpr int kCycles = 100;
  constexpr std::uint64_t kFramesPerCycle = 100;
  auto prod = std::make_unique<Peer>([&] {
    auto a = produce_args(GetParam());
    a.insert(a.end(), {"--forever", "--interval-us", "50"});
    return a;
  }());
  ASSERT_TRUE(prod->wait_for("READY", 60s)) << prod->transcript();
  ConsumerOptions co;
  co.path = path_;
  co.reconnect = false;
  std::uint64_t bad = 0;
  auto cycle = [&] {
    Consumer c(co);
    std::uint64_t frames = 0;
    while (frames < kFramesPerCycle) {
      Event ev = c.next(10s);
      ASSERT_NE(ev.type, EventType::timeout);
      ASSERT_NE(ev.type, EventType::disconnected) << ev.message;
      if (ev.type != EventType::frame) continue;
      kernels_->verify(static_cast<CUstream>(c.cuda_stream()),
                       reinterpret_cast<CUdeviceptr>(ev.frame.data()), ev.frame.size(),
                       ev.frame.desc().pts);
      ++frames;
    }
    bad += kernels_->counters(static_cast<CUstream>(c.cuda_stream())).bad;
  };
  cycle();  // warm-up
  const Usage before = usage(*kernels_);
  for (int i = 0; i < kCycles && !HasFatalFailure(); ++i) cycle();
  expect_same(before, usage(*kernels_), "consumer, after 100 connections");
  EXPECT_EQ(bad, 0u);
}

INSTANTIATE_TEST_SUITE_P(ExportModes, Channel,
                         ::testing::Values(CudaExportMode::vmm, CudaExportMode::legacy),
                         [](const auto& info) { return std::string(mode_name(info.param)); });

}  // namespace
}  // namespace cudaipc
