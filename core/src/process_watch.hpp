// Proof of a peer's death: a pidfd on the pid its socket was opened by (SO_PEERCRED). A socket
// alone is no proof: a child forked without exec keeps it open after its parent is killed.
#pragma once

#include <sys/types.h>

#include "unique_fd.hpp"

namespace cudaipc {

// A pidfd for `pid`, or an empty fd where the kernel has none (before Linux 5.3) or the pid is
// not visible from here (0: another pid namespace); the caller then falls back to the socket.
// Errc::disconnected when the process has already exited.
UniqueFd open_pidfd(pid_t pid);

// True once the process behind `pidfd` has exited (the pidfd polls readable).
bool process_exited(int pidfd);

}  // namespace cudaipc
