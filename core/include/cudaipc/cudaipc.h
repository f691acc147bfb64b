/* cudaipc C API: plain C over the C++ core, for C programs and Python (ctypes).
 *
 * Every function returns CUDAIPC_OK or an error code; cudaipc_last_error() gives the message
 * (per thread) naming the cause. Handles are opaque; each *_new has a matching *_free. */
#ifndef CUDAIPC_H
#define CUDAIPC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  CUDAIPC_OK = 0,
  CUDAIPC_ERR_INVALID_ARGUMENT = 1,
  CUDAIPC_ERR_SYSTEM = 2,
  CUDAIPC_ERR_PROTOCOL = 3,
  CUDAIPC_ERR_VERSION_MISMATCH = 4,
  CUDAIPC_ERR_PERMISSION_DENIED = 5,
  CUDAIPC_ERR_TIMEOUT = 6,
  CUDAIPC_ERR_INTERRUPTED = 7,
  CUDAIPC_ERR_DISCONNECTED = 8,
  CUDAIPC_ERR_BUSY = 9,
  CUDAIPC_ERR_NO_CUDA = 10,
  CUDAIPC_ERR_CUDA = 11,
  CUDAIPC_ERR_UNSUPPORTED = 12,
} cudaipc_status;

typedef enum { CUDAIPC_MEMORY_HOST = 1, CUDAIPC_MEMORY_CUDA = 2 } cudaipc_memory;
typedef enum { CUDAIPC_EVERY_FRAME = 0, CUDAIPC_LATEST = 1 } cudaipc_mode;
typedef enum { CUDAIPC_BLOCK = 0, CUDAIPC_DROP = 1 } cudaipc_full_policy;
typedef enum {
  CUDAIPC_PUBLISHED = 0,
  CUDAIPC_DROPPED = 1,
  CUDAIPC_TIMED_OUT = 2,
  CUDAIPC_INTERRUPTED_PUBLISH = 3, /* cudaipc_producer_interrupt() woke the wait for a slot */
} cudaipc_publish;
typedef enum {
  CUDAIPC_EVENT_FRAME = 0,
  CUDAIPC_EVENT_FORMAT = 1,
  CUDAIPC_EVENT_EOS = 2,
  CUDAIPC_EVENT_TIMEOUT = 3,
  CUDAIPC_EVENT_INTERRUPTED = 4,
  CUDAIPC_EVENT_DISCONNECTED = 5,
} cudaipc_event_type;

#define CUDAIPC_MAX_RANK 8
#define CUDAIPC_MAX_PLANES 4
#define CUDAIPC_NO_TIME UINT64_MAX

/* Same layout and dtype numbering as cudaipc::TensorDesc (tensor.hpp). */
typedef struct {
  uint32_t dtype; /* 1 int8 .. 4 int64, 5 uint8 .. 8 uint64, 9 float16, 10 float32, 11 float64,
                     12 bfloat16, 13 bool */
  uint32_t rank;
  int64_t shape[CUDAIPC_MAX_RANK];
  int64_t strides[CUDAIPC_MAX_RANK]; /* bytes */
  uint64_t byte_offset;
  uint64_t size;
  uint32_t num_planes;
  uint32_t reserved;
  struct {
    uint64_t offset;
    uint64_t pitch;
  } planes[CUDAIPC_MAX_PLANES];
} cudaipc_tensor;

typedef struct {
  const char* path; /* NULL: the default path for channel "cudaipc" */
  uint32_t slots;   /* 0: 4 */
  cudaipc_memory memory;
  cudaipc_full_policy on_full;
  uint64_t block_timeout_ns; /* 0: 1 s */
  int cuda_device;           /* producer: ordinal; consumer: -1 = the producer's */
} cudaipc_producer_options;

typedef struct {
  const char* path;
  cudaipc_mode mode;
  int reconnect; /* nonzero: follow producer restarts */
  int cuda_device;
  int cuda_cpu_wait;
} cudaipc_consumer_options;

typedef struct {
  uint64_t pts, dts, duration; /* ns or CUDAIPC_NO_TIME */
  uint32_t flags;
  const cudaipc_tensor* tensor; /* NULL: the format's */
  const void* user_meta;
  uint32_t user_meta_size;
} cudaipc_frame_info;

typedef struct cudaipc_producer cudaipc_producer;
typedef struct cudaipc_consumer cudaipc_consumer;
typedef struct cudaipc_frame cudaipc_frame;

typedef struct {
  cudaipc_event_type type;
  cudaipc_frame* frame;  /* FRAME: release with cudaipc_frame_release */
  const char* caps;      /* FORMAT: valid until the next cudaipc_consumer_next */
  cudaipc_tensor tensor; /* FORMAT */
  uint64_t generation;
} cudaipc_event;

const char* cudaipc_last_error(void);

void cudaipc_producer_options_init(cudaipc_producer_options* opts);
void cudaipc_consumer_options_init(cudaipc_consumer_options* opts);

int cudaipc_producer_new(const cudaipc_producer_options* opts, cudaipc_producer** out);
void cudaipc_producer_free(cudaipc_producer* p);
int cudaipc_producer_set_format(cudaipc_producer* p, const char* caps,
                                const cudaipc_tensor* tensor, uint64_t max_frame_size);
/* from_device: data is a CUdeviceptr (CUDA channels). *result may be NULL. */
int cudaipc_producer_publish(cudaipc_producer* p, const void* data, uint64_t bytes,
                             const cudaipc_frame_info* info, int from_device,
                             cudaipc_publish* result);
/* Zero-copy: borrow a slot (*address is a host pointer or CUdeviceptr), then commit or abort.
 * *address is 0 when the frame was dropped or timed out (see *result). */
int cudaipc_producer_begin(cudaipc_producer* p, uintptr_t* address, uint64_t* capacity,
                           cudaipc_publish* result);
int cudaipc_producer_commit(cudaipc_producer* p, const cudaipc_frame_info* info);
int cudaipc_producer_abort(cudaipc_producer* p);
int cudaipc_producer_end_of_stream(cudaipc_producer* p);
/* Wakes publishes and begins blocked on a full ring (they return CUDAIPC_INTERRUPTED_PUBLISH), and
 * makes later ones that would block return it too, until cudaipc_producer_clear_interrupt(). */
void cudaipc_producer_interrupt(cudaipc_producer* p);
void cudaipc_producer_clear_interrupt(cudaipc_producer* p);
int cudaipc_producer_counters(cudaipc_producer* p, uint64_t* published, uint64_t* dropped,
                              uint32_t* consumers);
/* The CUstream writes are ordered on (CUDA channels), else NULL: a caller rendering into a borrowed
 * slot or copying from its own stream orders its work against this one. */
void* cudaipc_producer_cuda_stream(cudaipc_producer* p);

int cudaipc_consumer_new(const cudaipc_consumer_options* opts, cudaipc_consumer** out);
void cudaipc_consumer_free(cudaipc_consumer* c);
int cudaipc_consumer_next(cudaipc_consumer* c, uint64_t timeout_ns, cudaipc_event* ev);
void cudaipc_consumer_interrupt(cudaipc_consumer* c);
/* The CUstream reads are ordered on (CUDA channels), else NULL. */
void* cudaipc_consumer_cuda_stream(cudaipc_consumer* c);
/* The memory kind of the producer this consumer is connected to; CUDAIPC_ERR_DISCONNECTED when it
 * is connected to none. */
int cudaipc_consumer_memory(cudaipc_consumer* c, cudaipc_memory* out);

uint64_t cudaipc_frame_seq(const cudaipc_frame* f);
uintptr_t cudaipc_frame_data(const cudaipc_frame* f); /* tensor's first byte */
uint64_t cudaipc_frame_size(const cudaipc_frame* f);
void cudaipc_frame_times(const cudaipc_frame* f, uint64_t* pts, uint64_t* dts,
                         uint64_t* duration, uint32_t* flags);
const cudaipc_tensor* cudaipc_frame_tensor(const cudaipc_frame* f);
/* The producer's CLOCK_MONOTONIC at publish (ns): publish-to-read latency on one machine. */
uint64_t cudaipc_frame_publish_time(const cudaipc_frame* f);
const void* cudaipc_frame_user_meta(const cudaipc_frame* f, uint32_t* size);
void cudaipc_frame_release(cudaipc_frame* f);

#ifdef __cplusplus
}
#endif

#endif /* CUDAIPC_H */
