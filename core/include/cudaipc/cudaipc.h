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
/* What a channel carries (docs/protocol.md): a model server reads only REQUESTS channels. */
typedef enum {
  CUDAIPC_ROLE_FRAMES = 1,   /* a producer's stream, for any consumer */
  CUDAIPC_ROLE_REQUESTS = 2, /* frames a model server answers, as a cudaipcfilter's */
  CUDAIPC_ROLE_REPLIES = 3,  /* a model server's answers (made by the server) */
} cudaipc_role;
typedef enum {
  CUDAIPC_PUBLISHED = 0,
  CUDAIPC_DROPPED = 1,
  CUDAIPC_TIMED_OUT = 2,
  CUDAIPC_INTERRUPTED_PUBLISH = 3, /* cudaipc_producer_interrupt() woke the wait for a slot */
  CUDAIPC_NEEDS_FORMAT = 4, /* publish_dlpack: the tensor's dtype or shape is not the format's;
                               nothing was published or taken: set_format, then publish again */
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
#define CUDAIPC_MAX_SLOTS 32 /* slots of a channel, at most */
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
  uint32_t slots;   /* 1..CUDAIPC_MAX_SLOTS; 0: 4 */
  cudaipc_memory memory;
  cudaipc_full_policy on_full;
  uint64_t block_timeout_ns; /* 0: 1 s */
  int cuda_device;           /* producer: ordinal; consumer: -1 = the producer's */
  uint32_t meta_size;        /* bytes of meta area per slot (docs/metas.md); init: 65536 */
  cudaipc_role role;         /* init: CUDAIPC_ROLE_FRAMES */
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
  /* The frame's meta area (docs/metas.md): metas_size bytes copied into the slot's area, or none
   * copied when metas is the borrowed slot's own area (cudaipc_producer_slot_metas). */
  const void* metas;
  uint32_t metas_size;
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
/* The status the last failed call on this thread returned (CUDAIPC_OK after a call that worked). */
int cudaipc_last_error_code(void);

void cudaipc_producer_options_init(cudaipc_producer_options* opts);
void cudaipc_consumer_options_init(cudaipc_consumer_options* opts);

int cudaipc_producer_new(const cudaipc_producer_options* opts, cudaipc_producer** out);
void cudaipc_producer_free(cudaipc_producer* p);
int cudaipc_producer_set_format(cudaipc_producer* p, const char* caps, const cudaipc_tensor* tensor,
                                uint64_t max_frame_size);
/* from_device: data is a CUdeviceptr (CUDA channels). *result may be NULL. */
int cudaipc_producer_publish(cudaipc_producer* p, const void* data, uint64_t bytes,
                             const cudaipc_frame_info* info, int from_device,
                             cudaipc_publish* result);
/* Zero-copy: borrow a slot (*address is a host pointer or CUdeviceptr), then commit or abort.
 * *address is 0 when the frame was dropped or timed out (see *result). The commit waits on the GPU
 * for the streams DLPack exports of the slot named (cudaipc_producer_slot_dlpack); when that
 * ordering fails the frame is aborted and the error returned. */
int cudaipc_producer_begin(cudaipc_producer* p, uintptr_t* address, uint64_t* capacity,
                           cudaipc_publish* result);
int cudaipc_producer_commit(cudaipc_producer* p, const cudaipc_frame_info* info);
/* The borrowed slot's meta area (host memory), to encode records in place; NULL (and *capacity 0)
 * without a borrowed slot or with a meta_size of 0. */
uint8_t* cudaipc_producer_slot_metas(cudaipc_producer* p, uint32_t* capacity);
/* Bytes of meta area per slot. */
uint32_t cudaipc_producer_meta_size(const cudaipc_producer* p);
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
/* Disconnects now (frames handed out keep their leases); the handle stays valid, for
 * cudaipc_consumer_held, until cudaipc_consumer_free. Other calls on it fail: it is closed. */
void cudaipc_consumer_close(cudaipc_consumer* c);
int cudaipc_consumer_next(cudaipc_consumer* c, uint64_t timeout_ns, cudaipc_event* ev);
void cudaipc_consumer_interrupt(cudaipc_consumer* c);
/* The CUstream reads are ordered on (CUDA channels), else NULL. Reads queued on it are covered by
 * the releases of the frames they read (which then ask the driver whether it has run them). */
void* cudaipc_consumer_cuda_stream(cudaipc_consumer* c);
/* The memory kind of the producer this consumer is connected to; CUDAIPC_ERR_DISCONNECTED when it
 * is connected to none. */
int cudaipc_consumer_memory(cudaipc_consumer* c, cudaipc_memory* out);

/* Frames this consumer handed out whose leases have not ended (the frame not released, or a
 * DLPack export of it not deleted yet): *count, and up to `capacity` of their seqs in `seqs` (may
 * be NULL), lowest first. Frames outlive the consumer: the count does not need it connected. */
int cudaipc_consumer_held(cudaipc_consumer* c, uint32_t* count, uint64_t* seqs, uint32_t capacity);
/* The CUDA device ordinal (in this process) frames are read on; -1 for host memory or while not
 * connected. */
int cudaipc_consumer_cuda_device(cudaipc_consumer* c);

/* What a consumer has read. */
typedef struct {
  /* Since it connected to its current producer (they restart with each new one): frames taken
   * and frames passed over (latest mode), and that producer's own published and dropped counts. */
  uint64_t delivered, skipped, producer_published, producer_dropped;
  /* CUDA channels, over every connection so far: frames whose acquire queued a GPU wait (not yet
   * written when taken) and releases written by the consumer's stream (reads still queued). Each
   * costs a switch between the processes' contexts on a GPU without MPS; zero is the fast path. */
  uint64_t gpu_waits, gpu_releases;
} cudaipc_consumer_stats;
int cudaipc_consumer_counters(cudaipc_consumer* c, cudaipc_consumer_stats* out);

/* One frame's description in one struct, for bindings that read it per frame (Python). */
typedef struct {
  cudaipc_event_type type; /* as the event's */
  uint32_t tensor_id;      /* FRAME: changes whenever the tensor description differs from the
                              previous frame's of this consumer (read it with cudaipc_frame_tensor
                              then); the same id means the same description */
  cudaipc_frame* frame;    /* FRAME: as the event's */
  uint64_t seq;
  uintptr_t data; /* the tensor's first byte: host pointer or CUdeviceptr */
  uint64_t size;
  uint64_t pts, dts, duration; /* ns or CUDAIPC_NO_TIME */
  uint64_t publish_time_ns;
  uint32_t flags;
  int32_t cuda_device; /* -1: host memory */
} cudaipc_frame_view;

/* cudaipc_consumer_next, and for a FRAME event its description in *view too. */
int cudaipc_consumer_next_frame(cudaipc_consumer* c, uint64_t timeout_ns, cudaipc_event* ev,
                                cudaipc_frame_view* view);

uint64_t cudaipc_frame_seq(const cudaipc_frame* f);
uintptr_t cudaipc_frame_data(const cudaipc_frame* f); /* tensor's first byte */
uint64_t cudaipc_frame_size(const cudaipc_frame* f);
void cudaipc_frame_times(const cudaipc_frame* f, uint64_t* pts, uint64_t* dts, uint64_t* duration,
                         uint32_t* flags);
const cudaipc_tensor* cudaipc_frame_tensor(const cudaipc_frame* f);
/* The producer's CLOCK_MONOTONIC at publish (ns): publish-to-read latency on one machine. */
uint64_t cudaipc_frame_publish_time(const cudaipc_frame* f);
/* 0 for a CUDA frame the producer died before writing (reads ordered after it saw an unwritten
 * slot: drop their results), 1 otherwise. Ask after your reads have run. */
int cudaipc_frame_written(const cudaipc_frame* f);
const void* cudaipc_frame_user_meta(const cudaipc_frame* f, uint32_t* size);
/* The frame's meta area as the producer wrote it (docs/metas.md), read-only, valid until the frame
 * is released; NULL (and *size 0) when the frame has none. */
const uint8_t* cudaipc_frame_metas(const cudaipc_frame* f, uint32_t* size);
/* A frame's object detections, for cudaipc_metas_detections_area: `n` boxes (n x 4 float32
 * x1 y1 x2 y2, rounded to whole pixels as x = rint(x1), w = rint(x2 - x1)), scores (n float32,
 * NULL: 1), rotation (n float32 radians, NULL: not oriented), labels (n int64 indexes into the
 * names table, NULL: none), the table being `names` (UTF-8 back to back) with name i at bytes
 * [name_offsets[i], name_offsets[i + 1]). One struct, so a caller that keeps its arrays in place
 * (Python) sets a few fields per frame rather than passing ten arguments. */
typedef struct {
  uint8_t* area;
  uint32_t capacity;
  uint32_t n;
  const float* boxes;
  const float* scores;
  const float* rotation;
  const int64_t* labels;
  const uint8_t* names;
  const uint32_t* name_offsets;
  uint32_t name_count;
  uint32_t reserved;
} cudaipc_detections;
/* Writes a whole meta area (docs/metas.md) holding one analytics record of the detections (as
 * cudaipc_metas_add_analytics writes them), in one call. Returns the area's size, or minus the
 * status (cudaipc_last_error says why: too small an area names both sizes). */
int64_t cudaipc_metas_detections_area(const cudaipc_detections* d);

/* ---- Meta areas: the core's codec (docs/metas.md) -----------------------------------------
 * For bindings without C++ (the Python package): one codec of the records a frame carries beside
 * its pixels, the one cudaipcsink and cudaipcsrc use.
 *
 * Reading. cudaipc_metas_decode checks a whole area (another process's bytes: hostile; every
 * size, count, offset and string is checked, each field read once) and lays out what it holds as
 * tables of fixed-size rows in the caller's buffer: a cudaipc_metas_decoded header, then the
 * tables it points to. Offsets named "(area)" count from the area's first byte (names, strings,
 * heaps, tensor data, masks: read them in place while the frame is held); the tables' and the
 * messages' count from the buffer's. A record that breaks the format is left out with a message
 * ("record 2 (kind 4): custom field 'x': ..."), as are the records after one whose size cannot be
 * trusted; a peer's bytes never make a call fail. */
#define CUDAIPC_METAS_MAX_DIMS 16

typedef struct {
  uint32_t size;         /* bytes of the buffer this decode needs (all of it was written only
                            when the capacity was at least this) */
  uint32_t record_count; /* records read: the rows of `records` */
  uint32_t unknown;      /* records of kinds this version does not read (kept, as raw), or 1 for
                            an area of another encoding version */
  uint32_t bad;          /* records (or the area) left out as malformed */
  uint32_t mtd_count, class_count, segmentation_count, relation_count;
  uint32_t tensor_count, field_count;
  uint32_t error_count; /* messages, each ending in a NUL, back to back at `errors` */
  uint32_t errors_size;
  /* Where each table starts, from the buffer's first byte (8-byte aligned). */
  uint32_t records, mtds, classes, segmentations, relations, tensors, fields, errors;
} cudaipc_metas_decoded;

typedef struct {
  uint16_t kind;  /* 1 serialized, 2 analytics, 3 tensors, 4 custom, 5 reference timestamp */
  uint16_t known; /* 1: a kind this version reads, its rows below; 0: its body alone */
  uint32_t name_offset, name_size; /* (area) UTF-8, no NUL */
  uint32_t body_offset, body_size; /* (area) the body as it crossed, padding included */
  /* Its rows: analytics: mtds; tensors: tensors; custom: its own fields (each nested field's
   * members follow it, see cudaipc_metas_field). */
  uint32_t first, count;
  uint32_t first_relation, relation_count; /* analytics */
  uint32_t heap_offset, heap_size;         /* (area) analytics: the heap; timestamp: the caps */
  uint32_t reserved;
  uint64_t timestamp, duration; /* reference timestamp: ns or CUDAIPC_NO_TIME */
} cudaipc_metas_record;

typedef struct {
  uint32_t type;  /* 1 object detection, 2 classification, 3 tracking, 4 segmentation; any other
                     is a type this version does not read (id only) */
  uint32_t id;    /* the mtd's id in the producer's meta */
  uint32_t flags; /* object detection: 1 oriented; tracking: 1 lost */
  /* Classification, tracking: the object detection of the record it is related to (by a relation
   * of any type, either way; a detection's relation to it first, then its own, in order), as that
   * detection's rank among the record's detections; -1: none. Others: -1. */
  int32_t detection;
  int32_t x, y, w, h;    /* object detection */
  float rotation;        /* object detection: radians, 0 unless oriented */
  float confidence;      /* object detection */
  uint32_t label_offset; /* (area) object detection: its label, UTF-8 */
  uint32_t label_size;
  uint32_t first, count; /* classification: its rows of `classes`; segmentation: first is its
                            row of `segmentations` */
  int32_t track;         /* object detection: the tracking mtd related to it (the last one a
                            relation names), as its index in the record's mtds; -1: none */
  uint32_t reserved;
  uint64_t tracking_id, first_seen, last_seen; /* tracking (ns) */
} cudaipc_metas_mtd;

typedef struct {
  float confidence;
  uint32_t label_offset, label_size; /* (area) */
} cudaipc_metas_class;

typedef struct {
  uint32_t seg_type; /* 0 semantic, 1 instance */
  int32_t x, y;
  uint32_t w, h;
  uint32_t region_count;
  uint32_t regions_offset; /* (area) region_count little-endian u32, unaligned */
  uint32_t mask_width, mask_height, mask_stride, mask_format; /* GstVideoFormat */
  uint32_t mask_offset; /* (area) mask_stride * mask_height bytes */
} cudaipc_metas_segmentation;

typedef struct {
  uint32_t from, to; /* indexes into the record's mtds */
  uint32_t types;    /* GstAnalyticsRelTypes bits */
} cudaipc_metas_relation;

typedef struct {
  uint32_t id_offset, id_size;       /* (area) */
  uint32_t dtype_offset, dtype_size; /* (area) a data type name of docs/metas.md */
  uint32_t num_dims, dims_order;     /* 0 row-major, 1 column-major */
  uint64_t data_offset, data_size;   /* (area) data_size checked against the dims and type */
  uint64_t dims[CUDAIPC_METAS_MAX_DIMS];
} cudaipc_metas_tensor;

/* One custom field. A structure, array or list (types 12, 13, 14) is followed by its `members`
 * fields (nameless for arrays and lists), each followed by its own members: the fields of a record
 * are its tree in pre-order. */
typedef struct {
  uint32_t type;                   /* docs/metas.md, kind 4: 1 int64 .. 14 list */
  uint32_t members;                /* structure, array, list */
  uint32_t name_offset, name_size; /* (area) UTF-8 */
  /* (area) string: UTF-8; bytes: the bytes; other: GStreamer's text (UTF-8); structure: its name */
  uint32_t text_offset, text_size;
  uint32_t type_name_offset, type_name_size; /* (area) other: the GType's name */
  union {
    int64_t i;  /* int64, int32, fraction's numerator, boolean (0, 1) */
    uint64_t u; /* uint64, uint32 */
    double d;   /* double, float */
  } value;
  int32_t denominator; /* fraction */
  uint32_t reserved;
} cudaipc_metas_field;

/* Decodes the `size` bytes of a meta area (a frame's: cudaipc_frame_metas) into `out` (8-byte
 * aligned, `capacity` bytes). Returns the bytes the decode needs: when that is more than
 * `capacity` only the header was written (if it fits), and the caller calls again with room.
 * Negative (minus the status) only for arguments that are wrong, never for what the area holds. */
int64_t cudaipc_metas_decode(const uint8_t* area, uint32_t size, void* out, uint64_t capacity);

/* Writing. A writer adds records to an area in the caller's memory, in order; each add checks
 * its arguments (names UTF-8 without NUL, counts, indexes) and fails with the reason. A record
 * that does not fit is not written, and neither is any after it: their sizes are still counted,
 * and cudaipc_metas_writer_finish says how many bytes the whole area needed. */
typedef struct cudaipc_metas_writer cudaipc_metas_writer;
int cudaipc_metas_writer_new(cudaipc_metas_writer** out);
void cudaipc_metas_writer_free(cudaipc_metas_writer* w);
/* Starts an area of `capacity` bytes at `area` (NULL with 0: an area that holds nothing). */
int cudaipc_metas_writer_begin(cudaipc_metas_writer* w, uint8_t* area, uint32_t capacity);
/* The area's size (the frame's metas_size; 0 without records), or minus the status: the area
 * holds fewer bytes than the records need (the message names both sizes), more than 65535
 * records, or a custom record is still open. */
int64_t cudaipc_metas_writer_finish(cudaipc_metas_writer* w);

/* A record of any kind from a body the caller made (kind 1 to 65535): serialized metas, kinds
 * this version does not know, a decoded record forwarded byte for byte. */
int cudaipc_metas_add_raw(cudaipc_metas_writer* w, uint32_t kind, const char* name,
                          uint32_t name_size, const void* body, uint32_t body_size);
/* Kind 5: timestamp and duration in ns (CUDAIPC_NO_TIME: none), the reference's caps. */
int cudaipc_metas_add_timestamp(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                                uint64_t timestamp, uint64_t duration, const char* caps,
                                uint32_t caps_size);

/* Kind 3: `count` tensors (at most 256), their ids and data type names in `text`. Each tensor's
 * data lands on a 64-byte boundary of the area. */
typedef struct {
  uint32_t id_offset, id_size;       /* in `text` */
  uint32_t dtype_offset, dtype_size; /* in `text`: a data type name of docs/metas.md */
  uint32_t num_dims, dims_order;     /* at most 16; 0 row-major, 1 column-major */
  const void* data;                  /* data_size bytes, as the dims and type take them */
  uint64_t data_size;
  uint64_t dims[CUDAIPC_METAS_MAX_DIMS];
} cudaipc_metas_tensor_in;
int cudaipc_metas_add_tensors(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                              const cudaipc_metas_tensor_in* tensors, uint32_t count,
                              const char* text, uint32_t text_size);

/* Kind 2: one analytics record of detections (mtds 0 .. n-1), then classifications, then tracks,
 * each mtd's id its index, with the relations GStreamer's elements make (a detection CONTAIN its
 * classification and the classification IS_PART_OF it; a detection RELATE_TO its track), then
 * `relations`. Labels are indexes into one names table (UTF-8 back to back, name i at bytes
 * [name_offsets[i], name_offsets[i + 1])): a table of 2048 bytes or less goes into the heap whole
 * (the same bytes every frame), a larger one as the names the record uses. */
typedef struct {
  uint32_t n;         /* detections */
  uint32_t boxes_f64; /* nonzero: boxes are double, else float */
  /* n x 4 x1 y1 x2 y2 in pixels: x = rint(x1), w = rint(x2 - x1) (half to even) in the boxes'
   * precision */
  const void* boxes;
  const float* scores;   /* NULL: 1 */
  const float* rotation; /* radians; NULL: not oriented */
  const int64_t* labels; /* NULL: no labels */
  uint32_t classifications;
  uint32_t tracks;
  const int32_t* class_detection; /* per classification: the detection it classifies, -1: the
                                     frame */
  const uint32_t* class_first;    /* classifications + 1 values: classification k's classes are
                                     [class_first[k], class_first[k + 1]) of the two below */
  const float* class_scores;
  const int64_t* class_labels;
  const int32_t* track_detection; /* per track: its detection, -1: none */
  const uint64_t* track_ids;
  const uint64_t* first_seen; /* ns; NULL: 0 */
  const uint64_t* last_seen;  /* ns; NULL: 0 */
  const uint8_t* lost;        /* NULL: none lost */
  const uint32_t* relations;  /* relation_count x (from, to, types): mtd indexes, type bits */
  uint32_t relation_count;
  uint32_t name_count;
  const uint8_t* names;
  const uint32_t* name_offsets; /* name_count + 1 values */
} cudaipc_metas_analytics;
int cudaipc_metas_add_analytics(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                                const cudaipc_metas_analytics* a);

/* Kind 4, field by field: custom_begin, the fields (a structure, array or list is begun, its
 * members added, then ended; nested at most 8 levels), custom_end. Names are UTF-8 without NUL;
 * array and list members have empty names. */
int cudaipc_metas_custom_begin(cudaipc_metas_writer* w, const char* name, uint32_t name_size);
int cudaipc_metas_custom_int64(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                               int64_t v);
int cudaipc_metas_custom_uint64(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                                uint64_t v);
int cudaipc_metas_custom_int32(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                               int32_t v);
int cudaipc_metas_custom_uint32(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                                uint32_t v);
int cudaipc_metas_custom_double(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                                double v);
int cudaipc_metas_custom_float(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                               float v);
int cudaipc_metas_custom_boolean(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                                 int v);
/* Neither term -2^31, the denominator not 0. */
int cudaipc_metas_custom_fraction(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                                  int32_t numerator, int32_t denominator);
/* UTF-8. */
int cudaipc_metas_custom_string(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                                const char* value, uint32_t value_size);
int cudaipc_metas_custom_bytes(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                               const void* value, uint32_t value_size);
/* Another GType, as its name (at most 255 bytes) and gst_value_serialize's text. */
int cudaipc_metas_custom_other(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                               const char* type_name, uint32_t type_name_size, const char* text,
                               uint32_t text_size);
int cudaipc_metas_custom_begin_structure(cudaipc_metas_writer* w, const char* name,
                                         uint32_t name_size, const char* structure_name,
                                         uint32_t structure_name_size);
/* list: nonzero for a GstValueList, 0 for a GstValueArray. */
int cudaipc_metas_custom_begin_array(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                                     int list);
int cudaipc_metas_custom_end_nested(cudaipc_metas_writer* w);
int cudaipc_metas_custom_end(cudaipc_metas_writer* w);
/* The model side of cudaipcfilter (docs/elements.md, cudaipc/server.hpp). A model process reads the
 * filter's frames with a consumer on the filter's socket path (every-frame mode, reconnecting) and
 * answers each on a reply channel: a producer at "<path>.reply" in host memory with `slots` slots
 * (0: 8) and `meta_size` bytes of results per reply. */
int cudaipc_reply_channel_new(const char* request_path, uint32_t slots, uint32_t meta_size,
                              cudaipc_producer** out);
/* Answers `request` (a frame of the filter's channel, not yet released) with `metas_size` bytes of
 * results (a meta area, docs/metas.md; 0: none) on `replies`; release the request after. Returns
 * CUDAIPC_ERR_TIMEOUT when no reply slot came free in 100 ms (the filter is gone or stuck). */
int cudaipc_reply_publish(cudaipc_producer* replies, const cudaipc_frame* request,
                          const void* metas, uint32_t metas_size);
/* A server (cudaipc/server.hpp): one model process serving any number of cudaipcfilter pipelines,
 * the paths given and every filter channel that appears in `directory`, each read ahead on a
 * thread of its own. Requests are frames (cudaipc_frame_*, DLPack); answer each with
 * cudaipc_server_reply, then release it as any frame. What can never be a filter's channel (a
 * file that is no socket, a missing directory, a cudaipcsink's channel) is
 * CUDAIPC_ERR_INVALID_ARGUMENT naming the path and the cause. */
typedef struct cudaipc_server cudaipc_server;
typedef struct {
  const char* const* paths; /* the filters' socket-paths */
  uint32_t path_count;
  uint32_t reply_slots;      /* 0: 8 */
  const char* directory;     /* NULL: none; must exist (the default channel directory is made) */
  uint64_t scan_interval_ns; /* of an unwatched directory (10x for a watched one); 0: 100 ms */
  int32_t cuda_device;       /* the model's device; -1: each pipeline's own */
  uint32_t reply_meta_size;  /* the most bytes of results per reply; init: 65536 */
  uint32_t queue_depth;      /* requests read ahead per pipeline, 1..64; init: 16 */
  uint32_t socket_mode;      /* of the reply channels; init: 0600 */
  int64_t allowed_gid;       /* a group let in beside the owner; -1: none */
} cudaipc_server_options;
/* A request as cudaipc_server_batch hands it out: the frame's view (tensor_id changes when the
 * pipeline's format or the frame's tensor description changes: read them with
 * cudaipc_request_format then) and the pipeline's number in this server. */
typedef struct {
  cudaipc_frame_view frame;
  uint32_t pipeline;
  uint32_t reserved;
} cudaipc_request_view;
typedef struct {
  uint32_t id;
  uint32_t connected; /* a pipeline publishes on the channel now */
  uint32_t queued;    /* requests read, not yet handed out */
  uint32_t reserved;
  uint64_t requests, replies, replies_lost;
  const char* path; /* valid until the next cudaipc_server_pipelines on this server */
} cudaipc_server_pipeline;
void cudaipc_server_options_init(cudaipc_server_options* opts);
/* CUDAIPC_ERR_BUSY when another live process serves one of the paths. */
int cudaipc_server_new(const cudaipc_server_options* opts, cudaipc_server** out);
void cudaipc_server_free(cudaipc_server* s);
int cudaipc_server_add(cudaipc_server* s, const char* path, uint32_t* pipeline);
/* Up to `max_batch` requests into views[0..*count) (room for max_batch): waits up to timeout_ns for
 * the first, then until max_batch wait or the oldest has waited max_delay_ns; pipelines take turns.
 * *count 0: none came. *events (may be NULL): the pipelines' events kept to read
 * (cudaipc_server_next_event). CUDAIPC_ERR_INTERRUPTED after cudaipc_server_interrupt. Several
 * threads may call it at once: each request goes to one of them. */
int cudaipc_server_batch(cudaipc_server* s, uint32_t max_batch, uint64_t max_delay_ns,
                         uint64_t timeout_ns, cudaipc_request_view* views, uint32_t* count,
                         uint32_t* events);
/* What happened to the pipelines (kept by batches, the latest 256; `events` above counts them):
 * the oldest, taken; type 0 when none. path and message are valid until the next call. */
typedef enum {
  CUDAIPC_SERVER_EOS = 1,          /* the pipeline sent EOS */
  CUDAIPC_SERVER_DISCONNECTED = 2, /* it went away (message: how); its next run is waited for */
  CUDAIPC_SERVER_JOINED = 3,       /* its channel appeared in the directory: served */
  CUDAIPC_SERVER_LEFT = 4          /* its channel was removed from the directory: no longer */
} cudaipc_server_event_type;
typedef struct {
  int type;
  uint32_t pipeline;
  const char* path;
  const char* message;
} cudaipc_server_event;
int cudaipc_server_next_event(cudaipc_server* s, cudaipc_server_event* out);
/* Answers `request` (a frame cudaipc_server_batch handed out, once) with `metas_size` bytes of
 * results (a meta area, docs/metas.md; 0: none). Never waits for the filter: a reply it has no
 * room for is published in order later, or given up after 1 s; CUDAIPC_ERR_TIMEOUT when it
 * was given up at once (the filter holds every reply slot and the backlog is full, or the
 * pipeline has left: its reply channel is closed). The frame is
 * still the caller's: release it after (cudaipc_frame_release_after for CUDA reads). */
int cudaipc_server_reply(cudaipc_server* s, cudaipc_frame* request, const void* metas,
                         uint32_t metas_size);
/* Answers `request` with results the GPU is still computing, without waiting: returns at once,
 * and once the work queued on `stream` so far has run (the model's copies of its results into host
 * memory among it), the core writes the reply on a thread of its own: the detections of
 * `detections` (NULL: none; its arrays are read then, its area and capacity ignored) first, then
 * the records of `metas` (a meta area of what was ready on the host, copied now; NULL: none), and
 * publishes it. *ticket: once cudaipc_server_replies_done reaches it, the host memory the
 * detections point to may be reused. Release the request after, ordered after `stream`
 * (cudaipc_frame_release_after). */
int cudaipc_server_reply_after(cudaipc_server* s, cudaipc_frame* request, void* stream,
                               const cudaipc_detections* detections, const void* metas,
                               uint32_t metas_size, uint64_t* ticket);
uint64_t cudaipc_server_replies_done(cudaipc_server* s);
/* One reply of cudaipc_server_reply_results: a detector's results as the model left them.
 * Arrays: the address of element 0 (NULL: absent), a dtype of cudaipc_tensor's numbering (boxes,
 * scores, rotation: 10 float32, 9 float16, 12 bfloat16, 11 float64; labels: 4 int64, 3 int32),
 * and strides in elements: from one detection to the next, and for boxes from one of a box's
 * x1 y1 x2 y2 to the next (a box's values together, or all evenly apart). Labels index the names
 * table (as cudaipc_detections'; labels past it are named in decimal). */
typedef struct {
  cudaipc_frame* request;
  const void* metas; /* records ready on the host (a meta area), written after the detections */
  uint32_t metas_size;
  uint32_t n;
  const void* boxes;
  const void* scores;
  const void* labels;
  const void* rotation;
  int64_t boxes_strides[2];
  int64_t scores_stride, labels_stride, rotation_stride;
  uint32_t boxes_dtype, scores_dtype, labels_dtype, rotation_dtype;
  const uint8_t* names;
  const uint32_t* name_offsets;
  uint32_t name_count;
  uint32_t flags; /* CUDAIPC_RESULTS_* */
} cudaipc_reply_results;
/* flags: the reply has detections (n may be 0; else host records only); its arrays are host
 * memory the stream's work fills (else GPU memory, copied by the core). */
#define CUDAIPC_RESULTS_DETECTIONS 1u
#define CUDAIPC_RESULTS_HOST 2u
/* Answers `count` requests (cudaipc_server_batch's, each once) with results the GPU is still
 * computing, without waiting, in one call: per reply, the arrays in GPU memory are copied on
 * `stream` into page-locked memory the server keeps (no allocation once it is large enough;
 * CU_STREAM_LEGACY for the legacy default stream, never NULL with GPU arrays), the names and
 * records are copied now, and the core writes and publishes the reply once the stream has run the
 * copies. Nothing the caller passed is read after the call but the GPU arrays, which the stream's
 * copies read in their turn. With `release`, each request queued is then released after `stream`
 * (cudaipc_frame_release_after: its handle is gone). *sent: the replies queued, in order; on a
 * failure replies[*sent] is the one that failed (not answered nor released) and the rest were not
 * tried. *ticket: the last queued reply's, as cudaipc_server_reply_after's. */
int cudaipc_server_reply_results(cudaipc_server* s, void* stream,
                                 const cudaipc_reply_results* replies, uint32_t count, int release,
                                 uint32_t* sent, uint64_t* ticket);
/* The request's pipeline format: its caps (valid while the frame is held), generation, the
 * CUstream the server orders its reads of that pipeline on (NULL for host memory; as
 * cudaipc_frame_cuda_stream, pass NULL when it is not needed). Each may be NULL. */
int cudaipc_request_format(const cudaipc_frame* request, const char** caps, uint64_t* generation,
                           void** cuda_stream);
void cudaipc_server_interrupt(cudaipc_server* s);
/* The pipelines served now: up to `capacity` into `out`, *count how many there are. */
int cudaipc_server_pipelines(cudaipc_server* s, cudaipc_server_pipeline* out, uint32_t capacity,
                             uint32_t* count);
/* Gives the caller's hold on the frame back. The lease ends once every DLPack export of the frame
 * (cudaipc_frame_dlpack) has been deleted too; without exports, at once. `f` is invalid after. */
void cudaipc_frame_release(cudaipc_frame* f);
/* CUDA frames: cudaipc_frame_release ordered after the work queued on `stream` (a CUstream of the
 * consumer's context) so far: the consumer's stream waits for it on the GPU and the producer's
 * next write into the slot follows; nothing is queued when `stream` is idle, and the CPU never
 * waits. Host frames: cudaipc_frame_release. The frame is released even when the ordering fails
 * (the error is returned after). */
int cudaipc_frame_release_after(cudaipc_frame* f, void* stream);
/* CUDA frames: work queued on `stream` from now on reads the frame only after its bytes have
 * landed (nothing is queued when they have, the usual case); the CPU never waits. */
int cudaipc_frame_order_reads(cudaipc_frame* f, void* stream);
/* The CUstream the frame's consumer (or server) orders its own reads on (NULL for host frames).
 * Reads queued on it are covered by the frame's release; asking for it makes every later release
 * of that connection ask the driver whether the stream has run them. */
void* cudaipc_frame_cuda_stream(const cudaipc_frame* f);

/* Producers writing from streams of their own (CUDA channels; no-ops for host memory). Neither
 * makes the CPU wait or queues anything when the stream waited for is idle.
 * write_after: the next copy (publish) or commit waits for the work queued on `stream` so far.
 * order_after_writes: work queued on `stream` from now on follows the producer's stream, a
 * borrowed slot's wait for its last readers included (call it after cudaipc_producer_begin).
 * written: 1 when frame `seq` and everything before it on the producer's stream has landed (a
 * copy's source may be reused), else 0; never waits. last_seq: the newest committed frame. */
int cudaipc_producer_write_after(cudaipc_producer* p, void* stream);
int cudaipc_producer_order_after_writes(cudaipc_producer* p, void* stream);
int cudaipc_producer_written(cudaipc_producer* p, uint64_t seq);
uint64_t cudaipc_producer_last_seq(cudaipc_producer* p);
/* The CUDA device ordinal slots live on; -1 for host memory. */
int cudaipc_producer_cuda_device(cudaipc_producer* p);

/* ---- DLPack ------------------------------------------------------------------------------
 * Frames and borrowed slots as DLPack 1.x tensors, and DLPack tensors published by copy. The
 * structs are dlpack.h's ABI (v1.0) under prefixed names, so this header can sit beside dlpack.h:
 * cudaipc_dl_managed_tensor_versioned is DLManagedTensorVersioned, cudaipc_dl_managed_tensor the
 * legacy DLManagedTensor. Deleters may run on any thread, at any time, also after the producer or
 * consumer handle is freed. */
#define CUDAIPC_DLPACK_MAJOR 1
#define CUDAIPC_DLPACK_MINOR 0
#define CUDAIPC_DL_CPU 1
#define CUDAIPC_DL_CUDA 2
#define CUDAIPC_DL_CUDA_HOST 3
#define CUDAIPC_DL_FLAG_READ_ONLY 1ull

typedef struct {
  int32_t device_type;
  int32_t device_id;
} cudaipc_dl_device;
typedef struct {
  uint8_t code; /* 0 int, 1 uint, 2 float, 4 bfloat, 6 bool */
  uint8_t bits;
  uint16_t lanes;
} cudaipc_dl_dtype;
typedef struct {
  void* data;
  cudaipc_dl_device device;
  int32_t ndim;
  cudaipc_dl_dtype dtype;
  int64_t* shape;
  int64_t* strides; /* elements; NULL: compact row-major */
  uint64_t byte_offset;
} cudaipc_dl_tensor;
typedef struct cudaipc_dl_managed_tensor {
  cudaipc_dl_tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct cudaipc_dl_managed_tensor* self);
} cudaipc_dl_managed_tensor;
typedef struct cudaipc_dl_managed_tensor_versioned {
  struct {
    uint32_t major, minor;
  } version;
  void* manager_ctx;
  void (*deleter)(struct cudaipc_dl_managed_tensor_versioned* self);
  uint64_t flags;
  cudaipc_dl_tensor dl_tensor;
} cudaipc_dl_managed_tensor_versioned;

/* Flags of the DLPack calls. */
#define CUDAIPC_DLPACK_VERSIONED 1u /* the tensor is (or is to be) a ..._versioned struct */
#define CUDAIPC_DLPACK_NO_SYNC 2u   /* order nothing against `stream` (DLPack's stream -1) */
#define CUDAIPC_DLPACK_READ_ONLY 4u /* cudaipc_dlpack_wrap: a tensor importers must not write */

/* The frame as a DLPack tensor viewing the slot (read-only for host channels), in *out: a
 * cudaipc_dl_managed_tensor_versioned* with CUDAIPC_DLPACK_VERSIONED, else a
 * cudaipc_dl_managed_tensor*. It holds the frame's lease until its deleter runs, as the frame does
 * until released. CUDA frames: `stream` (a CUstream of the consumer's context; CU_STREAM_LEGACY or
 * CU_STREAM_PER_THREAD for the default streams) reads the frame only after its bytes landed, as
 * cudaipc_frame_order_reads, and the deleter orders the release after the work queued on it by
 * then, as cudaipc_frame_release_after; no CPU wait. Any number of exports per frame. */
int cudaipc_frame_dlpack(cudaipc_frame* f, void* stream, uint32_t flags, void** out);
/* Live DLPack exports (frames and slots) of this process: none should outlive their tensors. */
uint64_t cudaipc_dlpack_exports_alive(void);

/* ---- Slot views ---------------------------------------------------------------------------
 * A frame's slot as a DLPack tensor that keeps the slot's set mapped but holds no lease: made once
 * per slot and handed out again for every frame of the same tensor description that slot carries,
 * so a binding gives a frame's tensor without an export per frame. What it shows is the frame's
 * until the frame is released, then whatever the producer writes there next: order each frame's
 * reads with cudaipc_frame_order_reads and its release after them (cudaipc_frame_release_after,
 * or cudaipc_frame_order_release for another stream). No CPU wait, no lease, any thread may delete
 * it (the set is unmapped then if nothing else holds it). */
/* The frame's slot index (< CUDAIPC_MAX_SLOTS) and its slot set's identity: frames with equal
 * (slot, set) share their memory, and a view made from one is valid for the others. */
int cudaipc_frame_slot(cudaipc_frame* f, uint32_t* slot, const void** set);
/* The view of the frame's slot (flags: CUDAIPC_DLPACK_VERSIONED or 0), laid out as
 * cudaipc_frame_dlpack lays out the frame. */
int cudaipc_frame_slot_view(cudaipc_frame* f, uint32_t flags, void** out);
/* Slot views alive in this process (they die with their tensors). */
uint64_t cudaipc_dlpack_views_alive(void);
/* ---- Memory the caller owns ---------------------------------------------------------------
 * A DLPack tensor of memory that is not a frame or a slot (a binding's array without an export of
 * its own, to publish): `t` describes it (byte strides, which must be whole items), `data` is its
 * first element, on `device`; flags: CUDAIPC_DLPACK_VERSIONED, CUDAIPC_DLPACK_READ_ONLY (said in
 * the versioned struct's flags; the legacy one has none). Once the
 * call succeeded, `done(ctx)` runs exactly once, on whatever thread deletes the tensor (the
 * importer, or cudaipc_producer_publish_dlpack once its copy landed): the caller keeps the memory
 * valid until then. */
int cudaipc_dlpack_wrap(const cudaipc_tensor* t, const void* data, cudaipc_dl_device device,
                        uint32_t flags, void (*done)(void* ctx), void* ctx, void** out);
/* Wrapped tensors alive in this process (they die with their importers' tensors). */
uint64_t cudaipc_dlpack_wrapped_alive(void);
/* CUDA frames: the frame's release, whenever it comes, is ordered after the work queued on
 * `stream` so far too (the consumer's stream waits for it on the GPU; nothing is queued when it is
 * idle): for reads of a view queued on another stream than the one the release names. Host
 * frames: nothing to do. */
int cudaipc_frame_order_release(cudaipc_frame* f, void* stream);
/* CUDA frames: the frame's release, whenever it comes, is ordered after `event` (a CUevent, or the
 * runtime's cudaEvent_t, recorded after every read of the frame; CUDA counts an event never
 * recorded as completed): one query when it has completed
 * (a model's loop that waited for its answer through it), and the release is then a CPU store,
 * where naming a stream the next frame's work keeps busy would make the GPU write it after that
 * work; otherwise the consumer's stream waits for the event on the GPU. Release the frame after
 * (cudaipc_frame_release). Host frames: nothing to do. */
int cudaipc_frame_order_release_event(cudaipc_frame* f, void* event);
/* Another hold on the frame, ended by one more cudaipc_frame_release: for a binding that lets go of
 * its runtime's lock (the GIL) around a call on a frame another thread may release meanwhile. */
int cudaipc_frame_retain(cudaipc_frame* f);
/* The frame's first `bytes` (at most its size) copied into host memory at `dst`, after its bytes
 * landed, complete on return (CUDA frames: ordered on the consumer's stream, the CPU waits for it;
 * not for a hot path). Host frames: a memcpy. */
int cudaipc_frame_copy_to_host(cudaipc_frame* f, void* dst, uint64_t bytes);

/* Copies a C-contiguous DLPack tensor into a free slot and publishes it (cudaipc_producer_publish
 * without the pointers). It must be of the format's dtype and shape (else *result is
 * CUDAIPC_NEEDS_FORMAT and nothing is taken: cudaipc_dlpack_describe says what to set), on the CPU
 * (kDLCPU, kDLCUDAHost) or, for CUDA channels, on the producer's device. CUDA channels: the copy
 * waits on the GPU for the work queued on `stream` so far (unless CUDAIPC_DLPACK_NO_SYNC), never
 * on the CPU. With CUDAIPC_OK (and any other *result) the tensor is the library's: its deleter runs
 * once the copy has landed (looked at on later publishes; cudaipc_producer_free waits up to 5 s),
 * at once when nothing was copied. After an error it stays the caller's, unless the error is a
 * CUDA failure once the copy was queued (CUDAIPC_ERR_CUDA): then the library keeps it too. */
int cudaipc_producer_publish_dlpack(cudaipc_producer* p, void* managed, uint32_t flags,
                                    void* stream, const cudaipc_frame_info* info,
                                    cudaipc_publish* result);
/* A DLPack tensor's description as cudaipc_producer_set_format takes it (byte strides, size,
 * dtype) and where it lives. */
int cudaipc_dlpack_describe(const void* managed, uint32_t flags, cudaipc_tensor* out,
                            int32_t* device_type, int32_t* device_id);
/* The slot borrowed by cudaipc_producer_begin as a writable DLPack tensor of the format's dtype and
 * shape. CUDA channels: `stream` follows the producer's stream first (the slot's last readers,
 * cudaipc_producer_order_after_writes), and cudaipc_producer_commit then waits on the GPU for the
 * work queued by then on every stream an export of the slot named. The deleter frees only the
 * export: do not use the tensor after the commit. */
int cudaipc_producer_slot_dlpack(cudaipc_producer* p, void* stream, uint32_t flags, void** out);

/* ---- DLPack capsules (CPython) ------------------------------------------------------------
 * For bindings to a runtime that hands DLPack tensors over in capsule objects the way CPython's
 * PyCapsule does: they give the library the runtime's functions once, then export and publish in
 * one call each, with a compiled capsule destructor. Every call here must be made with the
 * runtime's lock (the GIL) held; publish_capsule lets go of it while it waits for a slot. */
typedef struct {
  void* (*capsule_new)(void* pointer, const char* name, void (*destructor)(void* capsule));
  void* (*capsule_get_pointer)(void* capsule, const char* name);
  const char* (*capsule_get_name)(void* capsule);
  int (*capsule_set_name)(void* capsule, const char* name);
  void (*set_error)(void* exception_type, const char* message); /* PyErr_SetString */
  /* The exception set_error raises (the message says why; cudaipc_last_error_code the status). */
  void* error_type;
  void* (*save_thread)(void);          /* PyEval_SaveThread */
  void (*restore_thread)(void* state); /* PyEval_RestoreThread */
} cudaipc_capsule_api;
int cudaipc_set_capsule_api(const cudaipc_capsule_api* api);
/* cudaipc_frame_dlpack in a new capsule ("dltensor_versioned" or "dltensor"): a new reference, or
 * NULL with the runtime's error set. A capsule no importer consumed deletes its tensor when it
 * dies. */
void* cudaipc_frame_dlpack_capsule(cudaipc_frame* f, void* stream, uint32_t flags);
/* cudaipc_frame_slot_view in a new capsule. */
void* cudaipc_frame_slot_view_capsule(cudaipc_frame* f, uint32_t flags);
/* cudaipc_dlpack_wrap in a new capsule. NULL (with the runtime's error set): `done` will not run,
 * and what `ctx` holds is still the caller's. */
void* cudaipc_dlpack_wrap_capsule(const cudaipc_tensor* t, const void* data,
                                  cudaipc_dl_device device, uint32_t flags, void (*done)(void* ctx),
                                  void* ctx);
/* cudaipc_producer_slot_dlpack, in a new capsule. */
void* cudaipc_producer_slot_dlpack_capsule(cudaipc_producer* p, void* stream, uint32_t flags);
/* cudaipc_producer_publish_dlpack of the tensor in a DLPack capsule (renamed "used_..." when
 * taken), with only pts and duration (ns or CUDAIPC_NO_TIME) and the frame's encoded metas
 * (metas_size bytes, or NULL and 0) to say: returns the cudaipc_publish result (>= 0), or minus the
 * error status (cudaipc_last_error says why). */
int cudaipc_producer_publish_capsule(cudaipc_producer* p, void* capsule, void* stream,
                                     uint32_t flags, uint64_t pts, uint64_t duration,
                                     const void* metas, uint32_t metas_size);
/* cudaipc_dlpack_describe of the tensor in a DLPack capsule (not consumed). */
int cudaipc_capsule_describe(void* capsule, cudaipc_tensor* out, int32_t* device_type,
                             int32_t* device_id);

#ifdef __cplusplus
}
#endif

#endif /* CUDAIPC_H */
