#include "unix_socket.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cudaipc/error.hpp"
#include "descriptor_shortage.hpp"

namespace cudaipc {
namespace {

sockaddr_un make_address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path))
    throw Error(Errc::invalid_argument, "socket path '" + path + "' is empty or longer than " +
                                            std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

UniqueFd make_socket(int flags = 0) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | flags, 0));
  if (!fd) throw_errno("socket(AF_UNIX, SOCK_SEQPACKET)");
  return fd;
}

// What a path that should be a socket is instead, for messages that name the cause.
const char* file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device file";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "a file of another type";
}

// Who answers a connect on `addr`: nobody (a crashed producer's leftover), a SOCK_SEQPACKET
// listener, or a program listening on a socket of another type (never a cudaipc producer).
enum class Listener { none, seqpacket, other_type };
Listener probe_listener(const sockaddr_un& addr) {
  UniqueFd probe = make_socket(SOCK_NONBLOCK);  // a full backlog (EAGAIN) still means "alive"
  if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0)
    return Listener::seqpacket;
  if (errno == EPROTOTYPE) return Listener::other_type;
  return errno == ECONNREFUSED || errno == ENOENT ? Listener::none : Listener::seqpacket;
}

// A connect refused (or ENOTDIR) on a path where no producer can ever listen: waiting there would
// be for ever, so it is an error naming the cause. A missing path or a stale socket returns.
void refuse_non_channel(const std::string& path, int err) {
  if (err == ENOTDIR)
    throw Error(Errc::invalid_argument, "a directory component of '" + path +
                                            "' is not a directory: no cudaipc producer can "
                                            "listen there. Choose another path");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISSOCK(st.st_mode)) return;
  throw Error(Errc::invalid_argument,
              "'" + path + "' is " + file_kind(st.st_mode) +
                  ", not a socket: no cudaipc producer listens there, and none can start there "
                  "while it exists. Remove it or choose another path");
}

}  // namespace

void check_channel_path(const std::string& path) {
  make_address(path);  // too long
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) refuse_non_channel(path, ECONNREFUSED);
  } else if (errno == ENOTDIR) {
    refuse_non_channel(path, ENOTDIR);
  }
}

UniqueFd listen_unix(const std::string& path, std::uint32_t mode, std::optional<gid_t> gid) {
  sockaddr_un addr = make_address(path);
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      throw Error(Errc::invalid_argument, "'" + path + "' exists and is not a socket (it is " +
                                              file_kind(st.st_mode) +
                                              "); refusing to replace it. Remove it or choose "
                                              "another path");
    switch (probe_listener(addr)) {
      case Listener::seqpacket:
        throw Error(Errc::busy, "a producer is already running on '" + path + "'");
      case Listener::other_type:
        throw Error(Errc::invalid_argument,
                    "'" + path +
                        "' is a socket another program listens on, of another type than "
                        "cudaipc's (SOCK_SEQPACKET); refusing to replace it. Stop that program "
                        "or choose another path");
      case Listener::none:
        break;
    }
    if (st.st_uid != ::geteuid())
      throw Error(Errc::permission_denied,
                  "stale socket '" + path + "' belongs to uid " + std::to_string(st.st_uid));
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      throw_errno("removing stale '" + path + "'");
  }
  UniqueFd fd = make_socket();
  // Linux makes the socket file with the socket inode's mode less the umask: 0600 here so the file
  // is never briefly open to others. Not umask(): it is the whole process's, and another thread
  // (the application's own) creating a file meanwhile would get our mask.
  if (::fchmod(fd.get(), 0600) != 0) throw_errno("fchmod of the socket for '" + path + "'");
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0)
    throw_errno("bind to '" + path + "'");
  // A kernel (or sandbox) that ignored the socket's mode would have made the file open to others:
  // refuse rather than serve frames through it.
  struct stat bound {};
  if (::lstat(path.c_str(), &bound) != 0) throw_errno("stat of the new socket '" + path + "'");
  if (!S_ISSOCK(bound.st_mode))
    throw Error(Errc::permission_denied,
                "'" + path + "' was replaced by something else just after it was bound");
  if ((bound.st_mode & 077) != 0) {
    ::unlink(path.c_str());
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", static_cast<unsigned>(bound.st_mode & 07777));
    throw Error(Errc::permission_denied, "the socket '" + path +
                                             "' was created open to others (mode " + octal +
                                             "): this system ignores a socket's mode before bind");
  }
  if (gid && ::chown(path.c_str(), static_cast<uid_t>(-1), *gid) != 0)
    throw_errno("chown of '" + path + "' to gid " + std::to_string(*gid));
  // Already 0600 (less the umask) when that is what was asked: touch the path only to open it up.
  if ((bound.st_mode & 0777) != (mode & 0777) &&
      ::chmod(path.c_str(), static_cast<mode_t>(mode & 0777)) != 0)
    throw_errno("chmod of '" + path + "'");
  if (::listen(fd.get(), 64) != 0) throw_errno("listen on '" + path + "'");
  int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK) != 0)
    throw_errno("making the listening socket non-blocking");
  return fd;
}

UniqueFd connect_unix(const std::string& path) {
  sockaddr_un addr = make_address(path);
  // Non-blocking: a blocking connect to a listener whose backlog is full waits without end.
  UniqueFd fd = make_socket(SOCK_NONBLOCK);
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK)
      throw Error(Errc::busy, "the producer on '" + path +
                                  "' is not accepting connections now (its backlog is full)");
    if (err == ECONNREFUSED || err == ENOTDIR) refuse_non_channel(path, err);
    if (err == ENOENT || err == ECONNREFUSED)
      throw Error(Errc::disconnected, "no producer on '" + path + "' (" + std::strerror(err) + ")");
    if (err == EPROTOTYPE)
      throw Error(Errc::protocol, "'" + path +
                                      "' is a socket of another type than cudaipc's "
                                      "(SOCK_SEQPACKET): what listens there is not a cudaipc "
                                      "producer");
    if (err == EACCES || err == EPERM)
      throw ConnectNotAllowed(Errc::permission_denied, "not allowed to connect to '" + path + "'");
    throw_errno("connect to '" + path + "'", err);
  }
  return fd;
}

UniqueFd accept_unix(int listen_fd) {
  int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK || err == ECONNABORTED || err == EINTR)
      return UniqueFd();
    if (err == EMFILE || err == ENFILE)
      throw DescriptorShortage(Errc::busy,
                               std::string("cannot accept a consumer: ") + std::strerror(err), err);
    if (err == ENOBUFS || err == ENOMEM)
      throw Error(Errc::busy, std::string("cannot accept a consumer: ") + std::strerror(err));
    throw_errno("accept", err);
  }
  return UniqueFd(fd);
}

PeerCredentials peer_credentials(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) throw_errno("SO_PEERCRED");
  return PeerCredentials{cred.pid, cred.uid, cred.gid};
}

void send_raw(int fd, const std::uint8_t* bytes, std::size_t size, const std::vector<int>& fds) {
  if (size > kMaxMessageBytes || fds.size() > kMaxMessageFds)
    throw Error(Errc::invalid_argument, "message too large to send");
  iovec iov{const_cast<std::uint8_t*>(bytes), size};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxMessageFds)];
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n;
  do {
    n = ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      throw Error(Errc::busy, "peer is not reading its socket (buffer full)");
    if (errno == EPIPE || errno == ECONNRESET)
      throw Error(Errc::disconnected, "peer closed the connection");
    throw_errno("sendmsg");
  }
  if (static_cast<std::size_t>(n) != size)
    throw Error(Errc::system, "sendmsg sent a partial message");
}

RecvStatus recv_raw(int fd, RawMessage& out, std::chrono::milliseconds timeout, int wake_fd) {
  pollfd p[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
  int rc;
  do {
    rc = ::poll(p, wake_fd >= 0 ? 2 : 1, static_cast<int>(timeout.count()));
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) throw_errno("poll on a socket");
  if (rc == 0) return RecvStatus::timeout;
  if (p[0].revents == 0) return RecvStatus::interrupted;

  out.bytes.resize(kMaxMessageBytes + 1);
  out.fds.clear();
  iovec iov{out.bytes.data(), out.bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxMessageFds)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  bool reset = false;
  for (;;) {
    n = ::recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n >= 0) break;
    if (errno == EINTR) continue;
    // A peer that hung up leaving our message unread makes the kernel report ECONNRESET once,
    // ahead of what the peer sent before it left (a refusal, say): read on to get that.
    if (errno == ECONNRESET && !reset) {
      reset = true;
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return reset ? RecvStatus::closed : RecvStatus::timeout;
    if (errno == ECONNRESET) return RecvStatus::closed;
    throw_errno("recvmsg");
  }
  // Take ownership of every fd first, so an error below closes them.
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int received;
      std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      out.fds.emplace_back(received);
    }
  }
  if (n == 0 && out.fds.empty()) return RecvStatus::closed;
  if (msg.msg_flags & MSG_TRUNC)
    throw Error(Errc::protocol,
                "peer sent a message larger than " + std::to_string(kMaxMessageBytes) + " bytes");
  if (msg.msg_flags & MSG_CTRUNC) {
    // The kernel also truncates when it cannot install the fds because our table is full.
    UniqueFd probe(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
    if (!probe && (errno == EMFILE || errno == ENFILE))
      throw Error(Errc::system,
                  "this process ran out of file descriptors (raise RLIMIT_NOFILE): a message from "
                  "the peer lost the descriptors it carried");
    throw Error(Errc::protocol, "peer sent more than " + std::to_string(kMaxMessageFds) +
                                    " file descriptors in one message");
  }
  out.bytes.resize(static_cast<std::size_t>(n));
  return RecvStatus::ok;
}

bool peer_hung_up(int fd) {
  pollfd p{fd, POLLIN, 0};
  int rc = ::poll(&p, 1, 0);
  if (rc < 0) return errno != EINTR;
  // Linux reports a closed unix peer as POLLHUP together with POLLIN (end of file reads as
  // readable), so POLLIN must not veto it; what a dead peer left unread no longer matters.
  return (p.revents & (POLLHUP | POLLERR)) != 0;
}

}  // namespace cudaipc
