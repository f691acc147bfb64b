// A consumer waiting for its producer is woken by the producer's socket appearing (inotify on the
// channel's directory), not only by its next connect attempt: the watch itself (its name only,
// the directory going, a wake), and a consumer that sleeps on it and meets the producer.
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <thread>

#include "channel_helpers.hpp"
#include "channel_watch.hpp"
#include "cudaipc/consumer.hpp"
#include "cudaipc/producer.hpp"
#include "poll_until.hpp"
#include "temp_dir.hpp"
#include "thread_syscall.hpp"
#include "unique_fd.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;
using cudaipc::detail::ChannelWatch;

namespace {

// A unix socket bound at `path` (what a producer makes first), kept until the returned fd closes.
UniqueFd bind_socket(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  EXPECT_TRUE(fd) << std::strerror(errno);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0)
      << std::strerror(errno);
  return fd;
}

UniqueFd make_eventfd() {
  UniqueFd fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  EXPECT_TRUE(fd) << std::strerror(errno);
  return fd;
}

}  // namespace

TEST(ChannelWatch, WakesWhenTheSocketIsMade) {
  TempDir dir;
  UniqueFd wake = make_eventfd();
  ChannelWatch w;
  w.watch(dir.file("cam0"));
  ASSERT_TRUE(w.watching());
  UniqueFd bound;
  std::thread maker([&] {
    std::this_thread::sleep_for(50ms);
    bound = bind_socket(dir.file("cam0"));
  });
  // True only for the socket's event: a timeout returns false.
  const bool appeared = w.wait(wake.get(), 60s);
  maker.join();
  EXPECT_TRUE(appeared);
  EXPECT_TRUE(w.watching());
}

TEST(ChannelWatch, OtherNamesAreNoNews) {
  TempDir dir;
  UniqueFd wake = make_eventfd();
  ChannelWatch w;
  w.watch(dir.file("cam0"));
  ASSERT_TRUE(w.watching());
  UniqueFd other = bind_socket(dir.file("cam1"));
  UniqueFd longer = bind_socket(dir.file("cam0.reply"));
  EXPECT_FALSE(w.wait(wake.get(), 100ms));
  EXPECT_TRUE(w.watching());
  // Moved in under the name: news.
  UniqueFd moved = bind_socket(dir.file("cam0.tmp"));
  std::filesystem::rename(dir.file("cam0.tmp"), dir.file("cam0"));
  bool appeared = false;
  for (int i = 0; i < 10 && !appeared; ++i) appeared = w.wait(wake.get(), 60s);
  EXPECT_TRUE(appeared);
}

TEST(ChannelWatch, AWakeEndsTheWaitWithoutNews) {
  TempDir dir;
  UniqueFd wake = make_eventfd();
  ChannelWatch w;
  w.watch(dir.file("cam0"));
  ASSERT_TRUE(w.watching());
  const std::uint64_t one = 1;
  ASSERT_EQ(::write(wake.get(), &one, sizeof one), static_cast<ssize_t>(sizeof one));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(w.wait(wake.get(), 60s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s) << "the wake did not end the wait";
  EXPECT_TRUE(w.watching());
}

TEST(ChannelWatch, ADirectoryThatGoesEndsTheWatch) {
  TempDir dir;
  const std::string sub = dir.file("sub");
  ASSERT_TRUE(std::filesystem::create_directory(sub));
  UniqueFd wake = make_eventfd();
  ChannelWatch w;
  w.watch(sub + "/cam0");
  ASSERT_TRUE(w.watching());
  std::filesystem::remove(sub);
  // Worth an attempt (the consumer's attempts go on by the clock from now on), and no longer
  // watching.
  EXPECT_TRUE(w.wait(wake.get(), 60s));
  EXPECT_FALSE(w.watching());
}

TEST(ChannelWatch, NothingToWatchWithoutTheDirectory) {
  TempDir dir;
  ChannelWatch w;
  w.watch(dir.file("missing") + "/cam0");
  EXPECT_FALSE(w.watching());
  UniqueFd wake = make_eventfd();
  EXPECT_FALSE(w.wait(wake.get(), 0ns));
  w.watch(dir.file("cam0"));
  EXPECT_TRUE(w.watching());
  w.stop();
  EXPECT_FALSE(w.watching());
}

// A consumer made long before its producer (its attempts a minute apart after the first) sleeps
// on the channel's directory, and the producer that comes up is met: every frame reads whole.
TEST(ChannelWatch, AWaitingConsumerMeetsItsProducer) {
  TempDir dir;
  ConsumerOptions co;
  co.path = dir.file("ch");
  co.reconnect = true;
  co.reconnect_interval = 60s;
  Consumer c(co);
  ASSERT_FALSE(c.connected());
  std::atomic<pid_t> tid{0};
  std::atomic<int> first{-1};
  std::thread reader([&] {
    tid = static_cast<pid_t>(::syscall(SYS_gettid));
    first = static_cast<int>(c.next(60s).type);
  });
  EXPECT_TRUE(poll_until([&] { return tid != 0 && in_ppoll(tid); }, 10s))
      << "the waiting consumer does not sleep on its channel's directory";
  ProducerOptions o;
  o.path = co.path;
  Producer p(o);
  p.set_format(pattern_format(4096));
  reader.join();
  ASSERT_EQ(first, static_cast<int>(EventType::format));
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(publish_next(p), PublishStatus::published);
    Event ev = c.next(10s);
    ASSERT_EQ(ev.type, EventType::frame);
    EXPECT_EQ(check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq()), ev.frame.size());
  }
}
