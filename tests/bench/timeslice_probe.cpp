// cudaipc-bench-timeslice: what it costs when two processes' GPU work depends on each other every
// frame, and which way of ordering it avoids the cost. Without MPS the GPU runs one process's
// context at a time; the field notes measured ~290 µs per cross-process round trip with GPU waits,
// and the elements' copy mode ran at ~3 400 frames/s. This probe answers the design question of
// issue #14: is the cost in the consumer doing GPU work at all, in streams blocked on a semaphore
// of the other process (cuStreamWaitValue32), or in waiting for it frame by frame?
//
// A producer process copies a frame (cuMemcpyDtoDAsync, 1080p RGBA by default) into one of S
// slots, stamps the frame number into the slot's first word and writes `ready` on its stream; a
// consumer process takes each frame and either queues nothing (an importing consumer), or copies
// the slot into a buffer of its own (a copying consumer), then says it is done with the slot.
// Who waits for what, each on the GPU (a semaphore wait queued on the stream) or on the CPU
// (polling the word a stream writes), is the variable:
//   producer: before rewriting slot s, the consumer's done[s] of the frame that slot held
//   consumer: before reading frame n, the producer's ready >= n
//   release:  the consumer's stream writes done[s] (gpu), or its CPU stores it when its stream has
//             nothing queued (cpu-idle: only for a consumer that queues no reads)
// Leases stay on the CPU as in the channel: the producer never begins a slot before the consumer's
// CPU has released it. Both processes spin on the CPU where they wait (16 cores on the device).
// Every 64th frame and the last, the consumer reads its copy's (or the slot's) first word back and
// checks the frame number: a wrong ordering fails the run.
// One more row runs the same frames in one process (two threads, two streams, one context): the
// floor without time-slicing. Without a driver or a GPU it prints why and exits 0.
//   cudaipc-bench-timeslice [--frames=3000] [--bytes=8294400] [--slots=4,8,16] [--limit-s=30]
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "bench.hpp"
#include "clock.hpp"
#include "cuda/cuda_handles.hpp"
#include "cuda/driver.hpp"
#include "cuda/semaphores.hpp"
#include "cudaipc/error.hpp"

namespace {

namespace cu = cudaipc::cuda;
using cudaipc::monotonic_ns;

constexpr std::uint32_t kMaxSlots = 32;
constexpr std::uint64_t kCheckEvery = 64;

enum class Wait { gpu, cpu };
enum class Work { none, copy };
enum class Release { gpu, cpu_idle };

struct Config {
  Wait producer = Wait::gpu;
  Wait consumer = Wait::gpu;
  Work work = Work::copy;
  Release release = Release::gpu;
  std::uint32_t slots = 4;
  bool one_process = false;
};

const char* name(Wait w) {
  return w == Wait::gpu ? "gpu wait" : "cpu poll";
}
const char* name(Work w) {
  return w == Work::none ? "none (import)" : "copy";
}
const char* name(Release r) {
  return r == Release::gpu ? "stream write" : "cpu store";
}

// The page both processes share: semaphore words (registered for the device in each), CPU
// counters, the slot memory's IPC handle and each side's results.
struct alignas(4096) Shared {
  std::atomic<std::uint32_t> ready;
  std::atomic<std::uint32_t> done[kMaxSlots];
  alignas(64) std::atomic<std::uint64_t> committed;  // producer's CPU: frames queued
  alignas(64) std::atomic<std::uint64_t> released;   // consumer's CPU: leases given back
  alignas(64) std::atomic<int> handle_ready;
  CUipcMemHandle handle;
  std::atomic<int> failed;
  std::uint64_t prod_cpu_ns, cons_cpu_ns, cons_t0, cons_t1, prod_t0, prod_t1, checked, bad;
  char error[256];
};

struct Options {
  std::uint64_t frames = 3000;
  std::uint64_t bytes = 8294400;
  std::vector<std::uint32_t> slots = {4, 8, 16};
  int limit_s = 30;
};

void fail(Shared* sh, const std::string& why) {
  if (sh->failed.exchange(1) == 0) std::snprintf(sh->error, sizeof sh->error, "%s", why.c_str());
}

// Spins until `pred` or the other side failed; false on failure.
template <typename Pred>
bool spin_until(Shared* sh, Pred pred) {
  while (!pred()) {
    if (sh->failed.load(std::memory_order_relaxed)) return false;
    __builtin_ia32_pause();
  }
  return true;
}

struct Side {
  cu::ContextPtr ctx;
  cu::Stream stream;
  std::unique_ptr<cu::RegisteredPage> page;
  CUdeviceptr ready = 0, done[kMaxSlots] = {};
};

// `registered`: the page's registration in this process when there is one already (one process,
// two threads: a range can be registered once per process).
Side make_side(Shared* sh, const cu::RegisteredPage* registered) {
  Side s;
  s.ctx = cu::Context::primary(0);
  s.stream = cu::make_stream(s.ctx);
  if (!registered) {
    s.page = std::make_unique<cu::RegisteredPage>(s.ctx, nullptr, sh, sizeof(Shared));
    registered = s.page.get();
  }
  s.ready = registered->device_address(&sh->ready);
  for (std::uint32_t i = 0; i < kMaxSlots; ++i)
    s.done[i] = registered->device_address(&sh->done[i]);
  return s;
}

// `slots_out` (one process): where the producer puts its slots' address for the consumer thread;
// otherwise the producer exports them by IPC handle.
void producer(Shared* sh, const Config& c, const Options& o, CUdeviceptr* slots_out,
              const cu::RegisteredPage* registered) {
  const cu::Driver& d = cu::driver();
  Side side = make_side(sh, registered);
  cu::ScopedContext current(side.ctx->get());
  CUstream st = side.stream.get();
  cu::DeviceAllocation slots = cu::make_device_allocation(side.ctx, o.bytes * c.slots);
  cu::DeviceAllocation src = cu::make_device_allocation(side.ctx, o.bytes);
  cu::check(d.cuMemsetD8Async(src.get(), 0x5a, o.bytes, st), "cuMemsetD8Async");
  cu::check(d.cuStreamSynchronize(st), "cuStreamSynchronize");
  if (slots_out) {
    *slots_out = slots.get();
  } else {
    cu::check(d.cuIpcGetMemHandle(&sh->handle, slots.get()), "cuIpcGetMemHandle");
  }
  sh->handle_ready.store(1, std::memory_order_release);
  const std::uint64_t cpu0 = bench::cpu_ns();
  sh->prod_t0 = monotonic_ns();
  for (std::uint64_t n = 1; n <= o.frames; ++n) {
    const std::uint32_t s = (n - 1) % c.slots;
    if (n > c.slots) {
      const std::uint64_t prev = n - c.slots;
      if (!spin_until(sh, [&] { return sh->released.load(std::memory_order_acquire) >= prev; }))
        return;
      const std::uint32_t t = cu::seq32(prev);
      if (!cu::reached(sh->done[s].load(std::memory_order_acquire), t)) {
        if (c.producer == Wait::gpu) {
          cu::stream_wait(st, side.done[s], t);
        } else if (!spin_until(sh, [&] {
                     return cu::reached(sh->done[s].load(std::memory_order_acquire), t);
                   })) {
          return;
        }
      }
    }
    const CUdeviceptr slot = slots.get() + s * o.bytes;
    cu::check(d.cuMemcpyDtoDAsync(slot, src.get(), o.bytes, st), "cuMemcpyDtoDAsync");
    cu::stream_write(st, slot, cu::seq32(n));  // the frame's number in its first word
    cu::stream_write(st, side.ready, cu::seq32(n));
    sh->committed.store(n, std::memory_order_release);
  }
  if (!cu::drain(st, std::chrono::seconds(o.limit_s))) fail(sh, "producer stream did not drain");
  sh->prod_t1 = monotonic_ns();
  sh->prod_cpu_ns = bench::cpu_ns() - cpu0;
  // The consumer may still read the slots: they go with this process only after it is done.
  spin_until(sh, [&] { return sh->released.load(std::memory_order_acquire) >= o.frames; });
}

void consumer(Shared* sh, const Config& c, const Options& o, const CUdeviceptr* own_slots,
              const cu::RegisteredPage* registered) {
  const cu::Driver& d = cu::driver();
  Side side = make_side(sh, registered);
  cu::ScopedContext current(side.ctx->get());
  CUstream st = side.stream.get();
  if (!spin_until(sh, [&] { return sh->handle_ready.load(std::memory_order_acquire) != 0; }))
    return;
  cu::IpcImport imported;
  CUdeviceptr slots = 0;
  if (own_slots) {
    slots = *own_slots;
  } else {
    imported = cu::open_ipc_memory(side.ctx, sh->handle);
    slots = imported.get();
  }
  cu::DeviceAllocation copies[2] = {cu::make_device_allocation(side.ctx, o.bytes),
                                    cu::make_device_allocation(side.ctx, o.bytes)};
  std::uint32_t word = 0;
  const std::uint64_t cpu0 = bench::cpu_ns();
  for (std::uint64_t n = 1; n <= o.frames; ++n) {
    if (!spin_until(sh, [&] { return sh->committed.load(std::memory_order_acquire) >= n; })) return;
    if (n == 1) sh->cons_t0 = monotonic_ns();
    const std::uint32_t s = (n - 1) % c.slots;
    const std::uint32_t t = cu::seq32(n);
    if (!cu::reached(sh->ready.load(std::memory_order_acquire), t)) {
      if (c.consumer == Wait::gpu) {
        cu::stream_wait(st, side.ready, t);
      } else if (!spin_until(sh, [&] {
                   return cu::reached(sh->ready.load(std::memory_order_acquire), t);
                 })) {
        return;
      }
    }
    const CUdeviceptr slot = slots + s * o.bytes;
    CUdeviceptr readable = slot;
    if (c.work == Work::copy) {
      readable = copies[n % 2].get();
      cu::check(d.cuMemcpyDtoDAsync(readable, slot, o.bytes, st), "cuMemcpyDtoDAsync");
    }
    const bool check = n % kCheckEvery == 0 || n == o.frames;
    if (check && c.work == Work::copy) {
      cu::check(d.cuMemcpyDtoHAsync(&word, readable, sizeof word, st), "cuMemcpyDtoHAsync");
      cu::check(d.cuStreamSynchronize(st), "cuStreamSynchronize");
      ++sh->checked;
      if (word != t) ++sh->bad;
    } else if (check) {
      // An importing consumer reads the slot itself, before it is done with it.
      if (c.consumer == Wait::gpu) cu::check(d.cuStreamSynchronize(st), "cuStreamSynchronize");
      cu::check(d.cuMemcpyDtoHAsync(&word, readable, sizeof word, st), "cuMemcpyDtoHAsync");
      cu::check(d.cuStreamSynchronize(st), "cuStreamSynchronize");
      ++sh->checked;
      if (word != t) ++sh->bad;
    }
    if (c.release == Release::gpu)
      cu::stream_write(st, side.done[s], t);
    else
      sh->done[s].store(t, std::memory_order_release);
    sh->released.store(n, std::memory_order_release);
  }
  if (!cu::drain(st, std::chrono::seconds(o.limit_s))) fail(sh, "consumer stream did not drain");
  sh->cons_t1 = monotonic_ns();
  sh->cons_cpu_ns = bench::cpu_ns() - cpu0;
}

template <typename F>
void guarded(Shared* sh, const char* who, F f) {
  try {
    f();
  } catch (const std::exception& e) {
    fail(sh, std::string(who) + ": " + e.what());
  }
}

struct Result {
  bool ok = false;
  std::string error;
  double fps = 0, prod_cpu_us = 0, cons_cpu_us = 0;
  std::uint64_t checked = 0, bad = 0;
};

Result run(const Config& c, const Options& o) {
  void* mem =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw std::runtime_error("mmap failed");
  auto* sh = new (mem) Shared{};
  Result r;
  // Every run is in children: the parent never initialises CUDA, so later forks can.
  const int nchildren = c.one_process ? 1 : 2;
  pid_t pids[2] = {-1, -1};
  for (int i = 0; i < nchildren; ++i) {
    pids[i] = fork();
    if (pids[i] < 0) throw std::runtime_error("fork failed");
    if (pids[i] != 0) continue;
    alarm(static_cast<unsigned>(o.limit_s) + 10);  // a hang ends the child, not the run
    if (c.one_process) {
      guarded(sh, "one process", [&] {
        cu::RegisteredPage page(cu::Context::primary(0), nullptr, sh, sizeof(Shared));
        CUdeviceptr own = 0;  // written before handle_ready, read after it
        std::thread p([&] { guarded(sh, "producer", [&] { producer(sh, c, o, &own, &page); }); });
        guarded(sh, "consumer", [&] { consumer(sh, c, o, &own, &page); });
        p.join();
      });
    } else if (i == 0) {
      guarded(sh, "producer", [&] { producer(sh, c, o, nullptr, nullptr); });
    } else {
      guarded(sh, "consumer", [&] { consumer(sh, c, o, nullptr, nullptr); });
    }
    _exit(sh->failed.load() ? 1 : 0);
  }
  const std::uint64_t deadline = monotonic_ns() + (o.limit_s + 20) * 1'000'000'000ull;
  int left = nchildren;
  while (left > 0) {
    int status = 0;
    const pid_t w = waitpid(-1, &status, WNOHANG);
    if (w > 0) {
      --left;
      for (pid_t& p : pids)
        if (p == w) p = -1;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail(sh, "a child failed or was killed");
      if (sh->failed.load())  // let the other one go
        for (pid_t p : pids)
          if (p > 0) kill(p, SIGKILL);
      continue;
    }
    if (monotonic_ns() > deadline) {
      for (pid_t p : pids)
        if (p > 0) kill(p, SIGKILL);
      fail(sh, "time limit");
    }
    usleep(1000);
  }
  r.ok = !sh->failed.load() && sh->bad == 0;
  r.error = sh->failed.load() ? sh->error : (sh->bad ? "bad frames" : "");
  const double secs = static_cast<double>(sh->cons_t1 - sh->cons_t0) / 1e9;
  if (secs > 0) r.fps = static_cast<double>(o.frames) / secs;
  r.prod_cpu_us = static_cast<double>(sh->prod_cpu_ns) / 1e3 / static_cast<double>(o.frames);
  r.cons_cpu_us = static_cast<double>(sh->cons_cpu_ns) / 1e3 / static_cast<double>(o.frames);
  if (c.one_process) r.prod_cpu_us = r.cons_cpu_us = 0;  // one process: the two are not apart
  r.checked = sh->checked;
  r.bad = sh->bad;
  sh->~Shared();
  munmap(mem, sizeof(Shared));
  return r;
}

std::vector<std::uint32_t> parse_list(const std::string& s) {
  std::vector<std::uint32_t> v;
  for (std::size_t p = 0; p < s.size();) {
    std::size_t c = s.find(',', p);
    if (c == std::string::npos) c = s.size();
    v.push_back(static_cast<std::uint32_t>(std::stoul(s.substr(p, c - p))));
    p = c + 1;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char* k) { return a.substr(std::strlen(k)); };
    if (a.rfind("--frames=", 0) == 0)
      o.frames = std::stoull(val("--frames="));
    else if (a.rfind("--bytes=", 0) == 0)
      o.bytes = std::stoull(val("--bytes="));
    else if (a.rfind("--slots=", 0) == 0)
      o.slots = parse_list(val("--slots="));
    else if (a.rfind("--limit-s=", 0) == 0)
      o.limit_s = std::stoi(val("--limit-s="));
    else {
      std::fprintf(stderr, "usage: %s [--frames=N] [--bytes=N] [--slots=4,8,16] [--limit-s=S]\n",
                   argv[0]);
      return 2;
    }
  }
  for (std::uint32_t s : o.slots)
    if (s == 0 || s > kMaxSlots) {
      std::fprintf(stderr, "slot counts are 1..%u\n", kMaxSlots);
      return 2;
    }
  // The parent never touches CUDA (its children fork from it); ask a child whether a GPU is there.
  {
    pid_t p = fork();
    if (p == 0) {
      std::string why;
      const bool ok = cu::driver_available(&why);
      if (!ok) std::printf("skipped: %s\n", why.c_str());
      std::fflush(stdout);
      _exit(ok ? 0 : 3);
    }
    int status = 0;
    waitpid(p, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) return 0;
  }
  const char* mps = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  std::printf("cudaipc-bench-timeslice: %llu frames of %llu bytes; MPS pipe directory %s\n\n",
              static_cast<unsigned long long>(o.frames), static_cast<unsigned long long>(o.bytes),
              mps ? mps : "(unset)");
  std::printf(
      "| processes | slots | consumer work | producer waits for done | consumer waits for "
      "ready | release | frames/s | prod CPU µs/f | cons CPU µs/f | checked | result |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  std::vector<Config> configs;
  for (std::uint32_t s : o.slots) {
    Config base;
    base.slots = s;
    Config one = base;
    one.one_process = true;
    configs.push_back(one);  // copy, GPU waits, one process: no time-slicing
    for (Work w : {Work::copy, Work::none})
      for (Wait pw : {Wait::gpu, Wait::cpu})
        for (Wait cw : {Wait::gpu, Wait::cpu}) {
          Config c = base;
          c.work = w;
          c.producer = pw;
          c.consumer = cw;
          configs.push_back(c);
        }
    Config idle = base;  // an importing consumer that queues nothing at all
    idle.work = Work::none;
    idle.release = Release::cpu_idle;
    configs.push_back(idle);
  }
  bool all_ok = true;
  for (const Config& c : configs) {
    Result r;
    try {
      r = run(c, o);
    } catch (const std::exception& e) {
      r.error = e.what();
    }
    all_ok = all_ok && r.ok;
    std::printf("| %s | %u | %s | %s | %s | %s | %.0f | %.1f | %.1f | %llu | %s |\n",
                c.one_process ? "one" : "two", c.slots, name(c.work), name(c.producer),
                name(c.consumer), name(c.release), r.fps, r.prod_cpu_us, r.cons_cpu_us,
                static_cast<unsigned long long>(r.checked), r.ok ? "ok" : r.error.c_str());
    std::fflush(stdout);
  }
  return all_ok ? 0 : 1;
}
