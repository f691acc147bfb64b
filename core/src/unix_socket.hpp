// Unix SOCK_SEQPACKET sockets: one recvmsg is one whole message, so a short or oversized message
// from a peer is detected instead of being half-read. File descriptors travel as SCM_RIGHTS.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cudaipc/error.hpp"
#include "unique_fd.hpp"

namespace cudaipc {

inline constexpr std::size_t kMaxMessageBytes = 64 * 1024;
inline constexpr std::size_t kMaxMessageFds = 64;

struct RawMessage {
  std::vector<std::uint8_t> bytes;
  std::vector<UniqueFd> fds;
};

struct PeerCredentials {
  pid_t pid;
  uid_t uid;
  gid_t gid;
};

// Binds and listens on `path` with file mode `mode` (and group `gid` when given). A socket file
// left by a dead producer is replaced; a live one is Errc::busy; a non-socket file, or a socket
// another program listens on with another socket type, is refused (Errc::invalid_argument).
// Throws Errc::invalid_argument for a path no producer can ever listen on (too long, a regular
// file or directory there, a parent that is not a directory), without connecting; a path with
// nothing there yet passes.
void check_channel_path(const std::string& path);

UniqueFd listen_unix(const std::string& path, std::uint32_t mode, std::optional<gid_t> gid);
// Errc::disconnected when nothing listens at `path` yet (missing, or a stale socket file),
// Errc::busy when the producer's backlog is full. A path no producer can ever listen on (a regular
// file, a directory, a parent that is not a directory) is Errc::invalid_argument; a socket of
// another type is Errc::protocol. A socket whose mode does not let us connect is
// ConnectNotAllowed. Never blocks; the socket is non-blocking.
UniqueFd connect_unix(const std::string& path);
// connect() refused by the socket file's mode (EACCES, EPERM: Errc::permission_denied). Final,
// except for a socket made a moment ago: a producer binds its socket for itself alone and only
// then opens it up to its group (chown, chmod) and listens.
class ConnectNotAllowed : public Error {
 public:
  using Error::Error;
};
// Non-blocking accept; an empty fd when nobody is waiting, Errc::busy when this process is out of
// file descriptors (a DescriptorShortage) or memory (the connection stays queued).
UniqueFd accept_unix(int listen_fd);
PeerCredentials peer_credentials(int fd);

// Sends one message; never blocks (a full peer buffer is Errc::busy: that peer is not reading).
void send_raw(int fd, const std::uint8_t* bytes, std::size_t size, const std::vector<int>& fds);

enum class RecvStatus { ok, closed, timeout, interrupted };
// Receives one message, waiting up to `timeout` (0: only what is already there), or until
// `wake_fd` (when >= 0) becomes readable (interrupted). Oversized or truncated messages and too
// many fds are Errc::protocol, and any fds that came are closed.
RecvStatus recv_raw(int fd, RawMessage& out, std::chrono::milliseconds timeout, int wake_fd = -1);

// True when the peer closed its end (POLLHUP) or the socket failed, whatever is left to read.
bool peer_hung_up(int fd);

}  // namespace cudaipc
