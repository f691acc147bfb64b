#include "metas/meta_encoder.h"

#include <gst/video/video.h>

#include <vector>

#include "cudaipc/metas.hpp"
#include "metas/analytics_custom_meta.h"
#include "metas/analytics_records.h"
#include "metas/custom_records.h"
#include "metas/tensor_meta.h"
#include "metas/tensor_records.h"

namespace cudaipc::gst {
namespace {

// Metas the frame description already carries, or that cudaipcsrc makes anew.
bool describes_the_frame(GstMeta* meta) {
  const GType api = meta->info->api;
  return api == GST_VIDEO_META_API_TYPE || api == tensor_meta_api_type();
}

Encoded encode_serialized(GstMeta* meta, const char* api_name, metas::AreaWriter& w) {
#if GST_CHECK_VERSION(1, 24, 0)
  if (!meta->info->serialize_func) return Encoded::unsupported;
  // gst_meta_serialize writes into a growable array: it gets one, then the bytes are copied into
  // the area once their size is known.
  GByteArray* bytes = g_byte_array_new();
  Encoded result = Encoded::unsupported;
  if (gst_meta_serialize_simple(meta, bytes)) {
    result = w.add_record(metas::RecordKind::serialized, api_name, bytes->data, bytes->len)
                 ? Encoded::written
                 : Encoded::no_room;
  }
  g_byte_array_unref(bytes);
  return result;
#else
  (void)meta, (void)api_name, (void)w;
  return Encoded::unsupported;
#endif
}

}  // namespace

std::uint32_t encode_metas(GstBuffer* buf, const MetaFilter& filter, std::uint8_t* area,
                           std::uint32_t capacity, EncodeCounts* counts,
                           const char** oversized_name) {
  if (!area || capacity == 0 || filter.none()) return 0;
  metas::AreaWriter w(area, capacity);
  const GType analytics = analytics_api_type();
  const GType tensors = tensor_meta_api_type_or_0();
  gpointer state = nullptr;
  while (GstMeta* meta = gst_buffer_iterate_meta(buf, &state)) {
    if (describes_the_frame(meta)) continue;
    const GType api = meta->info->api;
    const char* api_name = g_type_name(api);
    const char* custom_name = nullptr;
    const bool custom = is_custom_meta(meta, &custom_name);
    // Without analytics metas, CudaipcAnalyticsMeta stands for them: it leaves as their record.
    const bool as_analytics = !analytics && custom && is_analytics_custom_meta(custom_name);
    if (!filter.allows(as_analytics ? kAnalyticsApiName : api_name, custom ? custom_name : ""))
      continue;
    Encoded r;
    std::uint32_t skipped = 0;
    if (analytics && api == analytics) {
      r = encode_analytics(meta, w, &skipped);
    } else if (as_analytics) {
      r = encode_analytics_custom(meta, w, &skipped);
    } else if (tensors && api == tensors) {
      r = encode_tensors(meta, w);
    } else if (custom) {
      r = encode_custom(meta, custom_name, w);
    } else if (api == GST_REFERENCE_TIMESTAMP_META_API_TYPE) {
      if (is_own_reference_timestamp(meta)) continue;
      r = encode_reference_timestamp(meta, w);
    } else {
      r = encode_serialized(meta, api_name, w);
    }
    counts->unsupported += skipped;
    switch (r) {
      case Encoded::written:
        ++counts->sent;
        break;
      case Encoded::no_room:
        if (counts->oversized++ == 0 && oversized_name) *oversized_name = api_name;
        break;
      case Encoded::unsupported:
        ++counts->unsupported;
        break;
    }
  }
  return static_cast<std::uint32_t>(w.size());
}

}  // namespace cudaipc::gst
