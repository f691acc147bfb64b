#include "futex.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "cudaipc/error.hpp"

namespace cudaipc {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t),
              "a futex word is a plain 32-bit integer");

WaitResult futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected,
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

}  // namespace cudaipc
