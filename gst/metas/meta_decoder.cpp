#include "metas/meta_decoder.h"

#include <cstring>
#include <string>

#include "cudaipc/metas.hpp"
#include "metas/analytics_custom_meta.h"
#include "metas/analytics_records.h"
#include "metas/custom_records.h"
#include "metas/custom_values.h"
#include "metas/tensor_records.h"

namespace cudaipc::gst {
namespace {

#if GST_CHECK_VERSION(1, 24, 0)
// GStreamer's own serializable metas are not taken from a peer this way: custom metas and reference
// timestamps cross as kinds 4 and 5 (their deserializers parse text recursively; those kinds check
// it first), cudaipcsrc describes a frame's layout itself (GStreamer's video meta deserializer
// hands a peer's format number to gst_video_info_set_format, a critical past the last format), and
// no channel carries audio. Metas of other libraries and applications keep GStreamer's way.
bool serialized_from_peer_ok(const GstMetaInfo* info) {
  if (gst_meta_info_is_custom(info)) return false;
  const char* api = g_type_name(info->api);
  for (const char* own : {"GstReferenceTimestampMetaAPI", "GstVideoMetaAPI", "GstAudioMetaAPI"})
    if (api && std::strcmp(api, own) == 0) return false;
  return true;
}
#endif

bool attach_serialized(GstBuffer* buf, metas::Bytes body, bool* unknown, std::string* error) {
#if GST_CHECK_VERSION(1, 24, 0)
  // GStreamer's header, [u32 total][u32 name_len][name]['\0'][u8 version][payload], checked here
  // in full: gst_meta_deserialize computes name_len + 10 in 32 bits, so a name_len near 2^32
  // wraps past its own bounds check and reads far outside the record.
  if (body.size < 10) return (*error = "serialized meta shorter than its header", false);
  guint32 total = 0, name_len = 0;
  std::memcpy(&total, body.data, 4);
  std::memcpy(&name_len, body.data + 4, 4);
  if (total < 10 || total > body.size || name_len > total - 10 || body.data[8 + name_len] != '\0' ||
      std::memchr(body.data + 8, '\0', name_len))
    return (*error = "serialized meta's header is out of range", false);
  const std::string impl(reinterpret_cast<const char*>(body.data) + 8, name_len);
  const GstMetaInfo* info = gst_meta_get_info(impl.c_str());
  if (info && !serialized_from_peer_ok(info)) {
    *error =
        "serialized " + quoted(impl) + " refused: it is not taken in GStreamer's serialization";
    return false;
  }
  guint32 consumed = 0;
  // gst_meta_deserialize returns NULL for an implementation this process has not registered, as
  // for bytes it cannot parse: both count as unknown here, since GStreamer checks the bytes itself.
  if (gst_meta_deserialize(buf, body.data, body.size, &consumed)) return true;
  *unknown = true;
  return false;
#else
  (void)buf, (void)body, (void)error;
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
    // Without analytics metas their records arrive as CudaipcAnalyticsMeta: either name selects.
    const bool as_custom = !analytics && rec.kind == metas::RecordKind::analytics;
    if (!filter.allows(rec.name, as_custom ? kAnalyticsCustomMetaName : std::string_view{})) {
      ++counts->filtered;
      continue;
    }
    std::string why;
    bool ok = false, unknown = false;
    std::uint32_t skipped = 0;
    switch (rec.kind) {
      case metas::RecordKind::analytics:
        if (analytics) {
          ok = attach_analytics(buf, rec.body, &skipped, &why);
        } else {
          ok = attach_analytics_as_custom(buf, rec.body, &skipped, &why);
          counts->as_custom += ok;
        }
        break;
      case metas::RecordKind::tensors:
        unknown = !tensors;
        counts->tensors_no_api += unknown;
        ok = tensors && attach_tensors(buf, rec.body, &why);
        break;
      case metas::RecordKind::custom:
        // Made here from analytics records only: one from a peer would be sent on as analytics.
        if (!analytics && is_analytics_custom_meta(rec.name))
          why = std::string("custom meta '") + kAnalyticsCustomMetaName +
                "' is made from analytics records on this GStreamer, not taken from a peer";
        else
          ok = attach_custom(buf, rec.name, rec.body, &why);
        break;
      case metas::RecordKind::reference_timestamp:
        ok = attach_reference_timestamp(buf, rec.body, &why);
        break;
      case metas::RecordKind::serialized:
        ok = attach_serialized(buf, rec.body, &unknown, &why);
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

unsigned version_gaps(const DecodeCounts& counts) {
  if (analytics_api_type() != 0) return 0;
  return (counts.as_custom ? kAnalyticsAsCustom : 0u) |
         (counts.tensors_no_api ? kTensorsSkipped : 0u);
}

std::string version_gap_warning(unsigned gaps) {
  guint major = 0, minor = 0, micro = 0, nano = 0;
  gst_version(&major, &minor, &micro, &nano);
  const std::string version =
      std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(micro);
  std::string text;
  if (gaps & kAnalyticsAsCustom)
    text += std::string("GStreamer ") + version +
            " has no analytics metas (they need 1.24): detections, classifications and tracks "
            "are attached as a GstCustomMeta named \"" +
            kAnalyticsCustomMetaName +
            "\" instead (segmentation masks are skipped and counted in stats, metas-unknown).";
  if (gaps & kTensorsSkipped)
    text += std::string(text.empty() ? "" : " ") + "GStreamer " + version +
            " has no tensor metas (they need 1.26): tensor metas are skipped and counted in "
            "stats (metas-unknown).";
  if (!text.empty())
    text +=
        " docs/metas.md, section \"GStreamer 1.22: analytics as a custom meta\", says how to "
        "read them and what is skipped.";
  return text;
}

}  // namespace cudaipc::gst
