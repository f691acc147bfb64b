#include "death_watch.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <system_error>

#include "cudaipc/error.hpp"
#include "cudaipc/log.hpp"

namespace cudaipc {

DeathWatch::DeathWatch(int pidfd, std::function<void()> on_death) : on_death_(std::move(on_death)) {
  stop_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_) throw_errno("eventfd for a death watch");
  try {
    thread_ = std::thread([this, pidfd] { run(pidfd); });
  } catch (const std::system_error& e) {
    throw Error(Errc::system, std::string("starting a death watch thread: ") + e.what());
  }
}

DeathWatch::~DeathWatch() {
  const std::uint64_t one = 1;
  if (::write(stop_.get(), &one, sizeof one) < 0) {
    // An eventfd write fails only on overflow, which a single write cannot reach.
  }
  if (thread_.joinable()) thread_.join();
}

void DeathWatch::run(int pidfd) {
  pollfd fds[2] = {{stop_.get(), POLLIN, 0}, {pidfd, POLLIN, 0}};
  for (;;) {
    const int rc = ::poll(fds, 2, -1);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) {
      log(LogLevel::error, "death watch: poll failed; a producer's death is noticed only on use");
      return;
    }
    if (fds[0].revents) return;
    if (fds[1].revents) {
      on_death_();
      return;
    }
  }
}

}  // namespace cudaipc
