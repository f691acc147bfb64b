#include "elements/thread_priority.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace cudaipc::gst {
namespace {

constexpr unsigned kCapSysNice = 23;  // linux/capability.h's CAP_SYS_NICE

// What the thread had before it was raised; a part not raised has nothing to give back.
struct Kept {
  bool policy_raised = false;
  int policy = SCHED_OTHER;
  sched_param param{};
  bool nice_raised = false;
  int nice = 0;
};
thread_local Kept kept;

// Whether CAP_SYS_NICE is in the process's effective set (/proc/self/status's CapEff), which
// tells a refused SCHED_FIFO's causes apart.
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

std::string limit_text(int resource) {
  rlimit r{};
  if (getrlimit(resource, &r) != 0) return "unknown";
  return r.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(r.rlim_cur);
}

// Why the kernel refused `what` with `err`, with the causes it could have had.
std::string refused(const std::string& what, int err, int limit, const char* ulimit) {
  std::string why = what + ": " + std::strerror(err);
  if (err != EPERM && err != EACCES) return why;
  if (has_sys_nice())
    return why + " (the process has CAP_SYS_NICE: its control group, cpu.rt_runtime_us, or a " +
           "security policy refuses it)";
  return why + " (the process has no CAP_SYS_NICE, and its " +
         (limit == RLIMIT_RTPRIO ? "RLIMIT_RTPRIO" : "RLIMIT_NICE") + ", ulimit " + ulimit +
         ", is " + limit_text(limit) + ")";
}

std::string raise_policy(unsigned priority) {
  Kept before;
  if (int rc = pthread_getschedparam(pthread_self(), &before.policy, &before.param))
    return std::string("pthread_getschedparam: ") + std::strerror(rc);
  sched_param p{};
  p.sched_priority = static_cast<int>(priority);
  if (int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &p))
    return refused("SCHED_FIFO at " + std::to_string(priority), rc, RLIMIT_RTPRIO, "-r");
  // A thread raised twice (a task that enters again) keeps what it had the first time.
  if (!kept.policy_raised) {
    kept.policy = before.policy;
    kept.param = before.param;
    kept.policy_raised = true;
  }
  return "";
}

std::string raise_nice(int nice) {
  // On Linux a nice value is a thread's own: PRIO_PROCESS with a thread id sets that thread's.
  const id_t self = static_cast<id_t>(gettid());
  errno = 0;
  const int before = getpriority(PRIO_PROCESS, self);
  if (before == -1 && errno != 0) return std::string("getpriority: ") + std::strerror(errno);
  if (setpriority(PRIO_PROCESS, self, nice) != 0)
    return refused("nice " + std::to_string(nice), errno, RLIMIT_NICE, "-e");
  if (!kept.nice_raised) {
    kept.nice = before;
    kept.nice_raised = true;
  }
  return "";
}

}  // namespace

std::string raise_thread_priority(const ThreadPriority& p) {
  std::string why;
  if (p.rt) why = raise_policy(p.rt);
  if (p.nice) {
    const std::string nice_why = raise_nice(p.nice);
    if (!nice_why.empty()) why += (why.empty() ? "" : "; ") + nice_why;
  }
  return why;
}

void restore_thread_priority() noexcept {
  // Lowering a thread's own priority needs no privilege; a failure leaves nothing to act on.
  if (kept.policy_raised) (void)pthread_setschedparam(pthread_self(), kept.policy, &kept.param);
  if (kept.nice_raised) (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kept.nice);
  kept = Kept{};
}

}  // namespace cudaipc::gst
