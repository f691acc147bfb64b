// What the cudaipcfilter multi-process tests share: the model process's and the filter peer's
// command lines, their lines parsed (frames out, the model's answers) and the checks every layout
// makes of them: each frame once, in order, with its own bytes; a result only ever its own; every
// answer that came in time on its frame.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace cudaipc::testing::gstmp {

class ChildProcess;

// From meson (CUDAIPC_GST_FILTER_MODEL); "" when not set.
std::string filter_model_path();
// Why a filter test needing `elements` besides cudaipcfilter cannot run here, or "".
std::string filter_missing(const std::vector<std::string>& elements);

std::vector<std::string> model_argv(const std::string& socket, const std::string& behaviour,
                                    const std::vector<std::string>& extra = {});
// The mp peer's filter role (mp_peer.cpp lists its arguments).
std::vector<std::string> filter_argv(const std::string& socket,
                                     const std::vector<std::string>& args);

// Waits until `model` answered a frame with an id at least `id`; false at the deadline, or as soon
// as `pipeline` has exited (a crash then fails the test at once, its status in `why`).
bool wait_answered(ChildProcess& model, std::uint64_t id, ChildProcess& pipeline,
                   std::chrono::milliseconds timeout, std::string* why);

// CLOCK_MONOTONIC, as the model prints it.
std::uint64_t monotonic_ns();

// A frame as the filter peer ("out ...") or a consumer peer ("frame ...") saw it.
struct OutFrame {
  std::uint64_t id = 0;
  bool ok = false;
  int results = 0;
  long long result = -1;
};
std::vector<OutFrame> out_frames(const std::string& output, const std::string& prefix);

// An answer a model published ("reply ..."): when, and how long after the filter sent the frame.
struct Reply {
  std::uint64_t id = 0;
  bool result = false;  // it carries the frame's result
  std::uint64_t age_ns = 0;
  std::uint64_t at_ns = 0;
  std::uint64_t request_ns() const { return at_ns - age_ns; }
};
std::vector<Reply> replies(const std::string& output);

// "" when `out` is frames first_id .. first_id+count-1, each once, in order, bytes intact;
// otherwise what is wrong.
std::string check_order(const std::vector<OutFrame>& out, std::uint64_t first_id,
                        std::uint64_t count);

// Times around which an answer may be lost without fault: a model killed (its last answers may
// never be read) until its successor serves and the filter has found it.
struct Window {
  std::uint64_t from_ns = 0, to_ns = 0;
  bool covers(std::uint64_t t) const { return t >= from_ns && t <= to_ns; }
};

struct ResultCheck {
  std::size_t required = 0;   // frames whose answer with their result came in time
  std::size_t missing = 0;    // ... that came out without it
  std::size_t forbidden = 0;  // frames answered without a result (garbage) that carry one
  std::size_t wrong = 0;      // frames carrying a result not their own, or more than one
  std::size_t spanned = 0;    // frames out while a model served (between its first and last
                              // answer, outside every window)
  std::size_t spanned_with_result = 0;
  std::string problems;  // the first few, for the failure message
  double coverage() const {
    return spanned ? static_cast<double>(spanned_with_result) / static_cast<double>(spanned) : 0;
  }
};
// `in_time_ns`: an answer published this soon after its frame was sent must be on it
// (in_time_ns() below).
ResultCheck check_results(const std::vector<OutFrame>& out,
                          const std::vector<std::vector<Reply>>& models, std::uint64_t in_time_ns,
                          const std::vector<Window>& windows);

// Frames that went past a model while it served: out between the first and the last frame a model
// answered, yet answered by no model (the filter passed them as if nobody served). Only for
// models that answer every frame they get.
std::size_t bypassed(const std::vector<OutFrame>& out,
                     const std::vector<std::vector<Reply>>& models);

// How long after `since_ns` (a new model serving) the filter sent the first frame that model
// answered, in ms; -1 when it answered none sent after then.
long long first_sent_after_ms(const std::vector<Reply>& model, std::uint64_t since_ns);

// How soon after its frame was sent an answer must be published for a test to require it on the
// frame: a quarter of the filter's timeout, which leaves the filter three quarters to read it, so
// a loaded machine's scheduling does not fail the test while an answer left unread for a whole
// timeout still does.
inline std::uint64_t in_time_ns(std::uint64_t timeout_ms) {
  return timeout_ms * 1000000 / 4;
}

// What a filter peer run with --lend must leave behind (its "filtered" and "stats" lines): no
// frame kept downstream overwritten, no slot still held, as many descriptors as while the first
// model served. `every_frame_lent`: besides, every frame was written into a lent slot and none
// was copied or left unsent for want of a slot (no model held slots past the timeout).
void check_lending(std::uint64_t count, bool every_frame_lent, const std::string& filtered,
                   const std::string& stats);

// A number in a "key=value" line ("latency ... min=5"), -1 when absent or "none".
long long field(const std::string& line, const std::string& key);
// A counter of the filter's stats line ("stats cudaipcfilter-stats, answered=(guint64)5, ...").
long long stat(const std::string& stats_line, const std::string& name);

}  // namespace cudaipc::testing::gstmp
