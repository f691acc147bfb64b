// A real-time priority for the threads that carry answered frames on (cudaipcfilter's
// rt-priority): on a machine whose CPUs the pipelines keep busy, a woken thread of the default
// policy may wait milliseconds for one, where a SCHED_FIFO thread runs at once.
#pragma once

#include <string>

namespace cudaipc::gst {

// Puts the calling thread on SCHED_FIFO at `priority` (1-99), keeping what it had for
// restore_thread_priority(). "" when done; else why not (no CAP_SYS_NICE, RLIMIT_RTPRIO too low),
// and the thread keeps its scheduling.
std::string raise_thread_priority(unsigned priority);

// Gives the calling thread back the scheduling it had before raise_thread_priority(), if that
// raised it: a pooled thread (a pad's task) goes on to run other tasks.
void restore_thread_priority() noexcept;

}  // namespace cudaipc::gst
