// Futex wait/wake on words in shared memory (not FUTEX_PRIVATE: the waker is another process),
// and a wait on several words at once (futex_waitv) for waiters woken from several places.
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
// Never throws: FUTEX_WAKE fails only on a bad address, and a waiter still has its deadline.
void futex_wake_all_noexcept(std::atomic<std::uint32_t>& word) noexcept;

struct FutexWord {
  const std::atomic<std::uint32_t>* word;
  std::uint32_t expected;
};
inline constexpr std::size_t kMaxFutexWords = 128;  // the kernel's limit for futex_waitv

// Sleeps while every word still holds its expected value, at most `timeout`. Where the kernel has
// no futex_waitv (before Linux 5.16) it sleeps on the first word in slices of 1 ms, so wakes
// through the others arrive late but never get lost.
WaitResult futex_wait_any(const FutexWord* words, std::size_t count,
                          std::chrono::nanoseconds timeout);

}  // namespace cudaipc
