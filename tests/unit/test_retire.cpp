// The retiring thread (core/src/retire.hpp): the teardown of a consumer's CUDA imports runs there,
// not on the thread that let go of them last (a model's, in its reply). What is handed over runs
// in order on that one thread, and what it holds is destroyed there; the caller goes on at once.
#include <gtest/gtest.h>
#include <pthread.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "forked_child.hpp"
#include "retire.hpp"
#include "temp_dir.hpp"

using namespace cudaipc::detail;
using cudaipc::testing::ForkedChild;
using cudaipc::testing::TempDir;
using namespace std::chrono_literals;

namespace {

std::string this_thread_name() {
  char name[16] = {};
  if (::pthread_getname_np(::pthread_self(), name, sizeof name) != 0) return "?";
  return name;
}

struct Seen {
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::string> names;
  std::vector<std::thread::id> ids;

  void note(int i) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(i);
    names.push_back(this_thread_name());
    ids.push_back(std::this_thread::get_id());
  }
};

// Notes the thread it is destroyed on: what a retired work holds goes with it.
struct Held {
  explicit Held(Seen* s) : seen(s) {}
  Held(Held&& o) noexcept : seen(std::exchange(o.seen, nullptr)) {}
  Held& operator=(Held&&) = delete;
  ~Held() {
    if (seen) seen->note(-1);
  }
  Seen* seen;
};

}  // namespace

TEST(Retire, WorkRunsInOrderOnTheRetiringThread) {
  Seen seen;
  for (int i = 0; i < 100; ++i) retire([&seen, i]() noexcept { seen.note(i); });
  settle_retired();
  ASSERT_EQ(seen.order.size(), 100u);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(seen.order[i], i);
    EXPECT_EQ(seen.names[i], "cudaipc-retire");
    EXPECT_NE(seen.ids[i], std::this_thread::get_id());
  }
}

TEST(Retire, WhatTheWorkHoldsIsDestroyedThereAfterItRan) {
  Seen seen;
  retire([&seen, held = Held(&seen)]() noexcept { seen.note(1); });
  settle_retired();
  ASSERT_EQ(seen.order.size(), 2u);
  EXPECT_EQ(seen.order[0], 1);
  EXPECT_EQ(seen.order[1], -1);  // the capture, destroyed after the run
  EXPECT_EQ(seen.names[1], "cudaipc-retire");
}

// The caller does not wait for the teardown: the work waits for what the caller does after
// retire() returned (done inline, it would wait the 10 s out and say so).
TEST(Retire, TheCallerGoesOnWhileTheWorkRuns) {
  std::promise<void> caller_went_on;
  std::future<void> went_on = caller_went_on.get_future();
  std::promise<bool> result;
  std::future<bool> waited = result.get_future();
  retire([&went_on, &result]() noexcept {
    result.set_value(went_on.wait_for(10s) == std::future_status::ready);
  });
  caller_went_on.set_value();
  ASSERT_EQ(waited.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(waited.get()) << "retire() ran the work on the caller's thread";
  settle_retired();
}

// A teardown that lets go of more (a connection's, then its slot sets') does that at once, on the
// same thread, in its own order; what was queued before waits its turn.
TEST(Retire, WorkHandedOverFromARetiredWorkRunsThereAtOnce) {
  Seen seen;
  retire([&seen]() noexcept {
    retire([&seen]() noexcept { seen.note(2); });
    seen.note(1);
  });
  retire([&seen]() noexcept { seen.note(3); });
  settle_retired();
  ASSERT_EQ(seen.order.size(), 3u);
  EXPECT_EQ(seen.order, (std::vector<int>{2, 1, 3}));
  for (const auto& n : seen.names) EXPECT_EQ(n, "cudaipc-retire");
}

// A forked child has the parent's queue but not its thread: what it lets go is torn down where it
// lets go, and nothing waits for a thread that is not there.
TEST(Retire, AForkedChildTearsDownWhereItLetsGo) {
  retire([]() noexcept {});
  settle_retired();  // the parent's thread exists, idle
  ForkedChild child([](ForkedChild& c) {
    const pthread_t me = ::pthread_self();
    bool here = false;
    retire([&here, me]() noexcept { here = ::pthread_equal(::pthread_self(), me) != 0; });
    settle_retired();
    c.say(here ? "here" : "elsewhere");
    return 0;
  });
  EXPECT_EQ(child.read_line(10s).value_or("nothing"), "here");
  const auto st = child.wait_exit(10s);
  ASSERT_TRUE(st.has_value()) << "the child hung";
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
}

// What is queued when the process exits runs before it ends (the driver still answers then): a
// fresh process (this program again, one test) hands over a slow work and returns from main.
constexpr const char* kExitMarkerEnv = "CUDAIPC_TEST_RETIRE_MARKER";

TEST(Retire, QueuedWorkRunsBeforeTheProcessExits) {
  TempDir dir;
  const std::string marker = dir.file("ran");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv(kExitMarkerEnv, marker.c_str(), 1);
    ::execl("/proc/self/exe", "unit_retire", "--gtest_filter=Retire.ExitChildSide",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "the child failed: status " << st;
  EXPECT_EQ(::access(marker.c_str(), F_OK), 0) << "the queued work never ran";
}

TEST(Retire, ExitChildSide) {
  const char* marker = std::getenv(kExitMarkerEnv);
  if (!marker) GTEST_SKIP() << "the child side of QueuedWorkRunsBeforeTheProcessExits";
  retire([path = std::string(marker)]() noexcept {
    std::this_thread::sleep_for(200ms);  // still running as main returns
    if (FILE* f = std::fopen(path.c_str(), "w")) std::fclose(f);
  });
}
