// CUDA channels between containers (docs/deployment.md), made of Linux namespaces as in
// tests/mp/test_namespaces.cpp: producer and consumer (cudaipc-gpu-peer, every byte of every
// frame checked on the GPU) each in new PID, mount, IPC, network and UTS namespaces with a private
// /tmp and /dev/shm, sharing only the socket's directory, for both export modes. What it finds out:
// - VMM handles travel as fds and must work across every namespace here (asserted);
// - legacy IPC handles across separate PID namespaces: either every frame arrives intact or the
//   consumer fails with an error naming the cause; which one is printed as a "FINDING" line;
// - legacy IPC with the PID namespace shared (`docker run --pid=container:<producer>`) and
//   everything else separate (asserted);
// - a kill -9 of either container is survived (vmm): the consumer's GPU waits are released, and
//   a dead consumer's stalls nothing for the next one.
// Skips, saying why, without a GPU or where the kernel refuses the namespaces.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "container.hpp"
#include "gpu_support.hpp"
#include "peer_process.hpp"

namespace cudaipc {
namespace {

using namespace std::chrono_literals;
using testing::ContainerSpec;
using testing::PeerProcess;

const std::string kChannel = std::string(testing::kInsideVolume) + "/ch";
constexpr char kSize[] = "1048589";  // 1 MiB + 13: rows that end mid-word

// A peer's "RESULT k=v ..." line, or its "ERROR ..." line; nullopt if it said neither in time.
std::optional<std::string> outcome(PeerProcess& peer, std::chrono::seconds timeout) {
  return peer.wait_for_either("RESULT", "ERROR", timeout);
}

bool exited_ok(PeerProcess& peer) {
  const auto st = peer.wait_exit(30s);
  return st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0;
}

void finding(const std::string& what) {
  std::fprintf(stderr, "FINDING %s\n", what.c_str());
}

class GpuNamespaces : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { CUDAIPC_REQUIRE_GPU(); }

  ContainerSpec container() const { return volume_.container(); }

  std::vector<std::string> produce(const char* mode, std::vector<std::string> more) const {
    std::vector<std::string> a{"produce", "--path", kChannel, "--export", mode, "--size", kSize};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }

  static std::string frames() { return std::to_string(gputest::frame_count(300)); }
  static long long expected_frames() { return static_cast<long long>(gputest::frame_count(300)); }

  // Producer and consumer in containers of their own; the consumer's pid 1 or, with `init`, 2.
  // VMM must deliver every frame; legacy either does too or fails with a clear error.
  void separate_pid_namespaces(const ContainerSpec& consumer_spec, const std::string& what) {
    const char* mode = GetParam();
    CUDAIPC_START_OR_SKIP(
        producer, testing::start_in_container(
                      container(), produce(mode, {"--frames", frames(), "--consumers", "1"})));
    std::optional<std::string> line;
    CUDAIPC_AWAIT_OR_SKIP(*producer, "READY", 60s, line);
    CUDAIPC_START_OR_SKIP(consumer, testing::start_in_container(
                                        consumer_spec, {"consume", "--path", kChannel,
                                                        "--no-reconnect", "--frames", frames()}));
    const auto r = outcome(*consumer, 120s);
    ASSERT_TRUE(r) << consumer->transcript();
    if (r->rfind("container-setup-failed", 0) == 0) GTEST_SKIP() << *r;
    const bool works = r->rfind("RESULT", 0) == 0 &&
                       testing::field(*r, "frames") == expected_frames() &&
                       testing::field(*r, "bad") == 0;
    finding(std::string(mode) + " across separate PID namespaces (" + what +
            "): " + (works ? "every frame intact" : "fails: " + *r));
    if (std::string(mode) == "vmm" || works) {
      EXPECT_TRUE(works) << consumer->transcript();
      EXPECT_TRUE(exited_ok(*consumer)) << consumer->transcript();
      EXPECT_TRUE(outcome(*producer, 60s)) << producer->transcript();
      return;
    }
    // Legacy refused: no frame was delivered wrong, and the message says where to look.
    EXPECT_EQ(r->rfind("ERROR", 0), 0u) << *r;
    EXPECT_NE(r->find("PID namespace"), std::string::npos) << *r;
  }

  // A producer publishing for ever once a consumer joins, and that first consumer (`args` after
  // its path), both in containers of their own and started; frames flow when this returns.
  void start_stream(std::unique_ptr<PeerProcess>& producer, std::unique_ptr<PeerProcess>& consumer,
                    std::vector<std::string> args) {
    CUDAIPC_START_OR_SKIP(started,
                          testing::start_in_container(
                              container(), produce(GetParam(), {"--forever", "--consumers", "1"})));
    producer = std::move(started);
    std::optional<std::string> line;
    CUDAIPC_AWAIT_OR_SKIP(*producer, "READY", 60s, line);
    args.insert(args.begin(), {"consume", "--path", kChannel});
    CUDAIPC_START_OR_SKIP(joined, testing::start_in_container(container(), args));
    consumer = std::move(joined);
    CUDAIPC_AWAIT_OR_SKIP(*consumer, "READY", 60s, line);
    std::this_thread::sleep_for(500ms);
  }

  testing::SharedVolume volume_;
};

TEST_P(GpuNamespaces, SeparatePidNamespacesBothPidOne) {
  separate_pid_namespaces(container(), "both peers are pid 1");
}

TEST_P(GpuNamespaces, SeparatePidNamespacesDistinctPids) {
  ContainerSpec spec = container();
  spec.init = true;  // the consumer is pid 2 of its namespace, the producer pid 1 of its own
  separate_pid_namespaces(spec, "producer pid 1, consumer pid 2");
}

// `docker run --pid=container:<producer>`: one PID namespace, mounts, IPC, network and UTS
// namespaces of their own. Every frame, both modes.
TEST_P(GpuNamespaces, SharedPidNamespaceOnly) {
  CUDAIPC_START_OR_SKIP(
      producer, testing::start_in_container(
                    container(), produce(GetParam(), {"--frames", frames(), "--consumers", "1"})));
  std::optional<std::string> line;
  CUDAIPC_AWAIT_OR_SKIP(*producer, "READY", 60s, line);
  ContainerSpec joined = container();
  joined.share_pid_namespace_of = producer->pid();
  CUDAIPC_START_OR_SKIP(
      consumer, testing::start_in_container(joined, {"consume", "--path", kChannel,
                                                     "--no-reconnect", "--frames", frames()}));
  const auto r = outcome(*consumer, 120s);
  ASSERT_TRUE(r) << consumer->transcript();
  if (r->rfind("container-setup-failed", 0) == 0) GTEST_SKIP() << *r;
  finding(std::string(GetParam()) + " with the PID namespace shared, the rest separate: " + *r);
  EXPECT_EQ(testing::field(*r, "frames"), expected_frames()) << *r;
  EXPECT_EQ(testing::field(*r, "bad"), 0) << *r;
  EXPECT_TRUE(exited_ok(*consumer)) << consumer->transcript();
}

// A producer container killed mid-stream: the consumer in its own container is let go (its GPU
// waits on frames that will never come are released) and ends with every frame it got intact,
// except those Frame::written() names as never written (a frame published whose GPU write the
// kill cut off: the consumer checks each frame before letting it go, and counts those apart).
TEST_P(GpuNamespaces, KilledProducerContainerReleasesTheConsumer) {
  if (std::string(GetParam()) != "vmm") GTEST_SKIP() << "legacy across PID namespaces: see above";
  std::unique_ptr<PeerProcess> producer, consumer;
  start_stream(producer, consumer, {"--no-reconnect", "--each-frame-checked"});
  if (IsSkipped() || HasFatalFailure()) return;
  producer->kill_hard();
  ASSERT_TRUE(consumer->wait_for("DISCONNECTED", 10s)) << consumer->transcript();
  const auto r = outcome(*consumer, 30s);
  ASSERT_TRUE(r) << consumer->transcript();
  finding("killed producer container: " + *r);
  EXPECT_GT(testing::field(*r, "frames"), 0) << *r;
  EXPECT_EQ(testing::field(*r, "bad"), 0) << *r;
  // At most the frames the producer had published but not yet written: one per slot.
  EXPECT_LE(testing::field(*r, "unwritten"), 4) << *r;
  EXPECT_TRUE(exited_ok(*consumer)) << consumer->transcript();
}

// A consumer container killed while it reads: the producer, which cannot see its pid, proves it
// dead and its stream runs on; a consumer in a third container gets every frame.
TEST_P(GpuNamespaces, KilledConsumerContainerStallsNothing) {
  if (std::string(GetParam()) != "vmm") GTEST_SKIP() << "legacy across PID namespaces: see above";
  std::unique_ptr<PeerProcess> producer, doomed;
  start_stream(producer, doomed, {"--slow-read-ns", "2000000"});  // it has reads queued
  if (IsSkipped() || HasFatalFailure()) return;
  doomed->kill_hard();
  CUDAIPC_START_OR_SKIP(
      next, testing::start_in_container(container(), {"consume", "--path", kChannel,
                                                      "--no-reconnect", "--frames", frames()}));
  const auto r = outcome(*next, 120s);
  ASSERT_TRUE(r) << next->transcript();
  EXPECT_EQ(testing::field(*r, "frames"), expected_frames()) << *r;
  EXPECT_EQ(testing::field(*r, "bad"), 0) << *r;
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Modes, GpuNamespaces, ::testing::Values("vmm", "legacy"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace cudaipc
