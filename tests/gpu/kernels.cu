// Test-side kernels, built to a fatbin at build time and loaded with cuModuleLoadData, so the test
// binaries link neither libcudart nor libcuda. extern "C" keeps the names cuModuleGetFunction
// looks up unmangled. Every kernel is a grid-stride loop over 8-byte words plus a byte tail.
#include <cstdint>

namespace {

// The formula of tests/common/pattern.hpp's pattern_word; a test checks that GPU-filled bytes pass
// the host's check_pattern, so the two cannot drift apart unnoticed.
__device__ __forceinline__ std::uint64_t pattern_word(std::uint64_t seq, std::uint64_t index) {
  std::uint64_t x = seq * 0x9E3779B97F4A7C15ull + index * 0xBF58476D1CE4E5B9ull + 1;
  x ^= x >> 31;
  return x;
}

__device__ __forceinline__ std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ void spin_for(std::uint64_t ns) {
  const std::uint64_t start = global_ns();
  while (global_ns() - start < ns) {
  }
}

__device__ std::uint64_t thread_index() {
  return std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
}
__device__ std::uint64_t thread_count() { return std::uint64_t{gridDim.x} * blockDim.x; }

__device__ void fill(std::uint8_t* dst, std::uint64_t bytes, std::uint64_t seq) {
  const std::uint64_t words = bytes / 8;
  auto* w = reinterpret_cast<std::uint64_t*>(dst);
  for (std::uint64_t i = thread_index(); i < words; i += thread_count()) w[i] = pattern_word(seq, i);
  for (std::uint64_t i = words * 8 + thread_index(); i < bytes; i += thread_count())
    dst[i] = static_cast<std::uint8_t>(pattern_word(seq, i) & 0xff);
}

// Mismatching words (and tail bytes) seen by this thread.
__device__ std::uint64_t count_mismatches(const std::uint8_t* src, std::uint64_t bytes,
                                          std::uint64_t seq) {
  const std::uint64_t words = bytes / 8;
  const auto* w = reinterpret_cast<const volatile std::uint64_t*>(src);
  std::uint64_t bad = 0;
  for (std::uint64_t i = thread_index(); i < words; i += thread_count())
    bad += w[i] != pattern_word(seq, i);
  const volatile std::uint8_t* b = src;
  for (std::uint64_t i = words * 8 + thread_index(); i < bytes; i += thread_count())
    bad += b[i] != static_cast<std::uint8_t>(pattern_word(seq, i) & 0xff);
  return bad;
}

__device__ void add(unsigned long long* counter, std::uint64_t n) {
  if (n) atomicAdd(counter, static_cast<unsigned long long>(n));
}

}  // namespace

extern "C" __global__ void fill_pattern(std::uint8_t* dst, std::uint64_t bytes,
                                        std::uint64_t seq) {
  fill(dst, bytes, seq);
}

// Adds the number of wrong words to counters[0].
extern "C" __global__ void verify_pattern(const std::uint8_t* src, std::uint64_t bytes,
                                          std::uint64_t seq, unsigned long long* counters) {
  add(&counters[0], count_mismatches(src, bytes, seq));
}

// A writer that is still busy when its launch returns: every thread spins `spin_ns` before it
// writes, so a reader that is not ordered after this kernel sees the previous frame.
extern "C" __global__ void slow_fill(std::uint8_t* dst, std::uint64_t bytes, std::uint64_t seq,
                                     std::uint64_t spin_ns) {
  spin_for(spin_ns);
  fill(dst, bytes, seq);
}

// A reader that holds on to the slot: verifies (wrong words to counters[0]), spins `spin_ns`, then
// verifies again (words changed meanwhile to counters[1]): a producer that overwrites a slot its
// consumer still reads shows up in counters[1].
extern "C" __global__ void slow_read(const std::uint8_t* src, std::uint64_t bytes,
                                     std::uint64_t seq, std::uint64_t spin_ns,
                                     unsigned long long* counters) {
  add(&counters[0], count_mismatches(src, bytes, seq));
  spin_for(spin_ns);
  add(&counters[1], count_mismatches(src, bytes, seq));
}
