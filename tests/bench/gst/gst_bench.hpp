// cudaipc-gst-bench: shared declarations. The parent process decides which transports exist,
// then runs each one as a producer process and a consumer process (this program again, with
// --role=), both GStreamer pipelines; the children report through files in a private directory.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gstbench {

using Kv = std::map<std::string, std::string>;  // a child's report: one "key value" per line

// What one run does, passed to the child processes as key=value arguments.
struct RunSpec {
  std::string transport;  // a Transport id ("cudaipc-host", "shm", ...) or "baseline"
  std::string format = "RGBA";
  int width = 1920, height = 1080;
  std::uint64_t warmup = 50, frames = 500;
  std::string sink_factory, src_factory;  // resolved by the parent (ours by plugin name)
  std::string io_mode;                    // cudaipcsrc io-mode for the CUDA rows
  bool cuda = false;                      // frames travel in CUDA memory
  // The producer pushes kFeedFrames buffers made once (uploaded once for CUDA) through an
  // appsrc, flat out: the rows where the source is not the bottleneck. No stamps (the buffers
  // are shared); the consumer takes the index from the tensor meta's seq.
  bool feed = false;
  bool appsink = false;  // the consumer is an app pulling samples from an appsink
  // Feed rows: each frame carries a detector's output as metas (detector_metas.hpp): 100 boxes
  // and, on 1.26+, a 4-tensor meta of 10 KiB; the consumer checks they arrived.
  bool metas = false;
  // What makes the CUDA frames upstream of the sink: "" cudaupload; "convert" cudaupload then
  // cudaconvertscale (a 1280x720 I420 source converted and scaled to the row's format and size);
  // "nvdec" nvh264dec decoding `clip` (unstamped, like the feed: nothing is written into a frame).
  std::string upstream;
  std::string clip;
  // Live (frames/s > 0): a live videotestsrc paces frames at this rate (the sink has sync=false:
  // it renders each frame as it comes), the consumer ends in an appsink; latency is from the
  // moment a frame enters the producer's sink to its arrival at the consumer's appsink.
  int live_fps = 0;
  std::string dir;  // this run's socket, handshake and result files
  int timeout_s = 60;
  std::string ref0, ref1;  // expected bytes of one pixel group of plane 0 / 1 (hex); empty: none

  std::uint64_t total() const { return warmup + frames; }
  std::string path(const char* name) const { return dir + "/" + name; }
  std::vector<std::string> to_args() const;
  static RunSpec from_args(const std::vector<std::string>& args);
};

// One line of the report: a transport (or the baseline, or a row that did not run) at a format.
struct Row {
  std::string id;     // transport id, "baseline" or "baseline-cuda"
  std::string label;  // what the table shows
  std::string format;
  std::string note;  // why it did not run, what failed, remarks
  bool ran = false;
  bool ok = true;
  std::uint64_t sent = 0, received = 0, lost = 0, bad = 0, checked = 0;
  double fps = 0;             // consumer side (baseline: the sink), frames / window
  double over_source_us = 0;  // per-frame time above the baseline's (1e6/fps difference)
  double base_fps = 0, base_prod_cpu_us = 0;  // the same producer into fakesink, one process
  double prod_cpu_us = 0, cons_cpu_us = 0;
  std::vector<std::uint64_t> lat, meta;  // ns: stamp-based, and our sink-chain meta
  // Live rows through our elements: where each frame's time went (ns per frame, see kStages).
  std::vector<std::uint64_t> stages[5];
  Kv producer, consumer;  // the children's raw reports
};

struct ReportInfo {
  std::string gst_version, plugin_file, machine, size;
  std::uint64_t frames = 0, warmup = 0;
};
// The Markdown table (stdout) and the raw numbers (JSON file).
void print_table(const ReportInfo& info, const std::vector<Row>& rows);
void write_json(const std::string& path, const ReportInfo& info, const std::vector<Row>& rows);

// The per-frame budget of a live frame through cudaipcsink/cudaipcsrc: from the moment it enters
// the sink (a pad probe) through the source's reference timestamps and the push (a pad probe) to
// the appsink (a pad probe).
inline constexpr const char* kStages[5] = {
    "sink: enters the sink -> render() entry",  // basesink's chain before render()
    "sink: render() entry -> published",        // slot, copy, commit
    "wake: published -> source acquired it",    // futex wake across processes
    "source: acquired -> pushed",               // buffer, metas, timestamps
    "downstream: pushed -> appsink",            // the consumer pipeline's own hop
};

// ---- which transports exist (discover.cpp) ----
struct Transport {
  std::string id;  // what the roles and pipelines key on
  std::string label;
  std::string sink_factory, src_factory, io_mode;
  bool cuda = false;
  bool every_frame = true;             // promises every frame, so a lost one is a failure
  bool feed = false, appsink = false;  // as in RunSpec
  std::string upstream;                // as in RunSpec
  std::string unavailable;             // why it does not run; empty: it runs
};
// Every transport, runnable or with the reason it is not; `only` (ids) narrows the list.
// `*ours_missing` says why the cudaipc plugin's elements were not found ("" when they were).
// `clip`: an H.264 file for the decoder rows ("": they do not run).
std::vector<Transport> discover(bool gpu, bool live, const std::string& clip,
                                const std::vector<std::string>& only, std::string* ours_missing);
// Which producer a run has (its baseline is the same producer into fakesink): "sys", "cuda",
// "feed", "feed-cuda", "convert" or "nvdec".
std::string producer_key(bool feed, bool cuda, const std::string& upstream);
std::string plugin_file(const char* plugin);  // "" when the registry has no such plugin

// ---- runs in fresh processes (runs.cpp) ----
// `s.dir` must exist; `base_fps` is the matching baseline's, for the overhead column.
Row run_baseline(const RunSpec& s, const std::string& label);
Row run_pair(const Transport& t, const RunSpec& s, double base_fps);
std::string make_dir(const std::string& root, int index, const std::string& id);
void add_note(Row& r, const std::string& note);

// ---- pipelines (transports.cpp) ----
std::string producer_launch(const RunSpec& s);
std::string consumer_launch(const RunSpec& s);
std::string baseline_launch(const RunSpec& s);
// Makes the feed's frames: videotestsrc scrolling by 16 pixels a frame, so the kFeedFrames
// frames differ in every row, (cudaupload when s.cuda) into appsink "out".
std::string feed_frames_launch(const RunSpec& s);
inline constexpr std::size_t kFeedFrames = 4;
// The colour videotestsrc paints (ARGB), so a zeroed or foreign frame cannot pass the check.
inline constexpr std::uint32_t kForeground = 0xff3c78b4;

// ---- child roles (roles.cpp); each returns the process exit status ----
int producer_role(const RunSpec& s);
int consumer_role(const RunSpec& s);
int baseline_role(const RunSpec& s);

// ---- frame stamps and content checks (frame_check.cpp) ----
// Bytes 0..15 of plane 0 carry {CLOCK_MONOTONIC ns, frame index, magic}, written by the
// producer just before its sink's chain and read by the consumer after its source's push.
struct Stamp {
  std::uint64_t mono_ns = 0;
  std::uint32_t index = 0;
  std::uint32_t magic = 0;
};
inline constexpr std::uint32_t kStampMagic = 0x424d5453;  // "STMB"
inline constexpr std::size_t kStampBytes = sizeof(Stamp);

struct FrameCheck {
  GstVideoInfo info;                         // the frame's caps; a GstVideoMeta overrides layout
  std::vector<std::uint8_t> ref[2];          // one pixel group of plane 0 / plane 1; empty: any
  static FrameCheck from(const RunSpec& s);  // caps from the spec, references from ref0/ref1
};
// Writes `st` at plane 0's first byte, in system or CUDA memory. Makes `*buf` writable first;
// `*copied` tells whether that took a copy (it should not: the source's buffers are its own).
bool write_stamp(GstBuffer** buf, const FrameCheck& fc, const Stamp& st, bool* copied);
bool read_stamp(GstBuffer* buf, const FrameCheck& fc, Stamp* out);
// Compares sampled rows of every plane with the expected pixel group (past the stamp); CUDA
// memory is downloaded through a host map. False on a mismatch, with the first one in `why`.
bool check_solid(GstBuffer* buf, const FrameCheck& fc, std::string* why);
// Compares the first, middle and last row of every plane of `buf` with `ref`'s.
bool check_same(GstBuffer* buf, GstBuffer* ref, const FrameCheck& fc, std::string* why);
// Plane 0's and plane 1's pixel group at the frame's last pixel, hex (the stamp sits at the
// first), for the consumer's expected colour.
bool pixel_groups(GstBuffer* buf, const FrameCheck& fc, std::string* p0, std::string* p1);

// ---- CUDA (cuda_probe.cpp) ----
// Empty when a CUDA device and nvcodec's cudaupload are usable; else why not.
std::string gpu_unavailable_reason();
// 16-byte copies into / out of GstCudaMemory (a synchronous CuMemcpy2D).
bool is_cuda_memory(GstMemory* mem);
bool cuda_write(GstMemory* mem, std::size_t offset, const void* src, std::size_t n);
bool cuda_read(GstMemory* mem, std::size_t offset, void* dst, std::size_t n);
// A context carrying the GstCudaContext of `buf`'s first memory (nullptr when not CUDA memory),
// so elements that use the buffers work in the context they were allocated in.
GstContext* cuda_context_of(GstBuffer* buf);

// ---- process and file helpers (util.cpp) ----
std::uint64_t mono_ns();
std::uint64_t cpu_rusage_ns();  // RUSAGE_SELF user + system
std::uint64_t thread_cpu_ns();  // CLOCK_THREAD_CPUTIME_ID
double percentile(std::vector<std::uint64_t> v, double q);
void write_kv(const std::string& path, const Kv& kv);  // atomic: written aside, then renamed
Kv read_kv(const std::string& path);
std::uint64_t kv_u64(const Kv& kv, const char* key);  // 0 when absent
std::string kv_get(const Kv& kv, const char* key);    // "" when absent
void write_samples(const std::string& path, const std::vector<std::uint64_t>& v);
std::vector<std::uint64_t> read_samples(const std::string& path);
bool file_exists(const std::string& path);
void touch(const std::string& path);
// Polls for `path` until the deadline (CLOCK_MONOTONIC ns); true when it appeared.
bool wait_for_file(const std::string& path, std::uint64_t deadline_ns);
void set_self_exe(const char* argv0);
pid_t spawn_self(const std::vector<std::string>& args);
// Children die with the parent, so a killed benchmark leaves no pipelines behind.
void die_with_parent();
// Waits for every pid until the deadline, killing the rest (SIGKILL) once it passes or once one
// failed and `grace_ns` passed after that. Returns per pid: exit status, or -signal, or -1000
// for "killed on timeout".
std::vector<int> wait_all(const std::vector<pid_t>& pids, std::uint64_t deadline_ns,
                          std::uint64_t grace_ns);
std::string hex(const std::uint8_t* p, std::size_t n);
std::vector<std::uint8_t> unhex(const std::string& s);

}  // namespace gstbench
