#include "process_watch.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "cudaipc/error.hpp"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
// Linux 6.5's value where the architecture uses the generic socket options; headers older than
// 6.5 (Debian 12's) lack it. Elsewhere the option is not tried and pidfd_open stands in.
#if !defined(SO_PEERPIDFD) && \
    (defined(__x86_64__) || defined(__i386__) || defined(__aarch64__) || defined(__riscv))
#define SO_PEERPIDFD 77
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

UniqueFd peer_pidfd(int sock, pid_t pid) {
#ifdef SO_PEERPIDFD
  int fd = -1;
  socklen_t len = sizeof fd;
  if (::getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &fd, &len) == 0) {
    // Close-on-exec from birth, as pidfd_open's.
    UniqueFd pidfd(fd);
    if (len != sizeof fd || fd < 0)
      throw Error(Errc::system, "SO_PEERPIDFD returned no descriptor");
    return pidfd;
  }
  const int err = errno;
  // Before Linux 6.16 a peer that has exited and been reaped has no pidfd to give.
  if (err == ESRCH || err == EINVAL)
    throw Error(Errc::disconnected, "the peer process has already exited");
  // ENOPROTOOPT: a kernel before 6.5. ENODATA: the socket recorded no peer process. EPERM,
  // EACCES: a sandbox (seccomp, LSM) refuses it. pidfd_open of the visible pid may still work.
  if (err != ENOPROTOOPT && err != ENODATA && err != EPERM && err != EACCES)
    throw_errno("getsockopt(SO_PEERPIDFD)", err);
#else
  (void)sock;
#endif
  return open_pidfd(pid);
}

std::string describe_pid(pid_t pid) {
  if (pid > 0) return "pid " + std::to_string(pid);
  return "pid not visible from this PID namespace";
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
