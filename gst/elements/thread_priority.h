// A higher priority for the threads that carry answered frames on (cudaipcfilter's rt-priority,
// nice and time-slice): on a machine whose CPUs the pipelines keep busy, a woken thread of the
// default policy may wait milliseconds for one, where a SCHED_FIFO thread runs at once and one of
// a low nice value or a short slice soon. Under EEVDF a running thread keeps the CPU until its own
// slice is used (3 ms on 8+ CPUs) unless the woken one's slice is shorter (Linux 6.12+), whatever
// its weight: a short slice is what lets a woken thread in without privilege.
#pragma once

#include <cstdint>
#include <string>

namespace cudaipc::gst {

struct ThreadPriority {
  unsigned rt = 0;             // SCHED_FIFO at this priority (1-99); 0 leaves the policy as it is
  int nice = 0;                // this nice value (-20 to -1); 0 leaves it as it is
  std::uint64_t slice_ns = 0;  // this time slice for the default policy; 0 leaves it as it is
};

// The kernel's bounds for a thread's own slice (sched_setattr's sched_runtime).
constexpr std::uint64_t kMinSliceNs = 100'000;
constexpr std::uint64_t kMaxSliceNs = 100'000'000;

// Gives the calling thread `p` where that is higher than what it has (a part already as high is
// left), keeping what it had for restore_thread_priority(). Threads it starts from then on (a
// downstream element's) begin with the default scheduling, not this. "" when done; else why not,
// for each part refused (no CAP_SYS_NICE, an RLIMIT_RTPRIO or RLIMIT_NICE too low, a control
// group without real-time time, a kernel before 6.12 for the slice), and the thread keeps what it
// had of that part. A thread at a real-time priority has no slice to shorten.
std::string raise_thread_priority(const ThreadPriority& p);

// Gives the calling thread back the scheduling, nice value and slice it had before
// raise_thread_priority(), if that changed them: a pooled thread (a pad's task) goes on to run
// other tasks.
void restore_thread_priority() noexcept;

}  // namespace cudaipc::gst
