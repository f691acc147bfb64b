// Acts on a peer's death the moment it happens, without waiting for anyone to ask: a thread
// sleeping in poll() on the peer's pidfd. A consumer uses it to release GPU work that waits for
// frames a dead producer will never write, so a caller blocked in cuStreamSynchronize (the
// GStreamer elements, a PyTorch consumer) is let go too, not only the next call into cudaipc.
#pragma once

#include <functional>
#include <thread>

#include "unique_fd.hpp"

namespace cudaipc {

class DeathWatch {
 public:
  // Calls `on_death` once, on its own thread, when the process behind `pidfd` (borrowed: it must
  // outlive this object) exits. Throws Error(system) when the thread or its eventfd cannot be made.
  DeathWatch(int pidfd, std::function<void()> on_death);
  // Stops the thread; `on_death` is not called after this returns.
  ~DeathWatch();
  DeathWatch(const DeathWatch&) = delete;
  DeathWatch& operator=(const DeathWatch&) = delete;

 private:
  void run(int pidfd);

  UniqueFd stop_;  // eventfd: the destructor's signal
  std::function<void()> on_death_;
  std::thread thread_;
};

}  // namespace cudaipc
