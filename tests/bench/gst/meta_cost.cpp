// cudaipc-gst-meta-bench: what carrying metas costs cudaipcsink and cudaipcsrc per frame
// (docs/metas.md, docs/design.md's budget). The sink's step is encode_metas() into a slot's meta
// area, the source's decode_metas() onto its outgoing buffer, and, apart, removing those metas
// again when the buffer comes back to the source's pool (GStreamer's own work, in whichever
// thread frees the buffer). Each is timed
// per frame, p50/p99 over --frames, beside the same steps for a bare frame measured in the same
// run. Prints a table; asserts no timing, only that every meta crossed intact.
//   cudaipc-gst-meta-bench [--frames=20000] [--detections=100] [--tensor-bytes=10240]
#include <gst/gst.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "detector_metas.hpp"
#include "metas/meta_decoder.h"
#include "metas/meta_encoder.h"

namespace {

using cudaipc::gst::DecodeCounts;
using cudaipc::gst::EncodeCounts;
using cudaipc::gst::MetaFilter;

std::uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

struct Options {
  int frames = 20000;
  int detections = 100;
  std::size_t tensor_bytes = 10240;
};

struct Sample {
  std::vector<double> encode_us, decode_us, remove_us;
};

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

// Encodes `src`'s metas and decodes them onto a fresh buffer `frames` times; the decode step
// includes removing them again, as the source's pool does when the buffer returns.
bool run(GstBuffer* src, int frames, std::vector<std::uint8_t>& area, Sample* out,
         std::uint32_t* bytes, std::uint32_t* metas) {
  MetaFilter all;
  GstBuffer* dst = gst_buffer_new();
  for (int f = 0; f < frames; ++f) {
    EncodeCounts ec;
    const std::uint64_t t0 = now_ns();
    const std::uint32_t used = cudaipc::gst::encode_metas(
        src, all, area.data(), static_cast<std::uint32_t>(area.size()), &ec, nullptr);
    const std::uint64_t t1 = now_ns();
    DecodeCounts dc;
    std::string error;
    cudaipc::gst::decode_metas(area.data(), used, all, dst, &dc, &error);
    const std::uint64_t t15 = now_ns();
    gpointer state = nullptr;
    while (GstMeta* m = gst_buffer_iterate_meta(dst, &state)) {
      gst_buffer_remove_meta(dst, m);
      state = nullptr;
    }
    const std::uint64_t t2 = now_ns();
    if (dc.received != ec.sent || dc.bad || !error.empty()) {
      std::fprintf(stderr, "FAILED: %u metas sent, %u received, %u bad (%s)\n", ec.sent,
                   dc.received, dc.bad, error.c_str());
      gst_buffer_unref(dst);
      return false;
    }
    out->encode_us.push_back(static_cast<double>(t1 - t0) / 1000.0);
    out->decode_us.push_back(static_cast<double>(t15 - t1) / 1000.0);
    out->remove_us.push_back(static_cast<double>(t2 - t15) / 1000.0);
    *bytes = used;
    *metas = ec.sent;
  }
  gst_buffer_unref(dst);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  gst_init(&argc, &argv);
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = std::string(name) + "=";
      return a.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
    };
    if (const char* v = value("--frames")) {
      o.frames = std::atoi(v);
    } else if (const char* v = value("--detections")) {
      o.detections = std::atoi(v);
    } else if (const char* v = value("--tensor-bytes")) {
      o.tensor_bytes = static_cast<std::size_t>(std::atoll(v));
    } else {
      std::fprintf(stderr, "usage: %s [--frames=N] [--detections=N] [--tensor-bytes=N]\n", argv[0]);
      return 2;
    }
  }
  std::vector<std::uint8_t> area(64 * 1024);
  GstBuffer* bare = gst_buffer_new();
  GstBuffer* rich = gst_buffer_new();
  const std::string what = benchmetas::add_detector_output(rich, o.detections, o.tensor_bytes, 1);
  Sample base, full;
  std::uint32_t base_bytes = 0, full_bytes = 0, base_metas = 0, full_metas = 0;
  // Warm both paths (quarks, meta registrations, caches), then measure them interleaved.
  if (!run(bare, 200, area, &base, &base_bytes, &base_metas) ||
      !run(rich, 200, area, &full, &full_bytes, &full_metas))
    return 1;
  base = {};
  full = {};
  for (int chunk = 0; chunk < 10; ++chunk) {
    if (!run(bare, o.frames / 10, area, &base, &base_bytes, &base_metas) ||
        !run(rich, o.frames / 10, area, &full, &full_bytes, &full_metas))
      return 1;
  }
  gst_buffer_unref(bare);
  gst_buffer_unref(rich);
  std::printf("cudaipc meta cost per frame, GStreamer %s, %d frames each: %s\n",
              gst_version_string(), o.frames, what.c_str());
  std::printf(
      "| frame | metas | area bytes | sink: encode p50 / p99 us | source: attach p50 / p99 us "
      "| buffer back in the source's pool: metas removed p50 / p99 us |\n");
  std::printf("|---|---|---|---|---|---|\n");
  auto row = [](const char* name, std::uint32_t metas, std::uint32_t bytes, const Sample& s) {
    std::printf("| %s | %u | %u | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f |\n", name, metas, bytes,
                pct(s.encode_us, 0.5), pct(s.encode_us, 0.99), pct(s.decode_us, 0.5),
                pct(s.decode_us, 0.99), pct(s.remove_us, 0.5), pct(s.remove_us, 0.99));
  };
  row("bare (baseline)", base_metas, base_bytes, base);
  row("with metas", full_metas, full_bytes, full);
  std::printf("| added by the metas (p50) | | | %.2f | %.2f | %.2f |\n",
              pct(full.encode_us, 0.5) - pct(base.encode_us, 0.5),
              pct(full.decode_us, 0.5) - pct(base.decode_us, 0.5),
              pct(full.remove_us, 0.5) - pct(base.remove_us, 0.5));
  return 0;
}
