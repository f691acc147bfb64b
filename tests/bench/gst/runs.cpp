// One run: the child processes started, waited for (and killed past the deadline), and their
// reports turned into a row of the table.
#include <sys/stat.h>

#include <stdexcept>

#include "gst_bench.hpp"

namespace gstbench {
namespace {

std::string describe_status(int st) {
  if (st == -1000) return "killed on timeout";
  if (st < 0) return "killed by signal " + std::to_string(-st);
  return "exit status " + std::to_string(st);
}

// A process's CPU per frame in its window, less its probe's own (stamping, reading, checking).
double cpu_per_frame_us(const Kv& kv) {
  const std::uint64_t frames = kv_u64(kv, "window_frames");
  const std::uint64_t cpu = kv_u64(kv, "cpu_ns"), probe = kv_u64(kv, "probe_cpu_ns");
  const std::uint64_t ns = cpu > probe ? cpu - probe : 0;
  return frames ? static_cast<double>(ns) / 1000.0 / static_cast<double>(frames) : 0;
}

double fps_of(const Kv& kv) {
  const std::uint64_t ns = kv_u64(kv, "elapsed_ns");
  return ns ? static_cast<double>(kv_u64(kv, "window_frames")) * 1e9 / static_cast<double>(ns) : 0;
}

std::uint64_t deadline_after(int timeout_s) {
  // The children stop themselves at timeout_s; this is for a child that hangs anyway.
  return mono_ns() + (static_cast<std::uint64_t>(timeout_s) + 10) * 1'000'000'000u;
}

std::vector<std::string> role_args(const char* role, const RunSpec& s) {
  std::vector<std::string> a = {std::string("--role=") + role};
  for (auto& x : s.to_args()) a.push_back(x);
  return a;
}

// Live rows: latency from the moment each frame entered the producer's sink to its arrival at
// the consumer's appsink, and (our elements) where it went: kStages, from the source's reference
// timestamps and the pushed-time probe.
void live_latency(const RunSpec& s, Row& r) {
  const auto sent = read_samples(s.path("sent.u64"));
  const auto arrive = read_samples(s.path("arrive.u64"));
  const std::vector<std::uint64_t> marks[4] = {
      read_samples(s.path("chain.u64")), read_samples(s.path("publish.u64")),
      read_samples(s.path("acquire.u64")), read_samples(s.path("pushed.u64"))};
  for (std::uint64_t i = s.warmup; i < s.total() && i < sent.size() && i < arrive.size(); ++i) {
    if (!arrive[i] || arrive[i] < sent[i]) continue;
    r.lat.push_back(arrive[i] - sent[i]);
    std::uint64_t t[6] = {sent[i], 0, 0, 0, 0, arrive[i]};
    bool all = true;
    for (int k = 0; k < 4; ++k) {
      t[k + 1] = i < marks[k].size() ? marks[k][i] : 0;
      all = all && t[k + 1] != 0;
    }
    if (!all) continue;
    for (int k = 0; k < 5; ++k) r.stages[k].push_back(t[k + 1] > t[k] ? t[k + 1] - t[k] : 0);
  }
}

}  // namespace

void add_note(Row& r, const std::string& n) {
  if (n.empty()) return;
  r.note += (r.note.empty() ? "" : "; ") + n;
}

std::string make_dir(const std::string& root, int index, const std::string& id) {
  const std::string d = root + "/" + std::to_string(index) + "-" + id;
  if (::mkdir(d.c_str(), 0700) != 0) throw std::runtime_error("cannot create " + d);
  return d;
}

Row run_baseline(const RunSpec& s, const std::string& label) {
  Row r;
  r.id = std::string(s.feed ? "baseline-appsrc" : "baseline") + (s.cuda ? "-cuda" : "");
  r.label = label;
  r.format = s.format;
  r.ran = true;
  const pid_t pid = spawn_self(role_args("baseline", s));
  const int st = wait_all({pid}, deadline_after(s.timeout_s), 0)[0];
  r.producer = read_kv(s.path("baseline.kv"));
  r.sent = r.received = kv_u64(r.producer, "received");
  r.bad = kv_u64(r.producer, "bad") + kv_u64(r.producer, "stamp_failures");
  r.fps = fps_of(r.producer);
  r.prod_cpu_us = cpu_per_frame_us(r.producer);
  if (s.live_fps) r.lat = read_samples(s.path("lat.u64"));
  r.ok = st == 0 && r.bad == 0 && kv_get(r.producer, "ok") == "1";
  if (st != 0) add_note(r, "baseline " + describe_status(st));
  add_note(r, kv_get(r.producer, "error"));
  add_note(r, kv_get(r.producer, "bad_why"));
  if (kv_u64(r.producer, "stamp_copies")) add_note(r, "stamping copied frames");
  return r;
}

Row run_pair(const Transport& t, const RunSpec& s, double base_fps) {
  Row r;
  r.id = t.id;
  r.label = t.label;
  r.format = s.format;
  r.ran = true;
  const pid_t prod = spawn_self(role_args("producer", s));
  const pid_t cons = spawn_self(role_args("consumer", s));
  // One side failing leaves the other waiting on it: give it 5 s to notice, then kill it.
  const std::vector<int> st = wait_all({prod, cons}, deadline_after(s.timeout_s), 5'000'000'000u);
  r.producer = read_kv(s.path("producer.kv"));
  r.consumer = read_kv(s.path("consumer.kv"));
  r.sent = kv_u64(r.producer, "pushed");
  r.received = kv_u64(r.consumer, "received");
  r.lost = s.total() > r.received ? s.total() - r.received : 0;
  r.bad = kv_u64(r.consumer, "bad") + kv_u64(r.producer, "stamp_failures");
  r.checked = kv_u64(r.consumer, "checked");
  r.fps = fps_of(r.consumer);
  if (r.fps > 0 && base_fps > 0) r.over_source_us = 1e6 / r.fps - 1e6 / base_fps;
  r.prod_cpu_us = cpu_per_frame_us(r.producer);
  r.cons_cpu_us = cpu_per_frame_us(r.consumer);
  r.lat = read_samples(s.path("lat.u64"));
  r.meta = read_samples(s.path("meta.u64"));
  if (s.live_fps) live_latency(s, r);
  r.ok = st[0] == 0 && st[1] == 0 && r.bad == 0 && (t.every_frame ? r.lost == 0 : r.received > 0);
  if (st[0] != 0) add_note(r, "producer " + describe_status(st[0]));
  if (st[1] != 0) add_note(r, "consumer " + describe_status(st[1]));
  add_note(r, kv_get(r.producer, "error"));
  add_note(r, kv_get(r.consumer, "error"));
  add_note(r, kv_get(r.consumer, "bad_why"));
  if (kv_u64(r.producer, "sink_dropped"))
    add_note(r, "sink dropped " + kv_get(r.producer, "sink_dropped"));
  // Which path the frames took: rendered in place in slots or copied in by the sink, and how
  // often the source's ordering put work on the GPU (each a context switch without MPS).
  if (t.cuda && !kv_get(r.producer, "sink_copied").empty())
    add_note(r, "sink in-place " + kv_get(r.producer, "sink_in-place") + " copied " +
                    kv_get(r.producer, "sink_copied"));
  if (t.cuda && !kv_get(r.consumer, "src_gpu-waits").empty())
    add_note(r, "src gpu-waits " + kv_get(r.consumer, "src_gpu-waits") + " gpu-releases " +
                    kv_get(r.consumer, "src_gpu-releases"));
  if (kv_u64(r.producer, "stamp_copies"))
    add_note(r, "stamping copied " + kv_get(r.producer, "stamp_copies") + " frames");
  if (!t.every_frame && r.lost) add_note(r, "newest-frame delivery: losses expected");
  if (t.cuda) add_note(r, std::to_string(r.checked) + " frames downloaded and compared");
  if (t.feed) add_note(r, "unstamped: frame index from the tensor meta's seq");
  if (t.appsink) add_note(r, "app read " + kv_get(r.consumer, "tensors") + " tensor metas");
  return r;
}

}  // namespace gstbench
