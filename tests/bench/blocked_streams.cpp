// cudaipc-bench-blocked-streams: an open question of issue #8. The channel's consumer streams wait
// on GPU semaphores (cuStreamWaitValue32 GEQ on a word of a page-locked, device-mapped host page),
// and the field notes say that with 8 or more streams blocked that way (the default
// CUDA_DEVICE_MAX_CONNECTIONS is 8) other streams of the context stall, and that cuStreamCreate
// hung with ~34 blocked. This measures it, in one process on device 0's primary context:
//   for K in 0,1,2,4,6,7,8,9,12,16,24,32 streams each blocked on its own unsatisfied wait,
//   - the latency of a trivial piece of work (a 4-byte cuMemsetD8Async, then a cuStreamWriteValue32
//     of a host word the CPU polls) on a stream made before the blocked ones and on one made after
//     them: enqueue to the CPU seeing the word, p50/p99, with a per-try cap ("stalled");
//   - whether cuStreamCreate returns (in a helper thread, under a watchdog);
//   - once the CPU stores every waited-for word, whether all K streams drain, and how fast.
// The whole sweep runs again in a child (this program re-executed) with
// CUDA_DEVICE_MAX_CONNECTIONS=32, so one table shows both. K=0 is the baseline of the same run.
// Nothing here may hang the caller: every wait is polled against a deadline, and each sweep has an
// overall time limit after which the waits are released and the process gives up.
//   cudaipc-bench-blocked-streams [--k=0,1,...] [--tries=200] [--cap-ms=50] [--sweep-limit-s=60]
//                                 [--child-connections=32|none]
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench.hpp"
#include "clock.hpp"
#include "cuda/cuda_handles.hpp"
#include "cuda/driver.hpp"
#include "cuda/semaphores.hpp"
#include "cudaipc/error.hpp"

extern char** environ;

namespace {

namespace cu = cudaipc::cuda;
using cudaipc::monotonic_ns;

constexpr int kDevice = 0;
constexpr const char* kConnectionsVar = "CUDA_DEVICE_MAX_CONNECTIONS";
constexpr std::uint64_t kStalled = UINT64_MAX;  // a try that hit the cap, in a latency list

struct Options {
  std::vector<int> ks = {0, 1, 2, 4, 6, 7, 8, 9, 12, 16, 24, 32};
  int tries = 200;
  int warmup = 20;
  double cap_ms = 50;
  // After the cap, how long a stalled try may still finish before the series stops: work queued
  // behind a held stream would only stall too, and each stalled try costs cap + grace.
  double grace_ms = 100;
  int max_stalled = 3;
  double create_watchdog_s = 2;
  double sweep_limit_s = 60;
  std::string child_connections = "32";  // "none": no second sweep
  bool child = false;
};

std::vector<int> parse_ks(const std::string& s) {
  std::vector<int> out;
  for (std::size_t p = 0; p <= s.size();) {
    std::size_t c = s.find(',', p);
    if (c == std::string::npos) c = s.size();
    const std::string item = s.substr(p, c - p);
    char* end = nullptr;
    const long k = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || k < 0 || k > 1024)
      throw std::invalid_argument("--k: not a count 0..1024: '" + item + "'");
    out.push_back(static_cast<int>(k));
    p = c + 1;
  }
  return out;
}

double parse_number(const std::string& arg) {
  const std::string v = arg.substr(arg.find('=') + 1);
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(x > 0)) throw std::invalid_argument("bad value in " + arg);
  return x;
}

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

// How the sweep's process was started, as the table shows it: the variable is read by the driver
// when it makes the context, so this is what the sweep ran under.
std::string connections_label() {
  const char* v = std::getenv(kConnectionsVar);
  return v ? std::string(v) + " (set)" : std::string("unset (default 8)");
}

// "stalled" when the rank falls on a try that hit the cap.
std::string percentile(std::vector<std::uint64_t> ns, double p) {
  if (ns.empty()) return "-";
  const double v = bench::percentile(ns, p);
  return v == static_cast<double>(kStalled) ? "stalled" : fmt("%.1f", v / 1e3);
}

// One word per cache line, so the GPU's polls of one wait and the CPU's stores never share a line.
struct alignas(64) Word {
  std::atomic<std::uint32_t> v{0};
};

// A stream that runs the unrelated work; `word` is what its cuStreamWriteValue32 stores.
struct Probe {
  CUstream stream = nullptr;
  Word* word = nullptr;
  CUdeviceptr word_dev = 0;
  std::uint32_t last = 0;  // the value of the newest write queued
};

struct Series {
  std::vector<std::uint64_t> ns;
  int stalled = 0;
  bool held = false;             // the last stalled try had not finished when the series stopped
  bool enqueue_blocked = false;  // an enqueue call itself blocked until the watchdog released
  std::string stalled_text() const {
    std::string s = std::to_string(stalled) + "/" + std::to_string(ns.size());
    if (enqueue_blocked) return s + " enqueue blocked";
    return held ? s + " held" : s;
  }
};

const char* kHeader =
    "| K blocked | max connections | unrelated work p50 us | p99 us | stalled tries | "
    "cuStreamCreate | late stream p50 us | late p99 us | late stalled | release |\n"
    "|---|---|---|---|---|---|---|---|---|---|\n";

// The table so far, where a way out that cannot unwind (a driver call that never returns holds a
// thread) can still print it before it ends the process.
struct Report {
  std::mutex m;
  std::string intro;  // above the table
  std::vector<std::string> rows;
  bool child = false;  // rows go to stdout as they come, for the parent to collect
};

Report& report() {
  static Report r;
  return r;
}

void add_row(const std::string& row) {
  Report& r = report();
  std::lock_guard<std::mutex> l(r.m);
  // Progress on stderr, so a sweep that is cut off still shows what it measured.
  std::fprintf(stderr, "blocked-streams: row %s\n", row.c_str());
  if (r.child) {
    std::printf("%s\n", row.c_str());
    std::fflush(stdout);
  }
  r.rows.push_back(row);
}

void add_rows(const std::vector<std::string>& rows) {
  Report& r = report();
  std::lock_guard<std::mutex> l(r.m);
  r.rows.insert(r.rows.end(), rows.begin(), rows.end());
}

void print_table() {
  Report& r = report();
  std::lock_guard<std::mutex> l(r.m);
  if (r.child) return;  // the parent prints them
  std::printf("%s%s", r.intro.c_str(), kHeader);
  for (const std::string& row : r.rows) std::printf("%s\n", row.c_str());
  std::fflush(stdout);
}

// Ends the process now, without unwinding: a thread is stuck in the driver, and destructors (ours
// or the driver's at exit) could wait on it for ever.
[[noreturn]] void give_up(const std::string& why) {
  std::fprintf(stderr, "blocked-streams: error: %s; giving up\n", why.c_str());
  std::fflush(stderr);
  print_table();
  ::_exit(1);
}

// Spins (no sleep: the numbers are microseconds) until the word has reached `target`; the time it
// did, or 0 at the deadline.
std::uint64_t spin_until(const std::atomic<std::uint32_t>& word, std::uint32_t target,
                         std::uint64_t deadline_ns) {
  for (;;) {
    if (cu::reached(word.load(std::memory_order_acquire), target)) return monotonic_ns();
    const std::uint64_t now = monotonic_ns();
    if (now >= deadline_ns) return 0;
  }
}

void sleep_us(long us) {
  timespec ts{us / 1'000'000, (us % 1'000'000) * 1000};
  ::nanosleep(&ts, nullptr);
}

// Guards the sweep from its own thread. Past the sweep's time limit it stores the release value
// into every wait word (so whatever queued behind a wait can finish), and ends the process if the
// sweep still has not returned 10 s later: a hung driver call must not hang whoever ran this. A
// shorter guard covers one driver call at a time (an enqueue that blocks in the driver rather than
// on the GPU): past its deadline the waits are released too, and the caller is told.
class Watchdog {
 public:
  Watchdog(double limit_s, std::function<void()> release)
      : release_(std::move(release)),
        limit_ns_(monotonic_ns() + static_cast<std::uint64_t>(limit_s * 1e9)),
        limit_s_(limit_s),
        thread_([this] { watch(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> l(m_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  bool fired() const { return fired_.load(std::memory_order_acquire); }
  // Arms (deadline in monotonic ns) or disarms (0) the per-call guard.
  void guard(std::uint64_t deadline_ns) { guard_ns_.store(deadline_ns, std::memory_order_release); }
  // Whether the per-call guard released the waits since the last look.
  bool take_guard_fired() { return guard_fired_.exchange(false, std::memory_order_acq_rel); }

 private:
  void watch() {
    std::unique_lock<std::mutex> l(m_);
    for (;;) {
      // A 5 ms tick: the guards are tens of milliseconds and more.
      if (cv_.wait_for(l, std::chrono::milliseconds(5), [this] { return done_; })) return;
      const std::uint64_t now = monotonic_ns();
      const std::uint64_t g = guard_ns_.load(std::memory_order_acquire);
      if (g != 0 && now >= g) {
        guard_ns_.store(0, std::memory_order_relaxed);
        guard_fired_.store(true, std::memory_order_release);
        std::fprintf(stderr, "blocked-streams: a driver call blocked; releasing the waits\n");
        release_();
      }
      if (now >= limit_ns_) break;
    }
    fired_.store(true, std::memory_order_release);
    std::fprintf(stderr, "blocked-streams: the sweep passed its %g s limit; releasing the waits\n",
                 limit_s_);
    release_();
    if (cv_.wait_for(l, std::chrono::seconds(10), [this] { return done_; })) return;
    give_up(
        "the sweep still had not returned 10 s after its waits were released (a driver call "
        "hung)");
  }

  std::function<void()> release_;
  const std::uint64_t limit_ns_;
  const double limit_s_;
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::atomic<bool> fired_{false};
  std::atomic<std::uint64_t> guard_ns_{0};
  std::atomic<bool> guard_fired_{false};
  std::thread thread_;  // last: starts once the members above exist
};

// A cuStreamCreate in a helper thread: with many streams blocked it may not return, and the
// caller must be able to release the waits meanwhile.
struct CreateTry {
  std::atomic<bool> done{false};
  CUresult r = CUDA_SUCCESS;
  CUstream s = nullptr;
  std::uint64_t ns = 0;
};

class Sweep {
 public:
  explicit Sweep(const Options& o) : o_(o) {
    max_k_ = *std::max_element(o.ks.begin(), o.ks.end());
    const cu::Driver& d = cu::driver();
    CUdevice dev = 0;
    cu::check(d.cuDeviceGet(&dev, kDevice), "cuDeviceGet");
    ctx_ = cu::Context::primary(dev);
    char name[256] = {};
    cu::check(d.cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
    device_name_ = name;

    // The words live where the channel's semaphores live: a page-locked host page registered with
    // DEVICEMAP | PORTABLE (cuda::RegisteredPage, as for the connection page), one word per wait
    // stream and one per probe.
    const std::size_t words = static_cast<std::size_t>(max_k_) + 2;
    const long page = ::sysconf(_SC_PAGESIZE);
    bytes_ = (words * sizeof(Word) + static_cast<std::size_t>(page) - 1) /
             static_cast<std::size_t>(page) * static_cast<std::size_t>(page);
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) cudaipc::throw_errno("mmap (semaphore page)");
    map_ = p;
    words_ = static_cast<Word*>(p);
    for (std::size_t i = 0; i < words; ++i) new (&words_[i]) Word;
    page_ = std::make_unique<cu::RegisteredPage>(ctx_, nullptr, p, bytes_);
    scratch_ = cu::make_device_allocation(ctx_, 256);

    // Every stream up front (CU_STREAM_NON_BLOCKING), as the field notes advise: the probe made
    // first stands for a stream that exists before the consumers' (the producer's), the one made
    // last for one made after them. Which hardware queue a stream gets is fixed at creation, so
    // the two may see different things.
    first_.stream = keep(cu::make_stream(ctx_));
    for (int i = 0; i < max_k_; ++i) waits_.push_back(keep(cu::make_stream(ctx_)));
    last_.stream = keep(cu::make_stream(ctx_));
    first_.word = &words_[max_k_];
    last_.word = &words_[max_k_ + 1];
    first_.word_dev = page_->device_address(first_.word);
    last_.word_dev = page_->device_address(last_.word);
  }

  ~Sweep() {
    // A sweep cut short by an error may leave waits queued: release them and let the streams
    // drain (polled, bounded) before the page they poll is unregistered and unmapped.
    release_all();
    {
      cu::ScopedContext current(ctx_->get(), std::nothrow);
      std::vector<CUstream> all;
      for (const cu::Stream& st : streams_) all.push_back(st.get());
      const std::uint64_t deadline = monotonic_ns() + 2'000'000'000ull;
      for (CUstream st : all) {
        while (cu::loaded_driver().cuStreamQuery(st) == CUDA_ERROR_NOT_READY) {
          if (monotonic_ns() >= deadline) {
            // A stream still polls the page: leave it registered and mapped (leaked) rather than
            // pull it from under the GPU.
            std::fprintf(stderr, "blocked-streams: a stream did not drain; leaking its page\n");
            static_cast<void>(page_.release());
            map_ = nullptr;
            break;
          }
          sleep_us(100);
        }
        if (!map_) break;
      }
    }
    // Streams, the allocation and the registration go before the page is unmapped.
    streams_.clear();
    scratch_.reset();
    page_.reset();
    if (map_) ::munmap(map_, bytes_);
  }
  Sweep(const Sweep&) = delete;
  Sweep& operator=(const Sweep&) = delete;

  const std::string& device_name() const { return device_name_; }
  int streams() const { return static_cast<int>(streams_.size()); }

  // Releases every wait that is or may be queued: the watchdog calls this from its own thread.
  void release_all() noexcept {
    const std::uint32_t g = gen_.load(std::memory_order_acquire);
    for (int i = 0; i < max_k_; ++i) words_[i].v.store(g, std::memory_order_release);
  }

  // Runs the sweep and hands each finished row (one markdown table row) to `row`.
  void run(const std::function<void(const std::string&)>& row) {
    cu::ScopedContext current(ctx_->get());
    Watchdog dog(o_.sweep_limit_s, [this] { release_all(); });
    struct Arm {
      Sweep* s;
      ~Arm() { s->dog_ = nullptr; }
    } arm{this};
    dog_ = &dog;
    // Warm the path (first launches of the memset, first writes) before the baseline.
    for (Probe* p : {&first_, &last_}) {
      Options w = o_;
      w.tries = o_.warmup;
      measure(*p, w);
      if (!drain_probe(*p)) throw std::runtime_error("the warm-up work did not finish");
    }
    for (int k : o_.ks) {
      row(run_k(k));
      if (dog.fired()) throw std::runtime_error("the sweep passed its time limit");
    }
  }

 private:
  CUstream keep(cu::Stream s) {
    streams_.push_back(std::move(s));
    return streams_.back().get();
  }

  bool aborted() const { return dog_ && dog_->fired(); }

  // Runs `f` (driver calls that should return at once) under the watchdog's per-call guard;
  // whether the guard had to release the waits to get it back.
  template <typename F>
  bool guarded(std::uint64_t timeout_ns, F&& f) {
    if (!dog_) {
      f();
      return false;
    }
    dog_->guard(monotonic_ns() + timeout_ns);
    try {
      f();
    } catch (...) {
      dog_->guard(0);
      throw;
    }
    dog_->guard(0);
    return dog_->take_guard_fired();
  }

  // Up to o.tries of the unrelated work on `p`, one at a time.
  Series measure(Probe& p, const Options& o) {
    const cu::Driver& d = cu::driver();
    const auto cap_ns = static_cast<std::uint64_t>(o.cap_ms * 1e6);
    const auto grace_ns = static_cast<std::uint64_t>(o.grace_ms * 1e6);
    Series out;
    for (int i = 0; i < o.tries && !aborted(); ++i) {
      const std::uint32_t v = ++p.last;
      const std::uint64_t t0 = monotonic_ns();
      const bool hung = guarded(cap_ns + grace_ns, [&] {
        cu::check(d.cuMemsetD8Async(scratch_.get(), static_cast<unsigned char>(v), 4, p.stream),
                  "cuMemsetD8Async (unrelated work)");
        // The write is ordered after the memset (CU_STREAM_WRITE_VALUE_DEFAULT), so the word is
        // the completion of both.
        cu::stream_write(p.stream, p.word_dev, v);
      });
      if (hung) {
        // The enqueue itself blocked until the watchdog released the waits: the try is stalled,
        // and the rest of the row no longer has K waits outstanding.
        out.ns.push_back(kStalled);
        ++out.stalled;
        out.enqueue_blocked = true;
        break;
      }
      const std::uint64_t t1 = spin_until(p.word->v, v, t0 + cap_ns);
      if (t1 != 0) {
        out.ns.push_back(t1 - t0);
        continue;
      }
      out.ns.push_back(kStalled);
      ++out.stalled;
      if (!cu::cpu_wait(p.word->v, v, monotonic_ns() + grace_ns)) {
        out.held = true;  // stuck behind the waits: more tries would only queue behind it
        break;
      }
      if (out.stalled >= o.max_stalled) break;
    }
    return out;
  }

  // Whether everything queued on the probe has finished, within 2 s.
  bool drain_probe(const Probe& p) {
    if (!cu::cpu_wait(p.word->v, p.last, monotonic_ns() + 2'000'000'000ull)) return false;
    return poll_streams({p.stream}, 2'000'000'000ull) == 1;
  }

  // Polls the streams with cuStreamQuery (never a synchronize: a stream that stays held must not
  // hang us) until all are idle or `timeout_ns` passes; how many were idle by then. `done_ns`, if
  // given, gets the time the last one was seen idle.
  int poll_streams(const std::vector<CUstream>& ss, std::uint64_t timeout_ns,
                   std::uint64_t* done_ns = nullptr) {
    const cu::Driver& d = cu::driver();
    std::vector<bool> idle(ss.size(), false);
    std::size_t n = 0;
    const std::uint64_t deadline = monotonic_ns() + timeout_ns;
    for (unsigned round = 0; n < ss.size(); ++round) {
      for (std::size_t i = 0; i < ss.size(); ++i) {
        if (idle[i]) continue;
        const CUresult r = d.cuStreamQuery(ss[i]);
        if (r == CUDA_ERROR_NOT_READY) continue;
        cu::check(r, "cuStreamQuery");
        idle[i] = true;
        ++n;
        if (done_ns) *done_ns = monotonic_ns();
      }
      if (n == ss.size() || monotonic_ns() >= deadline) break;
      if (round >= 1000) sleep_us(100);  // past ~the first milliseconds, stop spinning a core
    }
    return static_cast<int>(n);
  }

  // How many of the streams cuStreamQuery reports busy.
  int busy(const std::vector<CUstream>& ss) {
    const cu::Driver& d = cu::driver();
    int n = 0;
    for (CUstream s : ss) {
      const CUresult r = d.cuStreamQuery(s);
      if (r == CUDA_ERROR_NOT_READY) {
        ++n;
        continue;
      }
      cu::check(r, "cuStreamQuery");
    }
    return n;
  }

  std::string run_k(int k) {
    const cu::Driver& d = cu::driver();
    const std::vector<CUstream> blocked(waits_.begin(), waits_.begin() + k);
    // Every wait word holds the previous round's value, so a wait for the next one is unsatisfied
    // until the CPU stores it (GEQ on a cyclic counter, as the channel's semaphores).
    const std::uint32_t g = gen_.load(std::memory_order_relaxed) + 1;
    gen_.store(g, std::memory_order_release);
    // The enqueues are guarded too: if one blocks in the driver rather than returning, the
    // watchdog releases the waits queued so far and the row says so.
    const auto call_guard_ns = static_cast<std::uint64_t>(o_.create_watchdog_s * 1e9);
    std::string blocked_calls;
    for (int i = 0; i < k; ++i) {
      const bool hung = guarded(call_guard_ns, [&] {
        cu::stream_wait(blocked[static_cast<std::size_t>(i)], page_->device_address(&words_[i]), g);
      });
      if (hung) {
        blocked_calls =
            "; cuStreamWaitValue32 #" + std::to_string(i + 1) + " blocked in the driver";
        break;
      }
    }
    // Let the GPU's front end fetch the waits and start polling before the work is timed.
    sleep_us(2000);
    int blocked_before = 0;
    if (guarded(call_guard_ns, [&] { blocked_before = busy(blocked); }))
      blocked_calls += "; cuStreamQuery blocked in the driver";

    const Series a = measure(first_, o_);
    const Series b = measure(last_, o_);
    int blocked_after = 0;
    if (guarded(call_guard_ns, [&] { blocked_after = busy(blocked); }))
      blocked_calls += "; cuStreamQuery blocked in the driver";

    // cuStreamCreate with the waits still outstanding, under a watchdog.
    auto create = std::make_shared<CreateTry>();
    CUcontext raw_ctx = ctx_->get();
    std::thread helper([create, raw_ctx] {
      cu::ScopedContext c(raw_ctx, std::nothrow);
      const std::uint64_t t0 = monotonic_ns();
      create->r = cu::loaded_driver().cuStreamCreate(&create->s, CU_STREAM_NON_BLOCKING);
      create->ns = monotonic_ns() - t0;
      create->done.store(true, std::memory_order_release);
    });
    const std::uint64_t create_deadline =
        monotonic_ns() + static_cast<std::uint64_t>(o_.create_watchdog_s * 1e9);
    while (!create->done.load(std::memory_order_acquire) && monotonic_ns() < create_deadline)
      sleep_us(100);
    const bool create_hung = !create->done.load(std::memory_order_acquire);

    // Release: the CPU stores the value every wait is for (a release store; no driver call, so it
    // works even while a helper is stuck inside the driver).
    const std::uint64_t t_release = monotonic_ns();
    for (int i = 0; i < max_k_; ++i) words_[i].v.store(g, std::memory_order_release);

    std::string create_text;
    if (create_hung) {
      const std::uint64_t deadline = monotonic_ns() + 5'000'000'000ull;
      while (!create->done.load(std::memory_order_acquire) && monotonic_ns() < deadline)
        sleep_us(100);
      if (!create->done.load(std::memory_order_acquire)) {
        helper.detach();
        give_up("cuStreamCreate with " + std::to_string(k) + " streams blocked did not return in " +
                fmt("%.0f", o_.create_watchdog_s) +
                " s, nor within 5 s after the waits were released");
      }
      create_text = "hung; returned " +
                    fmt("%.2f", static_cast<double>(monotonic_ns() - t_release) / 1e6) +
                    " ms after release";
    } else {
      create_text = "ok " + fmt("%.0f", static_cast<double>(create->ns) / 1e3) + " us";
    }
    helper.join();
    if (create->r != CUDA_SUCCESS) create_text += " but failed: " + cu::error_text(create->r);

    // Every blocked stream drains once released; the probes' held work finishes too.
    std::string release_text = "-";
    bool stuck = false;
    if (k > 0) {
      std::uint64_t done_ns = t_release;
      const int drained = poll_streams(blocked, 2'000'000'000ull, &done_ns);
      if (drained == k) {
        release_text = std::to_string(k) + " drained in " +
                       fmt("%.0f", static_cast<double>(done_ns - t_release) / 1e3) + " us";
      } else {
        release_text = std::to_string(k - drained) + " of " + std::to_string(k) + " stuck 2 s";
        stuck = true;
      }
    }
    release_text += blocked_calls;
    if (aborted()) release_text += "; cut short: the sweep limit released the waits";
    if (blocked_before != k || blocked_after != k)
      release_text += "; only " + std::to_string(std::min(blocked_before, blocked_after)) + " of " +
                      std::to_string(k) + " were waiting";
    for (const Probe* p : {&first_, &last_}) {
      if (!drain_probe(*p)) {
        release_text += "; a probe stream stuck 2 s";
        stuck = true;
      }
    }
    if (create->s) cu::check(d.cuStreamDestroy(create->s), "cuStreamDestroy (created stream)");

    std::string row = "| " + std::to_string(k) + " | " + connections_label() + " | " +
                      percentile(a.ns, 0.50) + " | " + percentile(a.ns, 0.99) + " | " +
                      a.stalled_text() + " | " + create_text + " | " + percentile(b.ns, 0.50) +
                      " | " + percentile(b.ns, 0.99) + " | " + b.stalled_text() + " | " +
                      release_text + " |";
    if (stuck) {
      std::fprintf(stderr, "%s\n", row.c_str());
      throw std::runtime_error("streams did not drain within 2 s of releasing " +
                               std::to_string(k) + " waits");
    }
    return row;
  }

  const Options& o_;
  int max_k_ = 0;
  cu::ContextPtr ctx_;
  std::string device_name_;
  std::size_t bytes_ = 0;
  void* map_ = nullptr;
  Word* words_ = nullptr;
  std::unique_ptr<cu::RegisteredPage> page_;
  cu::DeviceAllocation scratch_;
  std::vector<cu::Stream> streams_;
  std::vector<CUstream> waits_;
  Probe first_, last_;
  std::atomic<std::uint32_t> gen_{0};
  Watchdog* dog_ = nullptr;  // while run() runs
};

// One sweep in this process.
void sweep_here(const Options& o) {
  Sweep s(o);
  std::fprintf(stderr,
               "blocked-streams: %s=%s, device %d (%s), %d streams made up front, %d tries per "
               "row, cap %.0f ms\n",
               kConnectionsVar, connections_label().c_str(), kDevice, s.device_name().c_str(),
               s.streams(), o.tries, o.cap_ms);
  s.run(add_row);
}

// Re-executes this program with --child and the variable set, and collects the rows it prints on
// stdout, killing it if it runs past its limit (its own watchdog should end it first).
bool sweep_in_child(const Options& o, int argc, char** argv) {
  std::vector<std::string> args = {"/proc/self/exe"};
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  args.emplace_back("--child");
  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);

  const std::string var = std::string(kConnectionsVar) + "=" + o.child_connections;
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, kConnectionsVar, std::strlen(kConnectionsVar)) == 0 &&
        (*e)[std::strlen(kConnectionsVar)] == '=')
      continue;
    env_strings.emplace_back(*e);
  }
  env_strings.push_back(var);
  std::vector<char*> cenv;
  for (std::string& e : env_strings) cenv.push_back(e.data());
  cenv.push_back(nullptr);

  int fds[2];
  if (::pipe(fds) != 0) cudaipc::throw_errno("pipe");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  posix_spawn_file_actions_addclose(&fa, fds[1]);
  pid_t pid = 0;
  const int err = ::posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  if (err != 0) {
    ::close(fds[0]);
    cudaipc::throw_errno("posix_spawn (child sweep)", err);
  }

  // Driver start-up and context creation come on top of the sweep's own limit.
  const std::uint64_t deadline =
      monotonic_ns() + static_cast<std::uint64_t>((o.sweep_limit_s + 30) * 1e9);
  std::string buf;
  bool killed = false;
  for (;;) {
    const std::uint64_t now = monotonic_ns();
    if (now >= deadline) {
      std::fprintf(stderr, "blocked-streams: the child sweep ran past its limit; killing it\n");
      ::kill(pid, SIGKILL);
      killed = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    const int n = ::poll(
        &pfd, 1, static_cast<int>(std::min<std::uint64_t>((deadline - now) / 1'000'000 + 1, 1000)));
    if (n < 0 && errno != EINTR) cudaipc::throw_errno("poll (child sweep)");
    if (n <= 0) continue;
    char chunk[4096];
    const ssize_t got = ::read(fds[0], chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // the child closed its stdout: it has ended
    buf.append(chunk, static_cast<std::size_t>(got));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::vector<std::string> rows;
  for (std::size_t p = 0; p < buf.size();) {
    std::size_t e = buf.find('\n', p);
    if (e == std::string::npos) e = buf.size();
    std::string line = buf.substr(p, e - p);
    if (line.rfind("| ", 0) == 0) rows.push_back(line);
    p = e + 1;
  }
  add_rows(rows);
  if (killed) return false;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  std::fprintf(stderr, "blocked-streams: the child sweep failed (%s %d)\n",
               WIFEXITED(status) ? "exit status" : "signal",
               WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  return false;
}

int run(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const std::string val = a.substr(a.find('=') + 1);
    if (a == "--child") {
      o.child = true;
    } else if (a.rfind("--k=", 0) == 0) {
      o.ks = parse_ks(val);
    } else if (a.rfind("--tries=", 0) == 0) {
      o.tries = static_cast<int>(parse_number(a));
    } else if (a.rfind("--cap-ms=", 0) == 0) {
      o.cap_ms = parse_number(a);
    } else if (a.rfind("--sweep-limit-s=", 0) == 0) {
      o.sweep_limit_s = parse_number(a);
    } else if (a.rfind("--child-connections=", 0) == 0) {
      o.child_connections = val;
    } else {
      std::printf(
          "usage: cudaipc-bench-blocked-streams [--k=0,1,2,4,6,7,8,9,12,16,24,32] [--tries=200]\n"
          "       [--cap-ms=50] [--sweep-limit-s=60] [--child-connections=32|none]\n");
      return a == "--help" ? 0 : 2;
    }
  }

  std::string why;
  if (!cu::driver_available(&why)) {
    std::printf("skipped: %s\n", why.c_str());
    return 0;
  }

  report().child = o.child;
  report().intro =
      "# Streams blocked in cuStreamWaitValue32 (GEQ, host word) vs. other streams\n\n"
      "Driver " +
      std::to_string(cu::driver().version) + ", device " + std::to_string(kDevice) +
      ", primary context. Each row: K streams each wait on their own host word (page-locked, "
      "cuMemHostRegister DEVICEMAP|PORTABLE) that nobody has written yet; \"unrelated work\" is a "
      "4-byte cuMemsetD8Async + cuStreamWriteValue32 of a host word on a stream made before the K "
      "(\"late\": made after them), timed from enqueue until the CPU sees the word; a try that "
      "passes " +
      fmt("%.0f", o.cap_ms) + " ms is stalled (\"held\": not done " + fmt("%.0f", o.grace_ms) +
      " ms later either, so the series stopped; \"enqueue blocked\": "
      "the enqueue call itself did not return, and the watchdog released the waits). "
      "cuStreamCreate runs in a helper thread with a " +
      fmt("%.0f", o.create_watchdog_s) +
      " s watchdog. Release: the CPU stores every word; time until cuStreamQuery reports all K "
      "idle.\n\n";
  if (o.child) {
    sweep_here(o);
    return 0;
  }

  int rc = 0;
  try {
    sweep_here(o);  // everything of this sweep (its context included) is gone after
  } catch (const std::exception& e) {
    std::fprintf(stderr, "blocked-streams: error: %s\n", e.what());
    rc = 1;
  }
  if (rc == 0 && o.child_connections != "none") {
    std::fprintf(stderr, "blocked-streams: the same sweep in a child with %s=%s\n", kConnectionsVar,
                 o.child_connections.c_str());
    if (!sweep_in_child(o, argc, argv)) rc = 1;
  }
  print_table();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cudaipc-bench-blocked-streams: error: %s\n", e.what());
    return 1;
  }
}
