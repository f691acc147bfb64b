// The floor publish->acquire is measured against: two processes handing a counter back and forth
// through FUTEX_WAIT/FUTEX_WAKE on a shared memfd, with nothing else on the path (no library, no
// lease protocol). It is paced like the publish latency phase (gap_us of idleness before each
// round) so both measure a wake of a process that is really asleep.
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>

#include "bench.hpp"

namespace bench {
namespace {

struct Shared {
  alignas(64) std::atomic<std::uint32_t> ping;  // round number sent by the waker
  std::atomic<std::uint64_t> sent_ns;           // its CLOCK_MONOTONIC just before the wake
  alignas(64) std::atomic<std::uint32_t> pong;  // round number echoed back
};

void wait_while(std::atomic<std::uint32_t>& w, std::uint32_t v) {
  while (w.load(std::memory_order_acquire) == v) {
    long rc = ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&w), FUTEX_WAIT, v, nullptr,
                        nullptr, 0);
    if (rc < 0 && errno != EAGAIN && errno != EINTR) throw std::runtime_error("futex wait");
  }
}

void wake(std::atomic<std::uint32_t>& w) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&w), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
            0);
}

Shared* map_shared(int fd) {
  void* p = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw std::runtime_error("mmap of the futex page failed");
  return static_cast<Shared*>(p);
}

}  // namespace

int futex_pong_role(const std::vector<std::string>& args) {
  int fd = -1;
  std::uint64_t rounds = 0, warmup = 0;
  std::string out;
  for (const auto& a : args) {
    if (a.rfind("fd=", 0) == 0) fd = std::stoi(a.substr(3));
    if (a.rfind("rounds=", 0) == 0) rounds = std::stoull(a.substr(7));
    if (a.rfind("warmup=", 0) == 0) warmup = std::stoull(a.substr(7));
    if (a.rfind("lat=", 0) == 0) out = a.substr(4);
    if (a == "pin=1") pin_to(1);
  }
  Shared* sh = map_shared(fd);
  std::vector<std::uint64_t> direct;
  direct.reserve(rounds);
  for (std::uint32_t i = 1; i <= rounds; ++i) {
    wait_while(sh->ping, i - 1);
    const std::uint64_t now = mono_ns();
    if (i > warmup) direct.push_back(now - sh->sent_ns.load(std::memory_order_relaxed));
    sh->pong.store(i, std::memory_order_release);
    wake(sh->pong);
  }
  write_samples(out, direct);
  return 0;
}

FloorResult run_futex_floor(std::uint64_t samples, std::uint64_t warmup, std::uint64_t gap_us,
                            bool pin, const std::string& dir) {
  FloorResult r;
  // No MFD_CLOEXEC: the pong process inherits the fd across exec and maps the same page.
  int fd = ::memfd_create("cudaipc-bench-futex", 0);
  if (fd < 0 || ::ftruncate(fd, sizeof(Shared)) != 0)
    throw std::runtime_error("memfd for the futex floor");
  Shared* sh = map_shared(fd);
  new (sh) Shared{};
  const std::uint64_t rounds = warmup + samples;
  const std::string lat = dir + "/floor.lat";
  pid_t pid = spawn_self({"--role=futex-pong", "fd=" + std::to_string(fd),
                          "rounds=" + std::to_string(rounds), "warmup=" + std::to_string(warmup),
                          "lat=" + lat, std::string("pin=") + (pin ? "1" : "0")});
  cpu_set_t saved;
  ::sched_getaffinity(0, sizeof saved, &saved);
  if (pin) pin_to(0);
  ::close(fd);
  std::vector<std::uint64_t> half_rtt, wake_ns;
  half_rtt.reserve(samples);
  wake_ns.reserve(samples);
  for (std::uint32_t i = 1; i <= rounds; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    const std::uint64_t t0 = mono_ns();
    sh->sent_ns.store(t0, std::memory_order_relaxed);
    sh->ping.store(i, std::memory_order_release);
    wake(sh->ping);
    const std::uint64_t woken = mono_ns();
    wait_while(sh->pong, i - 1);
    if (i > warmup) {
      half_rtt.push_back((mono_ns() - t0) / 2);
      wake_ns.push_back(woken - t0);
    }
  }
  r.ok = wait_ok(pid, "futex pong");
  ::sched_setaffinity(0, sizeof saved, &saved);
  ::munmap(sh, sizeof(Shared));
  auto direct = read_samples(lat);
  r.n = half_rtt.size();
  r.oneway_p50_us = percentile(half_rtt, 0.50) / 1e3;
  r.oneway_p99_us = percentile(half_rtt, 0.99) / 1e3;
  r.direct_p50_us = percentile(direct, 0.50) / 1e3;
  r.direct_p99_us = percentile(direct, 0.99) / 1e3;
  r.wake_p50_us = percentile(wake_ns, 0.50) / 1e3;
  r.wake_p99_us = percentile(wake_ns, 0.99) / 1e3;
  r.ok = r.ok && direct.size() == samples;
  return r;
}

}  // namespace bench
