#include "filter_support.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "child_process.hpp"
#include "mp_support.hpp"

namespace cudaipc::testing::gstmp {

namespace {

// The "key=value" tokens of a line, after its first word.
std::map<std::string, std::string> tokens(const std::string& line) {
  std::map<std::string, std::string> out;
  std::istringstream in(line);
  std::string t;
  in >> t;
  while (in >> t) {
    const auto eq = t.find('=');
    if (eq != std::string::npos) out[t.substr(0, eq)] = t.substr(eq + 1);
  }
  return out;
}

std::vector<std::string> lines_starting(const std::string& output, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line))
    if (line.compare(0, prefix.size(), prefix) == 0) out.push_back(line);
  return out;
}

long long num(const std::map<std::string, std::string>& t, const std::string& key) {
  const auto it = t.find(key);
  return it == t.end() ? -1 : std::strtoll(it->second.c_str(), nullptr, 10);
}

}  // namespace

std::string filter_model_path() {
  const char* v = std::getenv("CUDAIPC_GST_FILTER_MODEL");
  return v ? v : "";
}

std::string filter_missing(const std::vector<std::string>& elements) {
  std::vector<std::string> all{"cudaipcfilter"};
  all.insert(all.end(), elements.begin(), elements.end());
  const std::string why = missing_peer(all);
  if (!why.empty()) return why;
  const std::string model = filter_model_path();
  if (model.empty() || ::access(model.c_str(), X_OK) != 0)
    return "cudaipc-gst-filter-model is not built (CUDAIPC_GST_FILTER_MODEL='" + model + "')";
  return "";
}

std::vector<std::string> model_argv(const std::string& socket, const std::string& behaviour,
                                    const std::vector<std::string>& extra) {
  std::vector<std::string> argv{filter_model_path(), "--socket", socket, "--behaviour", behaviour};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

std::vector<std::string> filter_argv(const std::string& socket,
                                     const std::vector<std::string>& args) {
  std::vector<std::string> all{"filter", "--socket", socket};
  all.insert(all.end(), args.begin(), args.end());
  return peer_argv(all);
}

bool wait_answered(ChildProcess& model, std::uint64_t id, ChildProcess& pipeline,
                   std::chrono::milliseconds timeout, std::string* why) {
  std::size_t from = 0;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!pipeline.running()) {
      const auto st = pipeline.wait_exit(std::chrono::milliseconds(0));
      *why = "the pipeline ended (" + (st ? describe_status(*st) : std::string("?")) +
             ") before the model answered frame " + std::to_string(id);
      return false;
    }
    const auto line = model.wait_line("reply id=", std::chrono::milliseconds(100), &from);
    if (line && field(*line, "id") >= static_cast<long long>(id)) return true;
  }
  *why = "the model did not answer frame " + std::to_string(id) + " in time";
  return false;
}

std::uint64_t monotonic_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

std::vector<OutFrame> out_frames(const std::string& output, const std::string& prefix) {
  std::vector<OutFrame> out;
  for (const std::string& line : lines_starting(output, prefix)) {
    const auto t = tokens(line);
    OutFrame f;
    f.id = static_cast<std::uint64_t>(num(t, "id"));
    f.ok = num(t, "ok") == 1;
    f.results = static_cast<int>(num(t, "results"));
    f.result = num(t, "result");
    out.push_back(f);
  }
  return out;
}

std::vector<Reply> replies(const std::string& output) {
  std::vector<Reply> out;
  for (const std::string& line : lines_starting(output, "reply ")) {
    const auto t = tokens(line);
    Reply r;
    r.id = static_cast<std::uint64_t>(num(t, "id"));
    r.result = num(t, "result") == 1;
    r.age_ns = static_cast<std::uint64_t>(num(t, "age_us")) * 1000;
    r.at_ns = static_cast<std::uint64_t>(num(t, "at_ns"));
    out.push_back(r);
  }
  return out;
}

std::string check_order(const std::vector<OutFrame>& out, std::uint64_t first_id,
                        std::uint64_t count) {
  std::ostringstream why;
  if (out.size() != count) why << out.size() << " frames out of " << count << "; ";
  std::size_t bad = 0;
  for (std::size_t i = 0; i < out.size() && bad < 5; ++i) {
    if (out[i].id != first_id + i) {
      why << "frame " << i << " is id " << out[i].id << " (want " << first_id + i << "); ";
      ++bad;
    } else if (!out[i].ok) {
      why << "frame " << out[i].id << " has bytes not its own; ";
      ++bad;
    }
  }
  return why.str();
}

ResultCheck check_results(const std::vector<OutFrame>& out,
                          const std::vector<std::vector<Reply>>& models, std::uint64_t in_time_ns,
                          const std::vector<Window>& windows) {
  auto excluded = [&](const Reply& r) {
    return std::any_of(windows.begin(), windows.end(),
                       [&](const Window& w) { return w.covers(r.request_ns()); });
  };
  std::map<std::uint64_t, Reply> answer;  // per frame, the answer that counts
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  for (const auto& model : models) {
    std::uint64_t lo = UINT64_MAX, hi = 0;
    for (const Reply& r : model) {
      if (excluded(r)) continue;
      answer[r.id] = r;
      lo = std::min(lo, r.id);
      hi = std::max(hi, r.id);
    }
    if (lo <= hi) spans.emplace_back(lo, hi);
  }
  ResultCheck c;
  auto note = [&](const std::string& s) {
    if (c.problems.size() < 600) c.problems += s + "; ";
  };
  for (const OutFrame& f : out) {
    if (f.results > 1 || (f.results == 1 && f.result != static_cast<long long>(f.id))) {
      ++c.wrong;
      note("frame " + std::to_string(f.id) + " carries " + std::to_string(f.results) +
           " result(s), the first " + std::to_string(f.result));
    }
    const auto it = answer.find(f.id);
    const bool answered_without = it != answer.end() && !it->second.result;
    if (answered_without && f.results) {
      ++c.forbidden;
      note("frame " + std::to_string(f.id) + " carries a result its answer did not hold");
    }
    if (it != answer.end() && it->second.result && it->second.age_ns < in_time_ns) {
      ++c.required;
      if (f.results != 1) {
        ++c.missing;
        note("frame " + std::to_string(f.id) + " answered " +
             std::to_string(it->second.age_ns / 1000000) + " ms after it was sent has no result");
      }
    }
    const bool spanned = std::any_of(spans.begin(), spans.end(), [&](const auto& s) {
      return f.id >= s.first && f.id <= s.second;
    });
    if (spanned && !answered_without) {
      ++c.spanned;
      if (f.results) ++c.spanned_with_result;
    }
  }
  return c;
}

std::size_t bypassed(const std::vector<OutFrame>& out,
                     const std::vector<std::vector<Reply>>& models) {
  std::set<std::uint64_t> answered;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  for (const auto& model : models) {
    if (model.empty()) continue;
    std::uint64_t lo = UINT64_MAX, hi = 0;
    for (const Reply& r : model) {
      answered.insert(r.id);
      lo = std::min(lo, r.id);
      hi = std::max(hi, r.id);
    }
    spans.emplace_back(lo, hi);
  }
  std::size_t n = 0;
  for (const OutFrame& f : out) {
    const bool within = std::any_of(spans.begin(), spans.end(), [&](const auto& s) {
      return f.id >= s.first && f.id <= s.second;
    });
    if (within && !answered.count(f.id)) ++n;
  }
  return n;
}

long long first_sent_after_ms(const std::vector<Reply>& model, std::uint64_t since_ns) {
  long long first = -1;
  for (const Reply& r : model) {
    if (r.request_ns() < since_ns) continue;  // from before it served: still in the channel
    const auto ms = static_cast<long long>((r.request_ns() - since_ns) / 1000000);
    if (first < 0 || ms < first) first = ms;
  }
  return first;
}

long long field(const std::string& line, const std::string& key) {
  const auto t = tokens(line);
  const auto it = t.find(key);
  if (it == t.end() || it->second == "none") return -1;
  return std::strtoll(it->second.c_str(), nullptr, 10);
}

long long stat(const std::string& stats_line, const std::string& name) {
  const std::string key = " " + name + "=(";
  const auto pos = stats_line.find(key);
  if (pos == std::string::npos) return -1;
  const auto close = stats_line.find(')', pos);
  if (close == std::string::npos) return -1;
  return std::strtoll(stats_line.c_str() + close + 1, nullptr, 10);
}

void check_lending(std::uint64_t count, bool every_frame_lent, const std::string& filtered,
                   const std::string& stats) {
  const Summary f(filtered);
  EXPECT_EQ(f.num("held_bad"), 0) << "a frame kept downstream was overwritten: " << filtered;
  EXPECT_GE(f.num("held_most"), 5) << filtered;
  EXPECT_EQ(stat(stats, "slots-held"), 0) << "a lent slot stayed out of the ring: " << stats;
  EXPECT_GT(f.num("fds_mid"), 0) << filtered;
  EXPECT_EQ(f.num("fds_end"), f.num("fds_mid")) << "descriptors leaked: " << filtered;
  EXPECT_GT(stat(stats, "in-place"), static_cast<long long>(count / 2)) << stats;
  if (!every_frame_lent) return;
  EXPECT_EQ(f.num("lent"), static_cast<long long>(count))
      << "upstream wrote a frame into memory that was not a lent slot: " << filtered;
  EXPECT_EQ(stat(stats, "copied"), 0) << stats;
  EXPECT_EQ(stat(stats, "not-sent"), 0) << "no free slot within the timeout: " << stats;
}

}  // namespace cudaipc::testing::gstmp
