// A higher priority for the threads that carry answered frames on (cudaipcfilter's rt-priority
// and nice): on a machine whose CPUs the pipelines keep busy, a woken thread of the default policy
// may wait milliseconds for one, where a SCHED_FIFO thread runs at once and one of a low nice
// value soon (the kernel's EEVDF scheduler gives a heavier thread an earlier deadline).
#pragma once

#include <string>

namespace cudaipc::gst {

struct ThreadPriority {
  unsigned rt = 0;  // SCHED_FIFO at this priority (1-99); 0 leaves the policy as it is
  int nice = 0;     // this nice value (-20 to -1); 0 leaves it as it is
};

// Gives the calling thread `p` where that is higher than what it has (a part already as high is
// left), keeping what it had for restore_thread_priority(). Threads it starts from then on (a
// downstream element's) begin with the default scheduling, not this. "" when done; else why not,
// for each part refused (no CAP_SYS_NICE, an RLIMIT_RTPRIO or RLIMIT_NICE too low, a control
// group without real-time time), and the thread keeps what it had of that part.
std::string raise_thread_priority(const ThreadPriority& p);

// Gives the calling thread back the scheduling and nice value it had before
// raise_thread_priority(), if that changed them: a pooled thread (a pad's task) goes on to run
// other tasks.
void restore_thread_priority() noexcept;

}  // namespace cudaipc::gst
