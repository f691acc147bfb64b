// One consumer's connection to one producer run: the socket, the mapped control block, the
// backend's imports. Frames share it, so releasing a frame works after the Consumer moved on to a
// new producer or was destroyed.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "control_block.hpp"
#include "cudaipc/options.hpp"
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

  // Connects and runs the handshake up to Start. Throws Error naming the cause.
  ConsumerConnection(const ConsumerOptions& opts);
  ~ConsumerConnection();

  // Ends a lease taken by the consumer thread; callable from any thread.
  void release(std::uint32_t slot) noexcept;
  // Reads format messages until generation `g` is known; Errc::protocol if it never comes.
  void sync_formats(std::uint64_t g);
  const Generation* find_generation(std::uint64_t g) const;
  // Forgets generations older than `g`: frames come in order, so none of theirs can follow.
  void prune_before(std::uint64_t g);

  ControlBlock& cb() const noexcept { return *cb_; }
  ConsumerEntry& entry() const noexcept { return cb_->consumers[id_]; }
  std::uint32_t slot_count() const noexcept { return slot_count_; }
  std::uint64_t start_cursor() const noexcept { return start_cursor_; }
  std::uint64_t newest_generation() const noexcept { return gens_.empty() ? 0 : gens_.back().generation; }
  const std::vector<Generation>& generations() const noexcept { return gens_; }
  MemoryKind memory_kind() const noexcept { return memory_->kind(); }
  ConsumerMemory& memory() const noexcept { return *memory_; }
  int socket() const noexcept { return sock_.get(); }

 private:
  Received receive(std::chrono::milliseconds timeout, const char* waiting_for);
  void apply_format(FormatMsg&& m);

  UniqueFd sock_;
  Mapping control_;
  ControlBlock* cb_ = nullptr;
  std::uint32_t id_ = 0;
  std::uint32_t slot_count_ = 0;
  std::uint64_t start_cursor_ = 0;
  std::unique_ptr<ConsumerMemory> memory_;
  std::vector<Generation> gens_;  // oldest first
};

}  // namespace cudaipc
