// Collects what the core logs, for tests that assert a message was (or was not) given. Optionally
// holds the logging thread inside the handler, to stall the producer's socket thread at a known
// point and show that publishing does not wait for it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "cudaipc/log.hpp"

namespace cudaipc::testing {

// Keeps what the core logs while it lives.
class LogCapture {
 public:
  LogCapture() { set_log_handler(&LogCapture::handle, this); }
  ~LogCapture() {
    release();
    set_log_handler(nullptr, nullptr);
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // The first line holding every one of `words`, or "".
  std::string find(const std::vector<std::string>& words) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& l : lines_) {
      bool all = true;
      for (const auto& w : words) all = all && l.find(w) != std::string::npos;
      if (all) return l;
    }
    return {};
  }
  // The next message holding `text` keeps its logging thread in the handler until release().
  void stall_on(const std::string& text) {
    std::lock_guard<std::mutex> lock(mu_);
    stall_on_ = text;
  }
  bool wait_stalled(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return stalled_; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  std::string all() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    for (const auto& l : lines_) out += l + "\n";
    return out;
  }

 private:
  static void handle(LogLevel, const char* message, void* self) {
    auto* me = static_cast<LogCapture*>(self);
    std::unique_lock<std::mutex> lock(me->mu_);
    me->lines_.emplace_back(message);
    if (me->stall_on_.empty() || me->stalled_ ||
        std::string(message).find(me->stall_on_) == std::string::npos)
      return;
    // Bounded, so a bug cannot hang the test: the caller's check fails first.
    me->stalled_ = true;
    me->cv_.notify_all();
    me->cv_.wait_for(lock, std::chrono::seconds(20), [me] { return me->released_; });
  }
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
  std::string stall_on_;
  bool stalled_ = false;
  bool released_ = false;
};

}  // namespace cudaipc::testing
