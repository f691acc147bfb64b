// cudaipc-gst-filter-model: a model process for cudaipcfilter written against the public C++ API
// (cudaipc::Server), serving the frames of the mp peer's filter role (ids in their pixels,
// frame_pattern.hpp). It reports on stdout, one fact per line, so a test waits on facts:
//   cudaipc-gst-filter-model --socket P [--behaviour good|hostile] [--abuse all|replies|records]
//                            [--stall-id I --stall-ms M] [--timeout-s T]
//   cudaipc-gst-filter-model --directory D [...]: serves every channel that appears in D instead
//     "serving" once its reply channel exists (D: once it watches D); per request whose pixels are
//     not frame_pattern's, "bad-request seq=S"; per answer published, "reply id=I result=R age_us=A
//     at_ns=T": whether it carries the frame's result, how long after the filter published the
//     frame it went out, and when (CLOCK_MONOTONIC, which the test shares); "reply-refused id=I"
//     when the reply channel was full. good: every frame answered at once with its result. hostile:
//     per filter_model.hpp (--abuse: which of it). --stall-id: before answering that frame, sleep M
//     ms
//     ("stalling ID").
// Runs until killed or T seconds (60) have passed; exit 0 then, 1 on a bad argument or error.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <thread>

#include "../../peers/peer_args.hpp"
#include "filter_model.hpp"
#include "filter_model_replies.hpp"
#include "frame_pattern.hpp"

namespace {

using cudaipc::testing::gstmp::Abuse;
using cudaipc::testing::gstmp::abuse_for;
using cudaipc::testing::gstmp::AbuseSet;
using cudaipc::testing::gstmp::answer_has_result;
using Clock = std::chrono::steady_clock;

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count());
}

class Model {
 public:
  Model(cudaipc::Server& server, bool hostile, AbuseSet set, std::uint64_t stall_id,
        std::uint64_t stall_ms)
      : server_(server), hostile_(hostile), set_(set), stall_id_(stall_id), stall_ms_(stall_ms) {}

  void take(cudaipc::Request request) {
    const auto* data = request.frame.data();
    const std::uint64_t bytes = request.frame.size();
    if (bytes < cudaipc::testing::gstmp::kIdBytes ||
        !cudaipc::testing::gstmp::frame_intact(data, bytes)) {
      std::printf("bad-request seq=%llu\n", static_cast<unsigned long long>(request.frame.seq()));
      request = cudaipc::Request{};
      return;
    }
    const std::uint64_t id = cudaipc::testing::gstmp::frame_id(data);
    if (stall_id_ && id == stall_id_) {
      std::printf("stalling %llu\n", static_cast<unsigned long long>(id));
      std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms_));
    }
    if (!hostile_) {
      answer(request, id, Abuse::none, false);
      return;
    }
    const Abuse abuse = abuse_for(id, set_);
    if (abuse == Abuse::held) {
      held_.emplace(std::move(request));
      held_id_ = id;
      return;
    }
    answer(request, id, abuse, true);
    if (held_) {  // the held frame's answer comes after its successor's
      answer(*held_, held_id_, Abuse::held, true);
      held_.reset();
    }
  }

 private:
  void answer(cudaipc::Request& request, std::uint64_t id, Abuse abuse, bool hostile) {
    const std::uint64_t published = request.frame.desc().publish_time_ns;
    bool sent;
    if (hostile) {
      sent = filter_model::answer_hostile(server_, request, id, abuse);
    } else {
      const std::vector<std::uint8_t> r = filter_model::result_area(id);
      sent = server_.reply(request, r.data(), static_cast<std::uint32_t>(r.size()));
    }
    const std::uint64_t at = now_ns();
    if (!sent) {
      std::printf("reply-refused id=%llu\n", static_cast<unsigned long long>(id));
      return;
    }
    std::printf("reply id=%llu result=%d age_us=%llu at_ns=%llu\n",
                static_cast<unsigned long long>(id), !hostile || answer_has_result(abuse) ? 1 : 0,
                static_cast<unsigned long long>(at > published ? (at - published) / 1000 : 0),
                static_cast<unsigned long long>(at));
  }

  cudaipc::Server& server_;
  bool hostile_;
  AbuseSet set_;
  std::uint64_t stall_id_, stall_ms_;
  std::optional<cudaipc::Request> held_;
  std::uint64_t held_id_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  // Lines must reach the test as they happen, not when a buffer fills.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  peer::Args a(argc, argv, 1);
  const std::string behaviour = a.str("behaviour", "good");
  const std::string abuse = a.str("abuse", "all");
  const std::string directory = a.str("directory");
  if ((a.str("socket").empty() == directory.empty()) ||
      (behaviour != "good" && behaviour != "hostile") ||
      (abuse != "all" && abuse != "replies" && abuse != "records")) {
    std::fprintf(stderr, "usage: %s --socket P|--directory D [--behaviour good|hostile] ...\n",
                 argv[0]);
    return 1;
  }
  const AbuseSet set = abuse == "replies"   ? AbuseSet::replies
                       : abuse == "records" ? AbuseSet::records
                                            : AbuseSet::all;
  const auto deadline = Clock::now() + std::chrono::seconds(a.num("timeout-s", 60));
  try {
    cudaipc::ServerOptions o;
    o.path = a.str("socket");
    o.directory = directory;
    // Room for the hostile replies around each answer while the filter reads them, and for the
    // deep GstValueArray's text.
    o.reply_slots = 32;
    o.reply_meta_size = 256 * 1024;
    cudaipc::Server server(o);
    std::printf("serving\n");
    Model model(server, behaviour == "hostile", set, a.num("stall-id", 0), a.num("stall-ms", 0));
    while (Clock::now() < deadline) {
      cudaipc::ServerEvent e = server.next(std::chrono::milliseconds(50));
      if (e.type == cudaipc::ServerEventType::request) model.take(std::move(e.request));
      if (e.type == cudaipc::ServerEventType::eos) std::printf("eos\n");
    }
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return 0;
}
