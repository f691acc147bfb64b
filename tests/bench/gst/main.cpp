// cudaipc-gst-bench: cudaipcsink/cudaipcsrc against GStreamer's own inter-process transports
// (shmsink/shmsrc, unixfdsink/unixfdsrc, nvcodec's cudaipcsink/cudaipcsrc), each a producer
// pipeline and a consumer pipeline in two processes, beside a one-process `videotestsrc !
// fakesink` baseline. videotestsrc (and cudaupload) cap those rows, so further rows push 4
// pre-made (pre-uploaded) frames through an appsrc instead, beside an `appsrc ! fakesink`
// baseline; and rows whose consumer is an app (appsink, pulling samples, reading the tensor
// meta). Prints a table; never fails on a timing, only when a transport that
// exists loses, corrupts or fails to deliver frames.
//   cudaipc-gst-bench [--formats=RGBA,NV12] [--width=1920] [--height=1080] [--frames=500]
//                     [--warmup=50] [--gpu] [--json FILE] [--timeout=60] [--transports=LIST]
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <stdexcept>

#include "gst_bench.hpp"

namespace gstbench {
namespace {

struct Options {
  std::vector<std::string> formats = {"RGBA", "NV12"};
  int width = 1920, height = 1080;
  std::uint64_t frames = 500, warmup = 50;
  bool gpu = false;
  std::string json;
  int timeout_s = 60;
  std::vector<std::string> only;  // transport ids; empty: all
  int live_fps = 0;
  std::string clip;    // H.264 for the decoder rows, at least warmup + frames frames
  bool metas = false;  // pre-made frames carry a detector's output as metas
};

void usage() {
  std::printf(
      "usage: cudaipc-gst-bench [options]\n"
      "  --formats=LIST      video formats: RGBA,NV12\n"
      "  --width=N --height=N  frame size: 1920x1080\n"
      "  --frames=N          measured frames per run: 500\n"
      "  --warmup=N          frames before the measurement (at least 1): 50\n"
      "  --gpu               also the CUDA rows (cudaupload -> cudaipcsink, cudaipcsrc\n"
      "                      io-mode=import|copy; nvcodec's cudaipcsink/src where present)\n"
      "  --json FILE         raw numbers (all latency samples) as JSON\n"
      "  --timeout=S         per-run limit; children are killed past it: 60\n"
      "  --live[=FPS]        live rows instead: videotestsrc is-live=true at FPS (60) into\n"
      "                      the sink with sync=true, consumer into appsink; latency from\n"
      "                      the moment the producer meant to render each frame, with the\n"
      "                      per-frame budget of our elements\n"
      "  --clip=FILE         an H.264 stream of at least warmup + frames frames of the\n"
      "                      row size: the nvh264dec producer rows decode it\n"
      "  --metas             the pre-made (appsrc) frames carry a detector's output as\n"
      "                      metas (100 boxes; on 1.26+ a 4-tensor meta of 10 KiB): the\n"
      "                      same rows with metas crossing, every frame checked for them\n"
      "  --transports=LIST   only these: cudaipc-host,shm,unixfd,cudaipc-cuda-import,\n"
      "                      cudaipc-cuda-copy,nvcodec,cudaipc-host-appsrc,\n"
      "                      cudaipc-cuda-appsrc-import,cudaipc-cuda-appsrc-copy,\n"
      "                      cudaipc-host-appsink,cudaipc-cuda-appsink-import\n");
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto eq = a.find('=');
    const std::string k = a.substr(0, eq);
    std::string v = eq == std::string::npos ? "" : a.substr(eq + 1);
    if (k == "--json" && eq == std::string::npos) {
      if (++i >= argc) throw std::runtime_error("--json needs a file name");
      v = argv[i];
    }
    if (k == "--formats")
      o.formats = split(v);
    else if (k == "--width")
      o.width = std::stoi(v);
    else if (k == "--height")
      o.height = std::stoi(v);
    else if (k == "--frames")
      o.frames = std::stoull(v);
    else if (k == "--warmup")
      o.warmup = std::stoull(v);
    else if (k == "--gpu")
      o.gpu = true;
    else if (k == "--json")
      o.json = v;
    else if (k == "--timeout")
      o.timeout_s = std::stoi(v);
    else if (k == "--transports")
      o.only = split(v);
    else if (k == "--metas")
      o.metas = true;
    else if (k == "--live")
      o.live_fps = v.empty() ? 60 : std::stoi(v);
    else if (k == "--clip")
      o.clip = v;
    else if (k == "--help" || k == "-h") {
      usage();
      std::exit(0);
    } else {
      throw std::runtime_error("unknown option " + a + " (--help lists them)");
    }
  }
  // The measurement window starts at the last warm-up frame's arrival.
  if (o.warmup < 1) o.warmup = 1;
  if (o.frames < 2) throw std::runtime_error("--frames must be at least 2");
  for (const auto& f : o.formats)
    if (gst_video_format_from_string(f.c_str()) == GST_VIDEO_FORMAT_UNKNOWN)
      throw std::runtime_error("unknown video format " + f);
  return o;
}

// What a baseline row (producer_key) runs, for the table.
std::string baseline_label(const std::string& key) {
  if (key == "cuda") return "source only: videotestsrc ! cudaupload ! fakesink (1 process)";
  if (key == "feed") return "source only: 4 pre-made frames, appsrc ! fakesink (1 process)";
  if (key == "feed-cuda")
    return "source only: 4 pre-uploaded CUDA frames, appsrc ! fakesink (1 process)";
  if (key == "convert")
    return "source only: videotestsrc ! cudaupload ! cudaconvertscale ! fakesink (1 process)";
  if (key == "nvdec") return "source only: filesrc ! h264parse ! nvh264dec ! fakesink (1 process)";
  return "source only: videotestsrc ! fakesink (1 process)";
}

std::string machine() {
  utsname u{};
  ::uname(&u);
  std::ifstream f("/proc/cpuinfo");
  std::string line, model = "?";
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return std::to_string(::sysconf(_SC_NPROCESSORS_ONLN)) + " cpus, " + model + ", kernel " +
         u.release;
}

int run(const Options& o) {
  ReportInfo info;
  gchar* v = gst_version_string();
  info.gst_version = v;
  g_free(v);
  info.plugin_file = plugin_file("cudaipc");
  info.machine = machine();
  info.size = std::to_string(o.width) + "x" + std::to_string(o.height);
  info.frames = o.frames;
  info.warmup = o.warmup;
  std::printf("cudaipc-gst-bench, %s; machine: %s\ncudaipc plugin: %s\n", info.gst_version.c_str(),
              info.machine.c_str(), info.plugin_file.empty() ? "(none)" : info.plugin_file.c_str());
  std::printf(
      "latency: producer stamps CLOCK_MONOTONIC into each frame at its sink's sink pad, the "
      "consumer reads it at its source's src pad (same method for every transport); meta: our "
      "sink's render() entry time, from the source's reference timestamp meta. frames/s and "
      "consumer CPU: from the last warm-up frame's arrival to the last frame's; producer CPU: "
      "first measured frame to EOS (getrusage, all threads, less the benchmark probes' own thread "
      "CPU time: stamping, stamp reads, content checks). Producers run flat out, so where the "
      "consumer is the slower side, latency includes the frame's wait in the transport's queue. "
      "System-memory frames: every stamp (index order) and every frame's pixels (3 rows per "
      "plane against the source's colour) are checked. CUDA frames: a stamp read waits for the "
      "frame on the GPU, so stamps are read during warm-up, then on every 16th frame (the "
      "latency column samples those) and the last; pixels (a download) during warm-up and on "
      "the last frame. appsrc rows: the producer pushes 4 frames made once (CUDA: uploaded once) "
      "round-robin, unstamped (the buffers are shared), so only the meta column has latency; the "
      "consumer takes each frame's index from the tensor meta's seq and compares its rows with "
      "the same 4 frames (CUDA: downloads, during warm-up and on the last frame). appsink rows: "
      "the consumer's main thread pulls samples and reads each one's tensor meta; frames/s and "
      "latency are taken where the app gets the sample.\n");
  if (o.live_fps)
    std::printf(
        "live rows: a live videotestsrc paces %d frames/s (each frame numbered in system memory "
        "before any upload); latency is from the moment a frame enters the producer's sink (a "
        "pad probe; sync=false, so the sink renders it at once) to its arrival at the consumer's "
        "appsink (a pad probe), the app thread taking and dropping each sample. The one-process "
        "row shows what a sink with sync=true adds on this machine: how late its clock wait "
        "ends. Our rows also get the per-frame budget from the source's reference timestamps.\n",
        o.live_fps);
  std::fflush(stdout);

  std::string ours_missing;
  const std::vector<Transport> transports =
      discover(o.gpu, o.live_fps > 0, o.clip, o.only, &ours_missing);

  char tmpl[] = "/tmp/cudaipc-gst-bench-XXXXXX";  // short: unix socket paths live in it
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  const std::string root = tmpl;
  std::vector<Row> rows;
  bool ok = ours_missing.empty();
  int index = 0;
  for (const auto& format : o.formats) {
    RunSpec base;
    base.format = format;
    base.width = o.width;
    base.height = o.height;
    base.frames = o.frames;
    base.warmup = o.warmup;
    base.timeout_s = o.timeout_s;
    base.live_fps = o.live_fps;
    if (o.live_fps) {
      // Long enough for every frame at that rate, plus start-up.
      const auto need =
          static_cast<int>(base.total() / static_cast<std::uint64_t>(o.live_fps)) + 20;
      base.timeout_s = std::max(base.timeout_s, need);
    }

    std::fprintf(stderr, "gst-bench: %s baseline\n", format.c_str());
    RunSpec b = base;
    b.transport = "baseline";
    b.dir = make_dir(root, index++, b.transport);
    Row br = run_baseline(b, o.live_fps ? "one process: live videotestsrc ! fakesink sync=true "
                                          "(latency: the sink's clock wait ending)"
                                        : "source only: videotestsrc ! fakesink (1 process)");
    ok = ok && br.ok;
    if (format == "RGBA" && br.ok) {
      // videotestsrc paints ARGB kForeground; RGBA stores it R, G, B, A.
      const std::uint8_t want[4] = {
          static_cast<std::uint8_t>(kForeground >> 16), static_cast<std::uint8_t>(kForeground >> 8),
          static_cast<std::uint8_t>(kForeground), static_cast<std::uint8_t>(kForeground >> 24)};
      if (kv_get(br.producer, "ref0") != hex(want, 4)) {
        br.ok = ok = false;
        add_note(br, "source colour " + kv_get(br.producer, "ref0") + ", expected " + hex(want, 4));
      }
    }
    rows.push_back(br);
    base.ref0 = kv_get(br.producer, "ref0");
    base.ref1 = kv_get(br.producer, "ref1");
    // Each row's baseline: its producer into fakesink in one process, run once per format.
    std::map<std::string, Row> baselines{{"sys", br}};
    auto baseline_for = [&](const Transport& t) -> const Row& {
      const std::string key = producer_key(t.feed, t.cuda, t.upstream);
      auto it = baselines.find(key);
      if (it != baselines.end()) return it->second;
      RunSpec b = base;
      b.transport = "baseline";
      b.cuda = t.cuda;
      b.feed = t.feed;
      b.metas = o.metas && t.feed;
      b.upstream = t.upstream;
      b.clip = o.clip;
      b.dir = make_dir(root, index++, "baseline-" + key);
      std::fprintf(stderr, "gst-bench: %s baseline (%s)\n", format.c_str(), key.c_str());
      Row r = run_baseline(b, baseline_label(key));
      ok = ok && r.ok;
      rows.push_back(r);
      return baselines.emplace(key, r).first->second;
    };
    for (const auto& t : transports) {
      std::string unavailable = t.unavailable;
      if (unavailable.empty() && t.upstream == "nvdec" && format != "NV12")
        unavailable = "not available: the decoder's frames are NV12";
      if (!unavailable.empty()) {
        Row r;
        r.id = t.id;
        r.label = t.label;
        r.format = format;
        r.note = unavailable;
        rows.push_back(r);
        continue;
      }
      const Row base_row = o.live_fps ? br : baseline_for(t);
      RunSpec s = base;
      s.transport = t.id;
      for (const char* ours : {"cudaipc-cuda", "cudaipc-host"})
        if (t.id.rfind(ours, 0) == 0) s.transport = ours;
      s.sink_factory = t.sink_factory;
      s.src_factory = t.src_factory;
      s.io_mode = t.io_mode;
      s.cuda = t.cuda;
      s.feed = t.feed;
      s.metas = o.metas && t.feed;
      s.appsink = t.appsink;
      s.upstream = t.upstream;
      s.clip = o.clip;
      // The colour this producer's frames have (cudaconvertscale's differs from videotestsrc's).
      if (!kv_get(base_row.producer, "ref0").empty()) {
        s.ref0 = kv_get(base_row.producer, "ref0");
        s.ref1 = kv_get(base_row.producer, "ref1");
      }
      if (t.upstream == "nvdec") s.ref0 = s.ref1 = "";  // decoded frames are not one colour
      s.dir = make_dir(root, index++, t.id);
      std::fprintf(stderr, "gst-bench: %s %s\n", format.c_str(), t.id.c_str());
      Row r = run_pair(t, s, base_row.fps);
      r.base_fps = base_row.fps;
      r.base_prod_cpu_us = base_row.prod_cpu_us;
      ok = ok && r.ok;
      rows.push_back(r);
    }
  }

  if (!o.json.empty()) write_json(o.json, info, rows);
  if (std::system(("rm -rf '" + root + "'").c_str()) != 0)
    std::fprintf(stderr, "gst-bench: could not remove %s\n", root.c_str());
  print_table(info, rows);
  std::printf("\n%s\n", ok ? "every transport that exists delivered every frame, verified"
                           : "FAILED: see the rows marked FAILED and the messages above");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace gstbench

int main(int argc, char** argv) {
  gstbench::set_self_exe(argv[0]);
  gst_init(nullptr, nullptr);
  try {
    if (argc > 1 && std::strncmp(argv[1], "--role=", 7) == 0) {
      const std::string role = argv[1] + 7;
      const auto spec = gstbench::RunSpec::from_args({argv + 2, argv + argc});
      if (role == "producer") return gstbench::producer_role(spec);
      if (role == "consumer") return gstbench::consumer_role(spec);
      if (role == "baseline") return gstbench::baseline_role(spec);
      std::fprintf(stderr, "gst-bench: unknown role %s\n", role.c_str());
      return 2;
    }
    return gstbench::run(gstbench::parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gst-bench: %s\n", e.what());
  }
  return 1;
}
