#include "metas/meta_decoder.h"

#include "cudaipc/metas.hpp"
#include "metas/analytics_records.h"
#include "metas/custom_records.h"
#include "metas/tensor_records.h"

namespace cudaipc::gst {
namespace {

bool attach_serialized(GstBuffer* buf, metas::Bytes body, bool* unknown) {
#if GST_CHECK_VERSION(1, 24, 0)
  guint32 consumed = 0;
  // gst_meta_deserialize reads the implementation's name first and returns NULL for one this
  // process has not registered, as for bytes it cannot parse: both count as unknown here, since
  // GStreamer checks the bytes itself.
  if (gst_meta_deserialize(buf, body.data, body.size, &consumed)) return true;
  *unknown = true;
  return false;
#else
  (void)buf, (void)body;
  *unknown = true;
  return false;
#endif
}

}  // namespace

void decode_metas(const std::uint8_t* area, std::uint32_t bytes, const MetaFilter& filter,
                  GstBuffer* buf, DecodeCounts* counts, std::string* error) {
  if (!area || bytes == 0) return;
  metas::AreaReader reader(area, bytes);
  metas::Record rec;
  const bool analytics = analytics_api_type() != 0;
  const bool tensors = tensor_meta_api_type_or_0() != 0;
  while (reader.next(&rec)) {
    if (!filter.allows(rec.name)) {
      ++counts->filtered;
      continue;
    }
    std::string why;
    bool ok = false, unknown = false;
    std::uint32_t skipped = 0;
    switch (rec.kind) {
      case metas::RecordKind::analytics:
        unknown = !analytics;
        ok = analytics && attach_analytics(buf, rec.body, &skipped, &why);
        break;
      case metas::RecordKind::tensors:
        unknown = !tensors;
        ok = tensors && attach_tensors(buf, rec.body, &why);
        break;
      case metas::RecordKind::custom:
        ok = attach_custom(buf, rec.name, rec.body, &why);
        break;
      case metas::RecordKind::reference_timestamp:
        ok = attach_reference_timestamp(buf, rec.body, &why);
        break;
      case metas::RecordKind::serialized:
        ok = attach_serialized(buf, rec.body, &unknown);
        break;
      default:
        unknown = true;
        break;
    }
    counts->unknown += skipped;
    if (ok) {
      ++counts->received;
    } else if (unknown) {
      ++counts->unknown;
    } else {
      ++counts->bad;
      if (error->empty()) *error = std::string(rec.name) + ": " + why;
    }
  }
  if (reader.error()) {
    ++counts->bad;
    if (error->empty()) *error = reader.error();
  }
}

}  // namespace cudaipc::gst
