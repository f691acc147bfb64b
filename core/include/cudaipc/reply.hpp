// Replies to frames (docs/protocol.md, "Replies"): a model process answers the frames of a
// request channel on a reply channel of its own, one reply frame per request, carrying the
// results in its meta area and, in its user metadata, a tag naming the request it answers.
// cudaipcfilter publishes the requests and pairs the replies with its frames (ReplyWindow);
// cudaipc::Server (server.hpp) is the model side.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cudaipc/frame.hpp"

namespace cudaipc {

// A reply frame's user metadata: the request's seq and publish time, which together name one
// frame of one producer run (seqs restart with every run of the requesting pipeline).
inline constexpr std::uint32_t kReplyTagMagic = 0x50524943;  // "CIRP"
inline constexpr std::uint32_t kReplyTagVersion = 1;
inline constexpr std::uint32_t kReplyTagSize = 24;  // magic, version, seq, publish time
// The most frames a ReplyWindow keeps awaiting replies.
inline constexpr std::uint32_t kMaxInflight = 64;

// The reply channel of a request channel: "<path>.reply", created by the model process.
std::string reply_path(const std::string& request_path);

// A model process that serves every channel of a directory (cudaipc::Server with `directory`)
// holds a lock on this file there for as long as it does: a filter that starts in the directory
// learns from it that a model is about to take its channel, and waits for it.
inline constexpr const char* kServerMarkName = ".cudaipc-server";
std::string server_mark_path(const std::string& directory);
// Whether a live server watches the directory of `request_path` (the filter's socket-path).
// Errc::system when the mark cannot be read for another reason than its absence.
bool directory_served(const std::string& request_path);

// The tag of a reply to `request` (written into `out`, kReplyTagSize bytes).
void write_reply_tag(const FrameDesc& request, std::uint8_t out[kReplyTagSize]) noexcept;

enum class ReplyVerdict : std::uint32_t {
  matched,    // answers a frame awaiting its reply: `place` is that frame's
  malformed,  // no reply tag (size, magic or version wrong)
  unknown,    // names a frame this run never sent
  stale,      // names a frame no longer awaited (given up on, or answered and gone)
  duplicate,  // names a frame already answered
  foreign,    // the seq of a frame awaited, but another run's (its publish time differs)
};
const char* to_string(ReplyVerdict v) noexcept;

struct ReplyMatch {
  ReplyVerdict verdict = ReplyVerdict::malformed;
  std::uint32_t place = 0;  // matched only
  std::uint64_t seq = 0;    // the seq the tag names (0 when malformed)
};

// The frames of one requester awaiting replies, oldest first, at most `capacity`. Each frame has a
// place (0 .. capacity-1) that stays its own until pop(), so a caller keeps its own per-frame data
// in an array beside the window. Replies are untrusted: match() checks the tag and never hands
// out a place for a reply that does not name a frame awaited, nor one already answered. No
// allocation after construction.
class ReplyWindow {
 public:
  explicit ReplyWindow(std::uint32_t capacity);  // 1 .. kMaxInflight

  std::uint32_t capacity() const noexcept { return static_cast<std::uint32_t>(entries_.size()); }
  std::uint32_t size() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }
  bool full() const noexcept { return count_ == capacity(); }

  // Frame `seq`, published at `publish_time_ns`, now awaits its reply: its place. Seqs must grow
  // (Errc::invalid_argument otherwise, and when full).
  std::uint32_t admit(std::uint64_t seq, std::uint64_t publish_time_ns);
  // Matches a reply by its user metadata; a match marks the frame answered.
  ReplyMatch match(const void* user_meta, std::uint32_t size) noexcept;
  // The oldest frame's place and whether it was answered; only when not empty.
  std::uint32_t head() const noexcept { return first_; }
  bool head_answered() const noexcept { return entries_[first_].answered; }
  std::uint64_t head_seq() const noexcept { return entries_[first_].seq; }
  // The oldest frame leaves the window (passed on, answered or not).
  void pop() noexcept;
  // Every frame leaves (flush); later replies to them are stale.
  void clear() noexcept;

 private:
  struct Entry {
    std::uint64_t seq = 0;
    std::uint64_t publish_time = 0;
    bool answered = false;
  };
  std::vector<Entry> entries_;
  std::uint32_t first_ = 0;
  std::uint32_t count_ = 0;
  std::uint64_t last_admitted_ = 0;
};

}  // namespace cudaipc
