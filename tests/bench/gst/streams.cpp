// cudaipc-gst-streams: many streams into one consumer process (issue #14, target 7). N producer
// processes, each
//   videotestsrc is-live=true ! video/x-raw,format=NV12,WxH,30/1 [! cudaupload] ! cudaipcringsink
// and one consumer process holding all N branches in one pipeline,
//   cudaipcringsrc mode=every-frame ! fakesink   (x N)
// Each producer stamps every frame's index and CLOCK_MONOTONIC into its first bytes in system
// memory, before any upload; the consumer reads the stamp of every frame of every stream on
// arrival (for CUDA frames a 16-byte download). It reports per stream the frames sent and
// delivered and the latency p50/p99 (stamp to arrival), and for the consumer process its CPU per
// frame and its threads (/proc/self/task) and descriptors (/proc/self/fd): before the pipeline,
// with the N sources playing but none connected, and with all N connected; the differences over
// N are the per-stream cost. It prints Markdown tables and never judges timings: it fails only
// when a frame is lost or wrong, or a process fails.
//   cudaipc-gst-streams [--host] [--streams=N --width=W --height=H] [--seconds=S] [--timeout=T]
// Without --streams/--width/--height it makes two runs: 16 streams at 1920x1080 and 64 at
// 320x240. --host: host-memory channels, no cudaupload (no GPU needed); else CUDA channels, and
// without a usable GPU it says why and exits 0. docs/benchmarks.md has the device command.
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "gst_bench.hpp"
#include "pipeline.hpp"
#include "proc_stats.hpp"

namespace gstbench {
namespace {

constexpr int kFps = 30;

struct Options {
  int streams = 16, width = 1920, height = 1080;
  int seconds = 10;
  int timeout_s = 120;  // a run's limit beyond `seconds`: 64 CUDA processes take a while to start
  bool host = false;
  bool sized = false;  // --streams, --width or --height given: one run, not the two defaults
  std::string dir;     // children: the run's directory
  int index = -1;      // producer: its stream
};

std::string socket_path(const Options& o, int i) {
  return o.dir + "/s" + std::to_string(i);
}
std::string file(const Options& o, const std::string& name) {
  return o.dir + "/" + name;
}
std::uint64_t seconds_ns(int s) {
  return static_cast<std::uint64_t>(s) * 1'000'000'000u;
}

std::vector<std::string> child_args(const Options& o, const std::string& role) {
  std::vector<std::string> a = {"--role=" + role,
                                "--dir=" + o.dir,
                                "--streams=" + std::to_string(o.streams),
                                "--width=" + std::to_string(o.width),
                                "--height=" + std::to_string(o.height),
                                "--seconds=" + std::to_string(o.seconds),
                                "--timeout=" + std::to_string(o.timeout_s),
                                "--index=" + std::to_string(o.index)};
  if (o.host) a.push_back("--host");
  return a;
}

FrameCheck frame_check(const Options& o) {
  FrameCheck fc;
  gst_video_info_set_format(&fc.info, GST_VIDEO_FORMAT_NV12, static_cast<guint>(o.width),
                            static_cast<guint>(o.height));
  return fc;
}

// ---- producer ----

struct Stamper {
  FrameCheck fc;
  std::uint32_t next = 0;
  std::uint64_t failures = 0, copies = 0;
};

GstPadProbeReturn stamp_probe(GstPad*, GstPadProbeInfo* info, gpointer data) {
  auto* s = static_cast<Stamper*>(data);
  GstBuffer* buf = GST_PAD_PROBE_INFO_BUFFER(info);
  bool copied = false;
  if (!write_stamp(&buf, s->fc, Stamp{mono_ns(), s->next, kStampMagic}, &copied)) ++s->failures;
  if (copied) ++s->copies;
  GST_PAD_PROBE_INFO_DATA(info) = buf;
  ++s->next;
  return GST_PAD_PROBE_OK;
}

guint sink_consumers(GstElement* pipe) {
  Ref<GstElement> sink(gst_bin_get_by_name(GST_BIN(pipe), "sink"));
  GstStructure* st = nullptr;
  g_object_get(sink.get(), "stats", &st, nullptr);
  guint n = 0;
  if (st) gst_structure_get_uint(st, "consumers", &n);
  if (st) gst_structure_free(st);
  return n;
}

// Pops the bus for up to `timeout`: an error ends it (false, the reason in *error); EOS sets *eos.
bool pop_bus(GstElement* pipe, GstClockTime timeout, bool* eos, std::string* error,
             std::string* warnings = nullptr) {
  Ref<GstBus> bus(gst_element_get_bus(pipe));
  for (;;) {
    GstMessage* msg = gst_bus_timed_pop_filtered(
        bus.get(), timeout,
        static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR | GST_MESSAGE_WARNING));
    if (!msg) return true;
    timeout = 0;
    bool ok = true;
    if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
      *error = describe_error(msg);
      ok = false;
    } else if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_WARNING) {
      if (warnings && warnings->size() < 2000) *warnings += describe_error(msg) + "; ";
    } else {
      *eos = true;
    }
    gst_message_unref(msg);
    if (!ok) return false;
  }
}

int stream_producer(const Options& o) {
  die_with_parent();
  const std::uint64_t deadline = mono_ns() + seconds_ns(o.seconds + o.timeout_s);
  const std::string desc =
      "videotestsrc name=vsrc is-live=true pattern=solid-color foreground-color=" +
      std::to_string(kForeground) + " ! video/x-raw,format=NV12,width=" + std::to_string(o.width) +
      ",height=" + std::to_string(o.height) + ",framerate=" + std::to_string(kFps) + "/1" +
      (o.host ? "" : " ! cudaupload") +
      " ! cudaipcringsink name=sink sync=false socket-path=" + socket_path(o, o.index) +
      (o.host ? " ipc-mode=host" : "");
  Stamper stamper{frame_check(o)};
  Kv kv;
  std::string error;
  bool eos = false;
  Pipeline pipe = launch(desc);
  gst_pad_add_probe(pad_of(pipe.get(), "vsrc", "src").get(), GST_PAD_PROBE_TYPE_BUFFER, stamp_probe,
                    &stamper, nullptr);
  // PAUSED starts the sink, which listens; frames flow only once the consumer is in, so it gets
  // the first one too.
  if (set_state(pipe.get(), GST_STATE_PAUSED, &error)) {
    while (sink_consumers(pipe.get()) == 0 && mono_ns() < deadline && error.empty())
      pop_bus(pipe.get(), 5 * GST_MSECOND, &eos, &error);
    if (error.empty() && mono_ns() >= deadline) error = "no consumer connected";
    if (error.empty() && set_state(pipe.get(), GST_STATE_PLAYING, &error)) {
      const std::uint64_t stop = mono_ns() + seconds_ns(o.seconds);
      while (error.empty() && mono_ns() < stop &&
             pop_bus(pipe.get(), 20 * GST_MSECOND, &eos, &error)) {
      }
      if (error.empty()) gst_element_send_event(pipe.get(), gst_event_new_eos());
      while (error.empty() && !eos && mono_ns() < deadline &&
             pop_bus(pipe.get(), 20 * GST_MSECOND, &eos, &error)) {
      }
      if (error.empty() && !eos) error = "no EOS from the producer's own pipeline";
    }
  }
  kv["ok"] = error.empty() ? "1" : "0";
  kv["error"] = error;
  kv["sent"] = std::to_string(stamper.next);
  kv["stamp_failures"] = std::to_string(stamper.failures);
  kv["stamp_copies"] = std::to_string(stamper.copies);
  write_kv(file(o, "producer-" + std::to_string(o.index) + ".kv"), kv);
  // The consumer reads the last frames from our slots: they stay until it is done.
  if (error.empty()) wait_for_file(file(o, "consumer.done"), deadline);
  return error.empty() ? 0 : 1;
}

// ---- consumer ----

struct Counts {
  std::size_t threads = 0, fds = 0;
};

// The fewest threads and descriptors over a few samples: a source that retries its connection
// holds a socket for a moment.
Counts counts() {
  Counts c{~std::size_t{0}, ~std::size_t{0}};
  for (int i = 0; i < 5; ++i) {
    c.threads = std::min(c.threads, cudaipc::testing::thread_count());
    c.fds = std::min(c.fds, cudaipc::testing::open_fd_count());
    g_usleep(20000);
  }
  return c;
}

// One stream's arrivals, checked and timed in its source's streaming thread.
struct Arrivals {
  FrameCheck fc;
  std::mutex mu;  // the streaming thread writes, the main thread reads
  std::uint32_t next = 0;
  std::uint64_t received = 0, bad = 0, probe_cpu = 0;
  std::string first_bad;
  std::vector<std::uint64_t> lat;
};

GstPadProbeReturn arrival_probe(GstPad*, GstPadProbeInfo* info, gpointer data) {
  const std::uint64_t now = mono_ns();
  const std::uint64_t tc0 = thread_cpu_ns();
  auto* a = static_cast<Arrivals*>(data);
  Stamp st;
  const bool read = read_stamp(GST_PAD_PROBE_INFO_BUFFER(info), a->fc, &st);
  std::lock_guard<std::mutex> lock(a->mu);
  std::string why;
  if (!read)
    why = "could not read the stamp";
  else if (st.magic != kStampMagic)
    why = "no stamp: foreign or torn frame";
  else if (st.index != a->next)
    why = "frame " + std::to_string(st.index) + " where " + std::to_string(a->next) + " was due";
  if (why.empty()) {
    a->lat.push_back(now >= st.mono_ns ? now - st.mono_ns : 0);
  } else {
    if (a->bad++ == 0) a->first_bad = why;
  }
  if (read && st.magic == kStampMagic) a->next = st.index + 1;
  ++a->received;
  a->probe_cpu += thread_cpu_ns() - tc0;
  return GST_PAD_PROBE_OK;
}

bool all_connected(GstElement* pipe, std::vector<std::unique_ptr<Arrivals>>& arrivals) {
  for (std::size_t i = 0; i < arrivals.size(); ++i) {
    {
      std::lock_guard<std::mutex> lock(arrivals[i]->mu);
      if (arrivals[i]->received == 0) return false;
    }
    Ref<GstElement> src(gst_bin_get_by_name(GST_BIN(pipe), ("src" + std::to_string(i)).c_str()));
    GstStructure* st = nullptr;
    g_object_get(src.get(), "stats", &st, nullptr);
    gboolean connected = FALSE;
    if (st) gst_structure_get_boolean(st, "connected", &connected);
    if (st) gst_structure_free(st);
    if (!connected) return false;
  }
  return true;
}

struct Totals {
  std::uint64_t frames = 0, probe_cpu = 0;
};
Totals totals(std::vector<std::unique_ptr<Arrivals>>& arrivals) {
  Totals t;
  for (auto& a : arrivals) {
    std::lock_guard<std::mutex> lock(a->mu);
    t.frames += a->received;
    t.probe_cpu += a->probe_cpu;
  }
  return t;
}

int stream_consumer(const Options& o) {
  die_with_parent();
  const std::uint64_t deadline = mono_ns() + seconds_ns(o.seconds + o.timeout_s);
  Kv kv;
  const Counts before = counts();
  std::string desc;
  for (int i = 0; i < o.streams; ++i)
    desc += "cudaipcringsrc name=src" + std::to_string(i) + " socket-path=" + socket_path(o, i) +
            " mode=every-frame" + (o.host ? "" : " ! video/x-raw(memory:CUDAMemory)") +
            " ! fakesink name=sink" + std::to_string(i) + " sync=false async=false ";
  Pipeline pipe = launch(desc);
  std::vector<std::unique_ptr<Arrivals>> arrivals;
  for (int i = 0; i < o.streams; ++i) {
    arrivals.push_back(std::make_unique<Arrivals>());
    arrivals.back()->fc = frame_check(o);
    arrivals.back()->lat.reserve(static_cast<std::size_t>(o.seconds + 5) * kFps);
    gst_pad_add_probe(pad_of(pipe.get(), ("sink" + std::to_string(i)).c_str(), "sink").get(),
                      GST_PAD_PROBE_TYPE_BUFFER, arrival_probe, arrivals.back().get(), nullptr);
  }
  std::string error, warnings;
  bool eos = false, measured = false;
  Counts idle{}, connected{};
  std::uint64_t cpu0 = 0, t0 = 0, cpu1 = 0, t1 = 0;
  Totals tot0, tot1;
  if (set_state(pipe.get(), GST_STATE_PLAYING, &error)) {
    g_usleep(300000);  // the sources' streaming threads start and wait for their producers
    idle = counts();
    touch(file(o, "consumer.ready"));
    while (!eos && error.empty() && mono_ns() < deadline &&
           pop_bus(pipe.get(), 10 * GST_MSECOND, &eos, &error, &warnings)) {
      if (!measured && all_connected(pipe.get(), arrivals)) {
        measured = true;
        connected = counts();
        cpu0 = cpu_rusage_ns();
        t0 = mono_ns();
        tot0 = totals(arrivals);
      }
    }
    cpu1 = cpu_rusage_ns();
    t1 = mono_ns();
    tot1 = totals(arrivals);
    if (error.empty() && !eos) error = "timed out before every stream ended";
    if (error.empty() && !measured) error = "never had every stream connected at once";
  }
  kv["ok"] = error.empty() ? "1" : "0";
  kv["error"] = error;
  kv["warnings"] = warnings;
  kv["threads_before"] = std::to_string(before.threads);
  kv["fds_before"] = std::to_string(before.fds);
  kv["threads_idle"] = std::to_string(idle.threads);
  kv["fds_idle"] = std::to_string(idle.fds);
  kv["threads_connected"] = std::to_string(connected.threads);
  kv["fds_connected"] = std::to_string(connected.fds);
  const std::uint64_t window_frames = tot1.frames - tot0.frames;
  const std::uint64_t probe_cpu = tot1.probe_cpu - tot0.probe_cpu;
  const std::uint64_t cpu = cpu1 - cpu0;
  kv["window_frames"] = std::to_string(window_frames);
  kv["window_ns"] = std::to_string(measured ? t1 - t0 : 0);
  kv["cpu_ns"] = std::to_string(measured ? cpu - std::min(cpu, probe_cpu) : 0);
  kv["probe_cpu_ns"] = std::to_string(probe_cpu);
  for (int i = 0; i < o.streams; ++i) {
    Arrivals& a = *arrivals[static_cast<std::size_t>(i)];
    std::lock_guard<std::mutex> lock(a.mu);
    const std::string k = "s" + std::to_string(i) + ".";
    kv[k + "received"] = std::to_string(a.received);
    kv[k + "bad"] = std::to_string(a.bad);
    kv[k + "first_bad"] = a.first_bad;
    write_samples(file(o, "lat-" + std::to_string(i)), a.lat);
  }
  write_kv(file(o, "consumer.kv"), kv);
  touch(file(o, "consumer.done"));
  return error.empty() ? 0 : 1;
}

// ---- parent ----

double ms(double ns) {
  return ns / 1e6;
}

// One run: the consumer first (its idle counts need no producer yet), then the producers.
bool run(const Options& base, const std::string& root, int run_index) {
  Options o = base;
  o.dir = root + "/run" + std::to_string(run_index);
  if (::mkdir(o.dir.c_str(), 0700) != 0) throw std::runtime_error("mkdir " + o.dir);
  const std::uint64_t deadline = mono_ns() + seconds_ns(o.seconds + o.timeout_s + 10);
  std::vector<pid_t> pids = {spawn_self(child_args(o, "consumer"))};
  std::string failure;
  if (!wait_for_file(file(o, "consumer.ready"), mono_ns() + seconds_ns(o.timeout_s))) {
    failure = "the consumer never became ready";
  } else {
    for (int i = 0; i < o.streams; ++i) {
      o.index = i;
      pids.push_back(spawn_self(child_args(o, "producer")));
    }
  }
  const std::vector<int> status = wait_all(pids, deadline, seconds_ns(10));
  const Kv c = read_kv(file(o, "consumer.kv"));

  std::printf("\n## %d streams of %dx%d NV12 at %d fps, %s, %d s\n\n", o.streams, o.width, o.height,
              kFps, o.host ? "host memory" : "CUDA memory (cudaupload)", o.seconds);
  std::printf("| stream | sent | delivered | lost | bad | latency p50 (ms) | latency p99 (ms) |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|\n");
  std::uint64_t sent_all = 0, got_all = 0, lost_all = 0, bad_all = 0;
  std::vector<std::uint64_t> lat_all;
  std::vector<std::string> notes;
  for (int i = 0; i < o.streams; ++i) {
    const Kv p = read_kv(file(o, "producer-" + std::to_string(i) + ".kv"));
    const std::string k = "s" + std::to_string(i) + ".";
    const std::uint64_t sent = kv_u64(p, "sent"), got = kv_u64(c, (k + "received").c_str());
    const std::uint64_t bad = kv_u64(c, (k + "bad").c_str()) + kv_u64(p, "stamp_failures");
    const std::uint64_t lost = sent > got ? sent - got : 0;
    std::vector<std::uint64_t> lat = read_samples(file(o, "lat-" + std::to_string(i)));
    std::printf("| %d | %llu | %llu | %llu | %llu | %.2f | %.2f |\n", i,
                static_cast<unsigned long long>(sent), static_cast<unsigned long long>(got),
                static_cast<unsigned long long>(lost), static_cast<unsigned long long>(bad),
                lat.empty() ? 0.0 : ms(percentile(lat, 0.5)),
                lat.empty() ? 0.0 : ms(percentile(lat, 0.99)));
    sent_all += sent;
    got_all += got;
    lost_all += lost;
    bad_all += bad;
    lat_all.insert(lat_all.end(), lat.begin(), lat.end());
    if (kv_get(p, "ok") != "1")
      notes.push_back("producer " + std::to_string(i) + ": " +
                      (!p.empty() ? kv_get(p, "error")
                       : static_cast<std::size_t>(i) + 1 < status.size()
                           ? "no report (status " + std::to_string(status[1 + i]) + ")"
                           : std::string("not started")));
    if (!kv_get(c, (k + "first_bad").c_str()).empty())
      notes.push_back("stream " + std::to_string(i) + ": " + kv_get(c, (k + "first_bad").c_str()));
    if (got > sent)
      notes.push_back("stream " + std::to_string(i) + ": more frames delivered than sent");
  }
  std::printf("| all | %llu | %llu | %llu | %llu | %.2f | %.2f |\n",
              static_cast<unsigned long long>(sent_all), static_cast<unsigned long long>(got_all),
              static_cast<unsigned long long>(lost_all), static_cast<unsigned long long>(bad_all),
              lat_all.empty() ? 0.0 : ms(percentile(lat_all, 0.5)),
              lat_all.empty() ? 0.0 : ms(percentile(lat_all, 0.99)));

  const double n = o.streams;
  auto row = [&](const char* what, const char* tkey, const char* fkey) {
    std::printf("| %s | %llu | %llu |\n", what, static_cast<unsigned long long>(kv_u64(c, tkey)),
                static_cast<unsigned long long>(kv_u64(c, fkey)));
  };
  auto per = [&](const char* what, const char* from_t, const char* from_f) {
    const double dt = static_cast<double>(kv_u64(c, "threads_connected")) -
                      static_cast<double>(kv_u64(c, from_t));
    const double df =
        static_cast<double>(kv_u64(c, "fds_connected")) - static_cast<double>(kv_u64(c, from_f));
    std::printf("| %s | %.2f | %.2f |\n", what, dt / n, df / n);
  };
  std::printf(
      "\nThe consumer process (one pipeline of %d `cudaipcringsrc mode=every-frame ! "
      "fakesink`):\n\n",
      o.streams);
  std::printf("| consumer process | threads | fds |\n|---|---:|---:|\n");
  row("before the pipeline", "threads_before", "fds_before");
  row("sources playing, none connected", "threads_idle", "fds_idle");
  row("every stream connected", "threads_connected", "fds_connected");
  per("per stream: the connection (connected - none connected) / N", "threads_idle", "fds_idle");
  per("per stream: the whole branch (connected - before) / N", "threads_before", "fds_before");
  const std::uint64_t frames = kv_u64(c, "window_frames");
  const double window_s = static_cast<double>(kv_u64(c, "window_ns")) / 1e9;
  std::printf(
      "\nConsumer CPU per frame: %.1f us (%llu frames in %.1f s with every stream connected, "
      "%.0f%% of one core; the stamp checks' own %.1f us per frame taken out)\n",
      frames ? static_cast<double>(kv_u64(c, "cpu_ns")) / 1e3 / static_cast<double>(frames) : 0.0,
      static_cast<unsigned long long>(frames), window_s,
      window_s > 0 ? static_cast<double>(kv_u64(c, "cpu_ns")) / 1e9 / window_s * 100 : 0.0,
      frames ? static_cast<double>(kv_u64(c, "probe_cpu_ns")) / 1e3 / static_cast<double>(frames)
             : 0.0);
  if (!kv_get(c, "warnings").empty())
    notes.push_back("consumer warnings: " + kv_get(c, "warnings"));
  if (kv_get(c, "ok") != "1")
    notes.push_back("consumer: " + (c.empty()
                                        ? "no report (status " + std::to_string(status[0]) + ")"
                                        : kv_get(c, "error")));
  if (!failure.empty()) notes.push_back(failure);
  const bool ok = failure.empty() && lost_all == 0 && bad_all == 0 && kv_get(c, "ok") == "1" &&
                  std::all_of(notes.begin(), notes.end(), [](const std::string& s) {
                    return s.rfind("consumer warnings", 0) == 0;
                  });
  for (const auto& note : notes) std::printf("\n- %s", note.c_str());
  std::printf("\n%s\n", ok ? "" : "\nFAIL: a frame was lost or wrong, or a process failed");
  return ok;
}

int parent(Options o) {
  if (!o.host) {
    const std::string why = gpu_unavailable_reason();
    if (!why.empty()) {
      std::printf("CUDA streams not run: %s (--host runs host-memory streams)\n", why.c_str());
      return 0;
    }
  }
  char tmpl[] = "/tmp/cudaipc-streams-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  const std::string root = tmpl;
  std::printf("# cudaipc-gst-streams (%s)\n", gst_version_string());
  std::vector<Options> runs;
  if (o.sized) {
    runs.push_back(o);
  } else {
    Options big = o, many = o;
    big.streams = 16, big.width = 1920, big.height = 1080;
    many.streams = 64, many.width = 320, many.height = 240;
    runs = {big, many};
  }
  bool ok = true;
  for (std::size_t i = 0; i < runs.size(); ++i) ok = run(runs[i], root, static_cast<int>(i)) && ok;
  // The run directories hold sockets, reports and samples only.
  const std::string rm = "rm -rf '" + root + "'";
  if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", root.c_str());
  return ok ? 0 : 1;
}

Options parse(int argc, char** argv, std::string* role) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* key) -> const char* {
      const std::size_t n = std::strlen(key);
      return a.compare(0, n, key) == 0 ? argv[i] + n : nullptr;
    };
    auto number = [&](const char* v, int lo, int hi) {
      char* end = nullptr;
      const long x = std::strtol(v, &end, 10);
      if (*v == '\0' || *end != '\0' || x < lo || x > hi)
        throw std::runtime_error("bad value in " + a + " (" + std::to_string(lo) + ".." +
                                 std::to_string(hi) + ")");
      return static_cast<int>(x);
    };
    if (const char* v = value("--role=")) {
      *role = v;
    } else if (const char* v = value("--streams=")) {
      o.streams = number(v, 1, 512);
      o.sized = true;
    } else if (const char* v = value("--width=")) {
      o.width = number(v, 16, 8192);
      o.sized = true;
    } else if (const char* v = value("--height=")) {
      o.height = number(v, 16, 8192);
      o.sized = true;
    } else if (const char* v = value("--seconds=")) {
      o.seconds = number(v, 1, 3600);
    } else if (const char* v = value("--timeout=")) {
      o.timeout_s = number(v, 1, 3600);
    } else if (const char* v = value("--dir=")) {
      o.dir = v;
    } else if (const char* v = value("--index=")) {
      o.index = number(v, -1, 511);
    } else if (a == "--host") {
      o.host = true;
    } else {
      throw std::runtime_error("unknown argument " + a +
                               " (--host --streams=N --width=W --height=H --seconds=S "
                               "--timeout=T)");
    }
  }
  if (o.width % 2 || o.height % 2) throw std::runtime_error("NV12 needs an even width and height");
  return o;
}

}  // namespace
}  // namespace gstbench

int main(int argc, char** argv) {
  gstbench::set_self_exe(argv[0]);
  gst_init(nullptr, nullptr);
  try {
    std::string role;
    const gstbench::Options o = gstbench::parse(argc, argv, &role);
    if (role == "producer") return gstbench::stream_producer(o);
    if (role == "consumer") return gstbench::stream_consumer(o);
    if (!role.empty()) throw std::runtime_error("unknown role " + role);
    return gstbench::parent(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cudaipc-gst-streams: %s\n", e.what());
  }
  return 1;
}
