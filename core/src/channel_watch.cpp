#include "channel_watch.hpp"

#include <poll.h>
#include <sys/inotify.h>

#include <cerrno>
#include <cstdint>
#include <ctime>
#include <utility>

#include "inotify_events.hpp"

namespace cudaipc::detail {
namespace {

// A producer binds its socket (made), may then chmod or chown it (changed) and listens; one that
// renames a socket into place moves it in. The directory going ends the watch (IN_IGNORED).
constexpr std::uint32_t kWatched = IN_CREATE | IN_MOVED_TO | IN_ATTRIB | IN_ONLYDIR;

}  // namespace

void ChannelWatch::watch(const std::string& path) {
  fd_.reset();
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  name_ = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name_.empty()) return;
  UniqueFd fd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  // No instance (fs.inotify.max_user_instances), no watch left, no such directory yet: the
  // consumer's connect attempts are what find the producer then.
  if (!fd || ::inotify_add_watch(fd.get(), dir.c_str(), kWatched) < 0) return;
  fd_ = std::move(fd);
}

bool ChannelWatch::wait(int wake_fd, std::chrono::nanoseconds timeout) {
  if (!fd_) return false;
  pollfd fds[2] = {{fd_.get(), POLLIN, 0}, {wake_fd, POLLIN, 0}};
  const auto ns = timeout.count() < 0 ? 0 : timeout.count();
  const timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  const int n = ::ppoll(fds, 2, &ts, nullptr);
  if (n <= 0) {
    // EINTR: the caller looks again. Another failure (no memory for the poll) ends the watch and
    // the caller sleeps on its own wake until the next attempt instead.
    if (n < 0 && errno != EINTR) fd_.reset();
    return false;
  }
  if (fds[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
    fd_.reset();
    return true;
  }
  if (!(fds[0].revents & POLLIN)) return false;
  bool news = false;
  bool ended = false;
  const bool read = read_inotify_events(fd_.get(), [&](std::uint32_t mask, const char* name) {
    if (mask & IN_IGNORED) ended = true;  // the directory went: no more events come
    // A full queue lost events, maybe ours.
    if ((mask & IN_Q_OVERFLOW) || name_ == name) news = true;
  });
  if (!read || ended) {
    fd_.reset();
    return true;
  }
  return news;
}

}  // namespace cudaipc::detail
