// The C API's meta-area writer for the common case of a frame's detections alone (cudaipc.h):
// Python's publish(detections=...) hands its arrays over in one call instead of a dozen NumPy
// operations. The bytes are those of the Python encoder for the same input (docs/metas.md, kind 2:
// the label names table whole as the heap).
#include <cmath>
#include <cstring>

#include "c_api_handles.hpp"
#include "cudaipc/cudaipc.h"
#include "metas/bytes_io.hpp"

namespace {

using cudaipc::metas::io::pad8;
using cudaipc::metas::io::store;

constexpr char kName[] = "GstAnalyticsRelationMetaAPI";
constexpr std::size_t kNameLen = sizeof kName - 1;
constexpr std::size_t kMtd = 56;

}  // namespace

int64_t cudaipc_metas_detections_area(const cudaipc_detections* d) {
  int64_t size = 0;
  const int rc = cudaipc::capi::guard([&] {
    using cudaipc::Errc;
    using cudaipc::Error;
    if (!d) throw Error(Errc::invalid_argument, "detections area: no detections given");
    std::uint8_t* const area = d->area;
    const std::uint32_t capacity = d->capacity, n = d->n, name_count = d->name_count;
    const float *boxes = d->boxes, *scores = d->scores, *rotation = d->rotation;
    const std::int64_t* labels = d->labels;
    const std::uint8_t* names = d->names;
    const std::uint32_t* name_offsets = d->name_offsets;
    if (!area || (n && !boxes) || (labels && (!name_offsets || name_count == 0)))
      throw Error(Errc::invalid_argument, "detections area: a required array is missing");
    const std::size_t heap = labels ? name_offsets[name_count] : 0;
    if (labels && heap && !names)
      throw Error(Errc::invalid_argument, "detections area: label names are missing");
    const std::size_t heap_at = 24 + kMtd * static_cast<std::size_t>(n);
    const std::size_t body = heap_at + heap;
    const std::size_t record = 8 + pad8(kNameLen) + pad8(body);
    const std::size_t total = 16 + record;
    if (total > capacity)
      throw Error(Errc::invalid_argument, "the frame's metas need " + std::to_string(total) +
                                              " bytes, more than the channel's meta area of " +
                                              std::to_string(capacity) + " bytes per slot");
    std::uint8_t* p = area;
    store<std::uint32_t>(p, 0x544D4943);  // "CIMT"
    store<std::uint16_t>(p + 4, 1);
    store<std::uint16_t>(p + 6, 1);
    store<std::uint32_t>(p + 8, static_cast<std::uint32_t>(total));
    store<std::uint32_t>(p + 12, 0);
    p += 16;
    store<std::uint32_t>(p, static_cast<std::uint32_t>(record));
    store<std::uint16_t>(p + 4, 2);  // analytics
    store<std::uint16_t>(p + 6, static_cast<std::uint16_t>(kNameLen));
    std::memset(p + 8, 0, pad8(kNameLen));
    std::memcpy(p + 8, kName, kNameLen);
    std::uint8_t* b = p + 8 + pad8(kNameLen);
    store<std::uint32_t>(b, n);
    store<std::uint32_t>(b + 4, 0);
    store<std::uint32_t>(b + 8, static_cast<std::uint32_t>(heap_at));
    store<std::uint32_t>(b + 12, static_cast<std::uint32_t>(heap));
    store<std::uint32_t>(b + 16, static_cast<std::uint32_t>(heap_at));
    store<std::uint32_t>(b + 20, 0);
    for (std::uint32_t i = 0; i < n; ++i) {
      std::uint8_t* e = b + 24 + kMtd * i;
      std::memset(e, 0, kMtd);
      std::uint32_t off = 0, len = 0;
      if (labels) {
        const int64_t l = labels[i];
        if (l < 0 || static_cast<uint64_t>(l) >= name_count)
          throw Error(Errc::invalid_argument, "label " + std::to_string(l) + " of box " +
                                                  std::to_string(i) + " has no name (" +
                                                  std::to_string(name_count) + " names)");
        off = name_offsets[l];
        len = name_offsets[l + 1] - off;
      }
      const float* bx = boxes + 4 * static_cast<std::size_t>(i);
      store<std::uint32_t>(e, 1);  // object detection
      store<std::uint32_t>(e + 4, i);
      store<std::uint32_t>(e + 8, rotation ? 1u : 0u);
      store<std::uint32_t>(e + 12, off);
      store<std::uint32_t>(e + 16, len);
      // x = rint(x1), w = rint(x2 - x1), in float32 as the NumPy encoder rounds them.
      store<std::int32_t>(e + 32, static_cast<std::int32_t>(std::nearbyint(bx[0])));
      store<std::int32_t>(e + 36, static_cast<std::int32_t>(std::nearbyint(bx[1])));
      store<std::int32_t>(e + 40, static_cast<std::int32_t>(std::nearbyint(bx[2] - bx[0])));
      store<std::int32_t>(e + 44, static_cast<std::int32_t>(std::nearbyint(bx[3] - bx[1])));
      store<float>(e + 48, rotation ? rotation[i] : 0.f);
      store<float>(e + 52, scores ? scores[i] : 1.f);
    }
    if (heap) std::memcpy(b + heap_at, names, heap);
    std::memset(b + body, 0, pad8(body) - body);
    size = static_cast<int64_t>(total);
  });
  return rc == CUDAIPC_OK ? size : -rc;
}
