#include "metas/tensor_meta.h"

#include <algorithm>

namespace cudaipc::gst {
namespace {

static_assert(GST_CUDA_IPC_TENSOR_MAX_RANK == kMaxRank, "public meta rank matches the core");
static_assert(GST_CUDA_IPC_DTYPE_BOOL == static_cast<int>(DType::boolean),
              "public dtype values are the core's wire values");

gboolean meta_init(GstMeta* meta, gpointer, GstBuffer*) {
  auto* m = reinterpret_cast<GstCudaIpcTensorMeta*>(meta);
  m->version = GST_CUDA_IPC_TENSOR_META_VERSION;
  m->dtype = GST_CUDA_IPC_DTYPE_INVALID;
  m->rank = 0;
  std::fill(std::begin(m->shape), std::end(m->shape), 0);
  std::fill(std::begin(m->strides), std::end(m->strides), 0);
  m->size = 0;
  m->data = 0;
  m->device_id = -1;
  m->seq = 0;
  return TRUE;
}

// A copy describes the same bytes only while the memory is shared (not on a deep copy).
gboolean meta_transform(GstBuffer* dest, GstMeta* meta, GstBuffer* src, GQuark type,
                        gpointer data) {
  if (!GST_META_TRANSFORM_IS_COPY(type)) return FALSE;
  auto* copy = static_cast<GstMetaTransformCopy*>(data);
  if (copy->region) return FALSE;
  if (gst_buffer_n_memory(dest) == 0 ||
      gst_buffer_peek_memory(dest, 0) != gst_buffer_peek_memory(src, 0))
    return FALSE;
  auto* from = reinterpret_cast<GstCudaIpcTensorMeta*>(meta);
  auto* to = reinterpret_cast<GstCudaIpcTensorMeta*>(
      gst_buffer_add_meta(dest, tensor_meta_info(), nullptr));
  if (!to) return FALSE;
  GstMeta head = to->meta;
  *to = *from;
  to->meta = head;
  return TRUE;
}

}  // namespace

GType tensor_meta_api_type() {
  static GType type = 0;
  if (g_once_init_enter(&type)) {
    static const gchar* tags[] = {GST_META_TAG_MEMORY_STR, nullptr};
    GType t = gst_meta_api_type_register(GST_CUDA_IPC_TENSOR_META_API_NAME, tags);
    g_once_init_leave(&type, t);
  }
  return type;
}

const GstMetaInfo* tensor_meta_info() {
  static const GstMetaInfo* info = nullptr;
  if (g_once_init_enter(&info)) {
    const GstMetaInfo* i =
        gst_meta_register(tensor_meta_api_type(), "GstCudaIpcTensorMeta",
                          sizeof(GstCudaIpcTensorMeta), meta_init, nullptr, meta_transform);
    g_once_init_leave(&info, i);
  }
  return info;
}

GstCudaIpcTensorMeta* add_tensor_meta(GstBuffer* buffer) {
  return reinterpret_cast<GstCudaIpcTensorMeta*>(
      gst_buffer_add_meta(buffer, tensor_meta_info(), nullptr));
}

void fill_tensor_meta(GstCudaIpcTensorMeta* m, const TensorDesc& tensor, std::uintptr_t data,
                      int device_id, std::uint64_t seq) {
  m->dtype = static_cast<GstCudaIpcDType>(tensor.dtype);
  m->rank = std::min(tensor.rank, kMaxRank);
  std::fill(std::copy(tensor.shape, tensor.shape + m->rank, m->shape), std::end(m->shape), 0);
  std::fill(std::copy(tensor.strides, tensor.strides + m->rank, m->strides), std::end(m->strides),
            0);
  m->size = tensor.size;
  m->data = data;
  m->device_id = device_id;
  m->seq = seq;
}

}  // namespace cudaipc::gst
