// Reading a channel's state from outside it (the `cudaipc` tool, monitoring). A monitor asks the
// producer's socket thread for a snapshot of what it already keeps; it takes no consumer place,
// holds no lease and maps nothing, so watching a channel never changes how it runs. The producer
// admits a monitor by the same rules as a consumer (same uid, or the allowed group).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cudaipc/frame.hpp"
#include "cudaipc/options.hpp"

namespace cudaipc {

// One consumer as the producer sees it. Counters other than the id, pid, mode and eviction are the
// consumer's own claims (from its page), clamped to what is possible, shown and never acted on.
struct MonitorConsumer {
  std::uint32_t id = 0;
  pid_t pid = 0;  // in the producer's PID namespace; 0 when it cannot see the consumer's
  ConsumeMode mode = ConsumeMode::every_frame;
  std::uint64_t cursor = 0;     // newest frame it took
  std::uint64_t lag = 0;        // frames published after its cursor
  std::uint64_t delivered = 0;  // frames it took
  std::uint64_t skipped = 0;    // frames it skipped (latest mode)
  std::uint32_t leases = 0;     // slots it holds now
  bool evicted = false;         // cut off; listed while it still holds slots
};

struct ChannelStatus {
  pid_t producer_pid = 0;    // from the socket's credentials, in this process's PID namespace
  std::string producer_exe;  // as the producer reads its /proc/self/exe; may be empty
  MemoryKind memory = MemoryKind::host;
  CudaExportMode export_mode = CudaExportMode::automatic;  // vmm or legacy for CUDA channels
  int device = -1;                                         // CUDA device ordinal; -1: host
  std::uint32_t slot_count = 0;
  std::uint32_t max_consumers = 0;
  std::uint32_t max_leases = 0;  // per consumer
  std::uint32_t meta_size = 0;   // bytes of meta area per slot
  std::uint64_t slot_size = 0;   // 0 before the first format
  std::uint64_t generation = 0;  // 0: no format set yet
  Format format;
  std::uint64_t published = 0;
  std::uint64_t dropped = 0;
  // Connections turned away because the producer had no file descriptor left (issue #21).
  std::uint64_t descriptor_refusals = 0;
  bool end_of_stream = false;
  std::uint32_t monitors = 0;                // monitor connections, this one included
  std::uint64_t producer_time_ns = 0;        // the producer's CLOCK_MONOTONIC at the snapshot
  std::chrono::steady_clock::time_point at;  // this process's clock when the reply came
  std::vector<MonitorConsumer> consumers;
};

// A monitor connection. Connecting throws like a consumer's connect: Errc::disconnected when no
// producer listens on `path` (a missing or stale socket), Errc::permission_denied when the
// socket's mode or the producer's admission turns us away, Errc::version_mismatch for a producer
// of another protocol version.
class Monitor {
 public:
  explicit Monitor(const std::string& path,
                   std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));
  ~Monitor();
  Monitor(Monitor&&) noexcept;
  Monitor& operator=(Monitor&&) noexcept;
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  // One snapshot; may be called again on the same connection. Errc::disconnected once the
  // producer went away, Errc::timeout when it did not answer in time.
  ChannelStatus status();
  const std::string& path() const noexcept;

 private:
  std::unique_ptr<struct MonitorImpl> impl_;
};

// A snapshot through a connection of its own.
ChannelStatus read_channel_status(
    const std::string& path, std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));

}  // namespace cudaipc
