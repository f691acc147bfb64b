// cudaipc-bench-join-stall: whether pipelines joining and leaving a model process stall the
// model's GPU work. Under sixteen pipelines the model's batches took 20-90 ms instead of 1-5 while
// pipelines started and ended (docs/benchmarks.md, "twenty-first session"); the model process
// then imports (or unmaps) a joining (leaving) pipeline's slots and registers (unregisters) its
// semaphore page on its readers' threads, while other processes make and free contexts of their
// own. This tells those apart, in one process on device 0's primary context.
//
// A model thread writes a buffer on its own stream (--work-mib in --launches cuMemsetD8Async, or
// with --kernel in as many launches of a kernel that fills words, as a network's kernels are; the
// byte its iteration's) and waits for it through an event, again and again; it times the launch
// calls and the whole iteration. Beside it, phase by phase, another thread does one thing every
// --gap-ms:
//   alone        nothing (the baseline of the same run)
//   join-leave   a cudaipc consumer joins a channel whose producer (a child process) publishes
//                1080p NV12-sized CUDA frames at 30 frames/s, checks one frame's first and last
//                byte on its stream, and leaves: the readers' work in a model process
//   producer-ends  the same with a producer of its own started for each join, which ends
//                (SIGTERM: it frees its slots and exits, as a pipeline at its end) before the
//                consumer sees it gone and is closed: a reader's end when its pipeline ends
//   crowd        sixteen producers started at once, joined at once by sixteen consumers on
//                threads of their own (a server's readers), each checking a frame, then all
//                ended at once and each consumer closed on its thread: sixteen pipelines
//                starting and ending together, as many_pipelines.py's
//   host-page    registers a page as device-mapped host memory and unregisters it (a channel's
//                semaphore page)
//   vmm          imports an exported allocation of this process, maps it and gives it access,
//                then unmaps and releases it (a slot's import)
//   stream       creates and destroys a stream
//   other-ctx    a child process makes the device's context, allocates and writes 64 MiB, exits
//   contexts     four such children at once (nothing timed)
//   host-page-local  host-page's registration without CU_MEMHOSTREGISTER_PORTABLE
//   host-numa    imports a page of shareable host memory (a host NUMA node's, made by the driver),
//                maps it for the device and the CPU, writes a word, unmaps it: a connection page
//                shared without a registration
//   vmm-amid-contexts, host-page-amid-contexts, host-page-local-amid-contexts,
//   host-numa-amid-contexts, host-numa-create-amid-contexts, stream-amid-contexts,
//   join-amid-contexts
//                the same, and that phase's calls (join-leave's for join; for host-numa-create
//                the page's making and export, a producer's side) again and again
//                until they are gone: whether this process's calls that need the kernel driver's
//                GPU-wide lock (which the children's contexts hold as they are made and torn down)
//                hold the model's launches meanwhile
//   command      a child process runs --command (a pipeline's start and end: gst-launch-1.0 with
//                cudaupload, whose plugin probes the GPU's codecs as it loads); only with --command
// Each phase's table row: the model's iteration and launch call (p50, p99, max), how many
// iterations took over twice the baseline's p50, those that overlapped the other thread's call,
// and that call's own time. The model's buffer is read back after each phase: its byte must be
// the last iteration's. Without a driver or a GPU it prints why and exits 0. Run it under MPS
// too (the many_pipelines runs are).
//   cudaipc-bench-join-stall [--phase-s=3] [--gap-ms=50] [--work-mib=2048] [--launches=1]
//   [--kernel]
//                            [--phases=a,b,...]
//                            [--command='sh command line']
#include <linux/futex.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench.hpp"
#include "cuda/backend_common.hpp"
#include "cuda/cuda_handles.hpp"
#include "cuda/driver.hpp"
#include "cuda/semaphores.hpp"
#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"
#include "unique_fd.hpp"

extern char** environ;

namespace {

namespace cu = cudaipc::cuda;
using bench::mono_ns;

constexpr int kDevice = 0;
constexpr std::uint64_t kFrameBytes = 1920ull * 1080 * 3 / 2;  // 1080p NV12
constexpr std::uint64_t kFrameGapNs = 33'333'333;              // 30 frames/s

struct Options {
  double phase_s = 3;
  int gap_ms = 50;
  std::uint64_t work_mib = 2048;
  std::uint32_t launches = 1;
  bool kernel = false;  // the model's work as kernel launches (cuLaunchKernel), not memsets
  std::string command;
  std::vector<std::string> phases = {"alone", "join-leave", "producer-ends", "host-page",
                                     "vmm",   "stream",     "other-ctx"};
};

std::uint8_t fill_byte(std::uint64_t seq) {
  return static_cast<std::uint8_t>(seq * 0x9Du + 0x3Bu);
}

cu::ContextPtr device_context() {
  CUdevice dev = 0;
  cu::check(cu::driver().cuDeviceGet(&dev, kDevice), "cuDeviceGet");
  return cu::Context::primary(dev);
}

volatile sig_atomic_t g_stop = 0;

// The child that publishes: until SIGTERM, a frame every 33 ms, each slot filled with its seq's
// byte on the channel's stream.
int run_producer(const std::string& path) {
  ::signal(SIGTERM, [](int) { g_stop = 1; });
  cudaipc::ProducerOptions po;
  po.path = path;
  po.slots = 4;
  po.memory = cudaipc::MemoryKind::cuda;
  cudaipc::Producer p(po);
  cudaipc::Format f;
  f.caps = "bench/join-stall";
  f.tensor = cudaipc::make_tensor(cudaipc::DType::uint8, {static_cast<std::int64_t>(kFrameBytes)});
  p.set_format(f);
  const cu::ContextPtr ctx = device_context();
  while (!g_stop) {
    cudaipc::PublishStatus st;
    cudaipc::WriteSlot slot = p.begin_frame(&st);
    if (slot) {
      const std::uint64_t seq = p.stats().published + 1;
      cu::ScopedContext current(ctx->get());
      cu::check(cu::driver().cuMemsetD8Async(slot.address(), fill_byte(seq), kFrameBytes,
                                             static_cast<CUstream>(p.cuda_stream())),
                "cuMemsetD8Async (slot)");
      p.commit(slot);
    }
    std::this_thread::sleep_for(std::chrono::nanoseconds(kFrameGapNs));
  }
  return 0;
}

// The child that makes and drops a context of its own, as a pipeline's process does.
int run_other_context() {
  const cu::ContextPtr ctx = device_context();
  cu::DeviceAllocation a = cu::make_device_allocation(ctx, 64 << 20);
  cu::ScopedContext current(ctx->get());
  cu::check(cu::driver().cuMemsetD8Async(a.get(), 7, 64 << 20, nullptr), "cuMemsetD8Async");
  cu::check(cu::driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
  return 0;
}

// The model's kernel for --kernel: each thread stores `value` into every stride-th 32-bit word of
// `dst`. PTX, compiled by the driver as the module loads, so the bench needs no CUDA compiler.
constexpr char kFillPtx[] = R"(
.version 7.0
.target sm_80
.address_size 64

.visible .entry fill_u32(.param .u64 p_dst, .param .u64 p_words, .param .u32 p_value)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [p_dst];
  ld.param.u64 %rd2, [p_words];
  ld.param.u32 %r1, [p_value];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.u32 %r5, %r2, %r3, %r4;
  cvt.u64.u32 %rd3, %r5;
  mov.u32 %r2, %nctaid.x;
  mul.lo.u32 %r2, %r2, %r3;
  cvt.u64.u32 %rd4, %r2;
LOOP:
  setp.ge.u64 %p1, %rd3, %rd2;
  @%p1 bra DONE;
  shl.b64 %rd5, %rd3, 2;
  add.s64 %rd6, %rd1, %rd5;
  st.global.u32 [%rd6], %r1;
  add.s64 %rd3, %rd3, %rd4;
  bra LOOP;
DONE:
  ret;
}
)";

// The loaded kernel, unloaded with its owner.
class FillKernel {
 public:
  explicit FillKernel(const cu::ContextPtr& ctx) : ctx_(ctx) {
    const cu::Driver& d = cu::driver();
    cu::ScopedContext current(ctx_->get());
    cu::check(d.cuModuleLoadData(&module_, kFillPtx), "cuModuleLoadData (the fill kernel)");
    try {
      cu::check(d.cuModuleGetFunction(&fn_, module_, "fill_u32"), "cuModuleGetFunction");
      int sms = 0;
      cu::check(
          d.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ctx_->device()),
          "cuDeviceGetAttribute");
      blocks_ = static_cast<unsigned>(std::max(sms, 1)) * 4;
    } catch (...) {
      d.cuModuleUnload(module_);
      throw;
    }
  }
  FillKernel(const FillKernel&) = delete;
  FillKernel& operator=(const FillKernel&) = delete;
  ~FillKernel() {
    cu::ScopedContext current(ctx_->get(), std::nothrow);
    cu::loaded_driver().cuModuleUnload(module_);
  }

  // Fills `bytes` (a multiple of 4) at `dst` with `byte` on `s`; the context is current.
  void fill(CUdeviceptr dst, std::size_t bytes, std::uint8_t byte, CUstream s) const {
    std::uint64_t words = bytes / 4;
    std::uint32_t value = byte * 0x01010101u;
    void* args[] = {&dst, &words, &value};
    cu::check(cu::driver().cuLaunchKernel(fn_, blocks_, 1, 1, 256, 1, 1, 0, s, args, nullptr),
              "cuLaunchKernel (the model's work)");
  }

 private:
  cu::ContextPtr ctx_;
  CUmodule module_ = nullptr;
  CUfunction fn_ = nullptr;
  unsigned blocks_ = 0;
};

struct Interval {
  std::uint64_t begin, end;
};

// The other thread's calls, for the model thread's iterations to be matched against.
class Calls {
 public:
  void add(std::uint64_t b, std::uint64_t e) {
    std::lock_guard<std::mutex> lock(mu_);
    all_.push_back({b, e});
  }
  std::vector<Interval> take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(all_);
  }

 private:
  std::mutex mu_;
  std::vector<Interval> all_;
};

struct Churn {
  const cu::ContextPtr& ctx;
  const std::string& channel;
  const std::string& command;
  Calls& calls;
  std::vector<std::uint64_t> join_ns, leave_ns;
  std::vector<std::uint64_t> spawn_ns;  // the *-contexts phases' spawning, untabled
  std::uint8_t* host = nullptr;         // two bytes a consumer (crowd: kCrowd of them), page-locked
  std::atomic<std::uint64_t> checked = 0;
  // producer-ends, crowd: each round's channels have names of their own.
  std::uint64_t own_producers = 0;
  // producer-ends, crowd: the part of each undoing that is the producers' end (SIGTERM to their
  // exit); the rest is the consumers seeing the hang-up and closing.
  std::vector<std::uint64_t> ended_ns;

  template <class F>
  void timed(std::vector<std::uint64_t>& into, F&& f) {
    const std::uint64_t b = mono_ns();
    f();
    const std::uint64_t e = mono_ns();
    into.push_back(e - b);
    calls.add(b, e);
  }

  void join_leave() {
    std::unique_ptr<cudaipc::Consumer> c;
    timed(join_ns, [&] { c = join_and_check(channel, host); });
    timed(leave_ns, [&] { c.reset(); });
  }

  // producer-ends: its own producer each time, which ends first; "its undoing" is that producer's
  // end (its slots freed, its process and context gone) and the consumer's close once it sees the
  // hang-up. crowd: the same for kCrowd at once, each consumer on a thread of its own.
  void producer_ends() { own_producers_end(1); }
  void crowd() { own_producers_end(kCrowd); }

  static constexpr int kCrowd = 16;

  void own_producers_end(int n) {
    const std::string round = std::to_string(++own_producers);
    std::vector<std::string> paths;
    std::vector<pid_t> kids;
    const auto end_all = [&] {
      for (const pid_t pid : kids) ::kill(pid, SIGTERM);
      bool ok = true;
      for (const pid_t pid : kids) ok = bench::wait_ok(pid, "the phase's producer") && ok;
      kids.clear();
      return ok;
    };
    std::vector<std::unique_ptr<cudaipc::Consumer>> cs(n);
    try {
      for (int i = 0; i < n; ++i) {
        paths.push_back(channel + "-own-" + round + "-" + std::to_string(i));
        kids.push_back(bench::spawn_self({"--producer=" + paths.back()}));
      }
      for (const std::string& path : paths)
        for (int i = 0; i < 400 && ::access(path.c_str(), F_OK) != 0; ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(25));
      timed(join_ns,
            [&] { on_threads(n, [&](int i) { cs[i] = join_and_check(paths[i], host + 2 * i); }); });
      timed(leave_ns, [&] {
        const std::uint64_t b = mono_ns();
        if (!end_all()) throw std::runtime_error("the phase's producer failed");
        ended_ns.push_back(mono_ns() - b);
        on_threads(n, [&](int i) { close_once_gone(cs[i]); });
      });
    } catch (...) {
      end_all();
      throw;
    }
  }

  // f(0) .. f(n - 1), each on a thread of its own (one: on this thread); the first failure is
  // thrown once all ended.
  template <class F>
  static void on_threads(int n, F&& f) {
    if (n == 1) return f(0);
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> failed(n);
    for (int i = 0; i < n; ++i)
      threads.emplace_back([&, i] {
        try {
          f(i);
        } catch (...) {
          failed[i] = std::current_exception();
        }
      });
    for (std::thread& t : threads) t.join();
    for (const std::exception_ptr& e : failed)
      if (e) std::rethrow_exception(e);
  }

  // Closes `c` once it has seen its producer hang up (5 s at most).
  static void close_once_gone(std::unique_ptr<cudaipc::Consumer>& c) {
    for (const auto until = mono_ns() + 5'000'000'000ull;;) {
      if (mono_ns() >= until) throw std::runtime_error("the ended producer not seen in 5 s");
      if (c->next(std::chrono::milliseconds(100)).type == cudaipc::EventType::disconnected) break;
    }
    c.reset();
  }

  // Joins `path` and checks one frame's first and last byte, read on the consumer's stream into
  // `bytes` (two page-locked bytes of its own).
  std::unique_ptr<cudaipc::Consumer> join_and_check(const std::string& path, std::uint8_t* bytes) {
    cudaipc::ConsumerOptions co;
    co.path = path;
    co.reconnect = false;
    auto c = std::make_unique<cudaipc::Consumer>(co);
    for (const auto until = mono_ns() + 5'000'000'000ull; mono_ns() < until;) {
      cudaipc::Event ev = c->next(std::chrono::milliseconds(100));
      if (ev.type == cudaipc::EventType::disconnected)
        throw std::runtime_error("the producer went away: " + ev.message);
      if (ev.type != cudaipc::EventType::frame) continue;
      const auto s = static_cast<CUstream>(c->cuda_stream());
      const CUdeviceptr base = ev.frame.slot_address() + ev.frame.desc().tensor.byte_offset;
      cu::ScopedContext current(ctx->get());
      cu::check(cu::driver().cuMemcpyDtoHAsync(bytes, base, 1, s), "cuMemcpyDtoHAsync");
      cu::check(cu::driver().cuMemcpyDtoHAsync(bytes + 1, base + kFrameBytes - 1, 1, s),
                "cuMemcpyDtoHAsync");
      if (!cu::drain(s, std::chrono::seconds(5)))
        throw std::runtime_error("the consumer's stream did not drain in 5 s");
      const std::uint8_t want = fill_byte(ev.frame.seq());
      if (bytes[0] != want || bytes[1] != want)
        throw std::runtime_error("frame " + std::to_string(ev.frame.seq()) + " held " +
                                 std::to_string(bytes[0]) + "/" + std::to_string(bytes[1]) +
                                 ", not " + std::to_string(want));
      ++checked;
      ev.frame.release();
      return c;
    }
    throw std::runtime_error("no frame in 5 s from " + path);
  }

  // A consumer's connection page: registered device-mapped, then unregistered.
  void host_page() {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    void* p = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error(std::string("mmap: ") + std::strerror(errno));
    const std::shared_ptr<const void> mapped(
        p, [page](const void* q) { ::munmap(const_cast<void*>(q), page); });
    std::unique_ptr<cu::RegisteredPage> reg;
    timed(join_ns, [&] { reg = std::make_unique<cu::RegisteredPage>(ctx, mapped, p, page); });
    timed(leave_ns, [&] { reg.reset(); });
  }

  // A consumer's slot import (the core's own map_for_reading), then its unmapping.
  void vmm(const cu::VmmAllocation& exported, std::size_t size) {
    cu::ScopedContext current(ctx->get());
    int raw_fd = -1;
    cu::check(cu::driver().cuMemExportToShareableHandle(
                  &raw_fd, exported.get(), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
              "cuMemExportToShareableHandle");
    const cudaipc::UniqueFd fd(raw_fd);
    cu::Mapping mapping;
    timed(join_ns, [&] {
      CUmemGenericAllocationHandle h = 0;
      cu::check(cu::driver().cuMemImportFromShareableHandle(
                    &h, reinterpret_cast<void*>(std::intptr_t{fd.get()}),
                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                "cuMemImportFromShareableHandle");
      const cu::VmmAllocation imported(ctx, h);  // the mapping holds its own reference
      mapping = cu::map_for_reading(ctx, h, size, ctx->device());
    });
    timed(leave_ns, [&] { mapping.reset(); });
  }

  // host-page's registration as the current context's alone (no CU_MEMHOSTREGISTER_PORTABLE).
  void host_page_local() {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    void* p = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error(std::string("mmap: ") + std::strerror(errno));
    const std::unique_ptr<void, std::function<void(void*)>> mapped(
        p, [page](void* q) { ::munmap(q, page); });
    cu::ScopedContext current(ctx->get());
    const cu::Driver& d = cu::driver();
    timed(join_ns, [&] {
      cu::check(d.cuMemHostRegister(p, page, CU_MEMHOSTREGISTER_DEVICEMAP),
                "cuMemHostRegister (DEVICEMAP alone)");
    });
    timed(leave_ns, [&] { cu::check(d.cuMemHostUnregister(p), "cuMemHostUnregister"); });
  }

  // A page of host memory the CUDA driver made as a shareable allocation (a host NUMA node's),
  // imported and mapped for the device and the CPU, its first word written by the CPU, then
  // unmapped: a connection page shared without cuMemHostRegister.
  void host_numa(const cu::VmmAllocation& exported, std::size_t size) {
    cu::ScopedContext current(ctx->get());
    const cu::Driver& d = cu::driver();
    int raw_fd = -1;
    cu::check(d.cuMemExportToShareableHandle(&raw_fd, exported.get(),
                                             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
              "cuMemExportToShareableHandle (host NUMA)");
    const cudaipc::UniqueFd fd(raw_fd);
    CUdeviceptr va = 0;
    bool mapped = false;
    const auto undo = [&] {
      if (mapped) cu::check(d.cuMemUnmap(va, size), "cuMemUnmap (host NUMA)");
      mapped = false;
      if (va) cu::check(d.cuMemAddressFree(va, size), "cuMemAddressFree (host NUMA)");
      va = 0;
    };
    try {
      timed(join_ns, [&] {
        CUmemGenericAllocationHandle h = 0;
        cu::check(
            d.cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(std::intptr_t{fd.get()}),
                                             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
            "cuMemImportFromShareableHandle (host NUMA)");
        const cu::VmmAllocation imported(ctx, h);
        cu::check(d.cuMemAddressReserve(&va, size, 0, 0, 0), "cuMemAddressReserve (host NUMA)");
        cu::check(d.cuMemMap(va, size, 0, h, 0), "cuMemMap (host NUMA)");
        mapped = true;
        CUmemAccessDesc access[2] = {};
        access[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access[0].location.id = ctx->device();
        access[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        access[1].location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
        access[1].location.id = 0;
        access[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        cu::check(d.cuMemSetAccess(va, size, access, 2), "cuMemSetAccess (device and host)");
        reinterpret_cast<std::atomic<std::uint32_t>*>(va)->store(1, std::memory_order_release);
      });
      timed(leave_ns, undo);
    } catch (...) {
      try {
        undo();
      } catch (...) {
      }
      throw;
    }
  }

  // A producer's side of host-numa: the page made and exported, then released.
  void host_numa_create(std::size_t size) {
    cu::ScopedContext current(ctx->get());
    const cu::Driver& d = cu::driver();
    CUmemAllocationProp prop = cu::vmm_properties(ctx->device());
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    prop.location.id = 0;
    cu::VmmAllocation made;
    cudaipc::UniqueFd fd;
    timed(join_ns, [&] {
      CUmemGenericAllocationHandle h = 0;
      cu::check(d.cuMemCreate(&h, size, &prop, 0), "cuMemCreate (host NUMA node 0)");
      made = cu::VmmAllocation(ctx, h);
      int raw_fd = -1;
      cu::check(
          d.cuMemExportToShareableHandle(&raw_fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
          "cuMemExportToShareableHandle (host NUMA)");
      fd = cudaipc::UniqueFd(raw_fd);
    });
    timed(leave_ns, [&] {
      fd.reset();
      made = cu::VmmAllocation();
    });
  }

  void stream() {
    cu::Stream st;
    timed(join_ns, [&] { st = cu::make_stream(ctx); });
    timed(leave_ns, [&] { st.reset(); });
  }

  void other_context() {
    timed(join_ns, [&] {
      if (!bench::wait_ok(bench::spawn_self({"--other-context"}), "the other context's process"))
        throw std::runtime_error("the process with a context of its own failed");
    });
  }

  static constexpr int kContexts = 4;

  // kContexts processes making and dropping contexts of their own at once, and `each` (none:
  // nothing) again and again until they are all gone: the kernel driver's GPU-wide lock, which
  // their contexts' making and teardown hold, against this process's calls that need it, as a
  // model process's joins while pipelines start.
  template <class F>
  void contexts_at_once(F&& each) {
    std::vector<pid_t> kids;
    const auto wait_all = [&] {
      bool ok = true;
      for (const pid_t pid : kids) ok = bench::wait_ok(pid, "a process with a context") && ok;
      kids.clear();
      return ok;
    };
    try {
      timed(spawn_ns, [&] {
        for (int i = 0; i < kContexts; ++i) kids.push_back(bench::spawn_self({"--other-context"}));
      });
      while (!all_exited(kids)) each();
    } catch (...) {
      wait_all();
      throw;
    }
    if (!wait_all()) throw std::runtime_error("a process with a context of its own failed");
  }

  // Whether every one of `pids` has exited, none of them reaped (wait_ok does that).
  static bool all_exited(const std::vector<pid_t>& pids) {
    for (const pid_t pid : pids) {
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0)
        throw std::runtime_error(std::string("waitid: ") + std::strerror(errno));
      if (info.si_pid == 0) return false;
    }
    return true;
  }

  void run_command() {
    if (command.empty()) throw std::runtime_error("the phase 'command' needs --command");
    timed(join_ns, [&] {
      const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
      pid_t pid = 0;
      const int rc =
          ::posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ);
      if (rc != 0) throw std::runtime_error(std::string("posix_spawn: ") + std::strerror(rc));
      if (!bench::wait_ok(pid, "--command")) throw std::runtime_error("--command failed");
    });
  }
};

// An exportable allocation the size of a 1080p NV12 slot, as a producer makes it, for the vmm
// phase; and one page of shareable host memory (a host NUMA node's) for host-numa, where the
// driver makes one (else why not).
struct Exported {
  cu::VmmAllocation allocation;
  std::size_t size = 0;
  cu::VmmAllocation host_numa;
  std::size_t host_numa_size = 0;
  std::string host_numa_refused;
};

Exported make_exported(const cu::ContextPtr& ctx) {
  const CUdevice dev = ctx->device();
  Exported e;
  e.size = cu::round_up(kFrameBytes, cu::vmm_granularity(dev));
  const CUmemAllocationProp prop = cu::vmm_properties(dev);
  cu::ScopedContext current(ctx->get());
  const cu::Driver& d = cu::driver();
  CUmemGenericAllocationHandle h = 0;
  cu::check(d.cuMemCreate(&h, e.size, &prop, 0), "cuMemCreate");
  e.allocation = cu::VmmAllocation(ctx, h);
  try {
    CUmemAllocationProp host = prop;
    host.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    host.location.id = 0;
    std::size_t g = 0;
    cu::check(d.cuMemGetAllocationGranularity(&g, &host, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
              "cuMemGetAllocationGranularity (host NUMA)");
    CUmemGenericAllocationHandle hh = 0;
    cu::check(d.cuMemCreate(&hh, g, &host, 0), "cuMemCreate (host NUMA node 0)");
    e.host_numa = cu::VmmAllocation(ctx, hh);
    e.host_numa_size = g;
  } catch (const std::exception& err) {
    e.host_numa_refused = err.what();
  }
  return e;
}

// What a page of shareable host memory allows the CPU, mapped in this process for the device and
// the CPU: its size (the driver's granularity), a compare-and-swap, a futex wake (a consumer sleeps
// on words of its connection page). One line.
void probe_host_numa(const cu::ContextPtr& ctx, const Exported& e) {
  if (!e.host_numa) {
    std::printf("host NUMA page: none (%s)\n\n", e.host_numa_refused.c_str());
    return;
  }
  cu::ScopedContext current(ctx->get());
  const cu::Driver& d = cu::driver();
  CUdeviceptr va = 0;
  cu::check(d.cuMemAddressReserve(&va, e.host_numa_size, 0, 0, 0), "cuMemAddressReserve (probe)");
  std::string result;
  try {
    cu::check(d.cuMemMap(va, e.host_numa_size, 0, e.host_numa.get(), 0), "cuMemMap (probe)");
    CUmemAccessDesc access[2] = {};
    access[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access[0].location.id = ctx->device();
    access[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    access[1].location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    access[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    try {
      cu::check(d.cuMemSetAccess(va, e.host_numa_size, access, 2), "cuMemSetAccess (probe)");
      auto* word = reinterpret_cast<std::atomic<std::uint32_t>*>(va);
      word->store(5, std::memory_order_release);
      std::uint32_t seen = 5;
      const bool swapped = word->compare_exchange_strong(seen, 6, std::memory_order_acq_rel);
      const long woke = ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(va), FUTEX_WAKE, 1,
                                  nullptr, nullptr, 0);
      const int futex_errno = woke < 0 ? errno : 0;
      result = std::string("compare-and-swap ") + (swapped && word->load() == 6 ? "ok" : "FAILED") +
               ", futex wake " +
               (woke >= 0 ? "ok" : std::string("refused: ") + std::strerror(futex_errno));
    } catch (const std::exception& err) {
      result = err.what();
    }
    cu::check(d.cuMemUnmap(va, e.host_numa_size), "cuMemUnmap (probe)");
  } catch (...) {
    d.cuMemAddressFree(va, e.host_numa_size);
    throw;
  }
  cu::check(d.cuMemAddressFree(va, e.host_numa_size), "cuMemAddressFree (probe)");
  std::printf("host NUMA page: %zu bytes, mapped for the device and the CPU: %s\n\n",
              e.host_numa_size, result.c_str());
}

struct Row {
  std::vector<std::uint64_t> iter, launch;
  std::uint64_t slow = 0, slow_overlapping = 0;
  std::vector<std::uint64_t> join_ns, leave_ns, ended_ns;
  std::uint64_t checked = 0;
};

double us(double ns) {
  return ns / 1e3;
}
double ms(double ns) {
  return ns / 1e6;
}

Row run_phase(const std::string& phase, const Options& o, const cu::ContextPtr& ctx,
              CUdeviceptr buf, std::size_t bytes, CUstream s, CUevent ev,
              const std::string& channel, std::uint8_t* host, const Exported& exported,
              const FillKernel* kernel, double baseline_p50) {
  Row row;
  Calls calls;
  std::atomic<bool> stop{false};
  std::exception_ptr failed;
  Churn churn{ctx, channel, o.command, calls, {}, {}, {}, host + 8, 0, 0, {}};
  std::thread other([&] {
    try {
      while (!stop.load(std::memory_order_acquire)) {
        if (phase == "join-leave")
          churn.join_leave();
        else if (phase == "producer-ends")
          churn.producer_ends();
        else if (phase == "crowd")
          churn.crowd();
        else if (phase == "host-page")
          churn.host_page();
        else if (phase == "vmm")
          churn.vmm(exported.allocation, exported.size);
        else if (phase == "stream")
          churn.stream();
        else if (phase == "other-ctx")
          churn.other_context();
        else if (phase == "contexts")
          churn.contexts_at_once([] { std::this_thread::sleep_for(std::chrono::milliseconds(1)); });
        else if (phase == "vmm-amid-contexts")
          churn.contexts_at_once([&] { churn.vmm(exported.allocation, exported.size); });
        else if (phase == "host-page-amid-contexts")
          churn.contexts_at_once([&] { churn.host_page(); });
        else if (phase == "host-page-local")
          churn.host_page_local();
        else if (phase == "host-page-local-amid-contexts")
          churn.contexts_at_once([&] { churn.host_page_local(); });
        else if (phase.rfind("host-numa", 0) == 0 && !exported.host_numa)
          throw std::runtime_error("no host NUMA allocation: " + exported.host_numa_refused);
        else if (phase == "host-numa-amid-contexts")
          churn.contexts_at_once(
              [&] { churn.host_numa(exported.host_numa, exported.host_numa_size); });
        else if (phase == "host-numa-create-amid-contexts")
          churn.contexts_at_once([&] { churn.host_numa_create(exported.host_numa_size); });
        else if (phase == "host-numa")
          churn.host_numa(exported.host_numa, exported.host_numa_size);
        else if (phase == "stream-amid-contexts")
          churn.contexts_at_once([&] { churn.stream(); });
        else if (phase == "join-amid-contexts")
          churn.contexts_at_once([&] { churn.join_leave(); });
        else if (phase == "command")
          churn.run_command();
        else if (phase != "alone")
          throw std::runtime_error("no phase " + phase);
        std::this_thread::sleep_for(std::chrono::milliseconds(o.gap_ms));
      }
    } catch (...) {
      failed = std::current_exception();
      stop.store(true, std::memory_order_release);
    }
  });
  const cu::Driver& d = cu::driver();
  std::vector<Interval> iters;
  std::uint8_t last = 0;
  const auto expected = static_cast<std::size_t>(o.phase_s * 1e6 / 400) + 64;
  row.iter.reserve(expected);  // no allocation in the timed loop but past this many
  row.launch.reserve(expected);
  iters.reserve(expected);
  std::exception_ptr model_failed;
  {
    cu::ScopedContext current(ctx->get());
    try {
      const std::uint64_t end = mono_ns() + static_cast<std::uint64_t>(o.phase_s * 1e9);
      for (std::uint64_t i = 1; mono_ns() < end && !stop.load(std::memory_order_acquire); ++i) {
        last = static_cast<std::uint8_t>(i);
        const std::uint64_t t0 = mono_ns();
        // In --launches pieces: a model's network is many launches, each of which may wait in
        // the driver.
        const std::size_t piece = bytes / o.launches / 4 * 4;
        for (std::uint32_t k = 0; k < o.launches; ++k) {
          const std::size_t at = k * piece;
          const std::size_t n = k + 1 == o.launches ? bytes - at : piece;
          if (kernel)
            kernel->fill(buf + at, n, last, s);
          else
            cu::check(d.cuMemsetD8Async(buf + at, last, n, s),
                      "cuMemsetD8Async (the model's work)");
        }
        const std::uint64_t t1 = mono_ns();
        cu::check(d.cuEventRecord(ev, s), "cuEventRecord");
        cu::check(d.cuEventSynchronize(ev), "cuEventSynchronize");
        const std::uint64_t t2 = mono_ns();
        row.iter.push_back(t2 - t0);
        row.launch.push_back(t1 - t0);
        iters.push_back({t0, t2});
      }
    } catch (...) {
      model_failed = std::current_exception();
    }
    // The other thread is let go before anything is thrown: a joinable thread must not be
    // destroyed.
    stop.store(true, std::memory_order_release);
    other.join();
    if (model_failed) std::rethrow_exception(model_failed);
    if (failed) std::rethrow_exception(failed);
    cu::check(d.cuMemcpyDtoHAsync(host, buf + bytes - 1, 1, s), "cuMemcpyDtoHAsync");
    cu::check(d.cuStreamSynchronize(s), "cuStreamSynchronize");
  }
  if (host[0] != last)
    throw std::runtime_error("the model's buffer held " + std::to_string(host[0]) + ", not " +
                             std::to_string(last));
  const std::vector<Interval> done = calls.take();
  const double limit = 2 * (baseline_p50 > 0 ? baseline_p50 : 1e18);
  for (const Interval& it : iters) {
    if (static_cast<double>(it.end - it.begin) <= limit) continue;
    ++row.slow;
    row.slow_overlapping += std::any_of(done.begin(), done.end(), [&](const Interval& c) {
      return c.begin < it.end && it.begin < c.end;
    });
  }
  row.join_ns = std::move(churn.join_ns);
  row.leave_ns = std::move(churn.leave_ns);
  row.ended_ns = std::move(churn.ended_ns);
  row.checked = churn.checked.load();
  return row;
}

std::string stats(std::vector<std::uint64_t> v, double (*unit)(double), const char* fmt) {
  if (v.empty()) return "";  // an empty cell
  char b[128];
  const double mx = static_cast<double>(*std::max_element(v.begin(), v.end()));
  std::snprintf(b, sizeof b, fmt, unit(bench::percentile(v, 0.5)), unit(bench::percentile(v, 0.99)),
                unit(mx));
  return b;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t p = 0;
  while (p <= s.size()) {
    const std::size_t c = std::min(s.find(',', p), s.size());
    if (c > p) out.push_back(s.substr(p, c - p));
    p = c + 1;
  }
  return out;
}

int run_all(const Options& o) {
  std::string why;
  if (!cu::driver_available(&why)) {
    std::printf("skipped: %s\n", why.c_str());
    return 0;
  }
  const char* mps = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  std::printf(
      "cudaipc-bench-join-stall: the model's work %llu MiB in %u %s, phases of "
      "%.1f s, the other thread's call every %d ms; MPS pipe directory %s\n\n",
      static_cast<unsigned long long>(o.work_mib), o.launches,
      o.kernel ? "launches of a fill kernel" : "cuMemsetD8Async", o.phase_s, o.gap_ms,
      mps ? mps : "(unset)");
  char dir[] = "/tmp/cudaipc-join-stall-XXXXXX";
  if (!::mkdtemp(dir)) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  const std::string channel = std::string(dir) + "/channel";
  const pid_t producer = bench::spawn_self({"--producer=" + channel});
  int rc = 0;
  try {
    const cu::ContextPtr ctx = device_context();
    const std::size_t bytes = static_cast<std::size_t>(o.work_mib) << 20;
    cu::DeviceAllocation buf = cu::make_device_allocation(ctx, bytes);
    cu::HostAllocation host = cu::make_host_allocation(ctx, 64);
    const Exported exported = make_exported(ctx);
    probe_host_numa(ctx, exported);
    const cu::Stream stream = cu::make_stream(ctx);
    const CUstream s = stream.get();
    cu::Event event;
    {
      cu::ScopedContext current(ctx->get());
      CUevent e = nullptr;
      cu::check(cu::driver().cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
      event = cu::Event(ctx, e);
    }
    const CUevent ev = event.get();
    std::unique_ptr<FillKernel> kernel;
    if (o.kernel) kernel = std::make_unique<FillKernel>(ctx);
    // The producer's socket appears once it has made its slots.
    for (int i = 0; i < 200 && ::access(channel.c_str(), F_OK) != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::printf(
        "| phase | model iteration p50 / p99 / max µs | its launch calls p50 / p99 / max µs | "
        "iterations over 2x alone's p50 | of them during the other's call | the other's call "
        "p50 / p99 / max ms | its undoing p50 / p99 / max ms | calls |\n"
        "|---|---|---|---|---|---|---|---|\n");
    double baseline = 0;
    // Warm: the first iterations pay for the buffer's first touch.
    Options warm = o;
    warm.phase_s = 0.3;
    run_phase("alone", warm, ctx, buf.get(), bytes, s, ev, channel,
              static_cast<std::uint8_t*>(host.get()), exported, kernel.get(), 0);
    for (const std::string& phase : o.phases) {
      Row r = run_phase(phase, o, ctx, buf.get(), bytes, s, ev, channel,
                        static_cast<std::uint8_t*>(host.get()), exported, kernel.get(), baseline);
      if (phase == "alone") {
        std::vector<std::uint64_t> v = r.iter;
        baseline = bench::percentile(v, 0.5);
      }
      const std::size_t n = r.join_ns.size();
      std::string note =
          r.checked ? ", " + std::to_string(r.checked) + " frames checked" : std::string();
      if (!r.ended_ns.empty())
        note += "; of the undoing, the producers' end " +
                stats(r.ended_ns, ms, "%.2f / %.2f / %.2f") + " ms";
      std::printf("| %s | %s | %s | %llu of %zu | %llu | %s | %s | %zu%s |\n", phase.c_str(),
                  stats(r.iter, us, "%.0f / %.0f / %.0f").c_str(),
                  stats(r.launch, us, "%.1f / %.1f / %.0f").c_str(),
                  static_cast<unsigned long long>(r.slow), r.iter.size(),
                  static_cast<unsigned long long>(r.slow_overlapping),
                  stats(r.join_ns, ms, "%.2f / %.2f / %.2f").c_str(),
                  stats(r.leave_ns, ms, "%.2f / %.2f / %.2f").c_str(), n, note.c_str());
      std::fflush(stdout);
      const std::size_t want = phase == "crowd" ? n * Churn::kCrowd : n;
      if ((phase == "join-leave" || phase == "producer-ends" || phase == "crowd") &&
          r.checked != want) {
        std::fprintf(stderr, "join-stall: %llu frames checked of %zu joins\n",
                     static_cast<unsigned long long>(r.checked), want);
        rc = 1;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "join-stall: %s\n", e.what());
    rc = 1;
  }
  ::kill(producer, SIGTERM);
  if (!bench::wait_ok(producer, "the producer")) rc = 1;
  ::rmdir(dir);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  bench::set_self_exe(argv[0]);
  Options o;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto val = [&](const char* k) { return a.substr(std::strlen(k)); };
      if (a.rfind("--producer=", 0) == 0) return run_producer(val("--producer="));
      if (a == "--other-context") return run_other_context();
      if (a.rfind("--phase-s=", 0) == 0)
        o.phase_s = std::stod(val("--phase-s="));
      else if (a.rfind("--gap-ms=", 0) == 0)
        o.gap_ms = std::stoi(val("--gap-ms="));
      else if (a.rfind("--work-mib=", 0) == 0)
        o.work_mib = std::stoull(val("--work-mib="));
      else if (a.rfind("--launches=", 0) == 0)
        o.launches = static_cast<std::uint32_t>(std::max(1ul, std::stoul(val("--launches="))));
      else if (a == "--kernel")
        o.kernel = true;
      else if (a.rfind("--command=", 0) == 0)
        o.command = val("--command=");
      else if (a.rfind("--phases=", 0) == 0)
        o.phases = split(val("--phases="));
      else {
        std::fprintf(stderr,
                     "usage: %s [--phase-s=3] [--gap-ms=50] [--work-mib=2048] [--launches=1] "
                     "[--kernel] "
                     "[--phases=a,b] "
                     "[--command='sh command line']\n",
                     argv[0]);
        return 2;
      }
    }
    if (!o.command.empty() &&
        std::find(o.phases.begin(), o.phases.end(), "command") == o.phases.end())
      o.phases.push_back("command");
    // The other phases' slow iterations are counted against this one.
    if (o.phases.empty() || o.phases.front() != "alone") o.phases.insert(o.phases.begin(), "alone");
    return run_all(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "join-stall: %s\n", e.what());
    return 1;
  }
}
