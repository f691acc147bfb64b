// The socket messages of the connect-time handshake and of format changes. Nothing travels on the
// socket per frame. Every decode checks sizes, counts and ranges and throws Errc::protocol.
//
//   consumer -> producer  Hello   {version, mode}
//   producer -> consumer  Welcome {connection id, slot count, memory kind, lease limit}
//                                 + producer-region fd (read-only) + this connection's page fd
//                                 + the producer backend's sync blob
//   producer -> consumer  Format  {generation, slot set, caps, tensor} + slot blob   (0..n times;
//                                 the blob only the first time this connection meets the set)
//   consumer -> producer  Ready   the consumer backend's sync blob
//   producer -> consumer  Start   {first cursor}
//   producer -> consumer  Refused {error code, reason}   instead of Welcome or Start, or before
//                                 the producer hangs up on a consumer it evicts
//
// A monitor (cudaipc/monitor.hpp) sends StatusRequest instead of Hello, as often as it likes on one
// connection, and gets one Status for each: a snapshot of the channel, with no fds.
//   monitor  -> producer  StatusRequest {flags: 0}
//   producer -> monitor   Status {channel, format, counters} + caps + exe + one record per consumer
#pragma once

#include <cstdint>
#include <string>

#include "cudaipc/error.hpp"
#include "cudaipc/frame.hpp"
#include "cudaipc/monitor.hpp"
#include "cudaipc/options.hpp"
#include "unix_socket.hpp"
#include "wire_blob.hpp"

namespace cudaipc {

inline constexpr std::uint32_t kWireMagic = 0x43504943;  // "CIPC"
inline constexpr std::uint32_t kProtocolVersion = 5;
// Status messages carry at most this many consumer records (the producer's record table) and an
// executable path of at most this many bytes.
inline constexpr std::uint32_t kMaxStatusConsumers = 96;
inline constexpr std::uint32_t kMaxStatusExeBytes = 1024;

enum class MsgType : std::uint32_t {
  hello = 1,
  welcome = 2,
  format = 3,
  ready = 4,
  start = 5,
  refused = 6,
  status_request = 7,
  status = 8,
};

struct HelloMsg {
  ConsumeMode mode;
};

struct WelcomeMsg {
  std::uint32_t consumer_id;  // the producer's name for this connection (logs, stats)
  std::uint32_t slot_count;
  MemoryKind memory;
  std::uint32_t control_size;
  std::uint32_t page_size;
  std::uint32_t max_leases;  // frames this consumer may hold at once
  UniqueFd control_fd;
  UniqueFd page_fd;
  WireBlob sync;
};

struct FormatMsg {
  std::uint64_t generation;
  std::uint64_t set_id;  // slot sets are reused across generations while big enough
  std::uint64_t slot_size;
  Format format;
  bool has_slots = true;  // false: the consumer already holds this set from an earlier message
  WireBlob slots;
};

struct StartMsg {
  std::uint64_t cursor;
};

struct RefusedMsg {
  Errc code;
  std::string reason;
};

void send_hello(int fd, const HelloMsg& m);
void send_welcome(int fd, const WelcomeMsg& m);
void send_format(int fd, const FormatMsg& m);
void send_ready(int fd, const WireBlob& sync);
void send_start(int fd, const StartMsg& m);
void send_status_request(int fd);
// `s.producer_pid` and `s.at` do not travel: the monitor fills them in from its side.
void send_status(int fd, const ChannelStatus& s);
// Best effort: the peer may already be gone.
void send_refused(int fd, Errc code, const std::string& reason) noexcept;

// A received message: its type is checked against the header's magic and version first.
struct Received {
  MsgType type;
  RawMessage raw;
};
// Errc::version_mismatch for another protocol version, Errc::protocol for garbage.
Received parse_header(RawMessage&& raw);

HelloMsg decode_hello(Received& r);
WelcomeMsg decode_welcome(Received& r);
FormatMsg decode_format(Received& r);
WireBlob decode_ready(Received& r);
StartMsg decode_start(Received& r);
void decode_status_request(Received& r);
// Checks every count, size, string and value range; strings come back with control characters
// replaced, so they are safe to print.
ChannelStatus decode_status(Received& r);
// A producer's refusal: what it said, as opposed to what we concluded (a hang-up, a timeout).
class Refused : public Error {
 public:
  Refused(Errc code, std::string reason)
      : Error(code, "producer refused the connection: " + reason), reason_(std::move(reason)) {}
  // The producer's own words (an eviction's start with "evicted: ").
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string reason_;
};
// A listener that accepted and never answered the handshake (Errc::protocol): not a cudaipc
// producer, or one whose process is stopped; a reconnecting consumer waits on it.
class Unanswered : public Error {
 public:
  using Error::Error;
};
// Throws the refusal as Refused, with the producer's code and reason.
[[noreturn]] void throw_refused(Received& r);

// Checks a format a caller or a peer gave (caps length, tensor, slot size) and fills in
// max_frame_size when it is 0.
void validate_format(Format& f, Errc code);

}  // namespace cudaipc
