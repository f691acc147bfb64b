// One connection's page: a small read-write memfd the producer makes for each consumer and sends
// only to it. It holds everything that consumer writes (leases, cursor, counters, its sleep flag)
// and the words it sleeps on, so a consumer can only ever spoil its own page. The producer never
// trusts it: every value goes through read_conn_page() into a private, validated snapshot.
#pragma once

#include <atomic>
#include <cstdint>

#include "control_block.hpp"

namespace cudaipc {

inline constexpr std::uint64_t kPageMagic = 0x3250434441495043ull;  // "CIPADCP2"

inline constexpr std::uint32_t kSleeping = 1;
inline constexpr std::uint32_t kSleepingAtLimit = 2;

struct ConnPage {
  // Written by the producer before the page is sent; the consumer checks them.
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t page_size;

  // Written by the consumer (all but frame_wake, the producer's).
  alignas(64) std::atomic<std::uint64_t> leases;  // bit per slot it holds now
  std::atomic<std::uint64_t> cursor;              // last seq it acquired (~0: reads no more)
  std::atomic<std::uint64_t> delivered;
  std::atomic<std::uint64_t> skipped;
  // Non-zero while the consumer sleeps on frame_wake: publishing wakes it then. kSleepingAtLimit
  // when it also sleeps on its own release_futex (at its lease limit): only then does a release of
  // its own wake it, so a release while it waits for the next frame (a server's reader, between a
  // model's requests) makes no syscall.
  alignas(64) std::atomic<std::uint32_t> sleeping;
  // Bumped by the producer (then FUTEX_WAKE) on an event for a consumer that says `sleeping`; the
  // consumer sleeps on it. Here, not in the producer region: that one is mapped read-only, and the
  // kernel keys a futex by first asking for write access to its page, which on a read-only mapping
  // fails through the slow path (a VMA lookup under the mmap lock) on every wait. Beside
  // `sleeping`: the producer reads one and bumps the other in a single cache line.
  std::atomic<std::uint32_t> frame_wake;
  // Bumped on every release; the producer sleeps on it (with every other page's) for space.
  alignas(64) std::atomic<std::uint32_t> release_futex;

  // Written by the producer: 1 once it evicted or dropped this connection. It stores it (seq_cst)
  // before it last reads `leases`; the consumer reads it (seq_cst) after setting a lease bit. So
  // a lease either shows in that read, and is honoured, or the consumer sees `revoked` and gives
  // the frame up: it is never handed a slot the producer no longer keeps for it.
  alignas(64) std::atomic<std::uint32_t> revoked;

  // GPU semaphores of a CUDA channel (cuda/semaphores.hpp). Both processes register the page with
  // cuMemHostRegister, so streams write and wait on these words; values are frame seqs, the 32-bit
  // ones cut to their low half and compared cyclically.
  // Written by the producer's stream once a frame's bytes have landed: the newest such seq.
  alignas(64) std::atomic<std::uint32_t> ready;
  // Written by the consumer's CPU when it takes a frame from slot i: that frame's seq. The producer
  // waits on done[i] before rewriting slot i only where this names the frame the slot holds.
  alignas(64) std::atomic<std::uint64_t> acquired[kMaxSlots];
  // Written by the consumer's stream after its last read of a frame from slot i: that frame's seq.
  alignas(64) std::atomic<std::uint32_t> done[kMaxSlots];
};

// What the producer believes about a page after checking it.
struct PageSnapshot {
  std::uint64_t leases = 0;  // only bits of real slots
  std::uint64_t cursor = 0;
  bool retired = false;  // the consumer object is gone: it holds no frame back
  // Set when the page broke a rule no honest consumer breaks; it names the rule.
  const char* violation = nullptr;
};

// Wakes the page's consumer if it sleeps on frame_wake (it re-reads what it waits for on waking).
void wake_page(ConnPage& page) noexcept;

// Reads a page a consumer may have filled with anything. `slot_count` is the channel's,
// `max_leases` the most slots one consumer may hold, `published` the newest seq.
PageSnapshot read_conn_page(const ConnPage& page, std::uint32_t slot_count,
                            std::uint32_t max_leases, std::uint64_t published) noexcept;

}  // namespace cudaipc
