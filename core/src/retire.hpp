// Teardown off the thread that let go last. A consumer's CUDA imports (a slot set's mappings, a
// connection's stream and semaphore page) are unmapped and drained by whoever drops the last
// reference: often a model's thread, replying to the last request of a pipeline that left, or
// dropping its slot views. Unmapping takes the GPU driver's device-wide lock, which other
// processes making or dropping contexts hold for tens of milliseconds, and the model's kernel
// launches wait behind the call meanwhile (docs/design.md). So that work runs on one thread of the
// process's own ("cudaipc-retire"), in the order it was handed over.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace cudaipc::detail {

class RetiredWork {
 public:
  virtual ~RetiredWork() = default;
  virtual void run() noexcept = 0;
};

// Queues `work` for the retiring thread, which runs it and then destroys it (what it holds goes
// there too). Runs it here instead on the retiring thread itself (a teardown that lets go of more:
// a connection's, then its slot sets', in their order), and where that thread cannot be had: no
// memory, no thread, a forked child, or the process ending (the queue closed).
void retire_work(std::unique_ptr<RetiredWork> work) noexcept;

// Until everything handed over so far has run and been destroyed: for whoever must know the
// memory is back (a test counting descriptors).
void settle_retired() noexcept;

template <typename F>
void retire(F&& f) noexcept {
  struct Work final : RetiredWork {
    explicit Work(F&& g) : f(std::forward<F>(g)) {}
    void run() noexcept override { f(); }
    std::decay_t<F> f;
  };
  static_assert(std::is_nothrow_move_constructible_v<std::decay_t<F>>,
                "what is retired moves without throwing, so a failed allocation leaves it whole");
  std::unique_ptr<RetiredWork> w;
  try {
    w = std::make_unique<Work>(std::forward<F>(f));
  } catch (...) {
    f();  // no memory for the queue's entry: done here, as before
    return;
  }
  retire_work(std::move(w));
}

}  // namespace cudaipc::detail
