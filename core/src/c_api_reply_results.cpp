#include "c_api_reply_results.hpp"

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "c_api_metas_writer.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/metas.hpp"

namespace cudaipc::capi {

// Python packs the struct with struct.Struct("@PPIIPPPPqqqqqIIIIPPII") (_server_gpu.py).
static_assert(sizeof(cudaipc_reply_results) == 136 &&
                  offsetof(cudaipc_reply_results, boxes_strides) == 56 &&
                  offsetof(cudaipc_reply_results, names) == 112,
              "cudaipc_reply_results's layout is the one Python packs");

namespace {

ResultArray array(const void* data, std::uint32_t dtype, std::int64_t stride,
                  std::int64_t inner = 1) {
  ResultArray a;
  a.data = data;
  a.dtype = static_cast<DType>(dtype);
  a.stride = stride;
  a.inner = inner;
  return a;
}

// The most labels named in decimal beyond a names table (a label past it is a model's class the
// caller gave no name; a larger one is refused by the writer as the host path's would be).
constexpr std::int64_t kMaxDecimalLabel = 65536;

// Labels past `d`'s names table get their decimal text, as Python's host path names them: the
// table is extended into `text`/`offsets` (which `d` then points to). The labels were read by the
// GPU's copies only now, so this cannot happen before.
void name_every_label(cudaipc_detections& d, std::string& text,
                      std::vector<std::uint32_t>& offsets) {
  if (!d.labels || !d.n) return;
  std::int64_t top = -1;
  for (std::uint32_t i = 0; i < d.n; ++i) top = std::max(top, d.labels[i]);
  if (top < static_cast<std::int64_t>(d.name_count) || top >= kMaxDecimalLabel) return;
  text.clear();
  offsets.clear();
  offsets.push_back(0);
  for (std::uint32_t k = 0; k < d.name_count; ++k) {
    text.append(reinterpret_cast<const char*>(d.names) + d.name_offsets[k],
                d.name_offsets[k + 1] - d.name_offsets[k]);
    offsets.push_back(static_cast<std::uint32_t>(text.size()));
  }
  for (std::int64_t k = d.name_count; k <= top; ++k) {
    text += std::to_string(k);
    offsets.push_back(static_cast<std::uint32_t>(text.size()));
  }
  d.names = reinterpret_cast<const std::uint8_t*>(text.data());
  d.name_offsets = offsets.data();
  d.name_count = static_cast<std::uint32_t>(top + 1);
}

}  // namespace

ResultDetections results_of(const cudaipc_reply_results& r) {
  ResultDetections d;
  d.n = r.n;
  d.boxes = array(r.boxes, r.boxes_dtype, r.boxes_strides[0], r.boxes_strides[1]);
  d.scores = array(r.scores, r.scores_dtype, r.scores_stride);
  d.labels = array(r.labels, r.labels_dtype, r.labels_stride);
  d.rotation = array(r.rotation, r.rotation_dtype, r.rotation_stride);
  d.names = r.names;
  d.name_offsets = r.name_offsets;
  d.name_count = r.name_count;
  d.on_device = !(r.flags & CUDAIPC_RESULTS_HOST);
  return d;
}

ResultDetections results_of(const cudaipc_detections& c) {
  ResultDetections d;
  d.n = c.n;
  const auto f32 = static_cast<std::uint32_t>(DType::float32);
  d.boxes = array(c.boxes, f32, 4);
  d.scores = array(c.scores, f32, 1);
  d.labels = array(c.labels, static_cast<std::uint32_t>(DType::int64), 1);
  d.rotation = array(c.rotation, f32, 1);
  d.names = c.names;
  d.name_offsets = c.name_offsets;
  d.name_count = c.name_count;
  d.on_device = false;
  return d;
}

std::uint32_t encode_results(const ReadyResults& r, std::uint8_t* area, std::uint32_t capacity) {
  thread_local MetasWriter w;
  thread_local std::string text;
  thread_local std::vector<std::uint32_t> offsets;
  w.begin(area, capacity);
  if (r.detections) {
    cudaipc_detections d{};
    d.n = r.n;
    d.boxes = r.boxes;
    d.scores = r.scores;
    d.rotation = r.rotation;
    d.labels = r.labels;
    d.names = r.names;
    d.name_offsets = r.name_offsets;
    d.name_count = r.name_count;
    name_every_label(d, text, offsets);
    w.analytics(kAnalyticsName, analytics_of(d));
  }
  if (r.metas_size) {
    metas::AreaReader rd(r.metas, r.metas_size);
    metas::Record rec;
    while (rd.next(&rec))
      w.raw(static_cast<std::uint32_t>(rec.kind), rec.name, rec.body.data, rec.body.size);
    if (rd.error())
      throw Error(Errc::invalid_argument, std::string("the reply's host records: ") + rd.error());
  }
  return static_cast<std::uint32_t>(w.finish());
}

}  // namespace cudaipc::capi
