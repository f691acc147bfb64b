// The threads the core starts carry names (top -H, ps -L, gdb, /proc/PID/task/TID/comm), so that
// whoever looks into a process embedding the core (an application, a model process, a GStreamer
// pipeline) tells its threads from their own and from the GPU driver's.
#pragma once

#include <pthread.h>

#include <string>

#include "cudaipc/log.hpp"

namespace cudaipc::detail {

// `name`: at most 15 characters (the kernel's limit), "cudaipc-" and the thread's job.
inline void name_this_thread(const char* name) noexcept {
  if (const int rc = ::pthread_setname_np(::pthread_self(), name); rc != 0)
    log(LogLevel::debug,
        ("naming a thread \"" + std::string(name) + "\": error " + std::to_string(rc)).c_str());
}

}  // namespace cudaipc::detail
