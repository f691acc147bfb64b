// A consumer waiting for its producer wakes the moment the producer's socket is made (or moved in)
// at the channel's path, through inotify on the path's directory, instead of at its next connect
// attempt: those are up to ConsumerOptions::reconnect_interval apart once a wait has gone on for
// seconds, and readers started long before their pipelines met them up to that late, their first
// frames with them. Where the directory cannot be watched (it does not exist yet, this user has no
// inotify instance or watch left) nothing is watched and the attempts alone find the producer.
#pragma once

#include <chrono>
#include <string>

#include "unique_fd.hpp"

namespace cudaipc::detail {

class ChannelWatch {
 public:
  // Watches for `path`'s socket from now on; quietly nothing where that cannot be had.
  void watch(const std::string& path);
  void stop() noexcept { fd_.reset(); }
  bool watching() const noexcept { return static_cast<bool>(fd_); }

  // Sleeps until an event of the directory, `wake_fd` readable or `timeout`. True when the socket's
  // name was made, moved in or changed, or the watch ended (worth a connect attempt now); false
  // otherwise (another name's event, a wake, the timeout). A failed wait ends the watch.
  bool wait(int wake_fd, std::chrono::nanoseconds timeout);

 private:
  UniqueFd fd_;  // inotify; none: not watching
  std::string name_;
};

}  // namespace cudaipc::detail
