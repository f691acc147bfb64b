#include "retire.hpp"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>

#include "cudaipc/log.hpp"
#include "thread_name.hpp"

namespace cudaipc::detail {

namespace {

// Set once the queue's object is gone at exit (a plain flag outlives it): whatever is let go after
// that is torn down where it is let go.
std::atomic<bool> retirement_over{false};

class Retirement {
 public:
  ~Retirement() {
    if (forked()) {
      // A forked child has the parent's thread object but not its thread, and the lock as the
      // fork left it: neither is touched.
      thread_.detach();
    } else {
      {
        std::lock_guard<std::mutex> lock(mu_);
        closed_ = true;
      }
      more_.notify_all();
      if (thread_.joinable()) thread_.join();  // what was queued runs first
    }
    retirement_over.store(true, std::memory_order_release);
  }

  void add(std::unique_ptr<RetiredWork> w) noexcept {
    if (forked()) {
      run(std::move(w));
      return;
    }
    try {
      std::unique_lock<std::mutex> lock(mu_);
      if (!closed_) {
        if (!thread_.joinable()) {
          thread_ = std::thread([this] { loop(); });
          owner_.store(::getpid(), std::memory_order_release);
        }
        queue_.push_back(std::move(w));
        lock.unlock();
        more_.notify_one();
        return;
      }
    } catch (const std::exception&) {
      log(LogLevel::debug, "no retiring thread or no room in its queue: torn down here");
    }
    if (w) run(std::move(w));
  }

  void settle() noexcept {
    if (forked()) return;
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
  }

 private:
  bool forked() const noexcept {
    const pid_t owner = owner_.load(std::memory_order_acquire);
    return owner != 0 && owner != ::getpid();
  }

  static void run(std::unique_ptr<RetiredWork> w) noexcept {
    w->run();
    w.reset();  // what it held goes here, before the next is taken
  }

  void loop() noexcept {
    name_this_thread("cudaipc-retire");
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      more_.wait(lock, [this] { return closed_ || !queue_.empty(); });
      if (queue_.empty()) return;  // closed, and nothing left
      std::unique_ptr<RetiredWork> w = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      run(std::move(w));
      lock.lock();
      busy_ = false;
      if (queue_.empty()) idle_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable more_;
  std::condition_variable idle_;
  std::deque<std::unique_ptr<RetiredWork>> queue_;
  bool busy_ = false;
  bool closed_ = false;
  std::atomic<pid_t> owner_{0};  // the process the thread runs in
  std::thread thread_;
};

Retirement& retirement() {
  // Made by the first teardown handed over, so after the driver was loaded: destroyed at exit
  // before the driver's own exit handlers run (reverse order), the queue run while it answers.
  static Retirement r;
  return r;
}

}  // namespace

void retire_work(std::unique_ptr<RetiredWork> work) noexcept {
  if (retirement_over.load(std::memory_order_acquire)) {
    work->run();
    return;
  }
  retirement().add(std::move(work));
}

void settle_retired() noexcept {
  if (!retirement_over.load(std::memory_order_acquire)) retirement().settle();
}

}  // namespace cudaipc::detail
