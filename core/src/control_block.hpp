// The producer region: one memfd per channel that only the producer writes. Consumers map it
// read-only (the memfd is sealed with F_SEAL_FUTURE_WRITE before any consumer gets it), so no
// consumer can change what another one reads. Everything a consumer writes lives in its own
// connection page (conn_page.hpp). Fixed layout with a magic and a version; every field is read
// by other processes through atomics with explicit ordering, and checked before use.
//
// Each slot's meta area (docs/metas.md) follows the block in the same memfd, so it is sealed and
// mapped read-only with it and needs no descriptor or message of its own.
//
// Publication protocol (seq numbers start at 1 and are never reused within a producer run):
//   producer: slots[i].seq = 0 (seq_cst) -> read every page's leases (seq_cst) -> write slot + desc
//             -> slots[i].seq = t (release) -> ring[t % kRing] = t<<8|i (release)
//             -> published = t (release) -> frame_futex++ (seq_cst) -> for each page that says
//             `sleeping` (seq_cst): its frame_wake++ and FUTEX_WAKE on it (conn_page.hpp)
//   consumer: t from published/cursor -> i from ring -> own page leases |= bit i (seq_cst)
//             -> slots[i].seq == t (seq_cst)? lease held : clear bit, retry
// The seq_cst pair (producer: invalidate then read leases; consumer: set lease then read seq) means
// at least one side sees the other, so a slot is never rewritten under a lease.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cudaipc/frame.hpp"
#include "cudaipc/options.hpp"

namespace cudaipc {

inline constexpr std::uint64_t kControlMagic = 0x3243504941445543ull;  // "CUDAIPC2"
inline constexpr std::uint32_t kLayoutVersion = 6;
inline constexpr std::uint32_t kMaxConsumers = 32;
inline constexpr std::uint32_t kRing = 64;  // > kMaxSlots: a ring entry outlives its slot's reuse
inline constexpr unsigned kRingSlotBits = 8;

static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "shared atomics must be lock-free");
static_assert(std::atomic<std::uint32_t>::is_always_lock_free, "shared atomics must be lock-free");
static_assert(kMaxSlots <= 64, "leases are a 64-bit mask");

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
  // Slot i's meta area: meta_size bytes at meta_offset + i * meta_stride from the region's start
  // (after the block, page-aligned). The region is sized to hold every slot's.
  std::uint32_t meta_size;
  std::uint64_t meta_offset;
  std::uint64_t meta_stride;
  // A ChannelRole (layout 5): what the channel carries, checked by consumers that read one kind.
  std::uint32_t role;

  alignas(64) std::atomic<std::uint32_t> frame_futex;  // bumped on publish, eos, format, close
  // Set while the producer sleeps waiting for a release: releasing consumers then wake it.
  std::atomic<std::uint32_t> producer_waiting;

  alignas(64) std::atomic<std::uint64_t> published;  // newest seq
  std::atomic<std::uint64_t> generation;             // newest format generation
  std::atomic<std::uint64_t> eos_after;              // 0: none; else EOS after seq eos_after-1
  std::atomic<std::uint64_t> frames_published;
  std::atomic<std::uint64_t> frames_dropped;
  std::atomic<std::uint32_t> closed;  // producer shut down in order

  alignas(64) std::atomic<std::uint64_t> ring[kRing];  // seq << 8 | slot
  SlotEntry slots[kMaxSlots];
};

static_assert(sizeof(ControlBlock) < (1u << 20), "control block should stay small");

inline std::uint64_t ring_entry(std::uint64_t seq, std::uint32_t slot) {
  return seq << kRingSlotBits | slot;
}

}  // namespace cudaipc
