// Pairing replies with the frames that await them (cudaipc/reply.hpp). A reply comes from another
// process: its tag is read field by field from a copy, and a frame is handed out only once.
#include <cstring>

#include "cudaipc/error.hpp"
#include "cudaipc/reply.hpp"

namespace cudaipc {

namespace {

struct Tag {
  std::uint32_t magic;
  std::uint32_t version;
  std::uint64_t seq;
  std::uint64_t publish_time;
};
static_assert(sizeof(Tag) == kReplyTagSize, "the reply tag is 24 bytes, without padding");

}  // namespace

std::string reply_path(const std::string& request_path) {
  return request_path + ".reply";
}

void write_reply_tag(const FrameDesc& request, std::uint8_t out[kReplyTagSize]) noexcept {
  const Tag t{kReplyTagMagic, kReplyTagVersion, request.seq, request.publish_time_ns};
  std::memcpy(out, &t, sizeof t);
}

const char* to_string(ReplyVerdict v) noexcept {
  switch (v) {
    case ReplyVerdict::matched:
      return "matched";
    case ReplyVerdict::malformed:
      return "malformed";
    case ReplyVerdict::unknown:
      return "unknown";
    case ReplyVerdict::stale:
      return "stale";
    case ReplyVerdict::duplicate:
      return "duplicate";
    case ReplyVerdict::foreign:
      return "foreign";
  }
  return "?";
}

ReplyWindow::ReplyWindow(std::uint32_t capacity) {
  if (capacity == 0 || capacity > kMaxInflight)
    throw Error(Errc::invalid_argument, "a reply window holds 1 to " +
                                            std::to_string(kMaxInflight) + " frames, not " +
                                            std::to_string(capacity));
  entries_.resize(capacity);
}

std::uint32_t ReplyWindow::admit(std::uint64_t seq, std::uint64_t publish_time_ns) {
  if (full()) throw Error(Errc::invalid_argument, "the reply window is full");
  if (seq <= last_admitted_)
    throw Error(Errc::invalid_argument, "frame " + std::to_string(seq) + " admitted after frame " +
                                            std::to_string(last_admitted_));
  const std::uint32_t place = (first_ + count_) % capacity();
  entries_[place] = Entry{seq, publish_time_ns, false};
  ++count_;
  last_admitted_ = seq;
  return place;
}

ReplyMatch ReplyWindow::match(const void* user_meta, std::uint32_t size) noexcept {
  ReplyMatch m;
  if (!user_meta || size != kReplyTagSize) return m;
  Tag t;
  std::memcpy(&t, user_meta, sizeof t);
  if (t.magic != kReplyTagMagic || t.version != kReplyTagVersion || t.seq == 0) return m;
  m.seq = t.seq;
  if (t.seq > last_admitted_) {
    m.verdict = ReplyVerdict::unknown;
    return m;
  }
  // Seqs grow along the window: the frame is found by bisection over at most kMaxInflight.
  std::uint32_t lo = 0, hi = count_;
  while (lo < hi) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (entries_[(first_ + mid) % capacity()].seq < t.seq)
      lo = mid + 1;
    else
      hi = mid;
  }
  const std::uint32_t place = (first_ + lo) % capacity();
  if (lo == count_ || entries_[place].seq != t.seq) {
    m.verdict = ReplyVerdict::stale;
    return m;
  }
  Entry& e = entries_[place];
  if (e.publish_time != t.publish_time) {
    m.verdict = ReplyVerdict::foreign;
    return m;
  }
  if (e.answered) {
    m.verdict = ReplyVerdict::duplicate;
    return m;
  }
  e.answered = true;
  m.verdict = ReplyVerdict::matched;
  m.place = place;
  return m;
}

void ReplyWindow::pop() noexcept {
  if (count_ == 0) return;
  first_ = (first_ + 1) % capacity();
  --count_;
}

void ReplyWindow::clear() noexcept {
  first_ = 0;
  count_ = 0;
}

}  // namespace cudaipc
