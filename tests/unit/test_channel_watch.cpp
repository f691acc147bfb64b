// A consumer waiting for its producer is woken by the producer's socket appearing (inotify on the
// channel's directory), not only by its next connect attempt: the watch itself (its name only,
// the directory going, a wake), and a consumer that sleeps on it and meets the producer.
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

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

// A unix socket bound at `path` (what a producer makes first), kept until the returned fd closes;
// with `mode`, the file's mode (set on the socket before bind).
UniqueFd bind_socket(const std::string& path, int mode = -1) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  EXPECT_TRUE(fd) << std::strerror(errno);
  if (mode >= 0) {
    EXPECT_EQ(::fchmod(fd.get(), static_cast<mode_t>(mode)), 0) << std::strerror(errno);
  }
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

constexpr const char* kNoInotify =
    "no inotify instance or watch to be had here (fs.inotify.max_user_instances or "
    "max_user_watches used up): consumers wait by their connect attempts alone";

// A watch of `cam0` in a fresh directory, with a wake to end its waits.
class Watched : public ::testing::Test {
 protected:
  void SetUp() override {
    w.watch(dir.file("cam0"));
    if (!w.watching()) GTEST_SKIP() << kNoInotify;
  }

  TempDir dir;
  UniqueFd wake = make_eventfd();
  ChannelWatch w;
};

using Seen = ChannelWatch::Seen;

}  // namespace

TEST_F(Watched, WakesWhenTheSocketIsMade) {
  UniqueFd bound;
  std::thread maker([&] {
    std::this_thread::sleep_for(50ms);
    bound = bind_socket(dir.file("cam0"));
  });
  // `socket` only for the socket's event: a timeout says nothing.
  const Seen seen = w.wait(wake.get(), 60s);
  maker.join();
  EXPECT_EQ(seen, Seen::socket);
  EXPECT_TRUE(w.watching());
}

TEST_F(Watched, OtherNamesAreNoNews) {
  UniqueFd other = bind_socket(dir.file("cam1"));
  UniqueFd longer = bind_socket(dir.file("cam0.reply"));
  EXPECT_EQ(w.wait(wake.get(), 100ms), Seen::nothing);
  EXPECT_TRUE(w.watching());
  // Moved in under the name: news.
  UniqueFd moved = bind_socket(dir.file("cam0.tmp"));
  std::filesystem::rename(dir.file("cam0.tmp"), dir.file("cam0"));
  Seen seen = Seen::nothing;
  for (int i = 0; i < 10 && seen == Seen::nothing; ++i) seen = w.wait(wake.get(), 60s);
  EXPECT_EQ(seen, Seen::socket);
}

TEST_F(Watched, AWakeEndsTheWaitWithoutNews) {
  const std::uint64_t one = 1;
  ASSERT_EQ(::write(wake.get(), &one, sizeof one), static_cast<ssize_t>(sizeof one));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(w.wait(wake.get(), 60s), Seen::nothing);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s) << "the wake did not end the wait";
  EXPECT_TRUE(w.watching());
}

TEST(ChannelWatch, ADirectoryThatGoesOrMovesEndsTheWatch) {
  TempDir dir;
  UniqueFd wake = make_eventfd();
  for (const bool moved : {false, true}) {
    const std::string sub = dir.file("sub");
    ASSERT_TRUE(std::filesystem::create_directory(sub));
    ChannelWatch w;
    w.watch(sub + "/cam0");
    if (!w.watching()) GTEST_SKIP() << kNoInotify;
    if (moved)
      std::filesystem::rename(sub, dir.file("elsewhere"));
    else
      std::filesystem::remove(sub);
    // Worth an attempt (the consumer's attempts go on by the clock from now on), and no longer
    // watching: a directory made again under the name is another one.
    EXPECT_EQ(w.wait(wake.get(), 60s), Seen::watch_ended) << (moved ? "moved" : "removed");
    EXPECT_FALSE(w.watching());
    std::filesystem::remove_all(dir.file("elsewhere"));
  }
}

TEST(ChannelWatch, NothingToWatchWithoutTheDirectory) {
  TempDir dir;
  ChannelWatch w;
  w.watch(dir.file("missing") + "/cam0");
  EXPECT_FALSE(w.watching());
  UniqueFd wake = make_eventfd();
  EXPECT_EQ(w.wait(wake.get(), 0ns), Seen::nothing);
  w.watch(dir.file("cam0"));
  if (!w.watching()) GTEST_SKIP() << kNoInotify;
  w.stop();
  EXPECT_FALSE(w.watching());
}

// One process's waiting consumers take at most kMaxWatches of the user's inotify instances; one
// given back is there for the next.
TEST(ChannelWatch, AProcessHoldsAtMostItsShareOfInstances) {
  TempDir dir;
  std::vector<ChannelWatch> watches(ChannelWatch::kMaxWatches);
  for (auto& w : watches) {
    w.watch(dir.file("cam0"));
    if (!w.watching()) GTEST_SKIP() << kNoInotify;
  }
  ChannelWatch one_more;
  one_more.watch(dir.file("cam0"));
  EXPECT_FALSE(one_more.watching());
  watches.back().stop();
  one_more.watch(dir.file("cam0"));
  EXPECT_TRUE(one_more.watching());
}

// Runs next(60 s) on a thread of its own and says what it gave, or what it threw.
class WaitingReader {
 public:
  explicit WaitingReader(Consumer& c)
      : thread_([this, &c] {
          tid_ = static_cast<pid_t>(::syscall(SYS_gettid));
          try {
            type_ = static_cast<int>(c.next(60s).type);
          } catch (const std::exception& e) {
            error_ = e.what();
            type_ = -2;
          }
        }) {}
  ~WaitingReader() {
    if (thread_.joinable()) thread_.join();
  }
  // Whether it sleeps on its channel's directory (what a watching consumer does).
  bool asleep_on_the_directory() {
    return poll_until([&] { return tid_ != 0 && in_ppoll(tid_); }, 10s);
  }
  // next()'s event type; a failure names what it threw.
  int result() {
    thread_.join();
    EXPECT_NE(type_, -2) << "next() threw: " << error_;
    return type_;
  }

 private:
  std::atomic<pid_t> tid_{0};
  std::atomic<int> type_{-1};
  std::string error_;
  std::thread thread_;
};

// `n` frames published, each read whole by `c`.
void frames_read_whole(Producer& p, Consumer& c, int n) {
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(publish_next(p), PublishStatus::published);
    Event ev = c.next(10s);
    ASSERT_EQ(ev.type, EventType::frame);
    EXPECT_EQ(check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq()), ev.frame.size());
  }
}

ConsumerOptions waiting_options(const std::string& path) {
  ConsumerOptions co;
  co.path = path;
  co.reconnect = true;
  co.reconnect_interval = 60s;
  return co;
}

// A consumer waiting for its producer sleeps on the channel's directory, and the producer that
// comes up is met: every frame reads whole.
TEST(ChannelWatch, AWaitingConsumerMeetsItsProducer) {
  TempDir dir;
  Consumer c(waiting_options(dir.file("ch")));
  ASSERT_FALSE(c.connected());
  WaitingReader reader(c);
  if (!reader.asleep_on_the_directory()) {
    ChannelWatch probe;
    probe.watch(dir.file("ch"));
    if (!probe.watching()) GTEST_SKIP() << kNoInotify;
    FAIL() << "the waiting consumer does not sleep on its channel's directory";
  }
  ProducerOptions o;
  o.path = dir.file("ch");
  Producer p(o);
  p.set_format(pattern_format(4096));
  ASSERT_EQ(reader.result(), static_cast<int>(EventType::format));
  frames_read_whole(p, c, 3);
}

// A producer binds its socket for itself alone and opens it up to its group before it listens: a
// consumer woken by the socket and refused by its mode tries again, and meets the producer. (As
// root the mode refuses nobody, and this only checks the meeting.)
TEST(ChannelWatch, ASocketNotOpenedUpYetIsTriedAgain) {
  TempDir dir;
  const std::string path = dir.file("ch");
  Consumer c(waiting_options(path));
  WaitingReader reader(c);
  if (!reader.asleep_on_the_directory()) GTEST_SKIP() << kNoInotify;
  {
    // A socket nobody may connect to (mode 0, set before bind as the producer sets its own), there
    // long enough for the consumer to be refused by it (it tries every 200 us once woken).
    UniqueFd closed = bind_socket(path, 0);
    std::this_thread::sleep_for(50ms);
    ASSERT_EQ(::unlink(path.c_str()), 0) << std::strerror(errno);
  }
  ProducerOptions o;
  o.path = path;
  Producer p(o);
  p.set_format(pattern_format(4096));
  ASSERT_EQ(reader.result(), static_cast<int>(EventType::format));
  frames_read_whole(p, c, 3);
}
