#include "futex.hpp"
#include "hot_path.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include "clock.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/log.hpp"

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

namespace cudaipc {
namespace {

// struct futex_waitv and its flags from <linux/futex.h> (5.16), spelled out for older headers.
struct WaitvEntry {
  std::uint64_t val;
  std::uint64_t uaddr;
  std::uint32_t flags;
  std::uint32_t reserved;
};
constexpr std::uint32_t kFutex2SizeU32 = 0x02;

std::atomic<bool> g_no_waitv{false};

}  // namespace

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t),
              "a futex word is a plain 32-bit integer");

CUDAIPC_HOT WaitResult futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                                  std::chrono::nanoseconds timeout) {
  if (timeout.count() <= 0) return WaitResult::timeout;
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
  long rc = ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT, expected, &ts,
                      nullptr, 0);
  if (rc == 0) return WaitResult::woken;
  switch (errno) {
    case EAGAIN:  // the word changed before we slept
    case EINTR:
      return WaitResult::woken;
    case ETIMEDOUT:
      return WaitResult::timeout;
    default:
      throw_errno("futex wait");
  }
}

void futex_wake_all(std::atomic<std::uint32_t>& word) {
  if (::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr,
                nullptr, 0) < 0)
    throw_errno("futex wake");
}

void futex_wake_all_noexcept(std::atomic<std::uint32_t>& word) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
}

WaitResult futex_wait_any(const FutexWord* words, std::size_t count,
                          std::chrono::nanoseconds timeout) {
  if (timeout.count() <= 0) return WaitResult::timeout;
  if (count == 0 || count > kMaxFutexWords)
    throw Error(Errc::invalid_argument, "futex_wait_any on " + std::to_string(count) + " words");
  if (!g_no_waitv.load(std::memory_order_relaxed)) {
    WaitvEntry v[kMaxFutexWords];
    for (std::size_t i = 0; i < count; ++i)
      v[i] = WaitvEntry{words[i].expected, reinterpret_cast<std::uintptr_t>(words[i].word),
                        kFutex2SizeU32, 0};
    // futex_waitv takes an absolute deadline.
    const std::uint64_t until = monotonic_ns() + static_cast<std::uint64_t>(timeout.count());
    timespec ts{static_cast<time_t>(until / 1'000'000'000),
                static_cast<long>(until % 1'000'000'000)};
    long rc = ::syscall(SYS_futex_waitv, v, static_cast<unsigned>(count), 0u, &ts, CLOCK_MONOTONIC);
    if (rc >= 0) return WaitResult::woken;
    switch (errno) {
      case EAGAIN:
      case EINTR:
        return WaitResult::woken;
      case ETIMEDOUT:
        return WaitResult::timeout;
      case ENOSYS:
        g_no_waitv.store(true, std::memory_order_relaxed);
        break;
      case EPERM:
        // A seccomp profile that does not know the call (container runtimes' defaults refused
        // it with EPERM until about 2023) is a kernel without it, as far as we are concerned.
        if (!g_no_waitv.exchange(true, std::memory_order_relaxed))
          log(LogLevel::info,
              "futex_waitv is refused here (a seccomp profile?): waiting in 1 ms slices instead");
        break;
      default:
        throw_errno("futex_waitv");
    }
  }
  for (std::size_t i = 0; i < count; ++i)
    if (words[i].word->load(std::memory_order_seq_cst) != words[i].expected)
      return WaitResult::woken;
  auto slice = std::min<std::chrono::nanoseconds>(timeout, std::chrono::milliseconds(1));
  auto& first = const_cast<std::atomic<std::uint32_t>&>(*words[0].word);
  WaitResult r = futex_wait(first, words[0].expected, slice);
  return r == WaitResult::timeout && slice < timeout ? WaitResult::woken : r;
}

}  // namespace cudaipc
