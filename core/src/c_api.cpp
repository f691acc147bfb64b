// The C API: catches every exception at the boundary and turns it into a code plus a per-thread
// message.
#include "cudaipc/cudaipc.h"

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>

#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"

static_assert(sizeof(cudaipc_tensor) == sizeof(cudaipc::TensorDesc), "C and C++ tensor layouts");
static_assert(offsetof(cudaipc_tensor, planes) == offsetof(cudaipc::TensorDesc, planes),
              "C and C++ tensor layouts");

struct cudaipc_producer {
  std::unique_ptr<cudaipc::Producer> p;
  cudaipc::WriteSlot borrowed;
};
struct cudaipc_consumer {
  std::unique_ptr<cudaipc::Consumer> c;
  std::string caps;  // keeps FORMAT events' caps alive until the next call
};
struct cudaipc_frame {
  cudaipc::Frame f;
};

namespace {

thread_local std::string g_error;

// C callers pass unsigned nanoseconds, UINT64_MAX meaning "wait for ever": clamp instead of
// letting it wrap to a negative (already expired) duration.
std::chrono::nanoseconds to_duration(uint64_t ns) {
  constexpr auto kMax = static_cast<uint64_t>(std::chrono::nanoseconds::max().count());
  return std::chrono::nanoseconds(static_cast<std::int64_t>(ns > kMax ? kMax : ns));
}

int fail(cudaipc::Errc code, const char* what) {
  g_error = what;
  return static_cast<int>(code);
}

template <typename F>
int guard(F&& f) {
  try {
    f();
    g_error.clear();
    return CUDAIPC_OK;
  } catch (const cudaipc::Error& e) {
    return fail(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return fail(cudaipc::Errc::system, "out of memory");
  } catch (const std::exception& e) {
    return fail(cudaipc::Errc::system, e.what());
  }
}

cudaipc::FrameInfo to_info(const cudaipc_frame_info* in) {
  cudaipc::FrameInfo info;
  if (!in) return info;
  info.pts = in->pts;
  info.dts = in->dts;
  info.duration = in->duration;
  info.flags = in->flags;
  info.tensor = reinterpret_cast<const cudaipc::TensorDesc*>(in->tensor);
  info.user_meta = in->user_meta;
  info.user_meta_size = in->user_meta_size;
  return info;
}

cudaipc_publish to_c(cudaipc::PublishStatus s) {
  switch (s) {
    case cudaipc::PublishStatus::published:
      return CUDAIPC_PUBLISHED;
    case cudaipc::PublishStatus::dropped:
      return CUDAIPC_DROPPED;
    case cudaipc::PublishStatus::timeout:
      return CUDAIPC_TIMED_OUT;
    case cudaipc::PublishStatus::interrupted:
      return CUDAIPC_INTERRUPTED_PUBLISH;
  }
  return CUDAIPC_DROPPED;
}

// The enum fields of option structs as the integers a C caller (or ctypes) really put there:
// loading an out-of-range value through the C++ view of the enum type is undefined behaviour.
template <typename E>
long long enum_value(const E& field) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized here");
  int v;
  std::memcpy(&v, &field, sizeof v);
  return v;
}

void require(const void* p, const char* what) {
  if (!p) throw cudaipc::Error(cudaipc::Errc::invalid_argument, std::string(what) + " is NULL");
}

}  // namespace

extern "C" {

const char* cudaipc_last_error(void) {
  return g_error.c_str();
}

void cudaipc_producer_options_init(cudaipc_producer_options* o) {
  *o = cudaipc_producer_options{nullptr, 4, CUDAIPC_MEMORY_HOST, CUDAIPC_BLOCK, 0, 0};
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
    auto h = std::make_unique<cudaipc_producer>();
    h->p = std::make_unique<cudaipc::Producer>(opts);
    *out = h.release();
  });
}

void cudaipc_producer_free(cudaipc_producer* p) {
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
    p->p->commit(p->borrowed, to_info(info));
  });
}

int cudaipc_producer_abort(cudaipc_producer* p) {
  return guard([&] {
    require(p, "producer");
    p->p->abort(p->borrowed);
  });
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

void cudaipc_consumer_free(cudaipc_consumer* c) {
  std::unique_ptr<cudaipc_consumer> owned(c);
}

int cudaipc_consumer_next(cudaipc_consumer* c, uint64_t timeout_ns, cudaipc_event* ev) {
  return guard([&] {
    require(c, "consumer");
    require(ev, "event");
    *ev = cudaipc_event{};
    cudaipc::Event e = c->c->next(to_duration(timeout_ns));
    ev->generation = e.generation;
    switch (e.type) {
      case cudaipc::EventType::frame: {
        auto f = std::make_unique<cudaipc_frame>();
        f->f = std::move(e.frame);
        ev->type = CUDAIPC_EVENT_FRAME;
        ev->frame = f.release();
        break;
      }
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
  });
}

void cudaipc_producer_interrupt(cudaipc_producer* p) {
  if (p) p->p->interrupt();
}

void cudaipc_producer_clear_interrupt(cudaipc_producer* p) {
  if (p) p->p->clear_interrupt();
}

void cudaipc_consumer_interrupt(cudaipc_consumer* c) {
  if (c) c->c->interrupt();
}

void* cudaipc_consumer_cuda_stream(cudaipc_consumer* c) {
  return c ? c->c->cuda_stream() : nullptr;
}

int cudaipc_consumer_memory(cudaipc_consumer* c, cudaipc_memory* out) {
  return guard([&] {
    require(c, "consumer");
    require(out, "out");
    *out = c->c->memory_kind() == cudaipc::MemoryKind::cuda ? CUDAIPC_MEMORY_CUDA
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
const void* cudaipc_frame_user_meta(const cudaipc_frame* f, uint32_t* size) {
  if (!f) return nullptr;
  if (size) *size = f->f.desc().user_meta_size;
  return f->f.desc().user_meta;
}
void cudaipc_frame_release(cudaipc_frame* f) {
  std::unique_ptr<cudaipc_frame> owned(f);
}

}  // extern "C"
