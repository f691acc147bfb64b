// One consumer's connection to one producer run: the socket, the mapped control block, the
// backend's imports. Frames share it, so releasing a frame works after the Consumer moved on to a
// new producer or was destroyed.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "conn_page.hpp"
#include "control_block.hpp"
#include "cudaipc/options.hpp"
#include "death_watch.hpp"
#include "mapping.hpp"
#include "memory_backend.hpp"
#include "protocol.hpp"

namespace cudaipc {

class ConsumerConnection {
 public:
  struct Generation {
    std::uint64_t generation;
    std::uint64_t set_id;
    Format format;
    std::shared_ptr<ConsumerSlots> slots;
  };

  // Connects and runs the handshake up to Start. Throws Error naming the cause; Errc::interrupted
  // when `wake_fd` becomes readable meanwhile.
  ConsumerConnection(const ConsumerOptions& opts, int wake_fd);
  ~ConsumerConnection();

  // Ends the lease on frame `seq` in `slot` taken by the consumer thread; callable from any thread.
  void release(std::uint32_t slot, std::uint64_t seq) noexcept;
  // Gives back a lease no frame was handed out for (a lost race, a format first).
  void unlease(std::uint64_t bit) noexcept;
  // Reads format messages until generation `g` is known. False when `deadline_ns` passed first;
  // Errc::protocol when the producer has owed it for longer than the handshake timeout.
  bool sync_formats(std::uint64_t g, std::uint64_t deadline_ns);
  const Generation* find_generation(std::uint64_t g) const;
  // Forgets generations older than `g`: frames come in order, so none of theirs can follow.
  void prune_before(std::uint64_t g);

  // Read-only: the producer region is mapped without write access.
  ControlBlock& cb() const noexcept { return *cb_; }
  ConnPage& page() const noexcept { return *page_; }
  std::uint32_t slot_count() const noexcept { return slot_count_; }
  std::uint32_t max_leases() const noexcept { return max_leases_; }
  // Why the producer hung up on us, in words: its refusal (an eviction's reason), a channel it
  // closed, a process that ended; empty when none of these shows.
  std::string parting_words() noexcept;
  std::uint64_t start_cursor() const noexcept { return start_cursor_; }
  std::uint64_t newest_generation() const noexcept {
    return gens_.empty() ? 0 : gens_.back().generation;
  }
  const std::vector<Generation>& generations() const noexcept { return gens_; }
  MemoryKind memory_kind() const noexcept { return memory_->kind(); }
  // Slot i's meta area and its size (checked against the mapped region at connect).
  const std::uint8_t* metas(std::uint32_t slot) const noexcept {
    return meta_base_ + meta_stride_ * slot;
  }
  std::uint32_t meta_size() const noexcept { return meta_size_; }
  ConsumerMemory& memory() const noexcept { return *memory_; }
  int socket() const noexcept { return sock_.get(); }
  // Leaves the producer while frames of this connection may still be held: it frees our place
  // and keeps the slots our page still leases until they are released. The descriptor stays open
  // (shut down) for whatever still holds the connection.
  void hang_up() noexcept;

 private:
  Received receive(std::chrono::milliseconds timeout, const char* waiting_for);
  // The handshake's first answer; silence is Errc::protocol (not a cudaipc producer), not a
  // timeout worth retrying.
  Received receive_welcome(const std::string& path);
  // Reads what the producer left on the socket before hanging up; throws its refusal, if any.
  void throw_parting_refusal();
  bool producer_exited() const noexcept;
  void apply_format(FormatMsg&& m);

  UniqueFd sock_;
  // SO_PEERCRED's: 0 when the producer is in a PID namespace we cannot see.
  pid_t producer_pid_ = 0;
  UniqueFd producer_pidfd_;  // empty where the kernel gives none
  int wake_fd_ = -1;
  Mapping control_;
  ControlBlock* cb_ = nullptr;
  const std::uint8_t* meta_base_ = nullptr;
  std::uint64_t meta_stride_ = 0;
  std::uint32_t meta_size_ = 0;
  Mapping page_map_;
  ConnPage* page_ = nullptr;
  std::uint32_t slot_count_ = 0;
  std::uint32_t max_leases_ = 1;
  std::uint64_t format_owed_since_ = 0;  // when a generation we have no format for was first seen
  std::uint64_t start_cursor_ = 0;
  std::unique_ptr<ConsumerMemory> memory_;
  // Releases GPU work waiting on the producer the moment it dies (CUDA channels with a pidfd).
  std::unique_ptr<DeathWatch> watch_;
  std::vector<Generation> gens_;  // oldest first
};

}  // namespace cudaipc
