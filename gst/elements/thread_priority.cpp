#include "elements/thread_priority.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace cudaipc::gst {
namespace {

constexpr unsigned kCapSysNice = 23;  // linux/capability.h's CAP_SYS_NICE

// What the thread had before it was raised; `raised` false: nothing to give back.
struct Kept {
  bool raised = false;
  int policy = SCHED_OTHER;
  sched_param param{};
};
thread_local Kept kept;

// Whether CAP_SYS_NICE is in the process's effective set (/proc/self/status's CapEff), which
// tells a refused SCHED_FIFO's two causes apart.
bool has_sys_nice() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const unsigned long long eff = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (eff >> kCapSysNice) & 1u;
  }
  return false;
}

}  // namespace

std::string raise_thread_priority(unsigned priority) {
  Kept before;
  if (int rc = pthread_getschedparam(pthread_self(), &before.policy, &before.param))
    return std::string("pthread_getschedparam: ") + std::strerror(rc);
  sched_param p{};
  p.sched_priority = static_cast<int>(priority);
  if (int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &p)) {
    std::string why = std::string("pthread_setschedparam(SCHED_FIFO, ") + std::to_string(priority) +
                      "): " + std::strerror(rc);
    rlimit rt{};
    if (rc == EPERM && has_sys_nice())
      why +=
          " (the process has CAP_SYS_NICE: its control group, cpu.rt_runtime_us, or a "
          "security policy allows no real-time threads)";
    else if (rc == EPERM && getrlimit(RLIMIT_RTPRIO, &rt) == 0)
      why +=
          " (the process has no CAP_SYS_NICE, and its RLIMIT_RTPRIO, ulimit -r, is " +
          (rt.rlim_cur == RLIM_INFINITY ? std::string("unlimited") : std::to_string(rt.rlim_cur)) +
          ")";
    return why;
  }
  // A thread raised twice (a task that enters again) keeps what it had the first time.
  if (!kept.raised) {
    kept = before;
    kept.raised = true;
  }
  return "";
}

void restore_thread_priority() noexcept {
  if (!kept.raised) return;
  // Lowering a thread's own priority needs no privilege; a failure leaves nothing to act on.
  (void)pthread_setschedparam(pthread_self(), kept.policy, &kept.param);
  kept = Kept{};
}

}  // namespace cudaipc::gst
