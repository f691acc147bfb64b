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

}  // namespace cudaipc::testing
