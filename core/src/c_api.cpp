// The C API: catches every exception at the boundary and turns it into a code plus a per-thread
// message.
#include "cudaipc/cudaipc.h"
#include "hot_path.hpp"

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>

#include "c_api_handles.hpp"

static_assert(sizeof(cudaipc_tensor) == sizeof(cudaipc::TensorDesc), "C and C++ tensor layouts");
static_assert(offsetof(cudaipc_tensor, planes) == offsetof(cudaipc::TensorDesc, planes),
              "C and C++ tensor layouts");
static_assert(CUDAIPC_MAX_SLOTS == cudaipc::kMaxSlots, "the C API's slot limit is the core's");
static_assert(CUDAIPC_ROLE_REQUESTS == static_cast<int>(cudaipc::ChannelRole::requests) &&
                  CUDAIPC_ROLE_REPLIES == static_cast<int>(cudaipc::ChannelRole::replies),
              "C and C++ channel roles");

using cudaipc::capi::guard;
using cudaipc::capi::require;
using cudaipc::capi::to_c;
using cudaipc::capi::to_duration;
using cudaipc::capi::to_info;

namespace {

// The enum fields of option structs as the integers a C caller (or ctypes) really put there:
// loading an out-of-range value through the C++ view of the enum type is undefined behaviour.
template <typename E>
long long enum_value(const E& field) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized here");
  int v;
  std::memcpy(&v, &field, sizeof v);
  return v;
}

CUDAIPC_HOT cudaipc::Consumer& open_consumer(cudaipc_consumer* c) {
  require(c, "consumer");
  if (!c->c) throw cudaipc::Error(cudaipc::Errc::invalid_argument, "the consumer is closed");
  return *c->c;
}

// The C handle of a frame the consumer just handed out: one hold (the caller's), counted among the
// consumer's held frames until the last hold ends.
CUDAIPC_HOT cudaipc_frame* hand_out(cudaipc_consumer* c, cudaipc::Frame&& frame) {
  // What may throw comes before take(): from there on nothing does, and the seq counted held is a
  // frame handed out.
  const int device = c->c->memory_kind() == cudaipc::MemoryKind::cuda ? c->c->cuda_device() : -1;
  std::unique_ptr<cudaipc_frame> f = c->held->take(frame.seq());
  f->held = c->held;
  f->cuda_device = device;
  f->f = std::move(frame);
  return f.release();
}

// Fills *ev from a core event other than a frame (out of the frame's path, whose code it would
// otherwise spread over more cache lines).
__attribute__((noinline, cold)) void to_c_other_event(cudaipc_consumer* c, cudaipc::Event& e,
                                                      cudaipc_event* ev) {
  *ev = cudaipc_event{};
  ev->generation = e.generation;
  switch (e.type) {
    case cudaipc::EventType::frame:
      break;
    case cudaipc::EventType::format:
      c->caps = e.format.caps;
      ev->type = CUDAIPC_EVENT_FORMAT;
      ev->caps = c->caps.c_str();
      std::memcpy(&ev->tensor, &e.format.tensor, sizeof ev->tensor);
      break;
    case cudaipc::EventType::eos:
      ev->type = CUDAIPC_EVENT_EOS;
      break;
    case cudaipc::EventType::timeout:
      ev->type = CUDAIPC_EVENT_TIMEOUT;
      break;
    case cudaipc::EventType::interrupted:
      ev->type = CUDAIPC_EVENT_INTERRUPTED;
      break;
    case cudaipc::EventType::disconnected:
      ev->type = CUDAIPC_EVENT_DISCONNECTED;
      break;
  }
}

// Fills *ev from a core event; a frame goes to a new C handle.
CUDAIPC_HOT inline void to_c_event(cudaipc_consumer* c, cudaipc::Event& e, cudaipc_event* ev) {
  if (__builtin_expect(e.type != cudaipc::EventType::frame, 0)) return to_c_other_event(c, e, ev);
  // Its fields but the tensor (a FORMAT event's), which a frame leaves as it was: clearing it
  // wrote three more cache lines per frame. A hand-out that throws leaves no handle in it.
  ev->type = CUDAIPC_EVENT_FRAME;
  ev->frame = nullptr;
  ev->frame = hand_out(c, std::move(e.frame));
  ev->caps = nullptr;
  ev->generation = e.generation;
}

// The view of a read that brought no frame.
__attribute__((noinline, cold)) void no_frame_view(const cudaipc_event* ev,
                                                   cudaipc_frame_view* view) {
  *view = cudaipc_frame_view{};
  view->type = ev->type;
  view->cuda_device = -1;
}

}  // namespace

namespace cudaipc::capi {

CUDAIPC_HOT void unref(cudaipc_frame* f, void* stream, bool ordered) {
  std::exception_ptr failure;
  if (ordered && f->cuda_device >= 0) {
    try {
      f->f.order_release_after(stream);
    } catch (...) {
      // The hold ends regardless: a lease kept would stall the consumer at its limit for good.
      failure = std::current_exception();
    }
  }
  if (f->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    std::unique_ptr<cudaipc_frame> owned(f);
    HeldFrames* held = owned->held.get();
    const std::uint64_t seq = owned->f.seq();
    held->give_back(seq, std::move(owned));
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace cudaipc::capi

extern "C" {

const char* cudaipc_last_error(void) {
  return cudaipc::capi::g_error.c_str();
}

int cudaipc_last_error_code(void) {
  return cudaipc::capi::g_code;
}

void cudaipc_producer_options_init(cudaipc_producer_options* o) {
  *o = cudaipc_producer_options{nullptr, 4, CUDAIPC_MEMORY_HOST,       CUDAIPC_BLOCK,
                                0,       0, cudaipc::kDefaultMetaSize, CUDAIPC_ROLE_FRAMES};
}

void cudaipc_consumer_options_init(cudaipc_consumer_options* o) {
  *o = cudaipc_consumer_options{nullptr, CUDAIPC_EVERY_FRAME, 1, -1, 0};
}

int cudaipc_producer_new(const cudaipc_producer_options* o, cudaipc_producer** out) {
  return guard([&] {
    require(o, "options");
    require(out, "out");
    cudaipc::ProducerOptions opts;
    if (o->path) opts.path = o->path;
    if (o->slots) opts.slots = o->slots;
    const long long memory = enum_value(o->memory);
    if (memory != CUDAIPC_MEMORY_HOST && memory != CUDAIPC_MEMORY_CUDA)
      throw cudaipc::Error(cudaipc::Errc::invalid_argument,
                           "unknown memory kind " + std::to_string(memory));
    opts.memory = static_cast<cudaipc::MemoryKind>(memory);
    opts.on_full = enum_value(o->on_full) == CUDAIPC_DROP ? cudaipc::FullPolicy::drop
                                                          : cudaipc::FullPolicy::block;
    if (o->block_timeout_ns) opts.block_timeout = to_duration(o->block_timeout_ns);
    opts.cuda.device = o->cuda_device;
    opts.meta_size = o->meta_size;
    // The core checks the value (a caller's struct may hold anything).
    opts.role = static_cast<cudaipc::ChannelRole>(enum_value(o->role));
    auto h = std::make_unique<cudaipc_producer>();
    h->slot_streams.reserve(4);
    h->p = std::make_unique<cudaipc::Producer>(opts);
    *out = h.release();
  });
}

void cudaipc_producer_free(cudaipc_producer* p) {
  if (!p) return;
  cudaipc::capi::settle_sources(p);
  std::unique_ptr<cudaipc_producer> owned(p);
}

int cudaipc_producer_set_format(cudaipc_producer* p, const char* caps, const cudaipc_tensor* t,
                                uint64_t max_frame_size) {
  return guard([&] {
    require(p, "producer");
    require(t, "tensor");
    cudaipc::Format f;
    f.caps = caps ? caps : "";
    f.tensor = *reinterpret_cast<const cudaipc::TensorDesc*>(t);
    f.max_frame_size = max_frame_size;
    p->p->set_format(f);
  });
}

int cudaipc_producer_publish(cudaipc_producer* p, const void* data, uint64_t bytes,
                             const cudaipc_frame_info* info, int from_device,
                             cudaipc_publish* result) {
  return guard([&] {
    require(p, "producer");
    require(data, "data");
    auto s = p->p->publish(data, bytes, to_info(info), from_device != 0);
    if (result) *result = to_c(s);
  });
}

int cudaipc_producer_begin(cudaipc_producer* p, uintptr_t* address, uint64_t* capacity,
                           cudaipc_publish* result) {
  return guard([&] {
    require(p, "producer");
    require(address, "address");
    cudaipc::PublishStatus s;
    p->slot_streams.clear();
    p->borrowed = p->p->begin_frame(&s);
    *address = p->borrowed ? p->borrowed.address() : 0;
    if (capacity) *capacity = p->borrowed ? p->borrowed.capacity() : 0;
    if (result) *result = to_c(s);
  });
}

int cudaipc_producer_commit(cudaipc_producer* p, const cudaipc_frame_info* info) {
  return guard([&] {
    require(p, "producer");
    if (!p->borrowed)
      throw cudaipc::Error(cudaipc::Errc::invalid_argument, "commit without a borrowed slot");
    try {
      for (void* stream : p->slot_streams) p->p->write_after(stream);
    } catch (...) {
      // Published unordered, the frame could reach consumers before its bytes: abort it.
      p->slot_streams.clear();
      p->p->abort(p->borrowed);
      throw;
    }
    p->slot_streams.clear();
    p->p->commit(p->borrowed, to_info(info));
  });
}

int cudaipc_producer_abort(cudaipc_producer* p) {
  return guard([&] {
    require(p, "producer");
    p->slot_streams.clear();
    p->p->abort(p->borrowed);
  });
}

int cudaipc_producer_write_after(cudaipc_producer* p, void* stream) {
  return guard([&] {
    require(p, "producer");
    p->p->write_after(stream);
  });
}

int cudaipc_producer_order_after_writes(cudaipc_producer* p, void* stream) {
  return guard([&] {
    require(p, "producer");
    p->p->order_after_writes(stream);
  });
}

int cudaipc_producer_written(cudaipc_producer* p, uint64_t seq) {
  return p && p->p->written(seq) ? 1 : 0;
}

uint64_t cudaipc_producer_last_seq(cudaipc_producer* p) {
  return p ? p->p->last_seq() : 0;
}

int cudaipc_producer_cuda_device(cudaipc_producer* p) {
  return p ? p->p->cuda_device() : -1;
}

int cudaipc_producer_end_of_stream(cudaipc_producer* p) {
  return guard([&] {
    require(p, "producer");
    p->p->end_of_stream();
  });
}

int cudaipc_producer_counters(cudaipc_producer* p, uint64_t* published, uint64_t* dropped,
                              uint32_t* consumers) {
  return guard([&] {
    require(p, "producer");
    auto s = p->p->stats();
    if (published) *published = s.published;
    if (dropped) *dropped = s.dropped;
    if (consumers) *consumers = static_cast<uint32_t>(s.consumers.size());
  });
}

void* cudaipc_producer_cuda_stream(cudaipc_producer* p) {
  return p ? p->p->cuda_stream() : nullptr;
}

int cudaipc_consumer_new(const cudaipc_consumer_options* o, cudaipc_consumer** out) {
  return guard([&] {
    require(o, "options");
    require(out, "out");
    cudaipc::ConsumerOptions opts;
    if (o->path) opts.path = o->path;
    opts.mode = enum_value(o->mode) == CUDAIPC_LATEST ? cudaipc::ConsumeMode::latest
                                                      : cudaipc::ConsumeMode::every_frame;
    opts.reconnect = o->reconnect != 0;
    opts.cuda.device = o->cuda_device;
    opts.cuda.cpu_wait = o->cuda_cpu_wait != 0;
    auto h = std::make_unique<cudaipc_consumer>();
    h->c = std::make_unique<cudaipc::Consumer>(opts);
    *out = h.release();
  });
}

void cudaipc_consumer_close(cudaipc_consumer* c) {
  if (c) c->c.reset();
}

void cudaipc_consumer_free(cudaipc_consumer* c) {
  std::unique_ptr<cudaipc_consumer> owned(c);
}

int cudaipc_consumer_next(cudaipc_consumer* c, uint64_t timeout_ns, cudaipc_event* ev) {
  return guard([&] {
    require(c, "consumer");
    require(ev, "event");
    cudaipc::Event e = open_consumer(c).next(to_duration(timeout_ns));
    to_c_event(c, e, ev);
  });
}

CUDAIPC_HOT int cudaipc_consumer_next_frame(cudaipc_consumer* c, uint64_t timeout_ns,
                                            cudaipc_event* ev, cudaipc_frame_view* view) {
  return guard([&]() CUDAIPC_HOT {
    require(c, "consumer");
    require(ev, "event");
    require(view, "view");
    cudaipc::Event e = open_consumer(c).next(to_duration(timeout_ns));
    to_c_event(c, e, ev);
    if (__builtin_expect(ev->type != CUDAIPC_EVENT_FRAME, 0)) return no_frame_view(ev, view);
    const cudaipc::FrameDesc& d = ev->frame->f.desc();
    if (d.tensor != c->last_tensor) {
      c->last_tensor = d.tensor;
      ++c->tensor_id;
    }
    cudaipc::capi::describe_frame(ev->frame, c->tensor_id, view);
  });
}

int cudaipc_consumer_held(cudaipc_consumer* c, uint32_t* count, uint64_t* seqs, uint32_t capacity) {
  return guard([&] {
    require(c, "consumer");
    require(count, "count");
    const std::vector<std::uint64_t> held = c->held->sorted();
    *count = static_cast<uint32_t>(held.size());
    if (seqs) std::copy_n(held.begin(), std::min<std::size_t>(capacity, held.size()), seqs);
  });
}

int cudaipc_consumer_cuda_device(cudaipc_consumer* c) {
  try {
    return c && c->c ? c->c->cuda_device() : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

void cudaipc_producer_interrupt(cudaipc_producer* p) {
  if (p) p->p->interrupt();
}

void cudaipc_producer_clear_interrupt(cudaipc_producer* p) {
  if (p) p->p->clear_interrupt();
}

void cudaipc_consumer_interrupt(cudaipc_consumer* c) {
  if (c && c->c) c->c->interrupt();
}

void* cudaipc_consumer_cuda_stream(cudaipc_consumer* c) {
  return c && c->c ? c->c->cuda_stream() : nullptr;
}

int cudaipc_consumer_counters(cudaipc_consumer* c, cudaipc_consumer_stats* out) {
  return guard([&] {
    require(c, "consumer");
    require(out, "out");
    const cudaipc::ConsumerCounters k = open_consumer(c).counters();
    *out = cudaipc_consumer_stats{k.delivered,        k.skipped,   k.producer_published,
                                  k.producer_dropped, k.gpu_waits, k.gpu_releases};
  });
}

int cudaipc_consumer_memory(cudaipc_consumer* c, cudaipc_memory* out) {
  return guard([&] {
    require(c, "consumer");
    require(out, "out");
    *out = open_consumer(c).memory_kind() == cudaipc::MemoryKind::cuda ? CUDAIPC_MEMORY_CUDA
                                                                       : CUDAIPC_MEMORY_HOST;
  });
}

uint64_t cudaipc_frame_seq(const cudaipc_frame* f) {
  return f ? f->f.seq() : 0;
}
uintptr_t cudaipc_frame_data(const cudaipc_frame* f) {
  return f ? reinterpret_cast<uintptr_t>(f->f.data()) : 0;
}
uint64_t cudaipc_frame_size(const cudaipc_frame* f) {
  return f ? f->f.size() : 0;
}
void cudaipc_frame_times(const cudaipc_frame* f, uint64_t* pts, uint64_t* dts, uint64_t* duration,
                         uint32_t* flags) {
  if (!f) return;
  const auto& d = f->f.desc();
  if (pts) *pts = d.pts;
  if (dts) *dts = d.dts;
  if (duration) *duration = d.duration;
  if (flags) *flags = d.flags;
}
const cudaipc_tensor* cudaipc_frame_tensor(const cudaipc_frame* f) {
  return f ? reinterpret_cast<const cudaipc_tensor*>(&f->f.desc().tensor) : nullptr;
}
uint64_t cudaipc_frame_publish_time(const cudaipc_frame* f) {
  return f ? f->f.desc().publish_time_ns : 0;
}
int cudaipc_frame_written(const cudaipc_frame* f) {
  return f && f->f.written() ? 1 : 0;
}
const uint8_t* cudaipc_frame_metas(const cudaipc_frame* f, uint32_t* size) {
  if (size) *size = f ? f->f.metas_size() : 0;
  return f ? f->f.metas() : nullptr;
}

uint8_t* cudaipc_producer_slot_metas(cudaipc_producer* p, uint32_t* capacity) {
  const bool has = p && p->borrowed && p->borrowed.metas();
  if (capacity) *capacity = has ? p->borrowed.metas_capacity() : 0;
  return has ? p->borrowed.metas() : nullptr;
}

uint32_t cudaipc_producer_meta_size(const cudaipc_producer* p) {
  return p ? p->p->meta_size() : 0;
}

const void* cudaipc_frame_user_meta(const cudaipc_frame* f, uint32_t* size) {
  if (!f) return nullptr;
  if (size) *size = f->f.desc().user_meta_size;
  return f->f.desc().user_meta;
}
CUDAIPC_HOT void cudaipc_frame_release(cudaipc_frame* f) {
  if (f) cudaipc::capi::unref(f, nullptr, false);
}

int cudaipc_frame_release_after(cudaipc_frame* f, void* stream) {
  return guard([&] {
    require(f, "frame");
    cudaipc::capi::unref(f, stream, true);
  });
}

int cudaipc_frame_order_reads(cudaipc_frame* f, void* stream) {
  return guard([&] {
    require(f, "frame");
    if (f->cuda_device >= 0) f->f.order_reads(stream);
  });
}

void* cudaipc_frame_cuda_stream(const cudaipc_frame* f) {
  return f && f->cuda_device >= 0 ? f->f.cuda_stream() : nullptr;
}

int cudaipc_frame_order_release(cudaipc_frame* f, void* stream) {
  return guard([&] {
    require(f, "frame");
    if (f->cuda_device >= 0) f->f.order_release_after(stream);
  });
}

int cudaipc_frame_order_release_event(cudaipc_frame* f, void* event) {
  return guard([&] {
    require(f, "frame");
    if (f->cuda_device >= 0) f->f.order_release_after_event(event);
  });
}

int cudaipc_frame_retain(cudaipc_frame* f) {
  return guard([&] {
    require(f, "frame");
    f->refs.fetch_add(1, std::memory_order_relaxed);
  });
}

int cudaipc_frame_copy_to_host(cudaipc_frame* f, void* dst, uint64_t bytes) {
  return guard([&] {
    require(f, "frame");
    f->f.copy_to_host(dst, bytes);
  });
}

}  // extern "C"
