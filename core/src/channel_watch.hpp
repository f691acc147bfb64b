// A consumer waiting for its producer wakes the moment the producer's socket is made (or moved in)
// at the channel's path, through inotify on the path's directory, instead of at its next connect
// attempt: those are up to ConsumerOptions::reconnect_interval apart once a wait has gone on for
// seconds, and readers started long before their pipelines met them up to that late, their first
// frames with them. Where the directory cannot be watched (it does not exist yet, this user has no
// inotify instance or watch left, this process's waiting consumers hold kMaxWatches already)
// nothing is watched and the attempts alone find the producer.
#pragma once

#include <chrono>
#include <string>

#include "unique_fd.hpp"

namespace cudaipc::detail {

class ChannelWatch {
 public:
  // fs.inotify.max_user_instances (128 by default) is shared by all of a user's processes: one
  // process's waiting consumers hold at most this many at once.
  static constexpr int kMaxWatches = 32;

  enum class Seen {
    nothing,      // another name's event, a wake, the timeout
    socket,       // the socket's name was made, moved in or changed
    watch_ended,  // the directory went or was moved, events were lost, or the wait failed
  };

  ChannelWatch() = default;
  ChannelWatch(const ChannelWatch&) = delete;
  ChannelWatch& operator=(const ChannelWatch&) = delete;
  ~ChannelWatch() { stop(); }

  // Watches for `path`'s socket from now on; quietly nothing where that cannot be had.
  void watch(const std::string& path);
  void stop() noexcept;
  bool watching() const noexcept { return static_cast<bool>(fd_); }

  // Sleeps until an event of the directory, `wake_fd` readable or `timeout`, and says what came
  // (worth a connect attempt now unless nothing). The watch ends with watch_ended.
  Seen wait(int wake_fd, std::chrono::nanoseconds timeout);

 private:
  UniqueFd fd_;  // inotify; none: not watching
  std::string name_;
};

}  // namespace cudaipc::detail
