/* GstCudaIpcTensorMeta: what a cudaipcsrc buffer holds, as a tensor.
 *
 * Every buffer cudaipcsrc pushes carries one, so an application (an appsink callback, a pad
 * probe) can hand the frame to PyTorch, TensorRT or CUDA code without parsing caps:
 *
 *   #include <gst/cudaipc/gstcudaipcmeta.h>
 *   const GstCudaIpcTensorMeta *m = gst_buffer_get_cuda_ipc_tensor_meta (buffer);
 *   if (m && m->device_id >= 0) launch (m->data, m->shape, m->strides, m->rank, m->dtype);
 *
 * This header is all an application needs: the meta is registered by the cudaipc plugin, which
 * is loaded once a cudaipcsrc exists, and looked up here by name. The struct layout is stable
 * within a major version (the `version` field says which layout a plugin wrote).
 *
 * `data` stays valid while the buffer is alive (the buffer holds the slot's lease, or owns a copy)
 * and it must only be read. For CUDA memory, work on another stream must first be ordered after
 * the buffer's GstCudaMemory stream (1.24+); on 1.22 the data is complete when pushed.
 */
#ifndef GST_CUDA_IPC_META_H
#define GST_CUDA_IPC_META_H

#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_CUDA_IPC_TENSOR_META_API_NAME "GstCudaIpcTensorMetaAPI"
#define GST_CUDA_IPC_TENSOR_META_VERSION 1
#define GST_CUDA_IPC_TENSOR_MAX_RANK 8

/* Element types; the values are cudaipc's wire values, the names NNStreamer's. */
typedef enum {
  GST_CUDA_IPC_DTYPE_INVALID = 0,
  GST_CUDA_IPC_DTYPE_INT8 = 1,
  GST_CUDA_IPC_DTYPE_INT16 = 2,
  GST_CUDA_IPC_DTYPE_INT32 = 3,
  GST_CUDA_IPC_DTYPE_INT64 = 4,
  GST_CUDA_IPC_DTYPE_UINT8 = 5,
  GST_CUDA_IPC_DTYPE_UINT16 = 6,
  GST_CUDA_IPC_DTYPE_UINT32 = 7,
  GST_CUDA_IPC_DTYPE_UINT64 = 8,
  GST_CUDA_IPC_DTYPE_FLOAT16 = 9,
  GST_CUDA_IPC_DTYPE_FLOAT32 = 10,
  GST_CUDA_IPC_DTYPE_FLOAT64 = 11,
  GST_CUDA_IPC_DTYPE_BFLOAT16 = 12,
  GST_CUDA_IPC_DTYPE_BOOL = 13,
} GstCudaIpcDType;

typedef struct {
  GstMeta meta;
  guint version;                                  /* GST_CUDA_IPC_TENSOR_META_VERSION */
  GstCudaIpcDType dtype;
  guint rank;                                     /* 0..GST_CUDA_IPC_TENSOR_MAX_RANK */
  gint64 shape[GST_CUDA_IPC_TENSOR_MAX_RANK];     /* outermost first */
  gint64 strides[GST_CUDA_IPC_TENSOR_MAX_RANK];   /* in bytes, outermost first */
  guint64 size;                                   /* bytes the tensor spans from data */
  guintptr data;      /* element 0: a CUdeviceptr when device_id >= 0, else a host pointer */
  gint device_id;     /* CUDA device ordinal in this process, -1 for host memory */
  guint64 seq;        /* the producer's frame number (1, 2, ...), gaps mean skipped frames */
} GstCudaIpcTensorMeta;

/* The meta of `buffer`, or NULL (no meta, or the cudaipc plugin is not loaded). */
static inline GstCudaIpcTensorMeta *
gst_buffer_get_cuda_ipc_tensor_meta (GstBuffer * buffer)
{
  GType api = g_type_from_name (GST_CUDA_IPC_TENSOR_META_API_NAME);
  if (api == 0)
    return NULL;
  return (GstCudaIpcTensorMeta *) gst_buffer_get_meta (buffer, api);
}

G_END_DECLS

#endif /* GST_CUDA_IPC_META_H */
