// What another thread of this process is blocked in: the system call it sleeps in, from
// /proc/self/task/TID/syscall (-1 while it runs or when that cannot be read).
#pragma once

#include <sys/syscall.h>
#include <sys/types.h>

#include <fstream>
#include <string>

namespace cudaipc::testing {

inline long thread_syscall(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/syscall");
  long nr = -1;
  in >> nr;
  return nr;
}

// Sleeping in futex(2) or futex_waitv(2) (a wait for a frame, or for a producer whose channel
// directory cannot be watched).
inline bool in_futex_wait(pid_t tid) {
  constexpr long kFutexWaitv = 449;
  const long nr = thread_syscall(tid);
  return nr == SYS_futex || nr == kFutexWaitv;
}

// Sleeping in ppoll(2): a wait for a producer that watches the channel's directory.
inline bool in_ppoll(pid_t tid) {
  return thread_syscall(tid) == SYS_ppoll;
}

}  // namespace cudaipc::testing
