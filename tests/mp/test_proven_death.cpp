// Core v2: a consumer's slots come back only when it released them or its process is gone.
// Findings 2 (a live consumer dropped by a format storm kept its frames, and its late release
// could clear a bit of whoever reused its entry), 4 (a child forked without exec keeps the socket
// alive after its parent's kill -9), 8 (a killed sleeping consumer left state behind) and 10 (no
// cap on connections that never say hello).
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <bitset>
#include <thread>
#include <vector>

#include "channel_helpers.hpp"
#include "consumer_helpers.hpp"
#include "cudaipc/consumer.hpp"
#include "temp_dir.hpp"
#include "unix_socket.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

void drain_formats(Consumer& c) {
  while (c.next(0ms).type == EventType::format) {
  }
}

std::size_t open_fds() {
  std::size_t n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return 0;
  while (::readdir(d)) ++n;
  ::closedir(d);
  return n;
}

// A child process, forked before any thread exists, that connects when told to.
class ForkedConsumer {
 public:
  // `script` runs in the child after "go"; it writes progress lines to `out`.
  template <typename Script>
  explicit ForkedConsumer(Script script) {
    int go[2], out[2];
    if (::pipe2(go, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(go[1]);
      ::close(out[0]);
      char c;
      if (::read(go[0], &c, 1) != 1) ::_exit(2);
      script(out[1]);
      ::_exit(0);
    }
    ::close(go[0]);
    ::close(out[1]);
    go_ = go[1];
    out_ = out[0];
  }
  ~ForkedConsumer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(go_);
    ::close(out_);
  }
  void go() { EXPECT_EQ(::write(go_, "g", 1), 1); }
  // Reads one value the child reported.
  long read_value() {
    long v = -1;
    EXPECT_EQ(::read(out_, &v, sizeof v), static_cast<ssize_t>(sizeof v));
    return v;
  }
  void kill9() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int go_ = -1, out_ = -1;
};

void report(int fd, long v) {
  if (::write(fd, &v, sizeof v) != sizeof v) ::_exit(3);
}

}  // namespace

TEST(ProvenDeath, ConsumerCutByAFormatStormKeepsItsFramesAndItsReleaseTouchesNoOneElse) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 4;
  o.block_timeout = 2s;
  o.lease_timeout = 0s;  // only the storm may cut it
  Producer p(o);
  p.set_format(pattern_format(4096));
  Consumer a(consumer_at(o.path));
  ASSERT_EQ(publish_next(p), PublishStatus::published);
  Frame held = next_frame(a);
  ASSERT_TRUE(held);
  ASSERT_EQ(held.seq(), 1u);
  Consumer b(consumer_at(o.path, ConsumeMode::latest));
  ASSERT_TRUE(wait_consumers(p, 2));
  drain_formats(b);

  // `a` stops reading its socket; format changes pile up there until the producer gives up on it.
  // `b` reads on in its own thread, as a live consumer does.
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> b_seen{0};
  std::thread reader([&] {
    while (!stop.load()) {
      Event ev = b.next(10ms);
      if (ev.type == EventType::format) b_seen = ev.generation;
    }
  });
  int changes = 0;
  for (; changes < 20000 && p.consumer_count() == 2; ++changes) {
    p.set_format(pattern_format(4096, "test/pattern,n=" + std::to_string(changes)));
    // b keeps up (however slow this build is); a's socket fills until the producer gives up on it.
    const std::uint64_t g = p.stats().generation;
    ASSERT_TRUE(poll_until([&] { return b_seen.load() >= g || p.consumer_count() < 2; }, 10s));
  }
  stop = true;
  reader.join();
  drain_formats(b);
  ASSERT_TRUE(wait_consumers(p, 1, 2s))
      << "still " << p.consumer_count() << " consumers after " << changes << " format changes";
  auto evicted = p.stats().consumers;
  ASSERT_EQ(evicted.size(), 2u);
  const auto& za = evicted[0].evicted ? evicted[0] : evicted[1];
  EXPECT_TRUE(za.evicted);
  EXPECT_EQ(za.leases, 1u << held.slot());

  // Its slot is out of rotation: the frame it holds never changes while b reads on.
  std::uint64_t b_bit = 0;
  Frame b_frame;
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(publish_next(p), PublishStatus::published);
    Frame f = next_frame(b);
    ASSERT_TRUE(f);
    EXPECT_NE(f.slot(), held.slot());
    EXPECT_EQ(check_pattern(f.data(), f.size(), f.seq()), f.size());
    if (i == 19) {
      b_bit = 1ull << f.slot();
      b_frame = std::move(f);
    }
  }
  EXPECT_EQ(check_pattern(held.data(), held.size(), 1), held.size());

  // Its late release ends its own lease only: b's stays, and a's record goes.
  held.release();
  ASSERT_TRUE(poll_until([&] { return p.stats().consumers.size() == 1; }, 5s));
  auto s = p.stats().consumers;
  ASSERT_EQ(s.size(), 1u);
  EXPECT_FALSE(s[0].evicted);
  EXPECT_EQ(s[0].leases, b_bit);
  for (int i = 0; i < 8; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);
  EXPECT_EQ(check_pattern(b_frame.data(), b_frame.size(), b_frame.seq()), b_frame.size());
}

TEST(ProvenDeath, ChildForkedWithoutExecDoesNotKeepADeadConsumerAlive) {
  TempDir dir;
  const std::string path = dir.file("ch");
  ForkedConsumer child([&](int out) {
    Consumer c(consumer_at(path));
    Frame f = next_frame(c);
    if (!f) ::_exit(4);
    pid_t grandchild = ::fork();
    if (grandchild == 0) {
      // Holds the socket and the page, inherited, and lives on after its parent dies.
      ::sleep(60);
      ::_exit(0);
    }
    report(out, grandchild);
    ::pause();
  });
  ProducerOptions o;
  o.path = path;
  o.slots = 2;
  o.block_timeout = 5s;
  o.lease_timeout = 0s;  // death alone must free it
  Producer p(o);
  p.set_format(pattern_format(1024));
  child.go();
  ASSERT_TRUE(wait_consumers(p, 1));
  ASSERT_EQ(publish_next(p), PublishStatus::published);
  const auto grandchild = static_cast<pid_t>(child.read_value());
  ASSERT_GT(grandchild, 0);
  ASSERT_EQ(p.stats().consumers.at(0).leases, 1u);
  child.kill9();
  ASSERT_TRUE(poll_until([&] { return p.stats().consumers.empty(); }, 5s))
      << "the dead consumer's record outlived it";
  // Every-frame delivery is no longer held back and both slots rotate.
  for (int i = 0; i < 6; ++i) EXPECT_EQ(publish_next(p), PublishStatus::published);
  ::kill(grandchild, SIGKILL);
  ::waitpid(grandchild, nullptr, 0);
}

TEST(ProvenDeath, KilledSleepingConsumerLeavesNothingBehind) {
  TempDir dir;
  const std::string path = dir.file("ch");
  ForkedConsumer child([&](int out) {
    Consumer c(consumer_at(path));
    report(out, 1);
    c.next(60s);  // format
    c.next(60s);  // asleep: no frame comes
  });
  ProducerOptions o;
  o.path = path;
  o.slots = 2;
  Producer p(o);
  p.set_format(pattern_format(1024));
  child.go();
  ASSERT_EQ(child.read_value(), 1);
  ASSERT_TRUE(wait_consumers(p, 1));
  std::this_thread::sleep_for(100ms);  // let it fall asleep
  child.kill9();
  ASSERT_TRUE(poll_until([&] { return p.stats().consumers.empty(); }, 5s));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(publish_next(p), PublishStatus::published);
  // A newcomer gets its own page and every frame from its start on.
  Consumer c(consumer_at(path));
  ASSERT_TRUE(wait_consumers(p, 1));
  ASSERT_EQ(publish_next(p), PublishStatus::published);
  Frame f = next_frame(c);
  ASSERT_TRUE(f);
  EXPECT_EQ(f.seq(), 5u);
  EXPECT_EQ(check_pattern(f.data(), f.size(), f.seq()), f.size());
}

TEST(ProvenDeath, ConnectionsThatNeverSayHelloAreCapped) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  Producer p(o);
  p.set_format(pattern_format(1024));
  const std::size_t before = open_fds();
  std::vector<UniqueFd> silent;
  for (int i = 0; i < 300; ++i) {
    try {
      silent.push_back(connect_unix(o.path));
    } catch (const Error& e) {
      ASSERT_EQ(e.code(), Errc::busy) << e.what();  // backlog full: the producer is behind
      std::this_thread::sleep_for(1ms);
    }
  }
  std::this_thread::sleep_for(300ms);
  // What the producer holds for them is bounded whatever we opened (our own fds are ours).
  const std::size_t producer_side = open_fds() - before - silent.size();
  EXPECT_LE(producer_side, 40u) << "the producer holds " << producer_side << " fds for "
                                << silent.size() << " silent connections";
  // A real consumer still gets in and reads verified frames.
  ConsumerOptions co = consumer_at(o.path);
  co.reconnect = true;
  Consumer c(co);
  ASSERT_TRUE(wait_consumers(p, 1));
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(publish_next(p), PublishStatus::published);
    Frame f = next_frame(c);
    ASSERT_TRUE(f);
    EXPECT_EQ(check_pattern(f.data(), f.size(), f.seq()), f.size());
  }
}
