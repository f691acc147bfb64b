// Bounded waiting for a condition another thread or process makes true: a bug then fails the
// test at the deadline instead of hanging it.
#pragma once

#include <chrono>
#include <thread>

namespace cudaipc::testing {

template <typename Pred>
bool poll_until(Pred&& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// A value other threads are still changing (a producer's socket thread reaping a consumer that
// left), read once it has held still for `quiet`; the last reading if it never does by `timeout`.
template <typename Read>
auto settled(Read&& read, std::chrono::milliseconds quiet = std::chrono::milliseconds(100),
             std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto value = read();
  auto still_since = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto again = read();
    const auto now = std::chrono::steady_clock::now();
    if (again != value) {
      value = again;
      still_since = now;
    } else if (now - still_since >= quiet) {
      break;
    }
  }
  return value;
}

}  // namespace cudaipc::testing
