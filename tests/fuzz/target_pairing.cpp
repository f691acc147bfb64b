// Reply pairing (cudaipc/reply.hpp, cudaipcfilter): a model process may send any reply tag, in any
// order, any number of times. Against a plain model of the window (a list of frames awaiting
// replies), every verdict is predicted, a match hands out the place of exactly the frame the tag
// names, and no frame is matched twice.
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "cudaipc/reply.hpp"
#include "fuzz.hpp"

namespace cudaipc::fuzz {
namespace {

struct Awaited {
  std::uint64_t seq;
  std::uint64_t time;
  bool answered;
};

Bytes tag_bytes(std::uint32_t magic, std::uint32_t version, std::uint64_t seq, std::uint64_t t) {
  Bytes b(kReplyTagSize);
  std::memcpy(b.data(), &magic, 4);
  std::memcpy(b.data() + 4, &version, 4);
  std::memcpy(b.data() + 8, &seq, 8);
  std::memcpy(b.data() + 16, &t, 8);
  return b;
}

ReplyVerdict predict(const std::deque<Awaited>& model, std::uint64_t last, const Bytes& tag) {
  if (tag.size() != kReplyTagSize) return ReplyVerdict::malformed;
  std::uint32_t magic, version;
  std::uint64_t seq, t;
  std::memcpy(&magic, tag.data(), 4);
  std::memcpy(&version, tag.data() + 4, 4);
  std::memcpy(&seq, tag.data() + 8, 8);
  std::memcpy(&t, tag.data() + 16, 8);
  if (magic != kReplyTagMagic || version != kReplyTagVersion || seq == 0)
    return ReplyVerdict::malformed;
  if (seq > last) return ReplyVerdict::unknown;
  for (const Awaited& a : model) {
    if (a.seq != seq) continue;
    if (a.time != t) return ReplyVerdict::foreign;
    return a.answered ? ReplyVerdict::duplicate : ReplyVerdict::matched;
  }
  return ReplyVerdict::stale;
}

void one_input(Input& in) {
  const std::uint32_t capacity = 1 + in.u8() % kMaxInflight;
  ReplyWindow w(capacity);
  std::deque<Awaited> model;
  std::vector<std::uint64_t> seq_at(capacity, 0);  // the seq each place holds, by the caller
  std::uint64_t last = 0;
  for (int op = 0; op < 256 && in.remaining() > 0; ++op) {
    switch (in.u8() % 6) {
      case 0: {  // admit the next frame (seqs may skip: frames the channel dropped)
        if (w.full()) break;
        const std::uint64_t seq = last + 1 + in.u8() % 4;
        const std::uint64_t t = in.u32();
        const std::uint32_t place = w.admit(seq, t);
        if (place >= capacity) fail("admit gave a place outside the window");
        seq_at[place] = seq;
        model.push_back({seq, t, false});
        last = seq;
        break;
      }
      case 1:    // a well-formed reply near the frames sent, right or wrong publish time
      case 2: {  // a reply of any bytes
        Bytes tag;
        if (in.u8() % 2 == 0 || model.empty()) {
          const std::uint64_t base = model.empty() ? last : model[in.u8() % model.size()].seq;
          const std::uint64_t seq = base + static_cast<std::int8_t>(in.u8() % 7) - 3;
          std::uint64_t t = in.u32();
          for (const Awaited& a : model)
            if (a.seq == seq && in.u8() % 4 != 0) t = a.time;
          tag = tag_bytes(kReplyTagMagic, kReplyTagVersion, seq, t);
        } else {
          tag = in.rest(in.u8() % 40);
        }
        const ReplyVerdict want = predict(model, last, tag);
        const ReplyMatch got = w.match(tag.data(), static_cast<std::uint32_t>(tag.size()));
        if (got.verdict != want)
          fail(std::string("verdict ") + to_string(got.verdict) + ", expected " + to_string(want));
        if (want == ReplyVerdict::matched) {
          if (got.place >= capacity || seq_at[got.place] != got.seq)
            fail("a match handed out another frame's place");
          for (Awaited& a : model)
            if (a.seq == got.seq) a.answered = true;
        }
        break;
      }
      case 3:
        if (model.empty()) break;
        if (w.head_seq() != model.front().seq || w.head_answered() != model.front().answered)
          fail("the window's oldest frame is not the model's");
        w.pop();
        model.pop_front();
        break;
      case 4:
        w.clear();
        model.clear();
        break;
      case 5:  // a frame out of order is the caller's bug, refused
        if (w.full() || last == 0) break;
        try {
          w.admit(last - in.u8() % 2, 0);
          fail("a seq that does not grow was admitted");
        } catch (const Error& e) {
          if (e.code() != Errc::invalid_argument) throw;
        }
        break;
    }
    if (w.size() != model.size()) fail("the window holds another number of frames than sent");
  }
}

std::vector<Bytes> seeds() {
  // capacity 4; admit 1, 2; reply to 2 with the right time; reply again; pop; reply to 1.
  return {SeedBuilder()
              .u8(3)
              .u8(0)
              .u8(0)
              .u32(100)
              .u8(0)
              .u8(0)
              .u32(200)
              .u8(1)
              .u8(0)
              .u8(1)
              .u8(3)
              .u32(0)
              .u8(1)
              .u8(1)
              .u8(0)
              .u8(1)
              .u8(3)
              .u32(0)
              .u8(1)
              .u8(3)
              .u8(1)
              .u8(0)
              .u8(0)
              .u8(3)
              .u32(0)
              .u8(1)
              .done()};
}

}  // namespace

const Target& target() {
  static const Target t{"pairing", nullptr, one_input, seeds, {}};
  return t;
}

}  // namespace cudaipc::fuzz
