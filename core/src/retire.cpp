#include "retire.hpp"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>

#include "cudaipc/log.hpp"
#include "thread_name.hpp"

namespace cudaipc::detail {

namespace {

thread_local bool on_retiring_thread = false;

// Never destroyed (what it queues may run while the process's static objects go at exit): closed
// and joined by an exit handler instead, registered as it is made.
class Retirement {
 public:
  void add(std::unique_ptr<RetiredWork> w) noexcept {
    if (forked()) {
      run(std::move(w));
      return;
    }
    try {
      std::unique_lock<std::mutex> lock(mu_);
      if (!closed_) {
        if (!thread_.joinable()) {
          // Before the thread exists: a fork meanwhile must see whose it is.
          owner_.store(::getpid(), std::memory_order_release);
          try {
            thread_ = std::thread([this] { loop(); });
          } catch (...) {
            owner_.store(0, std::memory_order_release);
            throw;
          }
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

  // At exit: what is queued runs, then the thread ends; what is let go after runs where it is.
  void close() noexcept {
    // A forked child has the parent's thread object but not its thread, and the lock as the fork
    // left it: neither is touched.
    if (forked()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    more_.notify_all();
    if (thread_.joinable()) thread_.join();
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
    on_retiring_thread = true;
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
  // Made by the first teardown handed over, so after the driver was loaded: its exit handler runs
  // before the driver's own teardown at exit, the queue run while the driver answers.
  static Retirement* const r = [] {
    Retirement* made = std::make_unique<Retirement>().release();
    if (std::atexit([] { retirement().close(); }) != 0)
      log(LogLevel::debug, "no exit handler for the retiring thread: it is not joined at exit");
    return made;
  }();
  return *r;
}

}  // namespace

void retire_work(std::unique_ptr<RetiredWork> work) noexcept {
  if (on_retiring_thread) {
    work->run();
    return;
  }
  retirement().add(std::move(work));
}

void settle_retired() noexcept {
  if (!on_retiring_thread) retirement().settle();
}

}  // namespace cudaipc::detail
