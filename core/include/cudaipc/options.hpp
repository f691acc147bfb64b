// How a channel is opened: memory backend, slot count, back-pressure, access control.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace cudaipc {

// Values are part of the wire format: never renumber.
enum class MemoryKind : std::uint32_t { host = 1, cuda = 2 };

enum class CudaExportMode : std::uint32_t { automatic = 0, vmm = 1, legacy = 2 };

// What to do when every slot is leased or unread by an every-frame consumer.
enum class FullPolicy : std::uint32_t { block = 0, drop = 1 };

enum class ConsumeMode : std::uint32_t { every_frame = 0, latest = 1 };

// The most slots a channel has: its control block has room for this many.
inline constexpr std::uint32_t kMaxSlots = 32;

// What a channel carries, as its control block says (docs/protocol.md), so that a reader meant
// for one kind is not handed another's frames. Values are part of the layout: never renumber.
enum class ChannelRole : std::uint32_t {
  frames = 1,    // a producer's stream (cudaipcsink, Producer): for any consumer
  requests = 2,  // a cudaipcfilter's frames, each awaiting a model server's answer
  replies = 3,   // a model server's answers to a filter (<path>.reply)
};

struct CudaOptions {
  // Producer: device ordinal to allocate on (the UUID goes on the wire). Consumer: its own device;
  // -1 means "the producer's device", found by UUID.
  int device = -1;
  CudaExportMode export_mode = CudaExportMode::automatic;
  // Caller-owned CUcontext / CUstream (as void* so this header needs no cuda.h). Null: the
  // device's primary context and a stream the core creates.
  void* context = nullptr;
  void* stream = nullptr;
  // Consumer: wait for the producer's write on the CPU at acquire instead of on the GPU stream.
  bool cpu_wait = false;
};

// A consumer that joined or left a producer (ProducerOptions::on_consumer).
struct ConsumerChange {
  enum class Kind { joined, left, evicted } kind = Kind::joined;
  pid_t pid = 0;  // 0 where its PID namespace is not ours
  ConsumeMode mode = ConsumeMode::every_frame;
  std::string reason;         // why it left or was evicted; empty for joined
  std::size_t consumers = 0;  // connected once this change is counted
};

struct ProducerOptions {
  std::string path;  // empty: default_channel_path("cudaipc")
  std::uint32_t slots = 4;
  MemoryKind memory = MemoryKind::host;
  CudaOptions cuda;
  FullPolicy on_full = FullPolicy::block;
  std::chrono::nanoseconds block_timeout = std::chrono::seconds(1);
  // Socket file mode. 0600 by default; 0660 with allowed_gid opens the channel to a group.
  std::uint32_t socket_mode = 0600;
  std::optional<gid_t> allowed_gid;
  std::uint32_t max_consumers = 16;
  // A consumer that holds publishing back this long (frames it does not release, or an every-frame
  // cursor that does not move) while the producer needs a slot is evicted: disconnected with the
  // reason. Slots it still holds stay out of rotation until it releases them or its process dies,
  // so it never sees a frame change under it. 0: never evict.
  std::chrono::nanoseconds lease_timeout = std::chrono::seconds(5);
  // The most frames one consumer may hold at once; 0: slots - 1 (at least 1), so one stuck
  // consumer never takes the whole ring.
  std::uint32_t max_leases_per_consumer = 0;
  // Bytes of meta area beside each slot (docs/metas.md), in host memory for every memory kind:
  // 0 .. kMaxMetaSize (frame.hpp). Consumers map it read-only.
  std::uint32_t meta_size = 64 * 1024;
  ChannelRole role = ChannelRole::frames;
  // Told on the producer's socket thread each time a consumer joins or leaves (monitors are not
  // consumers): an application hears of its readers without polling stats. It holds that thread
  // up, so it should only hand the news on; what it throws is logged and dropped. Never called
  // once close() or the destructor has begun.
  std::function<void(const ConsumerChange&)> on_consumer;
};

struct ConsumerOptions {
  std::string path;  // empty: default_channel_path("cudaipc")
  ConsumeMode mode = ConsumeMode::every_frame;
  // After the producer goes away, keep trying to connect to a new one on the same path.
  bool reconnect = true;
  // The longest wait between connect attempts: they are 5 ms apart for the first 5 s of a wait
  // (processes started together come up over seconds, and one that appears is met soon), then the
  // wait doubles after each failed one up to this. A producer that turns attempts away is asked
  // less and less often from the start.
  std::chrono::milliseconds reconnect_interval{100};
  // With reconnect: the constructor does not connect (it never waits on a producer, for a
  // GStreamer state change on an application's thread); next() makes the first connect. A path no
  // producer can ever serve (too long, a file, a directory) is still thrown by the constructor.
  // A producer that accepts but does not answer the handshake (its process stopped) is waited
  // for and said once as a refusal (Event::refused), rather than thrown.
  bool connect_later = false;
  CudaOptions cuda;
  // Read only a channel of this role: another is turned away at connect, before the consumer
  // takes a place there (Errc::invalid_argument naming both roles). Empty: any channel.
  std::optional<ChannelRole> role;
};

// $XDG_RUNTIME_DIR/cudaipc/NAME, else /tmp/cudaipc-UID/NAME (the directory is created 0700).
std::string default_channel_path(const std::string& name);

}  // namespace cudaipc
