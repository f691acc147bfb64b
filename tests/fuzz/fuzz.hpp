// Fuzz targets for everything that decodes bytes a peer controls. One target = one .cpp that
// defines cudaipc::fuzz::target() plus one line in tests/fuzz/meson.build. The same target runs
// under libFuzzer (clang, -Dfuzz=enabled, libfuzzer_main.cpp) and under a deterministic seeded
// mutation loop that any compiler builds (loop_main.cpp, registered as the meson suite `fuzz`).
//
// What the harness treats as a finding (abort, so libFuzzer saves the input):
//   - any exception other than cudaipc::Error, and any Error whose code the target did not list
//     as a rejection (a peer's garbage must be Errc::protocol, not Errc::system or a crash);
//   - an Error with an empty message;
//   - a file descriptor left open after the input (every received fd must be closed or owned);
//   - whatever the target itself checks with fail() (round trips, predicted verdicts);
//   - under sanitizers, every memory error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cudaipc/error.hpp"

namespace cudaipc::fuzz {

using Bytes = std::vector<std::uint8_t>;

// Reads an input front to back. Past the end every read yields zeros, so a target never has to
// branch on the input's size and short inputs still reach the decoder.
class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t u8() { return static_cast<std::uint8_t>(take_le(1)); }
  std::uint16_t u16() { return static_cast<std::uint16_t>(take_le(2)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(take_le(4)); }
  std::uint64_t u64() { return take_le(8); }
  // Whatever is left, at most `max` bytes.
  Bytes rest(std::size_t max = ~std::size_t{0});
  std::size_t remaining() const { return size_ - pos_; }

 private:
  std::uint64_t take_le(std::size_t n);
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// Builds seeds in the layout Input reads (little-endian).
class SeedBuilder {
 public:
  SeedBuilder& u8(std::uint8_t v) { return le(v, 1); }
  SeedBuilder& u16(std::uint16_t v) { return le(v, 2); }
  SeedBuilder& u32(std::uint32_t v) { return le(v, 4); }
  SeedBuilder& u64(std::uint64_t v) { return le(v, 8); }
  SeedBuilder& bytes(const Bytes& b) {
    out_.insert(out_.end(), b.begin(), b.end());
    return *this;
  }
  Bytes done() { return std::move(out_); }

 private:
  SeedBuilder& le(std::uint64_t v, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
    return *this;
  }
  Bytes out_;
};

struct Target {
  const char* name;
  // Sets up what every input reuses (sockets, /dev/null) before fd counting starts; may be null.
  void (*init)();
  // Runs one input. Throws cudaipc::Error when the code under test rejects it.
  void (*one_input)(Input& in);
  // Valid inputs built by the real encoders; every seed must be accepted.
  std::vector<Bytes> (*seeds)();
  // The error codes a rejection may carry.
  std::vector<Errc> rejections;
};

// Defined by each target's .cpp.
const Target& target();

// A finding: prints `why` with the input's context and aborts.
[[noreturn]] void fail(const std::string& why);

// What one input did, for the loop driver's summary.
enum class Verdict { accepted, rejected };
// Runs target().one_input with the checks listed at the top of this file.
Verdict run_input(const std::uint8_t* data, std::size_t size);
// Calls target().init once; the drivers call it before the first input.
void init_once();
// Where the loop driver is, printed by fail() and on a crash; empty under libFuzzer.
void set_context(std::string context);

// One message as a peer's encoder put it on the wire: `send` writes to one end of a fresh
// SOCK_SEQPACKET pair and the bytes and fd count are read back from the other.
struct Captured {
  Bytes bytes;
  std::size_t fds;
};
Captured capture(const std::function<void(int fd)>& send);

}  // namespace cudaipc::fuzz
