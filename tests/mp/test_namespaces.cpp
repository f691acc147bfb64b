// Producer and consumer in separate containers (docs/deployment.md), built from Linux namespaces:
// each side has its own PID, mount, IPC, network and UTS namespaces, a private /tmp and /dev/shm,
// and only the socket's directory (the volume) is shared. Every frame is checked; a kill -9 of
// either side is noticed although neither can see the other's pid (SO_PEERCRED gives 0), and a
// consumer that cannot be watched is refused with the reason, never guessed dead or alive. User
// namespaces: the same id maps on both sides share a channel; other maps are refused with the
// reason, or admitted through a group mapped on both sides. Skips, saying why, where the kernel
// or the permissions refuse the namespaces.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "container.hpp"
#include "peer_process.hpp"
#include "reachable_peer.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

const std::string kChannel = std::string(kInsideVolume) + "/ch";

class Namespaces : public ::testing::Test {
 protected:
  // A container sharing the volume, as `docker run -v VOLUME:/tmp/cudaipc-volume` gives one.
  ContainerSpec container() const { return volume_.container(); }

  // Checks a finished consumer peer's last line: `frames` frames, every one intact and in order.
  static void expect_every_frame(PeerProcess& consumer, long long frames) {
    const auto done = consumer.wait_for("done", 30s);
    ASSERT_TRUE(done) << consumer.transcript();
    EXPECT_EQ(field(*done, "frames"), frames) << *done;
    EXPECT_EQ(field(*done, "bad"), 0) << *done;
    EXPECT_EQ(field(*done, "order"), 0) << *done;
    EXPECT_EQ(field(*done, "recheck"), 0) << *done;
  }

  SharedVolume volume_;
  const TempDir& dir_ = volume_.dir();
};

// The value of `key=` in a producer's "consumers n=.. pids=.. leases=.. evicted=.." line.
std::string value_of(const std::string& line, const std::string& key) {
  const auto at = line.find(" " + key + "=");
  if (at == std::string::npos) return "";
  const auto from = at + key.size() + 2;
  return line.substr(from, line.find(' ', from) - from);
}

}  // namespace

TEST_F(Namespaces, EveryFrameCrossesBetweenContainersThatCannotSeeEachOther) {
  CUDAIPC_START_OR_SKIP(
      producer, start_in_container(container(),
                                   {"produce", "--path", kChannel, "--bytes", "65536", "--frames",
                                    "300", "--wait-consumers", "1", "--then", "eos"}));
  std::optional<std::string> line;
  CUDAIPC_AWAIT_OR_SKIP(*producer, "listening", 10s, line);
  CUDAIPC_START_OR_SKIP(consumer, start_in_container(container(), {"consume", "--path", kChannel,
                                                                   "--frames", "300"}));
  CUDAIPC_AWAIT_OR_SKIP(*consumer, "connected", 10s, line);

  // The containers are what they claim: PID and mount namespaces of their own, the socket
  // reached through the volume at a path the host knows by another name.
  const pid_t self = ::getpid();
  EXPECT_NE(namespace_of(producer->pid(), "pid"), namespace_of(self, "pid"));
  EXPECT_NE(namespace_of(consumer->pid(), "pid"), namespace_of(self, "pid"));
  EXPECT_NE(namespace_of(producer->pid(), "pid"), namespace_of(consumer->pid(), "pid"));
  EXPECT_NE(namespace_of(producer->pid(), "mnt"), namespace_of(consumer->pid(), "mnt"));
  struct stat st {};
  ASSERT_EQ(::stat((volume_.path() + "/ch").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));

  // The producer cannot see the consumer's pid: what it watches came from SO_PEERPIDFD.
  const auto joined = producer->wait_for("consumers n=1", 10s);
  ASSERT_TRUE(joined) << producer->transcript();
  EXPECT_EQ(value_of(*joined, "pids"), "0") << *joined;
  expect_every_frame(*consumer, 300);
  const auto status = producer->wait_exit(20s);
  EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << producer->transcript();
}

// Container runtimes' default seccomp profiles refused futex_waitv (EPERM) until about 2023: the
// core then waits as on a kernel without it, and every frame still arrives, both sides sleeping.
TEST_F(Namespaces, EveryFrameCrossesWhereASeccompProfileRefusesFutexWaitv) {
  ContainerSpec spec = container();
  spec.deny_futex_waitv = true;
  CUDAIPC_START_OR_SKIP(
      producer, start_in_container(spec, {"produce", "--path", kChannel, "--bytes", "65536",
                                          "--frames", "100", "--slots", "2", "--interval-ms", "2",
                                          "--wait-consumers", "1", "--then", "eos"}));
  std::optional<std::string> line;
  CUDAIPC_AWAIT_OR_SKIP(*producer, "listening", 10s, line);
  CUDAIPC_START_OR_SKIP(consumer,
                        start_in_container(spec, {"consume", "--path", kChannel, "--frames", "100",
                                                  "--delay-us", "1000"}));
  CUDAIPC_AWAIT_OR_SKIP(*consumer, "connected", 10s, line);
  expect_every_frame(*consumer, 100);
  const auto status = producer->wait_exit(20s);
  EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << producer->transcript();
}

// The consumer runs under an init (`docker run --init`) and forks a child that keeps its socket
// and pages open. Killed, it is reclaimed at once: the producer watches its process, not the
// socket, though it cannot see its pid.
TEST_F(Namespaces, KilledConsumerInAnotherContainerIsReclaimedThoughItsChildKeepsTheSocket) {
  CUDAIPC_START_OR_SKIP(
      producer,
      start_in_container(container(), {"produce", "--path", kChannel, "--bytes", "4096", "--frames",
                                       "2", "--wait-consumers", "1", "--then", "watch"}));
  std::optional<std::string> line;
  CUDAIPC_AWAIT_OR_SKIP(*producer, "listening", 10s, line);
  ContainerSpec with_init = container();
  with_init.init = true;
  CUDAIPC_START_OR_SKIP(consumer, start_in_container(with_init, {"consume", "--path", kChannel,
                                                                 "--hold", "2", "--fork-holder"}));
  CUDAIPC_AWAIT_OR_SKIP(*consumer, "held 2", 10s, line);
  const auto holding = producer->wait_for("consumers n=1", 10s);
  ASSERT_TRUE(holding) << producer->transcript();
  EXPECT_EQ(value_of(*holding, "pids"), "0") << *holding;

  // Under the init: the consumer; under the consumer: the child that keeps its socket.
  const auto role = children_of(consumer->pid());
  ASSERT_EQ(role.size(), 1u);
  const auto holder = children_of(role[0]);
  ASSERT_EQ(holder.size(), 1u);
  ASSERT_EQ(::kill(role[0], SIGKILL), 0);
  const auto gone = producer->wait_for("consumers n=0", 5s);
  EXPECT_TRUE(gone) << "the dead consumer still holds its slots:\n" << producer->transcript();
  // Its socket was open all along: only the watch on its process could tell.
  EXPECT_EQ(::kill(holder[0], 0), 0) << "the child holding the socket is gone too";
}

// A live consumer in another PID namespace holds a frame and stops reading; the producer cuts it
// off (lease timeout) and publishes on. Cut off is not dead: the frame it holds must stay intact
// until it lets go, so its slot stays out of rotation; a hang-up taken for death would reuse it.
// Frames come every 30 ms, so many are published after the producer has hung up on it.
TEST_F(Namespaces, LiveConsumerCutOffInAnotherContainerKeepsTheFrameItHolds) {
  CUDAIPC_START_OR_SKIP(
      producer, start_in_container(
                    container(), {"produce", "--path", kChannel, "--bytes", "65536", "--frames",
                                  "20", "--interval-ms", "30", "--slots", "3", "--lease-timeout-ms",
                                  "200", "--wait-consumers", "1", "--then", "watch"}));
  std::optional<std::string> line;
  CUDAIPC_AWAIT_OR_SKIP(*producer, "listening", 10s, line);
  CUDAIPC_START_OR_SKIP(
      consumer, start_in_container(container(), {"consume", "--path", kChannel, "--hold", "1",
                                                 "--hold-ms", "3000"}));
  CUDAIPC_AWAIT_OR_SKIP(*consumer, "held 1", 10s, line);
  ASSERT_TRUE(producer->wait_for("published 20", 10s)) << producer->transcript();
  const auto after = producer->wait_for("consumers", 5s);
  ASSERT_TRUE(after) << producer->transcript();
  EXPECT_EQ(value_of(*after, "evicted"), "1") << *after;
  EXPECT_NE(value_of(*after, "leases"), "0") << *after;
  // It checks its frame again after the producer has moved on, then lets go and leaves.
  expect_every_frame(*consumer, 1);
  EXPECT_TRUE(producer->wait_for("consumers n=0", 10s)) << producer->transcript();
}

namespace {

// The producer's container is killed mid-stream; the consumer in its own container notices,
// and joins the producer of a new container on the same volume (the dead one's socket file is
// still there). `consumer_spec` says how the consumer's container is made.
void producer_killed_and_replaced(const ContainerSpec& producer_spec,
                                  const ContainerSpec& consumer_spec) {
  const std::vector<std::string> produce{"produce", "--path",   kChannel, "--bytes",
                                         "65536",   "--frames", "10",     "--wait-consumers",
                                         "1",       "--then"};
  auto first = produce;
  first.push_back("hold");
  CUDAIPC_START_OR_SKIP(producer, start_in_container(producer_spec, first));
  std::optional<std::string> line;
  CUDAIPC_AWAIT_OR_SKIP(*producer, "listening", 10s, line);
  CUDAIPC_START_OR_SKIP(
      consumer, start_in_container(consumer_spec, {"consume", "--path", kChannel, "--frames", "20",
                                                   "--reconnect", "--verbose"}));
  CUDAIPC_AWAIT_OR_SKIP(*consumer, "connected", 10s, line);
  ASSERT_TRUE(consumer->wait_for("frame 10 ", 10s)) << consumer->transcript();
  producer->kill_hard();  // its pid 1: the whole container goes
  const auto noticed = consumer->wait_for("disconnected", 5s);
  ASSERT_TRUE(noticed) << "the consumer did not notice:\n" << consumer->transcript();

  auto second = produce;
  second.push_back("eos");
  CUDAIPC_START_OR_SKIP(next, start_in_container(producer_spec, second));
  const auto done = consumer->wait_for("done", 20s);
  ASSERT_TRUE(done) << consumer->transcript() << next->transcript();
  EXPECT_EQ(field(*done, "frames"), 20) << *done;
  EXPECT_EQ(field(*done, "bad"), 0) << *done;
  EXPECT_EQ(field(*done, "order"), 0) << *done;
  EXPECT_EQ(field(*done, "disconnects"), 1) << *done;
}

}  // namespace

TEST_F(Namespaces, KilledProducerInAnotherContainerIsNoticedAndReplaced) {
  producer_killed_and_replaced(container(), container());
}

// The same with a consumer whose kernel would give it no pidfd for the producer (as before Linux
// 6.5): it cannot watch the producer's process, and says so, but the producer's death still
// reaches it through the socket.
TEST_F(Namespaces, ConsumerWithoutPeerPidfdStillNoticesAKilledProducer) {
  ContainerSpec deny = container();
  deny.deny_peerpidfd = true;
  producer_killed_and_replaced(container(), deny);
}

// A producer whose kernel gives no pidfd for a peer it cannot see (as before Linux 6.5) could
// only guess at that consumer's death from its hang-up: it refuses it, saying why and what to do.
TEST_F(Namespaces, ProducerThatCannotWatchAConsumerRefusesItWithTheReason) {
  ContainerSpec deny = container();
  deny.deny_peerpidfd = true;
  CUDAIPC_START_OR_SKIP(producer, start_in_container(deny, {"produce", "--path", kChannel,
                                                            "--frames", "0", "--then", "hold"}));
  std::optional<std::string> line;
  CUDAIPC_AWAIT_OR_SKIP(*producer, "listening", 10s, line);
  CUDAIPC_START_OR_SKIP(
      consumer, start_in_container(container(), {"connect", "--path", kChannel, "--repeat", "3"}));
  CUDAIPC_AWAIT_OR_SKIP(*consumer, "done", 20s, line);
  const std::string t = consumer->transcript();
  EXPECT_NE(t.find("outcome 12 3\n"), std::string::npos) << t;  // Errc::unsupported, each time
  EXPECT_NE(t.find("PID namespace the producer cannot see"), std::string::npos) << t;
  EXPECT_NE(t.find("--pid=container:"), std::string::npos) << t;
}

// Without SO_PEERPIDFD a consumer the producer can see is still watched (pidfd_open of its pid):
// killed while a forked child keeps its socket, it is reclaimed at once.
TEST_F(Namespaces, ProducerWithoutPeerPidfdStillWatchesAConsumerItCanSee) {
  ContainerSpec deny;  // no namespaces but the user namespace a non-root test needs
  deny.namespaces = 0;
  deny.deny_peerpidfd = true;
  const std::string path = dir_.file("ch");
  CUDAIPC_START_OR_SKIP(
      producer, start_in_container(deny, {"produce", "--path", path, "--bytes", "4096", "--frames",
                                          "2", "--wait-consumers", "1", "--then", "watch"}));
  std::optional<std::string> line;
  CUDAIPC_AWAIT_OR_SKIP(*producer, "listening", 10s, line);
  PeerProcess consumer({"consume", "--path", path, "--hold", "2", "--fork-holder"});
  const auto holder_line = consumer.wait_for("holder", 10s);
  ASSERT_TRUE(holder_line) << consumer.transcript();
  const pid_t holder = static_cast<pid_t>(std::stol(holder_line->substr(7)));
  const auto holding = producer->wait_for("consumers n=1", 10s);
  ASSERT_TRUE(holding) << producer->transcript();
  EXPECT_EQ(value_of(*holding, "pids"), std::to_string(consumer.pid())) << *holding;
  consumer.kill_hard();
  const auto gone = producer->wait_for("consumers n=0", 5s);
  EXPECT_TRUE(gone) << producer->transcript();
  EXPECT_EQ(::kill(holder, SIGKILL), 0);
}

// User namespaces with the same id maps on both sides (`docker` with userns-remap maps every
// container alike; without root: this user as root in both) share a channel as one user.
TEST_F(Namespaces, SameIdMapsInBothUserNamespacesShareAChannel) {
  ContainerSpec spec = container();
  spec.user_namespace = true;
  std::unique_ptr<ReachablePeer> reachable;
  if (::geteuid() == 0) {
    // Root inside is uid 100000 outside, as a remapped container's: it must reach the binaries
    // and own the volume.
    spec.uid_map = spec.gid_map = {{0, 100000, 65536}};
    reachable = std::make_unique<ReachablePeer>();
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0711), 0);
    ASSERT_EQ(::chown(volume_.path().c_str(), 100000, 100000), 0);
  }
  CUDAIPC_START_OR_SKIP(
      producer,
      start_in_container(spec, {"produce", "--path", kChannel, "--bytes", "65536", "--frames",
                                "100", "--wait-consumers", "1", "--then", "eos"}));
  std::optional<std::string> line;
  CUDAIPC_AWAIT_OR_SKIP(*producer, "listening", 10s, line);
  CUDAIPC_START_OR_SKIP(
      consumer, start_in_container(spec, {"consume", "--path", kChannel, "--frames", "100"}));
  CUDAIPC_AWAIT_OR_SKIP(*consumer, "connected", 10s, line);
  EXPECT_NE(namespace_of(producer->pid(), "user"), namespace_of(consumer->pid(), "user"));
  expect_every_frame(*consumer, 100);
}

// Two containers with different id maps, as two rootless containers of different users have:
// root inside is uid 100000 outside for the producer and 200000 for the consumer, and inside gid
// 1000 is host gid 5000 on both sides (a group both are given, like `video`). The volume belongs
// to the producer's root and that group. Only root may map other users' ids.
class OtherIdMaps : public Namespaces {
 protected:
  static constexpr unsigned kSharedGid = 1000, kHostSharedGid = 5000;

  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to map other users' ids";
    reachable_ = std::make_unique<ReachablePeer>();
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0711), 0);
    ASSERT_EQ(::chown(volume_.path().c_str(), 100000, kHostSharedGid), 0);
    ASSERT_EQ(::chmod(volume_.path().c_str(), 0770), 0);
    producer_ = consumer_ = container();
    producer_.user_namespace = consumer_.user_namespace = true;
    producer_.uid_map = {{0, 100000, 1}};
    producer_.gid_map = {{0, 100000, 1}, {kSharedGid, kHostSharedGid, 1}};
    consumer_.uid_map = {{0, 200000, 1}};
    consumer_.gid_map = {{0, 200000, 1}, {kSharedGid, kHostSharedGid, 1}};
  }

  // The producer's arguments: the channel opened to the shared group.
  static std::vector<std::string> produce(std::vector<std::string> more) {
    std::vector<std::string> a{"produce",
                               "--path",
                               kChannel,
                               "--socket-mode",
                               "0660",
                               "--allowed-gid",
                               std::to_string(kSharedGid)};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }

  std::unique_ptr<ReachablePeer> reachable_;
  ContainerSpec producer_, consumer_;
};

// The consumer's uid and gid mean nothing in the producer's user namespace (the kernel shows
// 65534): refused, with that reason, though file permissions let it reach connect().
TEST_F(OtherIdMaps, ConsumerIsRefusedWithTheReason) {
  // In the group only as a supplementary group: enough for the 0660 socket, not for the check.
  consumer_.ids = "0:0:" + std::to_string(kSharedGid);
  CUDAIPC_START_OR_SKIP(
      producer, start_in_container(producer_, produce({"--frames", "0", "--then", "hold"})));
  std::optional<std::string> line;
  CUDAIPC_AWAIT_OR_SKIP(*producer, "listening", 10s, line);
  CUDAIPC_START_OR_SKIP(
      consumer, start_in_container(consumer_, {"connect", "--path", kChannel, "--repeat", "3"}));
  CUDAIPC_AWAIT_OR_SKIP(*consumer, "done", 20s, line);
  const std::string t = consumer->transcript();
  EXPECT_NE(t.find("outcome 5 3\n"), std::string::npos) << t;  // Errc::permission_denied
  EXPECT_NE(t.find("uid and gid are not mapped into the producer's user namespace"),
            std::string::npos)
      << t;
}

// The same containers, the consumer running with the shared group as its own: admitted by the
// group (socket-mode 0660, allowed-group), every frame intact.
TEST_F(OtherIdMaps, ConsumerIsAdmittedThroughASharedGroup) {
  consumer_.ids = "0:" + std::to_string(kSharedGid);
  CUDAIPC_START_OR_SKIP(
      producer, start_in_container(producer_, produce({"--bytes", "65536", "--frames", "100",
                                                       "--wait-consumers", "1", "--then", "eos"})));
  std::optional<std::string> line;
  CUDAIPC_AWAIT_OR_SKIP(*producer, "listening", 10s, line);
  struct stat st {};
  ASSERT_EQ(::stat((volume_.path() + "/ch").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(st.st_uid, 100000u);
  EXPECT_EQ(st.st_gid, kHostSharedGid);
  CUDAIPC_START_OR_SKIP(
      consumer, start_in_container(consumer_, {"consume", "--path", kChannel, "--frames", "100"}));
  CUDAIPC_AWAIT_OR_SKIP(*consumer, "connected", 10s, line);
  expect_every_frame(*consumer, 100);
}
