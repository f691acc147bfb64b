#include "metas/tensor_records.h"

#include <cstring>
#include <string_view>
#include <vector>

#include "metas/peer_quarks.h"

#if defined(CUDAIPC_HAVE_ANALYTICS) && GST_CHECK_VERSION(1, 26, 0)
#define CUDAIPC_HAVE_TENSOR_META 1
#include <gst/analytics/analytics.h>
#endif

namespace cudaipc::gst {

#ifndef CUDAIPC_HAVE_TENSOR_META

GType tensor_meta_api_type_or_0() {
  return 0;
}
Encoded encode_tensors(GstMeta*, metas::AreaWriter&) {
  return Encoded::unsupported;
}
bool attach_tensors(GstBuffer*, metas::Bytes, std::string* error) {
  *error = "this GStreamer has no GstTensorMeta (1.26+)";
  return false;
}

#else

namespace {

// GstTensorDataType's values in order (gsttensor.h): the names docs/metas.md uses.
constexpr std::string_view kTypeNames[] = {
    "int4",           "int8",       "int16",          "int32",      "int64",
    "uint4",          "uint8",      "uint16",         "uint32",     "uint64",
    "float16",        "float32",    "float64",        "bfloat16",
#if GST_CHECK_VERSION(1, 28, 0)
    "string",         "bool",       "complex64",      "complex128", "float8e4m3fn",
    "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz",
#endif
};
constexpr int kTypeCount = sizeof kTypeNames / sizeof kTypeNames[0];

int type_of(std::string_view name) {
  for (int i = 0; i < kTypeCount; ++i)
    if (kTypeNames[i] == name) return i;
  return -1;
}

}  // namespace

GType tensor_meta_api_type_or_0() {
  return gst_tensor_meta_api_get_type();
}

Encoded encode_tensors(GstMeta* meta, metas::AreaWriter& w) {
  auto* tmeta = reinterpret_cast<GstTensorMeta*>(meta);
  if (tmeta->num_tensors > metas::kMaxTensors) return Encoded::unsupported;
  const auto count = static_cast<std::uint32_t>(tmeta->num_tensors);
  for (std::uint32_t i = 0; i < count; ++i) {
    const GstTensor* t = tmeta->tensors[i];
    if (!t || t->num_dims > metas::kMaxTensorDims || static_cast<int>(t->data_type) < 0 ||
        static_cast<int>(t->data_type) >= kTypeCount)
      return Encoded::unsupported;
  }
  // Every entry goes before the data: their sizes first. Most metas have a few tensors: those
  // descriptions live on the stack.
  constexpr std::uint32_t kInline = 16;
  metas::Tensor inline_descs[kInline];
  std::vector<metas::Tensor> many(count > kInline ? count : 0);
  metas::Tensor* descs = count > kInline ? many.data() : inline_descs;
  std::size_t entries = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    const GstTensor* t = tmeta->tensors[i];
    metas::Tensor& d = descs[i];
    d.id = t->id ? g_quark_to_string(t->id) : "";
    d.dtype = kTypeNames[t->data_type];
    d.num_dims = static_cast<std::uint32_t>(t->num_dims);
    for (std::uint32_t k = 0; k < d.num_dims; ++k) d.dims[k] = t->dims[k];
    d.dims_order = t->dims_order == GST_TENSOR_DIM_ORDER_COL_MAJOR ? 1 : 0;
    entries += metas::TensorsWriter::entry_bytes(d);
  }
  const std::size_t room = body_room(w, kTensorApiName);
  std::uint8_t* body = w.begin_record(metas::RecordKind::tensors, kTensorApiName, room);
  if (!body) return Encoded::no_room;
  metas::TensorsWriter tw(body, room, w.body_offset(), count, entries);
  for (std::uint32_t i = 0; tw.ok() && i < count; ++i) {
    const GstTensor* t = tmeta->tensors[i];
    metas::Tensor& d = descs[i];
    GstMapInfo map;
    const bool mapped = t->data && gst_buffer_map(t->data, &map, GST_MAP_READ);
    d.data_size = mapped ? map.size : 0;
    std::uint8_t* dst = tw.add(d);
    if (dst && d.data_size) std::memcpy(dst, map.data, d.data_size);
    if (mapped) gst_buffer_unmap(t->data, &map);
    if (!dst) {
      w.cancel_record();
      return Encoded::no_room;
    }
  }
  const std::size_t used = tw.finish();
  if (!tw.ok()) {
    w.cancel_record();
    return Encoded::no_room;
  }
  w.commit_record(used);
  return Encoded::written;
}

bool attach_tensors(GstBuffer* buf, metas::Bytes body, std::string* error) {
  metas::TensorsView view;
  if (!view.parse(body, error)) return false;
  const std::uint32_t n = view.count();
  std::vector<metas::Tensor> parsed(n);
  std::vector<int> types(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    if (!view.tensor(i, &parsed[i], error)) return false;
    types[i] = type_of(parsed[i].dtype);
    if (types[i] < 0) {
      *error = "tensor " + std::to_string(i) + " has data type '" + std::string(parsed[i].dtype) +
               "', which this GStreamer does not know";
      return false;
    }
  }
  // Every id's quark first: one a peer may not add drops the record before anything is made.
  std::vector<GQuark> ids(n);
  for (std::uint32_t i = 0; i < n; ++i)
    if (!peer_quark(parsed[i].id, &ids[i], error)) return false;
  GstTensor** tensors = g_new0(GstTensor*, n ? n : 1);
  for (std::uint32_t i = 0; i < n; ++i) {
    const metas::Tensor& p = parsed[i];
    GstTensor* t = gst_tensor_alloc(p.num_dims);
    t->id = ids[i];
    t->layout = GST_TENSOR_LAYOUT_CONTIGUOUS;
    t->data_type = static_cast<GstTensorDataType>(types[i]);
    t->dims_order =
        p.dims_order == 1 ? GST_TENSOR_DIM_ORDER_COL_MAJOR : GST_TENSOR_DIM_ORDER_ROW_MAJOR;
    for (std::uint32_t k = 0; k < p.num_dims; ++k) t->dims[k] = p.dims[k];
    t->data = p.data_size ? gst_buffer_new_memdup(p.data, p.data_size) : gst_buffer_new();
    tensors[i] = t;
  }
  GstTensorMeta* tmeta = gst_buffer_add_tensor_meta(buf);
  if (!tmeta) {
    for (std::uint32_t i = 0; i < n; ++i) gst_tensor_free(tensors[i]);
    g_free(tensors);
    *error = "could not add a GstTensorMeta";
    return false;
  }
  gst_tensor_meta_set(tmeta, n, tensors);  // takes the array and the tensors
  return true;
}

#endif  // CUDAIPC_HAVE_TENSOR_META

}  // namespace cudaipc::gst
