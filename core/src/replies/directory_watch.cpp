#include "replies/directory_watch.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <thread>
#include <utility>

#include "cudaipc/error.hpp"
#include "cudaipc/log.hpp"
#include "inotify_events.hpp"

namespace cudaipc::detail {
namespace {

// What makes the server look again: entries that come and go (a channel bound, renamed in,
// unlinked), and the directory itself going or being renamed (it is then polled by its name).
constexpr std::uint32_t kWatched = IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM |
                                   IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;

}  // namespace

DirectoryWatch::DirectoryWatch(std::string dir, std::chrono::milliseconds poll,
                               std::string ignored_name)
    : dir_(std::move(dir)),
      poll_(poll.count() < 1 ? std::chrono::milliseconds(1) : poll),
      ignored_name_(std::move(ignored_name)) {
  wake_fd_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_fd_) throw_errno("eventfd for the watch of '" + dir_ + "'");
  inotify_fd_ = UniqueFd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!inotify_fd_)
    say_once("cannot watch '" + dir_ + "' (inotify_init1: " + std::strerror(errno) +
             "): it is listed every " + std::to_string(poll_.count()) + " ms instead");
  try_watch();
}

void DirectoryWatch::say_once(const std::string& what) {
  if (said_ == what) return;
  said_ = what;
  log(LogLevel::warning, what.c_str());
}

void DirectoryWatch::try_watch() {
  if (!inotify_fd_ || watch_ >= 0) return;
  const int wd = ::inotify_add_watch(inotify_fd_.get(), dir_.c_str(), kWatched);
  if (wd >= 0) {
    watch_ = wd;
    said_.clear();
    return;
  }
  // A directory that does not exist yet is no news (the server's listing says so); no watch
  // left (ENOSPC: fs.inotify.max_user_watches) or another cause is said once.
  if (errno != ENOENT)
    say_once("cannot watch '" + dir_ + "' (inotify_add_watch: " + std::strerror(errno) +
             "): it is listed every " + std::to_string(poll_.count()) + " ms instead");
}

bool DirectoryWatch::take_events() {
  bool due = false;
  const bool read =
      read_inotify_events(inotify_fd_.get(), [&](std::uint32_t mask, const char* name) {
        if (mask & IN_IGNORED) {
          // The watch is gone (the directory was removed): polled by name until it is back.
          watch_ = -1;
          due = true;
        } else if (mask & IN_MOVE_SELF) {
          // Renamed: its name may name another directory now, which is the one served.
          if (watch_ >= 0 && ::inotify_rm_watch(inotify_fd_.get(), watch_) != 0 && errno != EINVAL)
            say_once("inotify_rm_watch on '" + dir_ + "': " + std::strerror(errno));
          watch_ = -1;
          due = true;
        } else if ((mask & IN_Q_OVERFLOW) || !*name || ignored_name_ != name) {
          due = true;  // a full queue lost events: everything is looked at again
        }
      });
  if (!read) {
    say_once("reading the events of '" + dir_ + "' (" + std::strerror(errno) +
             "): it is listed every " + std::to_string(poll_.count()) + " ms instead");
    inotify_fd_.reset();
    watch_ = -1;
    return true;
  }
  return due;
}

bool DirectoryWatch::wait() {
  for (;;) {
    if (stopped_.load(std::memory_order_acquire)) return false;
    pollfd fds[2] = {{wake_fd_.get(), POLLIN, 0},
                     {inotify_fd_ ? inotify_fd_.get() : -1, POLLIN, 0}};
    const auto every = watch_ >= 0 ? poll_ * kFallbackPolls : poll_;
    const int n = ::poll(fds, 2, static_cast<int>(every.count()));
    if (n < 0) {
      if (errno == EINTR) continue;
      // Nothing to wait on (no memory for the poll): listed every `poll_` meanwhile.
      say_once(std::string("waiting for changes of '") + dir_ + "': " + std::strerror(errno));
      std::this_thread::sleep_for(poll_);
      return !stopped_.load(std::memory_order_acquire);
    }
    if (n == 0) {
      try_watch();  // events before the watch was made are found by the listing that follows
      return true;
    }
    bool due = false;
    if (fds[0].revents & POLLIN) {
      std::uint64_t count = 0;
      if (::read(wake_fd_.get(), &count, sizeof count) < 0 && errno != EAGAIN)
        say_once(std::string("reading the watch's wake: ") + std::strerror(errno));
      due = true;
    }
    if (fds[1].revents & POLLIN) due |= take_events();
    if (fds[1].revents & (POLLERR | POLLHUP | POLLNVAL)) {
      inotify_fd_.reset();
      watch_ = -1;
      due = true;
    }
    if (stopped_.load(std::memory_order_acquire)) return false;
    if (due) return true;
  }
}

void DirectoryWatch::wake() noexcept {
  const std::uint64_t one = 1;
  if (::write(wake_fd_.get(), &one, sizeof one) != static_cast<ssize_t>(sizeof one)) {
    // Only a full counter fails (EAGAIN), and then a wake is pending anyway.
  }
}

void DirectoryWatch::stop() noexcept {
  stopped_.store(true, std::memory_order_release);
  wake();
}

}  // namespace cudaipc::detail
