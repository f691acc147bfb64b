// Pipelines that come and go in a Server's directory (cudaipc/server.hpp): a pipeline that
// restarts on its path is served again each time, whatever gap it leaves and whatever the model
// still holds of its last run; channels are picked up as they appear (inotify), not at the next
// listing; and the server says it watches the directory (directory_served, cudaipc/reply.hpp) for
// as long as it does. Requesters in this process play the filters' part; every reply carries the
// run and the request it answers, and the checks are on those.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"
#include "cudaipc/reply.hpp"
#include "cudaipc/server.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// One run of a filter: its request channel (frame = {run, n}) and its reply reader.
class FilterRun {
 public:
  FilterRun(const std::string& path, std::uint32_t run) : run_(run) {
    ProducerOptions po;
    po.path = path;
    po.slots = 8;
    po.role = ChannelRole::requests;
    requests_ = std::make_unique<Producer>(po);
    Format f;
    f.caps = "test/requests";
    f.tensor = make_tensor(DType::uint32, {2});
    requests_->set_format(f);
  }
  // The server reads the requests and its reply channel can be read, within `within`.
  bool served(std::chrono::milliseconds within) {
    const auto until = Clock::now() + within;
    while (requests_->consumer_count() == 0 && Clock::now() < until)
      std::this_thread::sleep_for(1ms);
    ConsumerOptions co;
    co.path = reply_path(requests_->path());
    co.reconnect = false;
    while (!replies_ && Clock::now() < until) {
      try {
        replies_ = std::make_unique<Consumer>(co);
      } catch (const cudaipc::Error&) {
        std::this_thread::sleep_for(1ms);
      }
    }
    return requests_->consumer_count() > 0 && replies_;
  }
  void send(std::uint32_t n) {
    const std::uint32_t v[2] = {run_, n};
    ASSERT_EQ(requests_->publish(v, sizeof v), PublishStatus::published);
  }
  std::string reply() {
    const auto until = Clock::now() + 3s;
    while (Clock::now() < until) {
      Event e = replies_->next(50ms);
      if (e.type == EventType::frame)
        return std::string(reinterpret_cast<const char*>(e.frame.metas()), e.frame.metas_size());
    }
    return "(none)";
  }

 private:
  std::uint32_t run_;
  std::unique_ptr<Producer> requests_;
  std::unique_ptr<Consumer> replies_;
};

std::string text_of(const Request& r) {
  std::uint32_t v[2];
  std::memcpy(v, r.frame.data(), sizeof v);
  return std::to_string(v[0]) + "/" + std::to_string(v[1]);
}

// The next request, answered with its own text; the text ("(none)" when none came).
std::string answer_next(Server& s) {
  std::vector<Request> batch;
  if (!s.batch(batch, 1, 0ns, 3s) || batch.empty()) return "(none)";
  const std::string t = text_of(batch[0]);
  EXPECT_TRUE(s.reply(batch[0], t.data(), static_cast<std::uint32_t>(t.size())));
  return t;
}

// This process's open descriptors.
std::size_t open_fds() {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++n;
  }
  return n;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// A model that keeps a request of a pipeline's last run (unanswered, as a model keeps the views
// of its last batch until the next) does not keep that pipeline's reply channel: the pipeline
// restarts on its path after gaps shorter and longer than the listing interval, and every run's
// requests are answered, each with its own result.
TEST(ServerJoin, APipelineThatRestartsIsServedAgainWhateverTheModelHolds) {
  cudaipc::testing::TempDir dir;
  const std::string cam = dir.file("cam");
  ServerOptions so;
  so.directory = dir.path();
  so.scan_interval = 100ms;
  Server server(so);
  const std::size_t fds = open_fds();
  std::vector<Request> kept;  // one request of every run, never answered
  // The gap before each run (the first starts under the live server).
  const std::chrono::milliseconds gaps[] = {0ms, 0ms, 20ms, 300ms, 0ms, 1200ms, 5ms};
  std::uint32_t run = 0;
  for (const auto gap : gaps) {
    ++run;
    SCOPED_TRACE("run " + std::to_string(run) + " after " + std::to_string(gap.count()) + " ms");
    std::this_thread::sleep_for(gap);
    auto r = std::make_unique<FilterRun>(cam, run);
    ASSERT_TRUE(r->served(3s));
    for (std::uint32_t n = 1; n <= 3; ++n) {
      r->send(n);
      const std::string t = std::to_string(run) + "/" + std::to_string(n);
      EXPECT_EQ(answer_next(server), t);
      EXPECT_EQ(r->reply(), t);
    }
    r->send(4);
    std::vector<Request> batch;
    ASSERT_TRUE(server.batch(batch, 1, 0ns, 3s));
    ASSERT_EQ(batch.size(), 1u);
    kept.push_back(std::move(batch[0]));
  }
  // The last run's pipeline leaves (its channel is gone) although its request is still held: its
  // reply channel goes with it, and an answer to it now is lost, not sent to whoever comes next.
  const std::uint32_t last = kept.back().pipeline();
  bool left = false;
  const auto until = Clock::now() + 3s;
  for (ServerEvent e; !left && Clock::now() < until;)
    if (server.event(e))
      left = e.type == ServerEventType::left && e.pipeline == last;
    else
      std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(left);
  EXPECT_TRUE(server.pipelines().empty());
  EXPECT_FALSE(exists(reply_path(cam)));
  const std::string t = text_of(kept.back());
  EXPECT_FALSE(server.reply(kept.back(), t.data(), static_cast<std::uint32_t>(t.size())));
  // Once the model lets go of what it kept, every run's connection is gone: nothing leaked.
  kept.clear();
  EXPECT_EQ(open_fds(), fds);
}

// A channel that appears is served at once (the directory's events), not at its next listing: the
// listing here comes once a minute.
TEST(ServerJoin, AChannelIsPickedUpAsItAppears) {
  cudaipc::testing::TempDir dir;
  ServerOptions so;
  so.directory = dir.path();
  so.scan_interval = 6000ms;  // listed every minute when watched
  Server server(so);
  for (std::uint32_t run = 1; run <= 3; ++run) {
    FilterRun r(dir.file("cam" + std::to_string(run)), run);
    ASSERT_TRUE(r.served(3s)) << "run " << run;
    r.send(1);
    EXPECT_EQ(answer_next(server), std::to_string(run) + "/1");
    EXPECT_EQ(r.reply(), std::to_string(run) + "/1");
  }
  // And each leaves as its channel goes.
  const auto until = Clock::now() + 3s;
  while (!server.pipelines().empty() && Clock::now() < until) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(server.pipelines().empty());
}

// A channel another server serves is left to it, and taken as soon as that server goes (its reply
// channel going is news too), not at the next listing.
TEST(ServerJoin, AChannelAnotherServerLeavesIsTakenAtOnce) {
  cudaipc::testing::TempDir dir;
  const std::string cam = dir.file("cam");
  FilterRun r(cam, 1);
  ServerOptions given;
  given.path = cam;
  auto one = std::make_unique<Server>(given);
  ASSERT_TRUE(r.served(3s));
  ServerOptions so;
  so.directory = dir.path();
  so.scan_interval = 6000ms;  // listed every minute when watched
  Server two(so);
  EXPECT_TRUE(two.pipelines().empty());
  one.reset();
  const auto until = Clock::now() + 3s;
  while (two.pipelines().empty() && Clock::now() < until) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(two.pipelines().size(), 1u);
  r.send(1);
  EXPECT_EQ(answer_next(two), "1/1");
}

// A directory a server watches says so to the filters that start in it, for as long as a server
// watches it (two servers may share one directory); nothing is said of another directory.
TEST(ServerJoin, AServerSaysItWatchesItsDirectory) {
  cudaipc::testing::TempDir dir;
  cudaipc::testing::TempDir other;
  const std::string cam = dir.file("cam");
  EXPECT_FALSE(directory_served(cam));
  ServerOptions so;
  so.directory = dir.path();
  auto one = std::make_unique<Server>(so);
  EXPECT_TRUE(directory_served(cam));
  EXPECT_FALSE(directory_served(other.file("cam")));
  auto two = std::make_unique<Server>(so);
  one.reset();
  EXPECT_TRUE(directory_served(cam));
  two.reset();
  EXPECT_FALSE(directory_served(cam));
  EXPECT_FALSE(exists(server_mark_path(dir.path())));
  // A server of given paths watches no directory.
  ServerOptions paths;
  paths.path = cam;
  Server three(paths);
  EXPECT_FALSE(directory_served(cam));
}

// A directory made after the server started is served once it exists, and said to be watched.
TEST(ServerJoin, AMarkRemovedUnderTheServerIsMadeAgain) {
  cudaipc::testing::TempDir top;
  const std::string d = top.file("models");
  ASSERT_EQ(::mkdir(d.c_str(), 0700), 0);
  ServerOptions so;
  so.directory = d;
  so.scan_interval = 10ms;
  Server server(so);
  EXPECT_TRUE(directory_served(d + "/cam"));
  {
    FilterRun r(d + "/cam", 1);
    ASSERT_TRUE(r.served(3s));
    r.send(1);
    EXPECT_EQ(answer_next(server), "1/1");
    EXPECT_EQ(r.reply(), "1/1");
  }
  const auto gone = Clock::now() + 3s;
  while (!server.pipelines().empty() && Clock::now() < gone) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(server.pipelines().empty());
  // A mark removed under the server (by a server that left as this one took it) is made again.
  ASSERT_EQ(::unlink(server_mark_path(d).c_str()), 0);
  const auto again = Clock::now() + 3s;
  while (!directory_served(d + "/cam") && Clock::now() < again) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(directory_served(d + "/cam"));
}

}  // namespace

namespace {

// This process's threads' names (/proc/self/task/TID/comm).
std::vector<std::string> thread_names() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream f(e.path() / "comm");
    std::string name;
    if (std::getline(f, name)) names.push_back(name);
  }
  return names;
}

bool has_thread(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

// The threads the core starts in a model process carry names, so that someone looking into it
// (top -H, gdb, a profiler's thread list) tells them from the application's and the driver's:
// the server's directory scan and backlog, a pipeline's reader, the socket thread of a request
// channel's producer. Each request is still answered with its own text.
TEST(ServerJoin, TheCoresThreadsCarryTheirNames) {
  cudaipc::testing::TempDir dir;
  ServerOptions so;
  so.directory = dir.path();
  so.scan_interval = 100ms;
  Server server(so);
  FilterRun run(dir.file("cam"), 1);
  ASSERT_TRUE(run.served(3s));
  run.send(1);
  EXPECT_EQ(answer_next(server), "1/1");
  EXPECT_EQ(run.reply(), "1/1");
  const std::vector<std::string> names = thread_names();
  std::string all;
  for (const auto& n : names) all += n + " ";
  SCOPED_TRACE("threads: " + all);
  for (const char* name : {"cudaipc-scan", "cudaipc-backlog", "cudaipc-reader", "cudaipc-serve"})
    EXPECT_TRUE(has_thread(names, name)) << name;
}
