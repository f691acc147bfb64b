// cudaipc-gst-filter-bench: what cudaipcfilter costs a frame (docs/benchmarks.md). Pre-made frames
// (1080p NV12 by default; in CUDA memory with --cuda) are pushed as fast as the pipeline takes them
// through `appsrc ! X ! fakesink`, X being, in one run:
//   identity                      the baseline: a pass-through element
//   filter, no model              cudaipcfilter on-missing=pass with nobody serving (its own cost)
//   filter, C++ null model        cudaipc::Server on a thread replying at once with one custom meta
//   filter, Python null model     a Python cudaipc.Server process doing the same (--python PY)
//   filter, Python model (FILE)   `PY FILE --serve PATH` serving instead (--python-model FILE;
//                                 python/bench/filter_model_rate.py runs a real model that way)
// With --upstream='videotestsrc num-buffers=N ! ... ! cudaupload' (or a decoder) the frames are
// made in the pipeline instead, written into the filter's lent slots where upstream takes its
// pool (--frames must be N). The rows then print per row element entry -> pushed on p50/p99 (pad
// probes keyed by the frame index) and frames/s with max-inflight frames out. Every frame of a
// served row must carry the result the model made from that frame's timestamp, or the run fails.
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gst/gst.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cudaipc/metas.hpp"
#include "cudaipc/server.hpp"
#include "gst_bench.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int frames = 3000;
  int width = 1920, height = 1080;
  bool cuda = false;
  unsigned inflight = 4;
  std::string python;        // interpreter for the Python row; empty: no Python row
  std::string python_model;  // a script serving the filter in place of the null model
  bool only_python = false;  // the Python row alone
  std::string dir = "/tmp";
  // A gst-launch fragment that makes the frames instead of appsrc (e.g. videotestsrc ! cudaupload):
  // upstream then allocates from the filter's pool, so frames are written into its slots.
  std::string upstream;
};

std::uint64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// The model's answer: one custom meta naming the frame's pts.
std::vector<std::uint8_t> result_for(std::uint64_t pts) {
  std::vector<std::uint8_t> area(256);
  cudaipc::metas::AreaWriter w(area.data(), area.size());
  if (std::uint8_t* b = w.begin_record(cudaipc::metas::RecordKind::custom, "bench-result", 64)) {
    cudaipc::metas::CustomWriter cw(b, 64);
    cw.add_uint64("pts", pts);
    w.commit_record(cw.finish());
  }
  area.resize(w.size());
  return area;
}

// When each served frame reached each step (CLOCK_MONOTONIC ns, by frame index = pts / 1 ms), so
// a row's latency can be split: filter entry -> inner sink render -> published -> the model has it
// -> replied -> pushed on.
struct Steps {
  explicit Steps(int frames)
      : render(frames), published(frames), acquired(frames), replied(frames) {}
  std::vector<std::uint64_t> render, published, acquired, replied;
};

// The inner cudaipcsink's TimingRecord (gst/format/time_sync.h) rides in the request's user meta:
// its render() entry is its last field.
std::uint64_t sink_render_entry(const cudaipc::FrameDesc& d) {
  std::uint64_t words[3] = {};
  if (d.user_meta_size != 4 + 4 + 3 * 8) return 0;
  std::memcpy(words, d.user_meta + 8, 3 * 8);
  return words[2];
}

class CppModel {
 public:
  CppModel(const std::string& path, bool cpu_wait, Steps* steps = nullptr) {
    cudaipc::ServerOptions o;
    o.path = path;
    o.cuda.cpu_wait = cpu_wait;
    server_ = std::make_unique<cudaipc::Server>(o);
    thread_ = std::thread([this, steps] {
      while (!stop_) {
        cudaipc::ServerEvent e = server_->next(std::chrono::milliseconds(20));
        if (e.type != cudaipc::ServerEventType::request) continue;
        const std::uint64_t acquired = now_ns();
        const cudaipc::FrameDesc d = e.request.frame.desc();
        const std::vector<std::uint8_t> r = result_for(d.pts);
        server_->reply(e.request, r.data(), static_cast<std::uint32_t>(r.size()));
        const std::size_t i = d.pts / 1000000;
        if (steps && i < steps->render.size()) {
          steps->render[i] = sink_render_entry(d);
          steps->published[i] = d.publish_time_ns;
          steps->acquired[i] = acquired;
          steps->replied[i] = now_ns();
        }
      }
    });
  }
  ~CppModel() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::unique_ptr<cudaipc::Server> server_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

const char* kPythonModel =
    "import sys, cudaipc\n"
    "with cudaipc.Server(sys.argv[1]) as s:\n"
    "    print('serving', flush=True)\n"
    "    for req in s:\n"
    "        req.reply(meta={'pts': req.frame.pts})\n";

// A Python server process, until destroyed.
class PythonModel {
 public:
  PythonModel(const std::string& python, const std::string& path, const std::string& script) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      if (script.empty())
        execlp(python.c_str(), python.c_str(), "-c", kPythonModel, path.c_str(), nullptr);
      else
        execlp(python.c_str(), python.c_str(), script.c_str(), "--serve", path.c_str(), nullptr);
      _exit(127);
    }
    close(fds[1]);
    char buf[16] = {};
    const ssize_t n = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    if (n <= 0 || std::strncmp(buf, "serving", 7) != 0)
      throw std::runtime_error("the Python model did not start (" + python + ")");
  }
  ~PythonModel() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }

 private:
  pid_t pid_ = -1;
};

struct Row {
  std::string name;
  double p50 = 0, p99 = 0, fps = 0;
  int answered = 0, frames = 0;
  std::vector<double> split;       // p50 of each step, when the model recorded them
  std::string written = "copied";  // how frames got into the filter's slots (its stats)
};

struct Timing {
  std::vector<std::uint64_t> in, out;
  std::vector<int> results;  // per frame: 1 when its own result came
};

GstPadProbeReturn on_in(GstPad*, GstPadProbeInfo* info, gpointer data) {
  auto* t = static_cast<Timing*>(data);
  GstBuffer* b = GST_PAD_PROBE_INFO_BUFFER(info);
  const std::size_t i = GST_BUFFER_OFFSET(b);
  if (i < t->in.size()) t->in[i] = now_ns();
  return GST_PAD_PROBE_OK;
}

GstPadProbeReturn on_out(GstPad*, GstPadProbeInfo* info, gpointer data) {
  auto* t = static_cast<Timing*>(data);
  const std::uint64_t ns = now_ns();
  GstBuffer* b = GST_PAD_PROBE_INFO_BUFFER(info);
  const std::size_t i = GST_BUFFER_OFFSET(b);
  if (i >= t->out.size()) return GST_PAD_PROBE_OK;
  t->out[i] = ns;
  gpointer state = nullptr;
  while (GstMeta* m = gst_buffer_iterate_meta(b, &state)) {
    if (!gst_meta_info_is_custom(m->info)) continue;
    auto* cm = reinterpret_cast<GstCustomMeta*>(m);
    GstStructure* s = gst_custom_meta_get_structure(cm);
    guint64 pts = 0;
    gint64 spts = -1;
    if ((gst_structure_get_uint64(s, "pts", &pts) && pts == GST_BUFFER_PTS(b)) ||
        (gst_structure_get_int64(s, "pts", &spts) && spts == (gint64)GST_BUFFER_PTS(b)))
      t->results[i] = 1;
  }
  return GST_PAD_PROBE_OK;
}

std::vector<GstBuffer*> make_frames(const Options& o, GstCaps** caps, GstContext** ctx) {
  const std::string desc =
      "videotestsrc num-buffers=8 pattern=ball ! video/x-raw,format=NV12,width=" +
      std::to_string(o.width) + ",height=" + std::to_string(o.height) +
      (o.cuda ? " ! cudaupload ! video/x-raw(memory:CUDAMemory)" : "") + " ! appsink name=out";
  GError* err = nullptr;
  GstElement* p = gst_parse_launch(desc.c_str(), &err);
  if (!p || err) throw std::runtime_error(desc + ": " + (err ? err->message : "?"));
  GstElement* out = gst_bin_get_by_name(GST_BIN(p), "out");
  gst_element_set_state(p, GST_STATE_PLAYING);
  std::vector<GstBuffer*> bufs;
  while (bufs.size() < 8) {
    GstSample* s = gst_app_sink_try_pull_sample(GST_APP_SINK(out), 10 * GST_SECOND);
    if (!s) throw std::runtime_error(desc + ": no frame");
    if (!*caps) *caps = gst_caps_ref(gst_sample_get_caps(s));
    bufs.push_back(gst_buffer_copy_deep(gst_sample_get_buffer(s)));
    gst_sample_unref(s);
  }
  // The frames' own CUDA context, so the run's elements use the same one (as nvh264dec !
  // cudaipcfilter share theirs through context queries).
  *ctx = o.cuda ? gstbench::cuda_context_of(bufs[0]) : nullptr;
  if (o.cuda && !*ctx) throw std::runtime_error(desc + ": the frames are not in CUDA memory");
  gst_element_set_state(p, GST_STATE_NULL);
  gst_object_unref(out);
  gst_object_unref(p);
  return bufs;
}

double p50(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// Upstream of the filter (--upstream): each buffer numbered in arrival order, as appsrc's are.
GstPadProbeReturn number(GstPad*, GstPadProbeInfo* info, gpointer data) {
  auto* next = static_cast<guint64*>(data);
  GstBuffer* b = gst_buffer_make_writable(GST_PAD_PROBE_INFO_BUFFER(info));
  GST_BUFFER_OFFSET(b) = (*next)++;
  GST_PAD_PROBE_INFO_DATA(info) = b;
  return GST_PAD_PROBE_OK;
}

// Waits up to `seconds` for the run's end: "" at EOS, else why it did not come (the error's
// message, or the wait running out).
std::string wait_for_eos(GstBus* bus, int seconds) {
  GstMessage* m = gst_bus_timed_pop_filtered(
      bus, seconds * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  if (!m) return "no EOS within " + std::to_string(seconds) + " s";
  std::string why;
  if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR) {
    GError* e = nullptr;
    gst_message_parse_error(m, &e, nullptr);
    why = e ? e->message : "error";
    if (e) g_error_free(e);
  }
  gst_message_unref(m);
  return why;
}

// The row of a run: latency from the filter's entry to its push, the rate, the frames that
// came back with their own result (a served run fails short of all but the warm-up).
Row summarize(const Options& o, const std::string& name, const Timing& t, double secs, bool served,
              const Steps* steps) {
  Row r;
  r.name = name;
  r.frames = o.frames;
  std::vector<double> lat;
  const int warm = std::min(100, o.frames / 10);
  for (int i = warm; i < o.frames; ++i)
    if (t.in[i] && t.out[i]) lat.push_back((t.out[i] - t.in[i]) / 1000.0);
  std::sort(lat.begin(), lat.end());
  if (!lat.empty()) {
    r.p50 = lat[lat.size() / 2];
    r.p99 = lat[std::min(lat.size() - 1, lat.size() * 99 / 100)];
  }
  // The rate once warm, as the model alone is measured (after its own warm-up): from the push of
  // the first frame past the warm-up to the last push. A served model's first frames pay for its
  // start (cuDNN choosing kernels, first allocations), which is not its rate.
  r.fps = o.frames / secs;
  {
    std::uint64_t first = 0, last = 0;
    int counted = 0;
    for (int i = warm; i < o.frames; ++i) {
      if (!t.out[i]) continue;
      if (!first || t.out[i] < first) first = t.out[i];
      if (t.out[i] > last) last = t.out[i];
      ++counted;
    }
    if (counted > 1 && last > first) r.fps = (counted - 1) / ((last - first) / 1e9);
  }
  for (int v : t.results) r.answered += v;
  // Which frames lacked their own result, and when they left (an answer late past `timeout`
  // looks different from a model's start or a lost reply).
  if (served && r.answered < o.frames) {
    std::string missing;
    int listed = 0;
    for (int i = 0; i < o.frames && listed < 20; ++i)
      if (!t.results[i]) {
        missing += (listed++ ? ", " : "") + std::to_string(i);
        if (t.in[i] && t.out[i])
          missing += " (" + std::to_string((t.out[i] - t.in[i]) / 1000) + " us in the filter)";
      }
    std::printf("%s: %d of %d frames without their own result: %s\n", name.c_str(),
                o.frames - r.answered, o.frames, missing.c_str());
  }
  if (steps) {
    const std::vector<const std::vector<std::uint64_t>*> at = {
        &t.in, &steps->render, &steps->published, &steps->acquired, &steps->replied, &t.out};
    for (std::size_t k = 0; k + 1 < at.size(); ++k) {
      std::vector<double> d;
      for (int i = warm; i < o.frames; ++i) {
        const std::uint64_t a = (*at[k])[i], b = (*at[k + 1])[i];
        if (a && b) d.push_back((static_cast<double>(b) - static_cast<double>(a)) / 1000.0);
      }
      r.split.push_back(p50(std::move(d)));
    }
  }
  if (served && r.answered < o.frames - warm)
    throw std::runtime_error(name + ": only " + std::to_string(r.answered) + " of " +
                             std::to_string(o.frames) + " frames came back with their own result");
  return r;
}

// The frames made upstream in the pipeline (--upstream), into the filter's own pool where
// upstream allocates from it; the run ends at upstream's EOS.
Row run_upstream(const Options& o, const std::string& name, const std::string& element, bool served,
                 const Steps* steps) {
  const std::string desc = o.upstream + " ! " + element + " ! fakesink sync=false";
  GError* err = nullptr;
  GstElement* p = gst_parse_launch(desc.c_str(), &err);
  if (!p || err) throw std::runtime_error(desc + ": " + (err ? err->message : "?"));
  GstElement* x = gst_bin_get_by_name(GST_BIN(p), "x");
  Timing t;
  t.in.assign(o.frames, 0);
  t.out.assign(o.frames, 0);
  t.results.assign(o.frames, 0);
  guint64 next = 0;
  GstPad* sp = gst_element_get_static_pad(x, "sink");
  GstPad* op = gst_element_get_static_pad(x, "src");
  gst_pad_add_probe(sp, GST_PAD_PROBE_TYPE_BUFFER, number, &next, nullptr);
  gst_pad_add_probe(sp, GST_PAD_PROBE_TYPE_BUFFER, on_in, &t, nullptr);
  gst_pad_add_probe(op, GST_PAD_PROBE_TYPE_BUFFER, on_out, &t, nullptr);
  GstBus* bus = gst_element_get_bus(p);
  const auto start = Clock::now();
  gst_element_set_state(p, GST_STATE_PLAYING);
  const std::string why = wait_for_eos(bus, 240);
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  // The filter's own count of frames upstream wrote in its slots against those copied there.
  std::string written;
  if (g_object_class_find_property(G_OBJECT_GET_CLASS(x), "stats")) {
    GstStructure* stats = nullptr;
    g_object_get(x, "stats", &stats, nullptr);
    guint64 in_place = 0, copied = 0;
    if (stats && gst_structure_get_uint64(stats, "in-place", &in_place) &&
        gst_structure_get_uint64(stats, "copied", &copied))
      written = "in place " + std::to_string(in_place) + ", copied " + std::to_string(copied);
    if (stats) gst_structure_free(stats);
  }
  gst_element_set_state(p, GST_STATE_NULL);
  for (GstObject* obj :
       {GST_OBJECT(bus), GST_OBJECT(sp), GST_OBJECT(op), GST_OBJECT(x), GST_OBJECT(p)})
    gst_object_unref(obj);
  if (!why.empty()) throw std::runtime_error(name + ": " + why);
  if (next != static_cast<guint64>(o.frames))
    throw std::runtime_error(name + ": upstream made " + std::to_string(next) + " frames, not " +
                             std::to_string(o.frames) + " (--frames must match it)");
  Row r = summarize(o, name, t, secs, served, steps);
  r.written = written;
  return r;
}

Row run(const Options& o, const std::string& name, const std::string& element,
        const std::vector<GstBuffer*>& bufs, GstCaps* caps, GstContext* ctx, bool served,
        const Steps* steps = nullptr) {
  if (!o.upstream.empty()) return run_upstream(o, name, element, served, steps);
  const std::string desc = "appsrc name=in format=time ! " + element + " ! fakesink sync=false";
  GError* err = nullptr;
  GstElement* p = gst_parse_launch(desc.c_str(), &err);
  if (!p || err) throw std::runtime_error(desc + ": " + (err ? err->message : "?"));
  if (ctx) gst_element_set_context(p, ctx);
  GstElement* in = gst_bin_get_by_name(GST_BIN(p), "in");
  GstElement* x = gst_bin_get_by_name(GST_BIN(p), "x");
  g_object_set(in, "caps", caps, "max-bytes", (guint64)0, "max-buffers", (guint64)8, "block", TRUE,
               nullptr);
  Timing t;
  t.in.assign(o.frames, 0);
  t.out.assign(o.frames, 0);
  t.results.assign(o.frames, 0);
  GstPad* sp = gst_element_get_static_pad(x, "sink");
  GstPad* op = gst_element_get_static_pad(x, "src");
  gst_pad_add_probe(sp, GST_PAD_PROBE_TYPE_BUFFER, on_in, &t, nullptr);
  gst_pad_add_probe(op, GST_PAD_PROBE_TYPE_BUFFER, on_out, &t, nullptr);
  gst_element_set_state(p, GST_STATE_PLAYING);
  GstBus* bus = gst_element_get_bus(p);
  const auto start = Clock::now();
  for (int i = 0; i < o.frames; ++i) {
    GstBuffer* b = gst_buffer_copy(bufs[i % bufs.size()]);
    GST_BUFFER_PTS(b) = i * GST_MSECOND;
    GST_BUFFER_OFFSET(b) = i;
    if (gst_app_src_push_buffer(GST_APP_SRC(in), b) != GST_FLOW_OK) break;
    if (Clock::now() - start > std::chrono::seconds(120)) {
      // A model that died leaves each frame its whole timeout: end the row, not the machine's day.
      gst_element_set_state(p, GST_STATE_NULL);
      throw std::runtime_error(name + ": " + std::to_string(i + 1) +
                               " frames took over 120 s (did the model die?)");
    }
  }
  gst_app_src_end_of_stream(GST_APP_SRC(in));
  const std::string why = wait_for_eos(bus, 120);
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  gst_element_set_state(p, GST_STATE_NULL);
  for (GstObject* obj : {GST_OBJECT(bus), GST_OBJECT(sp), GST_OBJECT(op), GST_OBJECT(in),
                         GST_OBJECT(x), GST_OBJECT(p)})
    gst_object_unref(obj);
  if (!why.empty()) throw std::runtime_error(name + ": " + why);

  return summarize(o, name, t, secs, served, steps);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&](const char* k) { return a.substr(std::strlen(k)); };
    if (a.rfind("--frames=", 0) == 0)
      o.frames = std::atoi(val("--frames=").c_str());
    else if (a.rfind("--width=", 0) == 0)
      o.width = std::atoi(val("--width=").c_str());
    else if (a.rfind("--height=", 0) == 0)
      o.height = std::atoi(val("--height=").c_str());
    else if (a.rfind("--inflight=", 0) == 0)
      o.inflight = std::atoi(val("--inflight=").c_str());
    else if (a.rfind("--python=", 0) == 0)
      o.python = val("--python=");
    else if (a.rfind("--python-model=", 0) == 0)
      o.python_model = val("--python-model=");
    else if (a == "--only-python")
      o.only_python = true;
    else if (a.rfind("--dir=", 0) == 0)
      o.dir = val("--dir=");
    else if (a == "--cuda")
      o.cuda = true;
    else if (a.rfind("--upstream=", 0) == 0)
      o.upstream = val("--upstream=");
    else {
      std::fprintf(stderr,
                   "usage: cudaipc-gst-filter-bench [--frames=N] [--width=W --height=H] [--cuda] "
                   "[--inflight=N] [--python=PYTHON [--python-model=FILE] [--only-python]] "
                   "[--dir=DIR] [--upstream='videotestsrc num-buffers=N ! ... ! cudaupload']\n");
      return 2;
    }
  }
  gst_init(&argc, &argv);
  try {
    GstCaps* caps = nullptr;
    GstContext* ctx = nullptr;
    std::vector<GstBuffer*> bufs = make_frames(o, &caps, &ctx);
    char tmpl[256];
    std::snprintf(tmpl, sizeof tmpl, "%s/filter-bench-XXXXXX", o.dir.c_str());
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp in " + o.dir);
    const std::string dir = tmpl;
    const std::string mode = o.cuda ? "" : " ipc-mode=host";
    auto filter = [&](const std::string& path, const std::string& extra) {
      return "cudaipcfilter name=x socket-path=" + path + mode +
             " max-inflight=" + std::to_string(o.inflight) + " " + extra;
    };
    std::vector<Row> rows;
    if (!o.only_python) {
      rows.push_back(run(o, "identity (baseline)", "identity name=x", bufs, caps, ctx, false));
      rows.push_back(run(o, "filter, no model", filter(dir + "/none", "on-missing=pass"), bufs,
                         caps, ctx, false));
      {
        Steps steps(o.frames);
        CppModel model(dir + "/cpp", false, &steps);
        rows.push_back(run(o, "filter, C++ null model",
                           filter(dir + "/cpp", "on-missing=wait timeout=5000000000"), bufs, caps,
                           ctx, true, &steps));
      }
      if (o.cuda) {
        // The model waits on the CPU for each frame's bytes to land before it takes it, so its
        // release is a CPU store, not a GPU write the filter's next copy must wait for.
        Steps steps(o.frames);
        CppModel model(dir + "/cpw", true, &steps);
        rows.push_back(run(o, "filter, C++ null model, cpu-wait",
                           filter(dir + "/cpw", "on-missing=wait timeout=5000000000"), bufs, caps,
                           ctx, true, &steps));
      }
    }
    if (!o.python.empty()) {
      PythonModel model(o.python, dir + "/py", o.python_model);
      const std::string name = o.python_model.empty()
                                   ? std::string("filter, Python null model")
                                   : "filter, Python model (" +
                                         o.python_model.substr(o.python_model.rfind('/') + 1) + ")";
      rows.push_back(run(o, name, filter(dir + "/py", "on-missing=wait timeout=5000000000"), bufs,
                         caps, ctx, true));
    }
    std::printf(
        "\ncudaipcfilter, %dx%d NV12 in %s memory, %d frames, max-inflight=%u, from %s\n\n",
        o.width, o.height, o.cuda ? "CUDA" : "system", o.frames, o.inflight,
        o.upstream.empty() ? "appsrc (pre-made frames, copied into slots)" : o.upstream.c_str());
    std::printf(
        "| element | entry -> pushed p50 us | p99 us | frames/s once warm | own result | into "
        "slots |\n");
    std::printf("|---|---|---|---|---|---|\n");
    for (const Row& r : rows)
      std::printf("| %s | %.1f | %.1f | %.0f | %d/%d | %s |\n", r.name.c_str(), r.p50, r.p99, r.fps,
                  r.answered, r.frames, r.written.c_str());
    if (std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.split.size() == 5; })) {
      std::printf(
          "\nWhere a served frame's time goes, p50 us per step (the model on a thread):\n\n");
      std::printf(
          "| row | entry -> sink render | render -> published | published -> model has it "
          "| model: reply | replied -> pushed on |\n|---|---|---|---|---|---|\n");
      for (const Row& r : rows) {
        if (r.split.size() != 5) continue;
        std::printf("| %s |", r.name.c_str());
        for (double v : r.split) std::printf(" %.1f |", v);
        std::printf("\n");
      }
    }
    for (GstBuffer* b : bufs) gst_buffer_unref(b);
    gst_caps_unref(caps);
    if (ctx) gst_context_unref(ctx);
    rmdir(dir.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAILED: %s\n", e.what());
    return 1;
  }
  return 0;
}
