// The retiring thread (core/src/retire.hpp): the teardown of a consumer's CUDA imports runs there,
// not on the thread that let go of them last (a model's, in its reply). What is handed over runs
// in order on that one thread, and what it holds is destroyed there; the caller goes on at once.
#include <gtest/gtest.h>
#include <pthread.h>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "retire.hpp"

using namespace cudaipc::detail;
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

// A teardown that lets go of more (a connection's, then its slot sets') hands that over too; it
// runs after, on the same thread.
TEST(Retire, WorkHandedOverFromARetiredWorkRunsAfterIt) {
  Seen seen;
  std::promise<void> second_queued;
  std::future<void> queued = second_queued.get_future();
  retire([&seen, &queued]() noexcept {
    queued.wait_for(10s);  // the queue holds 3 when 2 joins it
    retire([&seen]() noexcept { seen.note(2); });
    seen.note(1);
  });
  retire([&seen]() noexcept { seen.note(3); });
  second_queued.set_value();
  settle_retired();
  ASSERT_EQ(seen.order.size(), 3u);
  EXPECT_EQ(seen.order, (std::vector<int>{1, 3, 2}));
  for (const auto& n : seen.names) EXPECT_EQ(n, "cudaipc-retire");
}
