#include "elements/thread_priority.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace cudaipc::gst {
namespace {

constexpr unsigned kCapSysNice = 23;  // linux/capability.h's CAP_SYS_NICE

// linux/sched/types.h's struct sched_attr as first published (SCHED_ATTR_SIZE_VER0), which every
// kernel since 3.14 takes; glibc wraps the calls only from 2.41. For the default policy
// sched_runtime is the thread's slice (Linux 6.12+; read back as 0 before).
struct SchedAttr {
  std::uint32_t size = sizeof(SchedAttr);
  std::uint32_t policy = 0;
  std::uint64_t flags = 0;
  std::int32_t nice = 0;
  std::uint32_t priority = 0;
  std::uint64_t runtime = 0;
  std::uint64_t deadline = 0;
  std::uint64_t period = 0;
};
static_assert(sizeof(SchedAttr) == 48, "SCHED_ATTR_SIZE_VER0");
constexpr std::uint64_t kFlagResetOnFork = 0x01;  // linux/sched.h's SCHED_FLAG_RESET_ON_FORK

int get_attr(SchedAttr& a) {
  return static_cast<int>(syscall(SYS_sched_getattr, 0, &a, sizeof a, 0u));
}
int set_attr(SchedAttr a) {
  a.size = sizeof a;
  a.flags &= kFlagResetOnFork;  // keep that one; none of the others (keep-params, clamps) meant
  return static_cast<int>(syscall(SYS_sched_setattr, 0, &a, 0u));
}

// What the thread had before it was raised; a part not changed has nothing to give back.
struct Kept {
  bool sched_changed = false;  // the policy, or only its reset-on-fork flag
  int policy = SCHED_OTHER;    // as pthread_getschedparam() said, flag included
  sched_param param{};
  bool nice_changed = false;
  int nice = 0;
  bool slice_changed = false;  // back to the kernel's default
};
thread_local Kept kept;

// Whether CAP_SYS_NICE is in this thread's effective set, which tells a refusal's causes apart.
bool has_sys_nice() {
  std::ifstream status("/proc/thread-self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const unsigned long long eff = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (eff >> kCapSysNice) & 1u;
  }
  return false;
}

// RLIMIT_RTPRIO or RLIMIT_NICE as a number, RLIM_INFINITY as the most any priority needs.
unsigned long long limit_of(int resource) {
  rlimit r{};
  if (getrlimit(resource, &r) != 0) return 0;
  return r.rlim_cur == RLIM_INFINITY ? 99 + 40 : r.rlim_cur;
}

std::string fifo_refused(unsigned priority, int err) {
  std::string why = "SCHED_FIFO at " + std::to_string(priority) + ": " + std::strerror(err);
  if (err != EPERM) return why;
  const unsigned long long rtprio = limit_of(RLIMIT_RTPRIO);
  if (has_sys_nice() || rtprio >= priority)
    return why + " (the thread may have it, by CAP_SYS_NICE or RLIMIT_RTPRIO " +
           std::to_string(rtprio) + ": its control group, cpu.rt_runtime_us, a user namespace " +
           "or a security policy refuses real-time threads)";
  return why + " (the process has no CAP_SYS_NICE, and its RLIMIT_RTPRIO, ulimit -r, is " +
         std::to_string(rtprio) + ": priority " + std::to_string(priority) + " needs " +
         std::to_string(priority) + " or more)";
}

std::string nice_refused(int nice, int err) {
  std::string why = "nice " + std::to_string(nice) + ": " + std::strerror(err);
  if (err != EACCES && err != EPERM) return why;
  if (has_sys_nice()) return why + " (a user namespace or a security policy refuses it)";
  return why + " (the process has no CAP_SYS_NICE, and its RLIMIT_NICE, ulimit -e, is " +
         std::to_string(limit_of(RLIMIT_NICE)) + ": nice " + std::to_string(nice) + " needs " +
         std::to_string(20 - nice) + " or more)";
}

// Sets the calling thread's policy, the first change keeping what it had. Through pthreads, whose
// own record of a thread's policy (pthread_getschedparam's answer) stays right so.
int set_policy(int policy, const sched_param& param, int old_policy, const sched_param& old) {
  if (int err = pthread_setschedparam(pthread_self(), policy, &param)) return err;
  if (!kept.sched_changed) {
    kept.sched_changed = true;
    kept.policy = old_policy;
    kept.param = old;
  }
  return 0;
}

// The reset-on-fork flag, which any thread may set on itself: threads started here (a downstream
// element's) begin with the default nice value and slice, not this thread's. Kept as a policy
// change, so that a pooled thread has it cleared again where that is allowed.
void flag_reset_on_fork() {
  int policy = SCHED_OTHER;
  sched_param param{};
  if (pthread_getschedparam(pthread_self(), &policy, &param) == 0 &&
      !(policy & SCHED_RESET_ON_FORK))
    (void)set_policy(policy | SCHED_RESET_ON_FORK, param, policy, param);
}

std::string raise_policy(unsigned priority) {
  int policy = SCHED_OTHER;
  sched_param old{};
  if (int err = pthread_getschedparam(pthread_self(), &policy, &old))
    return std::string("pthread_getschedparam: ") + std::strerror(err);
  const int plain = policy & ~SCHED_RESET_ON_FORK;
  if ((plain == SCHED_FIFO || plain == SCHED_RR) &&
      old.sched_priority >= static_cast<int>(priority))
    return "";  // already as high: an application's choice is not lowered
  sched_param p{};
  p.sched_priority = static_cast<int>(priority);
  // Reset on fork: a thread a downstream element starts here does not inherit real time.
  if (int err = set_policy(SCHED_FIFO | SCHED_RESET_ON_FORK, p, policy, old))
    return fifo_refused(priority, err);
  return "";
}

std::string raise_nice(int nice) {
  // On Linux a nice value is a thread's own: PRIO_PROCESS with a thread id sets that thread's.
  const id_t self = static_cast<id_t>(gettid());
  errno = 0;
  const int before = getpriority(PRIO_PROCESS, self);
  if (before == -1 && errno != 0) return std::string("getpriority: ") + std::strerror(errno);
  if (before <= nice) return "";  // already as high
  if (setpriority(PRIO_PROCESS, self, nice) != 0) return nice_refused(nice, errno);
  if (!kept.nice_changed) {
    kept.nice_changed = true;
    kept.nice = before;
  }
  // Threads started here begin at nice 0 rather than this.
  flag_reset_on_fork();
  return "";
}

constexpr const char* kNoSlices = "this kernel keeps no slice of a thread's own (Linux 6.12+ does)";

// The policies a slice belongs to (SCHED_IDLE threads run only when nothing else would).
bool has_slice(const SchedAttr& a) {
  return a.policy == SCHED_OTHER || a.policy == SCHED_BATCH;
}

std::string raise_slice(std::uint64_t asked) {
  const std::uint64_t ns = std::clamp(asked, kMinSliceNs, kMaxSliceNs);
  const std::string what = "time-slice " + std::to_string(ns) + " ns: ";
  SchedAttr a;
  if (get_attr(a) != 0) {
    const int err = errno;
    return what + "sched_getattr: " + std::strerror(err);
  }
  if (!has_slice(a)) return "";  // real time, or idle
  // Before 6.12 a thread of these policies has no slice of its own: it reads back as 0.
  if (a.runtime == 0) return what + kNoSlices;
  if (a.runtime <= ns) return "";  // already as short
  a.runtime = ns;
  if (set_attr(a) != 0) {
    const int err = errno;
    return what + "sched_setattr: " + std::strerror(err);
  }
  kept.slice_changed = true;
  flag_reset_on_fork();  // a policy change through pthreads keeps the slice (Linux 6.12+)
  return "";
}

}  // namespace

std::string raise_thread_priority(const ThreadPriority& p) {
  std::string why;
  const auto add = [&why](const std::string& part) {
    if (!part.empty()) why += (why.empty() ? "" : "; ") + part;
  };
  if (p.rt) add(raise_policy(p.rt));
  if (p.nice < 0) add(raise_nice(p.nice));
  if (p.slice_ns) add(raise_slice(p.slice_ns));
  return why;
}

void restore_thread_priority() noexcept {
  if (kept.sched_changed &&
      pthread_setschedparam(pthread_self(), kept.policy, &kept.param) == EPERM) {
    // Without CAP_SYS_NICE the reset-on-fork flag cannot be cleared: the rest still goes back.
    (void)pthread_setschedparam(pthread_self(), kept.policy | SCHED_RESET_ON_FORK, &kept.param);
  }
  // A higher nice value needs no privilege.
  if (kept.nice_changed) (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kept.nice);
  // The kernel's default slice, which a runtime of 0 asks for: what the thread had can be read
  // back only as a number, and giving that back would make it a slice of the thread's own, which
  // no longer follows the kernel's default (a pooled thread has no slice of its own).
  SchedAttr a;
  if (kept.slice_changed && get_attr(a) == 0 && has_slice(a)) {
    a.runtime = 0;
    (void)set_attr(a);
  }
  kept = Kept{};
}

}  // namespace cudaipc::gst
