// The process-wide death watch (core/src/death_watch.cpp): one thread for every watched pidfd,
// each callback once when its process exits, none after its watch ended, and ending a watch
// waits for a callback that is running. Real processes: forked children that exit when told.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "death_watch.hpp"
#include "forked_child.hpp"
#include "proc_stats.hpp"
#include "process_watch.hpp"

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

// A child that exits when told (go()), and a pidfd on it.
struct Child {
  ForkedChild proc{[](ForkedChild& ch) { return ch.wait_go() ? 0 : 1; }};
  UniqueFd pidfd = open_pidfd(proc.pid());
};

// Which callbacks ran, and how often.
class Fired {
 public:
  explicit Fired(std::size_t n) : count_(n, 0) {}
  std::function<void()> callback(std::size_t i) {
    return [this, i] {
      std::lock_guard<std::mutex> lock(mu_);
      ++count_[i];
      cv_.notify_all();
    };
  }
  bool wait(std::size_t i, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return count_[i] > 0; });
  }
  int count(std::size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return count_[i];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> count_;
};

}  // namespace

// Sixteen watches cost one thread, not one each, and each fires once, for its own process, as that
// process exits; the ones whose process still runs do not.
TEST(DeathWatch, OneThreadWatchesEveryProcessAndEachCallbackFiresOnceForItsOwn) {
  constexpr std::size_t kChildren = 16;
  std::vector<std::unique_ptr<Child>> children;
  for (std::size_t i = 0; i < kChildren; ++i) children.push_back(std::make_unique<Child>());
  if (!children[0]->pidfd) GTEST_SKIP() << "no pidfds on this kernel";
  Fired fired(kChildren);
  std::vector<std::unique_ptr<DeathWatch>> watches;
  // The first watch starts the watcher thread (and a sanitizer may start its own with it).
  watches.push_back(std::make_unique<DeathWatch>(children[0]->pidfd.get(), fired.callback(0)));
  const std::size_t threads = thread_count();
  for (std::size_t i = 1; i < kChildren; ++i)
    watches.push_back(std::make_unique<DeathWatch>(children[i]->pidfd.get(), fired.callback(i)));
  EXPECT_EQ(thread_count(), threads) << "a thread per watch";
  for (std::size_t i = 0; i < kChildren; ++i) {
    children[i]->proc.go();
    ASSERT_TRUE(fired.wait(i, 10s)) << "child " << i << " exited unnoticed";
    ASSERT_TRUE(children[i]->proc.wait_exit(10s));
    for (std::size_t j = i + 1; j < kChildren; ++j)
      EXPECT_EQ(fired.count(j), 0) << "child " << j << " still runs";
  }
  watches.clear();
  for (std::size_t i = 0; i < kChildren; ++i) EXPECT_EQ(fired.count(i), 1) << "child " << i;
}

// A watch that ended never fires, though its process then exits; a watch made later on the same
// process does.
TEST(DeathWatch, AnEndedWatchNeverFires) {
  Child child;
  if (!child.pidfd) GTEST_SKIP() << "no pidfds on this kernel";
  Fired fired(2);
  auto first = std::make_unique<DeathWatch>(child.pidfd.get(), fired.callback(0));
  first.reset();
  UniqueFd second_fd = open_pidfd(child.proc.pid());
  DeathWatch second(second_fd.get(), fired.callback(1));
  child.proc.go();
  ASSERT_TRUE(fired.wait(1, 10s));
  ASSERT_TRUE(child.proc.wait_exit(10s));
  EXPECT_EQ(fired.count(0), 0);
}

// Ending a watch whose callback is running returns only after the callback did: what it touches
// (a consumer's GPU memory) may be freed right after.
TEST(DeathWatch, EndingAWatchWaitsForItsRunningCallback) {
  Child child;
  if (!child.pidfd) GTEST_SKIP() << "no pidfds on this kernel";
  std::atomic<bool> started{false}, finished{false};
  auto watch = std::make_unique<DeathWatch>(child.pidfd.get(), [&] {
    started.store(true, std::memory_order_seq_cst);
    std::this_thread::sleep_for(300ms);
    finished.store(true, std::memory_order_seq_cst);
  });
  child.proc.go();
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!started.load(std::memory_order_seq_cst) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(started.load(std::memory_order_seq_cst));
  watch.reset();
  EXPECT_TRUE(finished.load(std::memory_order_seq_cst));
}

// A child forked from a process whose watcher runs gets a watcher of its own (threads do not
// survive fork), and its watches leave the parent's alone.
TEST(DeathWatch, AForkedChildWatchesWithItsOwnThread) {
#ifdef UNDER_TSAN
  GTEST_SKIP() << "ThreadSanitizer cannot start threads in a child forked from a threaded process";
#endif
  Child watched_by_parent, watched_by_child;
  if (!watched_by_parent.pidfd) GTEST_SKIP() << "no pidfds on this kernel";
  Fired fired(1);
  DeathWatch parent_watch(watched_by_parent.pidfd.get(), fired.callback(0));  // the thread runs
  const pid_t target = watched_by_child.proc.pid();
  ForkedChild watcher([target](ForkedChild& ch) {
    UniqueFd fd = open_pidfd(target);
    std::mutex mu;
    std::condition_variable cv;
    bool died = false;
    DeathWatch w(fd.get(), [&] {
      std::lock_guard<std::mutex> lock(mu);
      died = true;
      cv.notify_all();
    });
    ch.say("watching");
    std::unique_lock<std::mutex> lock(mu);
    ch.say(cv.wait_for(lock, 10s, [&] { return died; }) ? "fired" : "silent");
    return 0;
  });
  auto line = watcher.read_line(10s);
  ASSERT_TRUE(line);
  ASSERT_EQ(*line, "watching");
  watched_by_child.proc.go();
  line = watcher.read_line(15s);
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "fired");
  ASSERT_TRUE(watcher.wait_exit(10s));
  // The parent's watch still works, and did not fire for the other child.
  EXPECT_EQ(fired.count(0), 0);
  watched_by_parent.proc.go();
  EXPECT_TRUE(fired.wait(0, 10s));
}
