// Consumer role: cudaipcsrc ! appsink in this process, every frame checked against what its
// producer must have sent, and a summary of sequence numbers, DISCONTs and EOS for the test.
#include <gst/app/gstappsink.h>
#include <gst/cudaipc/gstcudaipcmeta.h>
#include <gst/video/video.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "element_names.hpp"
#include "filter_model.hpp"
#include "frame_pattern.hpp"
#include "mp_peer_args.hpp"

namespace gstmp_peer {

namespace {

using Clock = std::chrono::steady_clock;

// Frames of a local pipeline that must produce the same frames as the remote producer
// (videotestsrc with animation-mode=frames is a function of the frame number).
class Reference {
 public:
  explicit Reference(const std::string& description) {
    GError* err = nullptr;
    pipeline_ = gst_parse_launch((description + " ! appsink name=ref sync=false").c_str(), &err);
    if (err) {
      error_ = err->message;
      g_error_free(err);
    }
    if (!pipeline_) return;
    sink_ = gst_bin_get_by_name(GST_BIN(pipeline_), "ref");
    gst_element_set_state(pipeline_, GST_STATE_PLAYING);
  }
  ~Reference() {
    for (GstSample* s : frames_) gst_sample_unref(s);
    if (sink_) gst_object_unref(sink_);
    if (pipeline_) {
      gst_element_set_state(pipeline_, GST_STATE_NULL);
      gst_object_unref(pipeline_);
    }
  }
  bool ok() const { return pipeline_ && sink_; }
  const std::string& error() const { return error_; }

  // Reference frame `index` (0-based), or null when the reference ended before it.
  GstBuffer* frame(std::uint64_t index) {
    while (frames_.size() <= index) {
      GstSample* s = gst_app_sink_try_pull_sample(GST_APP_SINK(sink_), 5 * GST_SECOND);
      if (!s) return nullptr;
      frames_.push_back(s);
    }
    return gst_sample_get_buffer(frames_[index]);
  }

 private:
  GstElement* pipeline_ = nullptr;
  GstElement* sink_ = nullptr;
  std::vector<GstSample*> frames_;
  std::string error_;
};

bool same_bytes(GstBuffer* a, GstBuffer* b) {
  GstMapInfo ma, mb;
  if (!gst_buffer_map(a, &ma, GST_MAP_READ)) return false;
  if (!gst_buffer_map(b, &mb, GST_MAP_READ)) {
    gst_buffer_unmap(a, &ma);
    return false;
  }
  const bool same = ma.size == mb.size && std::memcmp(ma.data, mb.data, ma.size) == 0;
  gst_buffer_unmap(b, &mb);
  gst_buffer_unmap(a, &ma);
  return same;
}

// The results a cudaipcfilter model attached upstream (filter_model.hpp): how many, the first.
struct Results {
  int count = 0;
  long long first = -1;
  bool all_equal_to(std::uint64_t id) const {
    return count == 0 || (count == 1 && first == static_cast<long long>(id));
  }
};

Results results_of(GstBuffer* buf) {
  Results r;
  gpointer state = nullptr;
  while (GstMeta* meta = gst_buffer_iterate_meta(buf, &state)) {
    if (!gst_meta_info_is_custom(meta->info)) continue;
    auto* cm = reinterpret_cast<GstCustomMeta*>(meta);
    if (!gst_custom_meta_has_name(cm, cudaipc::testing::gstmp::kResultMeta)) continue;
    gint64 v = -1;
    gst_structure_get_int64(gst_custom_meta_get_structure(cm),
                            cudaipc::testing::gstmp::kResultField, &v);
    if (r.count++ == 0) r.first = v;
  }
  return r;
}

struct Tally {
  std::uint64_t frames = 0, bad = 0, first_seq = 0, last_seq = 0, gaps = 0, backwards = 0;
  std::uint64_t discont = 0, first_id = 0, last_id = 0, id_gaps = 0;
  // Frames carrying a cudaipcfilter model's result (filter_model.hpp), and those whose result is
  // not their own id (or that carry more than one).
  std::uint64_t with_results = 0, wrong_results = 0;
  bool eos = false;
  // One entry per run of frames between DISCONTs: "FIRSTID-LASTID/COUNT@FIRSTSEQ-LASTSEQ".
  std::string segments;
  std::uint64_t seg_first_id = 0, seg_first_seq = 0, seg_count = 0;

  void close_segment() {
    if (!seg_count) return;
    if (!segments.empty()) segments += ",";
    segments += std::to_string(seg_first_id) + "-" + std::to_string(last_id) + "/" +
                std::to_string(seg_count) + "@" + std::to_string(seg_first_seq) + "-" +
                std::to_string(last_seq);
    seg_count = 0;
  }

  void add(std::uint64_t seq, std::uint64_t id, bool discont_flag, bool ok) {
    if (discont_flag) {
      ++discont;
      close_segment();
    }
    if (seg_count > 0) {
      if (seq != last_seq + 1) ++gaps;
      if (seq <= last_seq) ++backwards;
      if (id != last_id + 1) ++id_gaps;
    } else {
      seg_first_id = id;
      seg_first_seq = seq;
    }
    if (frames == 0) {
      first_seq = seq;
      first_id = id;
    }
    if (!ok) ++bad;
    last_seq = seq;
    last_id = id;
    ++frames;
    ++seg_count;
  }

  void print() {
    close_segment();
    std::printf(
        "summary {\"frames\":%llu,\"bad\":%llu,\"first_seq\":%llu,\"last_seq\":%llu,"
        "\"gaps\":%llu,\"backwards\":%llu,\"discont_count\":%llu,\"eos\":%s,\"first_id\":%llu,"
        "\"last_id\":%llu,\"id_gaps\":%llu,\"segments\":\"%s\",\"with_results\":%llu,"
        "\"wrong_results\":%llu}\n",
        static_cast<unsigned long long>(frames), static_cast<unsigned long long>(bad),
        static_cast<unsigned long long>(first_seq), static_cast<unsigned long long>(last_seq),
        static_cast<unsigned long long>(gaps), static_cast<unsigned long long>(backwards),
        static_cast<unsigned long long>(discont), eos ? "true" : "false",
        static_cast<unsigned long long>(first_id), static_cast<unsigned long long>(last_id),
        static_cast<unsigned long long>(id_gaps), segments.c_str(),
        static_cast<unsigned long long>(with_results),
        static_cast<unsigned long long>(wrong_results));
  }
};

struct Pipeline {
  GstElement* pipeline = nullptr;
  ~Pipeline() {
    if (pipeline) {
      gst_element_set_state(pipeline, GST_STATE_NULL);
      gst_object_unref(pipeline);
    }
  }
};

}  // namespace

int consume(const Args& a) {
  const std::string src_name = cudaipc::testing::gstmp::src_factory();
  if (src_name.empty()) {
    std::printf("skip: no cudaipcsrc of this project is registered\n");
    return 77;
  }
  const auto deadline = Clock::now() + std::chrono::seconds(a.num("timeout-s", 30));
  const std::uint64_t max_frames = a.num("max-frames", 0);
  const std::uint64_t stall_after = a.num("stall-after", 0);
  const auto delay = std::chrono::milliseconds(a.num("delay-ms", 0));
  const bool verbose = a.flag("verbose");
  std::unique_ptr<Reference> reference;
  if (a.flag("reference")) {
    reference = std::make_unique<Reference>(a.str("reference"));
    if (!reference->ok()) {
      std::printf("error: reference pipeline: %s\n", reference->error().c_str());
      return 1;
    }
  }

  Pipeline p;
  p.pipeline = gst_pipeline_new("consumer");
  GstElement* src = gst_element_factory_make(src_name.c_str(), "src");
  GstElement* sink = gst_element_factory_make("appsink", "sink");
  if (!src || !sink) {
    std::printf("error: could not create %s or appsink\n", src_name.c_str());
    return 1;
  }
  g_object_set(src, "socket-path", a.str("socket").c_str(), nullptr);
  gst_util_set_object_arg(G_OBJECT(src), "mode", a.str("mode", "every-frame").c_str());
  gst_util_set_object_arg(G_OBJECT(src), "reconnect", a.str("reconnect", "true").c_str());
  // Each buffer downstream holds a slot's lease: keep only the one being checked and one queued.
  g_object_set(sink, "sync", FALSE, "max-buffers", 1u, "drop", FALSE, "enable-last-sample", FALSE,
               nullptr);
  gst_bin_add_many(GST_BIN(p.pipeline), src, sink, nullptr);
  if (!gst_element_link(src, sink)) {
    std::printf("error: could not link %s to appsink\n", src_name.c_str());
    return 1;
  }
  if (gst_element_set_state(p.pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    if (!report_bus_error(p.pipeline)) std::printf("error: the pipeline did not start\n");
    return 2;
  }
  std::printf("playing\n");

  Tally t;
  std::vector<GstSample*> held;  // --stall-after: leases kept until the test kills us
  for (;;) {
    GstSample* sample = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 100 * GST_MSECOND);
    if (sample) {
      GstBuffer* buf = gst_sample_get_buffer(sample);
      GstVideoInfo info;
      const bool have_info = gst_video_info_from_caps(&info, gst_sample_get_caps(sample));
      const GstCudaIpcTensorMeta* meta = gst_buffer_get_cuda_ipc_tensor_meta(buf);
      const std::uint64_t seq = meta ? meta->seq : 0;
      std::uint64_t id = 0;
      bool ok = meta != nullptr && have_info;
      GstMapInfo map;
      if (gst_buffer_map(buf, &map, GST_MAP_READ)) {
        if (reference) {
          GstBuffer* want = seq ? reference->frame(seq - 1) : nullptr;
          ok = ok && want && same_bytes(buf, want);
          id = seq;
        } else {
          ok = ok && map.size == GST_VIDEO_INFO_SIZE(&info) &&
               cudaipc::testing::gstmp::frame_intact(map.data, map.size);
          id = map.size >= cudaipc::testing::gstmp::kIdBytes
                   ? cudaipc::testing::gstmp::frame_id(map.data)
                   : 0;
        }
        gst_buffer_unmap(buf, &map);
      } else {
        ok = false;
      }
      const bool discont = GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_DISCONT);
      t.add(seq, id, discont, ok);
      const Results r = results_of(buf);
      if (r.count) ++t.with_results;
      if (!r.all_equal_to(id)) ++t.wrong_results;
      if (verbose)
        std::printf("frame seq=%llu id=%llu discont=%d ok=%d results=%d result=%lld\n",
                    static_cast<unsigned long long>(seq), static_cast<unsigned long long>(id),
                    discont ? 1 : 0, ok ? 1 : 0, r.count, r.first);
      if (stall_after && t.frames == stall_after) {
        held.push_back(sample);
        std::printf("stalled\n");
        // Stop reading with the leases held; the test kills us. Bounded all the same.
        while (Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        std::printf("timeout: still stalled\n");
        for (GstSample* s : held) gst_sample_unref(s);
        t.print();
        return 3;
      }
      gst_sample_unref(sample);
      if (delay.count()) std::this_thread::sleep_for(delay);
      if (max_frames && t.frames >= max_frames) break;
      continue;
    }
    if (gst_app_sink_is_eos(GST_APP_SINK(sink))) {
      t.eos = true;
      break;
    }
    if (report_bus_error(p.pipeline)) {
      t.print();
      return 2;
    }
    if (Clock::now() >= deadline) {
      std::printf("timeout: no frame or EOS in time\n");
      t.print();
      return 3;
    }
  }
  t.print();
  return 0;
}

}  // namespace gstmp_peer
