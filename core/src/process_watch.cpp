#include "process_watch.hpp"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "cudaipc/error.hpp"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

namespace cudaipc {

UniqueFd open_pidfd(pid_t pid) {
  if (pid <= 0) return UniqueFd();
  long fd = ::syscall(SYS_pidfd_open, pid, 0);
  if (fd >= 0) {
    // pidfds are close-on-exec from birth (the kernel sets O_CLOEXEC).
    return UniqueFd(static_cast<int>(fd));
  }
  if (errno == ESRCH)
    throw Error(Errc::disconnected, "process " + std::to_string(pid) + " has already exited");
  // No pidfds here (old kernel, seccomp): the caller falls back to the socket.
  if (errno == ENOSYS || errno == EPERM || errno == EINVAL) return UniqueFd();
  throw_errno("pidfd_open of pid " + std::to_string(pid));
}

bool process_exited(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  int rc;
  do {
    rc = ::poll(&p, 1, 0);
  } while (rc < 0 && errno == EINTR);
  return rc > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

}  // namespace cudaipc
