// The shared control block: one memfd mapping per channel, written by the producer and by each
// consumer in its own entry. Fixed layout with a magic and a version; every field another process
// writes is an atomic with explicit ordering, and every value read from here is checked before use.
//
// Publication protocol (seq numbers start at 1 and are never reused within a producer run):
//   producer: slots[i].seq = 0 (seq_cst) -> re-check leases -> write slot + desc
//             -> slots[i].seq = t (release) -> ring[t % kRing] = t<<8|i (release)
//             -> published = t (release) -> frame_futex++ -> wake if frame_waiters
//   consumer: t from published/cursor -> i from ring -> leases |= bit i (seq_cst)
//             -> slots[i].seq == t (seq_cst)? lease held : clear bit, retry
// The seq_cst pair (producer: invalidate then read leases; consumer: set lease then read seq) means
// at least one side sees the other, so a slot is never rewritten under a lease.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cudaipc/frame.hpp"

namespace cudaipc {

inline constexpr std::uint64_t kControlMagic = 0x3143504941445543ull;  // "CUDAIPC1"
inline constexpr std::uint32_t kLayoutVersion = 1;
inline constexpr std::uint32_t kMaxSlots = 32;
inline constexpr std::uint32_t kMaxConsumers = 32;
inline constexpr std::uint32_t kRing = 64;  // > kMaxSlots: a ring entry outlives its slot's reuse
inline constexpr unsigned kRingSlotBits = 8;

static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "shared atomics must be lock-free");
static_assert(std::atomic<std::uint32_t>::is_always_lock_free, "shared atomics must be lock-free");
static_assert(kMaxSlots <= 64, "leases are a 64-bit mask");

enum class EntryState : std::uint32_t { free = 0, active = 1 };

struct alignas(64) ConsumerEntry {
  std::atomic<std::uint32_t> state;   // EntryState; written by the producer
  std::uint32_t mode;                 // ConsumeMode; written by the producer before activation
  std::atomic<std::uint64_t> leases;  // bit per slot; the consumer sets, clears; producer reclaims
  std::atomic<std::uint64_t> cursor;  // last seq this consumer acquired
  std::atomic<std::uint64_t> delivered;
  std::atomic<std::uint64_t> skipped;
  std::atomic<std::uint32_t> pid;
};

struct alignas(64) SlotEntry {
  std::atomic<std::uint64_t> seq;  // frame in the slot; 0 while empty or being rewritten
  FrameDesc desc;                  // stable while seq != 0 and a lease is held
};

struct ControlBlock {
  // Immutable after creation.
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t block_size;
  std::uint32_t slot_count;
  std::uint32_t max_consumers;
  std::uint32_t memory_kind;
  std::uint32_t reserved;

  alignas(64) std::atomic<std::uint32_t> frame_futex;  // bumped on publish, eos, format, close
  std::atomic<std::uint32_t> frame_waiters;
  alignas(64) std::atomic<std::uint32_t> space_futex;  // bumped on every release
  std::atomic<std::uint32_t> space_waiters;

  alignas(64) std::atomic<std::uint64_t> published;   // newest seq
  std::atomic<std::uint64_t> generation;              // newest format generation
  std::atomic<std::uint64_t> eos_after;               // 0: none; else EOS after seq eos_after-1
  std::atomic<std::uint64_t> frames_published;
  std::atomic<std::uint64_t> frames_dropped;
  std::atomic<std::uint32_t> closed;                  // producer shut down in order

  alignas(64) std::atomic<std::uint64_t> ring[kRing];  // seq << 8 | slot
  SlotEntry slots[kMaxSlots];
  ConsumerEntry consumers[kMaxConsumers];
};

static_assert(sizeof(ControlBlock) < (1u << 20), "control block should stay small");

inline std::uint64_t ring_entry(std::uint64_t seq, std::uint32_t slot) {
  return seq << kRingSlotBits | slot;
}

}  // namespace cudaipc
