#include "channel_watch.hpp"

#include <poll.h>
#include <sys/inotify.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <ctime>
#include <utility>

#include "inotify_events.hpp"

namespace cudaipc::detail {
namespace {

// A producer binds its socket (made), may then chmod or chown it (changed) and listens; one that
// renames a socket into place moves it in. The directory going or being renamed ends the watch.
constexpr std::uint32_t kWatched =
    IN_CREATE | IN_MOVED_TO | IN_ATTRIB | IN_MOVE_SELF | IN_DELETE_SELF | IN_ONLYDIR;

// The inotify instances this process's waiting consumers hold.
std::atomic<int> g_watches{0};

}  // namespace

void ChannelWatch::watch(const std::string& path) {
  stop();
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  name_ = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name_.empty()) return;
  if (g_watches.fetch_add(1, std::memory_order_relaxed) >= kMaxWatches) {
    g_watches.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  UniqueFd fd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  // No instance (fs.inotify.max_user_instances), no watch left, no such directory yet: the
  // consumer's connect attempts are what find the producer then.
  if (!fd || ::inotify_add_watch(fd.get(), dir.c_str(), kWatched) < 0) {
    g_watches.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  fd_ = std::move(fd);
}

void ChannelWatch::stop() noexcept {
  if (!fd_) return;
  fd_.reset();
  g_watches.fetch_sub(1, std::memory_order_relaxed);
}

ChannelWatch::Seen ChannelWatch::wait(int wake_fd, std::chrono::nanoseconds timeout) {
  if (!fd_) return Seen::nothing;
  pollfd fds[2] = {{fd_.get(), POLLIN, 0}, {wake_fd, POLLIN, 0}};
  const auto ns = timeout.count() < 0 ? 0 : timeout.count();
  const timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  const int n = ::ppoll(fds, 2, &ts, nullptr);
  if (n < 0 && errno == EINTR) return Seen::nothing;  // the caller looks again
  if (n < 0 || (fds[0].revents & (POLLERR | POLLHUP | POLLNVAL))) {
    // No memory for the poll, a broken descriptor: the caller's attempts go on by the clock.
    stop();
    return Seen::watch_ended;
  }
  if (!(fds[0].revents & POLLIN)) return Seen::nothing;
  bool news = false;
  bool ended = false;
  const bool read = read_inotify_events(fd_.get(), [&](std::uint32_t mask, const char* name) {
    // The directory went or moved (its watch then follows another name), or a full queue lost
    // events, maybe ours.
    if (mask & (IN_IGNORED | IN_MOVE_SELF | IN_DELETE_SELF | IN_Q_OVERFLOW)) ended = true;
    if (*name && name_ == name) news = true;
  });
  if (!read || ended) {
    stop();
    return Seen::watch_ended;
  }
  return news ? Seen::socket : Seen::nothing;
}

}  // namespace cudaipc::detail
