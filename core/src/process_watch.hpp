// Proof of a peer's death: a pidfd on the process at the other end of its socket. A socket alone
// is no proof: a child forked without exec keeps it open after its parent is killed.
#pragma once

#include <sys/types.h>

#include <string>

#include "unique_fd.hpp"

namespace cudaipc {

// A pidfd for `pid`, or an empty fd where the kernel has none (before Linux 5.3) or the pid is
// not visible from here (0: another pid namespace); the caller then falls back to the socket.
// Errc::disconnected when the process has already exited.
UniqueFd open_pidfd(pid_t pid);

// A pidfd for the process at the other end of the connected unix socket `sock` (the one that
// connected, or for a socket we connected, the one that listened), wherever it runs. First
// SO_PEERPIDFD (Linux 6.5+): it names the process the kernel recorded at connect time, in any PID
// namespace, so neither an invisible pid (SO_PEERCRED gives 0 for a process in a PID namespace we
// cannot see, as between two containers) nor a recycled one can mislead it. Where the kernel or a
// sandbox refuses it, open_pidfd(`pid`), `pid` being the socket's SO_PEERCRED pid. An empty fd
// when neither gives one: `pid` == 0 then means the peer cannot be watched at all from here.
// Errc::disconnected when the process has already exited.
UniqueFd peer_pidfd(int sock, pid_t pid);

// "pid 4711", or what a 0 from SO_PEERCRED means: the process is in a PID namespace that this
// process cannot see (another container's, say). For messages.
std::string describe_pid(pid_t pid);

// True once the process behind `pidfd` has exited (the pidfd polls readable).
bool process_exited(int pidfd);

}  // namespace cudaipc
