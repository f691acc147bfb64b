// Registration and attachment of GstCudaIpcTensorMeta (public layout in
// include/gst/cudaipc/gstcudaipcmeta.h).
#pragma once

#include <gst/gst.h>

#include "cudaipc/tensor.hpp"
#include "gst/cudaipc/gstcudaipcmeta.h"

namespace cudaipc::gst {

GType tensor_meta_api_type();
const GstMetaInfo* tensor_meta_info();
// A new, empty meta on `buffer` (frame_metas.h fills it).
GstCudaIpcTensorMeta* add_tensor_meta(GstBuffer* buffer);
// `data` is element 0 (slot address + tensor.byte_offset, or the copy's address).
void fill_tensor_meta(GstCudaIpcTensorMeta* m, const TensorDesc& tensor, std::uintptr_t data,
                      int device_id, std::uint64_t seq);

}  // namespace cudaipc::gst
