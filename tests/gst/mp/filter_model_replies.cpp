// What cudaipc-gst-filter-model sends a cudaipcfilter: the result of a frame, and for the hostile
// behaviour everything a broken or malicious model process could send instead (filter_model.hpp).
// None of it may reach another frame's buffer, crash the pipeline or raise a GLib critical.
#include "filter_model_replies.hpp"

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "cudaipc/metas.hpp"
#include "cudaipc/reply.hpp"

namespace filter_model {

using cudaipc::FrameDesc;
using cudaipc::FrameInfo;
using cudaipc::Producer;
using cudaipc::testing::gstmp::Abuse;
using cudaipc::testing::gstmp::kResultField;
using cudaipc::testing::gstmp::kResultMeta;
namespace metas = cudaipc::metas;

namespace {

// The '<' nesting of the deep GstValueArray: far deeper than any parser recursion should go.
constexpr std::size_t kDepth = 30000;
constexpr std::size_t kAreaBytes = 128 * 1024;

void add_result(metas::AreaWriter& w, std::uint64_t id) {
  if (std::uint8_t* b = w.begin_record(metas::RecordKind::custom, kResultMeta, 128)) {
    metas::CustomWriter cw(b, 128);
    cw.add_int64(kResultField, static_cast<std::int64_t>(id));
    w.commit_record(cw.finish());
  }
}

// A custom record `name` with the fields `fill` writes; dropped when it does not fit.
template <typename Fill>
void add_custom(metas::AreaWriter& w, const char* name, std::size_t room, Fill fill) {
  std::uint8_t* b = w.begin_record(metas::RecordKind::custom, name, room);
  if (!b) return;
  metas::CustomWriter cw(b, room);
  fill(cw);
  const std::size_t used = cw.finish();
  if (cw.ok())
    w.commit_record(used);
  else
    w.cancel_record();
}

std::vector<std::uint8_t> deep_value_area(std::uint64_t id) {
  std::vector<std::uint8_t> area(kAreaBytes);
  metas::AreaWriter w(area.data(), area.size());
  const std::string deep = std::string(kDepth, '<') + "1" + std::string(kDepth, '>');
  add_custom(w, "deep-meta", deep.size() + 256,
             [&](metas::CustomWriter& cw) { cw.add_other("deep", "GstValueArray", deep); });
  add_result(w, id);
  area.resize(w.size());
  return area;
}

std::vector<std::uint8_t> bad_names_area(std::uint64_t id) {
  std::vector<std::uint8_t> area(kAreaBytes);
  metas::AreaWriter w(area.data(), area.size());
  // Names GstStructure refuses: neither may reach gst_structure_new_empty as they are.
  add_custom(w, "bad name!", 128, [](metas::CustomWriter& cw) { cw.add_int64("x", 1); });
  add_custom(w, "9lives", 128, [](metas::CustomWriter& cw) { cw.add_int64("x", 1); });
  // GTypes no GValue can hold: g_value_init refuses them with a critical.
  add_custom(w, "odd-types", 256, [](metas::CustomWriter& cw) {
    cw.add_other("nothing", "void", "1");
    cw.add_other("iface", "GInterface", "1");
  });
  add_result(w, id);
  area.resize(w.size());
  // The header's record count (bytes 6-7, docs/metas.md) one more than there are records: the
  // reader runs off the end after the result, which stays good.
  std::uint16_t count;
  std::memcpy(&count, area.data() + 6, 2);
  ++count;
  std::memcpy(area.data() + 6, &count, 2);
  return area;
}

std::vector<std::uint8_t> garbage_area() {
  std::vector<std::uint8_t> area(64);
  for (std::size_t i = 0; i < area.size(); ++i) area[i] = static_cast<std::uint8_t>(0xA5 ^ i);
  return area;
}

// A reply whose user metadata is `tag` (any bytes), carrying frame `id`'s result.
// The reply channel of a server never waits for its filter (it drops a reply it has no room
// for); the forged ones here wait up to 100 ms, as a hostile model that means to be heard would.
template <typename F>
void patiently(F publish) {
  for (int i = 0; i < 5000 && publish() != cudaipc::PublishStatus::published; ++i)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
}

void publish_tagged(Producer& p, const void* tag, std::uint32_t tag_size, std::uint64_t id) {
  const std::vector<std::uint8_t> r = result_area(id);
  FrameInfo info;
  info.user_meta = tag;
  info.user_meta_size = tag_size;
  info.metas = r.data();
  info.metas_size = static_cast<std::uint32_t>(r.size());
  const std::uint8_t byte = 0;
  patiently([&] { return p.publish(&byte, 1, info); });
}

// Tags that name no frame awaiting an answer, each carrying this frame's result: attached to any
// frame, it would show there as another frame's result (or here as a second one).
void publish_forged(Producer& p, const FrameDesc& request, std::uint64_t id) {
  const std::vector<std::uint8_t> r = result_area(id);
  const auto size = static_cast<std::uint32_t>(r.size());
  FrameDesc fake = request;
  fake.seq += 1000;  // never sent
  patiently([&] { return cudaipc::publish_reply(p, fake, r.data(), size); });
  fake = request;
  fake.seq += 1;  // the next frame's seq with this frame's publish time: another run's
  patiently([&] { return cudaipc::publish_reply(p, fake, r.data(), size); });
  fake = request;
  fake.publish_time_ns += 1;  // this seq, another run's publish time
  patiently([&] { return cudaipc::publish_reply(p, fake, r.data(), size); });
  std::uint8_t junk[cudaipc::kReplyTagSize];
  for (std::size_t i = 0; i < sizeof junk; ++i) junk[i] = static_cast<std::uint8_t>(i * 37 + id);
  publish_tagged(p, junk, sizeof junk, id);
  publish_tagged(p, junk, 5, id);  // too short to be a tag
}

}  // namespace

std::vector<std::uint8_t> result_area(std::uint64_t id) {
  std::vector<std::uint8_t> area(256);
  metas::AreaWriter w(area.data(), area.size());
  add_result(w, id);
  area.resize(w.size());
  return area;
}

bool answer_hostile(cudaipc::Server& server, cudaipc::Request& request, std::uint64_t id,
                    Abuse abuse) {
  const FrameDesc desc = request.frame.desc();
  std::vector<std::uint8_t> area;
  switch (abuse) {
    case Abuse::none:
    case Abuse::held:
    case Abuse::forged:
      area = result_area(id);
      break;
    case Abuse::garbage_area:
      area = garbage_area();
      break;
    case Abuse::deep_value:
      area = deep_value_area(id);
      break;
    case Abuse::bad_names:
      area = bad_names_area(id);
      break;
  }
  if (abuse == Abuse::forged)
    server.with_reply_channel(request, [&](Producer& p) { publish_forged(p, desc, id); });
  if (abuse != Abuse::forged)
    return server.reply(request, area.data(), static_cast<std::uint32_t>(area.size()));
  server.with_reply_channel(request, [&](Producer& p) {
    patiently([&] {
      return cudaipc::publish_reply(p, desc, area.data(), static_cast<std::uint32_t>(area.size()));
    });
    // The same tag again, now with the next frame's result: a duplicate.
    const std::vector<std::uint8_t> other = result_area(id + 1);
    patiently([&] {
      return cudaipc::publish_reply(p, desc, other.data(),
                                    static_cast<std::uint32_t>(other.size()));
    });
  });
  request = cudaipc::Request{};
  return true;
}

}  // namespace filter_model
