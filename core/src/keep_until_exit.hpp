// Memory a stream that never drained may still touch (slot sets, registered pages, the words they
// hold). Freeing it would turn a stalled stream into a GPU fault the moment it resumes, so it is
// kept, and said so, until the process exits. The store itself is never destroyed: the retiring
// thread (retire.hpp) may still keep something while the process's static objects go at exit.
#pragma once

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "cudaipc/log.hpp"

namespace cudaipc {

template <typename T>
void keep_until_exit(T thing, const char* why) noexcept {
  struct Store {
    std::mutex mu;
    std::vector<T> kept;
  };
  try {
    static Store* const store = std::make_unique<Store>().release();
    log(LogLevel::error, why);
    std::lock_guard<std::mutex> lock(store->mu);
    store->kept.push_back(std::move(thing));
  } catch (...) {
    // Out of memory while keeping it: it goes with `thing`, as it would have anyway.
  }
}

}  // namespace cudaipc
