// Futex wait/wake on a word in shared memory (not FUTEX_PRIVATE: the waker is another process).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace cudaipc {

enum class WaitResult { woken, timeout };

// Sleeps while *word == expected, at most `timeout`. Spurious wakeups return woken.
WaitResult futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                      std::chrono::nanoseconds timeout);
void futex_wake_all(std::atomic<std::uint32_t>& word);

}  // namespace cudaipc
