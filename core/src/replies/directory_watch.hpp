// When a Server looks at its directory again: at once when an entry appears, is moved in or goes
// (inotify), when woken (a pipeline's producer went away), and every so often in case an event
// was missed (a full event queue) or the directory cannot be watched (it does not exist yet, it
// went, or this process has no inotify watch left: then it is looked at every `poll`).
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "unique_fd.hpp"

namespace cudaipc::detail {

class DirectoryWatch {
 public:
  // A watched directory is listed again after `kFallbackPolls` polls at the latest.
  static constexpr int kFallbackPolls = 10;

  // Throws when the wake cannot be made (no descriptor); a directory that cannot be watched is
  // polled instead, said once per cause.
  // Events of `ignored_name` (the server's own mark) are not news. A reply channel's are: one that
  // goes may free a path another server served.
  DirectoryWatch(std::string dir, std::chrono::milliseconds poll, std::string ignored_name);
  DirectoryWatch(const DirectoryWatch&) = delete;
  DirectoryWatch& operator=(const DirectoryWatch&) = delete;

  // Waits until the directory should be listed again; false once stopped.
  bool wait();
  // Lists it again now (any thread).
  void wake() noexcept;
  // wait() returns false from now on (any thread).
  void stop() noexcept;

 private:
  void try_watch();
  // Reads the pending events: whether any is one the server must look at.
  bool take_events();
  void say_once(const std::string& what);

  const std::string dir_;
  const std::chrono::milliseconds poll_;
  const std::string ignored_name_;
  UniqueFd wake_fd_;     // eventfd
  UniqueFd inotify_fd_;  // none when inotify cannot be had
  int watch_ = -1;       // the directory's watch; -1: polled
  std::atomic<bool> stopped_{false};
  std::string said_;
};

}  // namespace cudaipc::detail
