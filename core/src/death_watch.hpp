// Acts on a peer's death the moment it happens, without waiting for anyone to ask. A consumer uses
// it to release GPU work that waits for frames a dead producer will never write, so a caller
// blocked in cuStreamSynchronize (the GStreamer elements, a PyTorch consumer) is let go too, not
// only the next call into cudaipc.
//
// One thread per process watches every pidfd (epoll), however many connections there are: a
// thread per connection does not scale to hundreds of streams. It starts with the first watch and
// lives until the process exits; callbacks run on it, one at a time, so they must be short and
// must not block (producer_gone() raises a few words).
#pragma once

#include <cstdint>
#include <functional>

namespace cudaipc {

class DeathWatch {
 public:
  // Calls `on_death` once, on the process's watcher thread, when the process behind `pidfd`
  // (borrowed: it must outlive this object) exits. Throws Error(system) when the watcher thread,
  // its epoll set or the watch cannot be made.
  DeathWatch(int pidfd, std::function<void()> on_death);
  // Ends the watch: when this returns `on_death` is not running and will not be called. From
  // inside a callback (on the watcher thread) it does not wait for that callback.
  ~DeathWatch();
  DeathWatch(const DeathWatch&) = delete;
  DeathWatch& operator=(const DeathWatch&) = delete;

 private:
  std::uint64_t id_ = 0;  // this watch in the watcher's table; never reused
};

}  // namespace cudaipc
