// Reading an inotify descriptor's pending events, for the watches that wait on one (a server's
// directory, a consumer's channel path).
#pragma once

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cudaipc::detail {

// Calls on_event(mask, name) for every event pending on the non-blocking `fd` (name "" for the
// events of the watched directory itself). False when read() failed for another cause than no
// more events (errno says which): the caller stops relying on the descriptor.
template <typename OnEvent>
bool read_inotify_events(int fd, OnEvent&& on_event) {
  alignas(inotify_event) char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN;
    }
    if (n == 0) return true;
    for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
      inotify_event e;
      std::memcpy(&e, buf + at, sizeof e);
      // The kernel pads a name with NULs up to e.len; a full buffer ends with a whole event.
      const char* name = e.len ? buf + at + sizeof e : "";
      at += static_cast<ssize_t>(sizeof e + e.len);
      on_event(e.mask, name);
    }
  }
}

}  // namespace cudaipc::detail
