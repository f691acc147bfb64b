// Memory a stream that never drained may still touch (slot sets, registered pages, the words they
// hold). Freeing it would turn a stalled stream into a GPU fault the moment it resumes, so it is
// kept, and said so, until the process exits.
#pragma once

#include <mutex>
#include <utility>
#include <vector>

#include "cudaipc/log.hpp"

namespace cudaipc {

template <typename T>
void keep_until_exit(T thing, const char* why) noexcept {
  static std::mutex mu;
  static std::vector<T> kept;
  try {
    log(LogLevel::error, why);
    std::lock_guard<std::mutex> lock(mu);
    kept.push_back(std::move(thing));
  } catch (...) {
    // Out of memory while keeping it: it goes with `thing`, as it would have anyway.
  }
}

}  // namespace cudaipc
