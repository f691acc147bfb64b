// The C API's DLPack calls (cudaipc.h): frames and borrowed slots as DLPack 1.x tensors with
// compiled deleters, DLPack tensors published by copy with their sources released once the copy
// has landed, and the capsule calls that let a binding (Python through ctypes) do each of these in
// one foreign call.
#include <time.h>

#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "c_api_handles.hpp"
#include "cudaipc/log.hpp"
#include "cudaipc/tensor.hpp"
#include "hot_path.hpp"

using cudaipc::DType;
using cudaipc::Errc;
using cudaipc::Error;
using cudaipc::capi::DlExport;
using cudaipc::capi::guard;
using cudaipc::capi::PendingSource;
using cudaipc::capi::require;

static_assert(offsetof(cudaipc_dl_managed_tensor_versioned, dl_tensor) == 32,
              "DLManagedTensorVersioned layout (dlpack.h v1.0)");
static_assert(offsetof(cudaipc_dl_managed_tensor, deleter) == 56,
              "DLManagedTensor layout (dlpack.h)");
static_assert(sizeof(cudaipc_dl_tensor) == 48, "DLTensor layout (dlpack.h)");

namespace {

constexpr const char* kNameVersioned = "dltensor_versioned";
constexpr const char* kNameLegacy = "dltensor";
constexpr const char* kUsedVersioned = "used_dltensor_versioned";
constexpr const char* kUsedLegacy = "used_dltensor";
// How long cudaipc_producer_free waits for the copies of sources it still holds.
constexpr std::uint64_t kSettleNs = 5'000'000'000;

std::atomic<std::uint64_t> g_exports_alive{0};
std::atomic<std::uint64_t> g_views_alive{0};
std::atomic<std::uint64_t> g_wrapped_alive{0};

// ---- dtypes ----

struct DlCode {
  DType dtype;
  std::uint8_t code, bits;
};
constexpr DlCode kDlCodes[] = {
    {DType::int8, 0, 8},     {DType::int16, 0, 16},   {DType::int32, 0, 32},
    {DType::int64, 0, 64},   {DType::uint8, 1, 8},    {DType::uint16, 1, 16},
    {DType::uint32, 1, 32},  {DType::uint64, 1, 64},  {DType::float16, 2, 16},
    {DType::float32, 2, 32}, {DType::float64, 2, 64}, {DType::bfloat16, 4, 16},
    {DType::boolean, 6, 8},
};

cudaipc_dl_dtype to_dl(DType t) {
  for (const DlCode& c : kDlCodes)
    if (c.dtype == t) return cudaipc_dl_dtype{c.code, c.bits, 1};
  throw Error(Errc::invalid_argument,
              "dtype code " + std::to_string(static_cast<unsigned>(t)) + " has no DLPack type");
}

DType from_dl(const cudaipc_dl_dtype& t) {
  if (t.lanes == 1)
    for (const DlCode& c : kDlCodes)
      if (c.code == t.code && c.bits == t.bits) return c.dtype;
  throw Error(Errc::invalid_argument,
              "DLPack dtype (code " + std::to_string(t.code) + ", " + std::to_string(t.bits) +
                  " bits, " + std::to_string(t.lanes) + " lanes) is not one cudaipc carries");
}

// ---- exports ----

extern "C" {
static void delete_versioned(cudaipc_dl_managed_tensor_versioned* m);
static void delete_legacy(cudaipc_dl_managed_tensor* m);
}

DlExport* claim_export(cudaipc_frame* f) {
  DlExport* e;
  if (f && !f->inline_busy.exchange(true, std::memory_order_acq_rel)) {
    f->inline_export = DlExport{};
    f->inline_export.inline_in_frame = true;
    e = &f->inline_export;
  } else {
    e = std::make_unique<DlExport>().release();  // owned by the tensor until its deleter
  }
  g_exports_alive.fetch_add(1, std::memory_order_relaxed);
  return e;
}

void recycle(DlExport* e) noexcept {
  g_exports_alive.fetch_sub(1, std::memory_order_relaxed);
  if (e->inline_in_frame)
    e->frame->inline_busy.store(false, std::memory_order_release);
  else
    std::unique_ptr<DlExport> owned(e);
}

// Fills the managed tensor of `e` for `t` with its first element at `data`: DLPack counts strides
// in elements, and the data pointer is the first element itself (byte_offset 0).
void* fill_export(DlExport& e, const cudaipc::TensorDesc& t, std::uintptr_t data,
                  cudaipc_dl_device device, bool read_only, bool versioned) {
  const cudaipc_dl_dtype dt = to_dl(t.dtype);
  const auto item = static_cast<std::int64_t>(cudaipc::dtype_size(t.dtype));
  if (t.rank > CUDAIPC_MAX_RANK)
    throw Error(Errc::invalid_argument, "rank " + std::to_string(t.rank) + " out of range");
  for (std::uint32_t i = 0; i < t.rank; ++i) {
    if (t.strides[i] % item != 0)
      throw Error(Errc::invalid_argument,
                  "stride " + std::to_string(t.strides[i]) + " bytes is not a multiple of the " +
                      cudaipc::dtype_name(t.dtype) + " item size " + std::to_string(item) +
                      "; DLPack counts strides in elements");
    e.shape[i] = t.shape[i];
    e.strides[i] = t.strides[i] / item;
  }
  const cudaipc_dl_tensor dl{reinterpret_cast<void*>(data),
                             device,
                             static_cast<int32_t>(t.rank),
                             dt,
                             e.shape,
                             e.strides,
                             0};
  if (versioned) {
    e.versioned.version.major = CUDAIPC_DLPACK_MAJOR;
    e.versioned.version.minor = CUDAIPC_DLPACK_MINOR;
    e.versioned.manager_ctx = &e;
    e.versioned.deleter = delete_versioned;
    e.versioned.flags = read_only ? CUDAIPC_DL_FLAG_READ_ONLY : 0;
    e.versioned.dl_tensor = dl;
    return &e.versioned;
  }
  e.legacy.dl_tensor = dl;
  e.legacy.manager_ctx = &e;
  e.legacy.deleter = delete_legacy;
  return &e.legacy;
}

// The importer let go of an export: a frame's hold ends, ordered after the stream it was read on.
void finish(DlExport* e) noexcept {
  cudaipc_frame* f = e->frame;
  void* stream = e->stream;
  const bool ordered = e->ordered;
  recycle(e);
  if (!f) return;
  try {
    cudaipc::capi::unref(f, stream, ordered);
  } catch (const std::exception& x) {
    // A deleter cannot report: say it, since the producer's next write may now race the reads.
    cudaipc::log(cudaipc::LogLevel::error,
                 (std::string("releasing a frame after its DLPack tensor was deleted: ") + x.what())
                     .c_str());
  }
}

extern "C" {
static void delete_versioned(cudaipc_dl_managed_tensor_versioned* m) {
  if (m) finish(static_cast<DlExport*>(m->manager_ctx));
}
static void delete_legacy(cudaipc_dl_managed_tensor* m) {
  if (m) finish(static_cast<DlExport*>(m->manager_ctx));
}
}

// The tensor `fill_export` made in `e` given to `owner`, whose deleter (versioned or legacy, as
// made) ends it instead of a frame's.
void give_to(DlExport& e, bool versioned, void* owner,
             void (*versioned_deleter)(cudaipc_dl_managed_tensor_versioned*),
             void (*legacy_deleter)(cudaipc_dl_managed_tensor*)) {
  if (versioned) {
    e.versioned.manager_ctx = owner;
    e.versioned.deleter = versioned_deleter;
  } else {
    e.legacy.manager_ctx = owner;
    e.legacy.deleter = legacy_deleter;
  }
}

// ---- slot views ----

// A view's tensor and what keeps its slot set mapped (no lease): the set goes when the last view
// or frame of it does.
struct SlotView {
  DlExport e;
  std::shared_ptr<const void> memory;
};

void drop_view(void* ctx) noexcept {
  std::unique_ptr<SlotView> owned(static_cast<SlotView*>(ctx));
  g_views_alive.fetch_sub(1, std::memory_order_relaxed);
}

extern "C" {
static void delete_view_versioned(cudaipc_dl_managed_tensor_versioned* m) {
  if (m) drop_view(m->manager_ctx);
}
static void delete_view_legacy(cudaipc_dl_managed_tensor* m) {
  if (m) drop_view(m->manager_ctx);
}
}

// ---- memory the caller owns ----

// A tensor of memory its caller owns, and how to tell the caller the importer is done with it.
struct Wrapped {
  DlExport e;
  void (*done)(void* ctx) = nullptr;
  void* ctx = nullptr;
};

void drop_wrapped(void* ctx) noexcept {
  std::unique_ptr<Wrapped> owned(static_cast<Wrapped*>(ctx));
  g_wrapped_alive.fetch_sub(1, std::memory_order_relaxed);
  if (owned->done) owned->done(owned->ctx);
}

extern "C" {
static void delete_wrapped_versioned(cudaipc_dl_managed_tensor_versioned* m) {
  if (m) drop_wrapped(m->manager_ctx);
}
static void delete_wrapped_legacy(cudaipc_dl_managed_tensor* m) {
  if (m) drop_wrapped(m->manager_ctx);
}
}

// The tensor of memory described by `t` at `data`, in *managed (owned by its deleter from here
// on), telling nobody yet when it goes: the caller sets `done` once nothing can fail any more.
Wrapped* new_wrapped(const cudaipc_tensor* t, const void* data, cudaipc_dl_device device,
                     uint32_t flags, void** managed) {
  require(t, "tensor");
  cudaipc::TensorDesc desc;
  std::memcpy(&desc, t, sizeof desc);
  for (std::uint32_t i = 0; i < desc.rank && i < CUDAIPC_MAX_RANK; ++i)
    if (desc.shape[i] < 0)
      throw Error(Errc::invalid_argument, "dimension " + std::to_string(i) + " is " +
                                              std::to_string(desc.shape[i]) + ", negative");
  auto w = std::make_unique<Wrapped>();
  const bool versioned = (flags & CUDAIPC_DLPACK_VERSIONED) != 0;
  void* m = fill_export(w->e, desc, reinterpret_cast<std::uintptr_t>(data), device,
                        (flags & CUDAIPC_DLPACK_READ_ONLY) != 0, versioned);
  give_to(w->e, versioned, w.get(), delete_wrapped_versioned, delete_wrapped_legacy);
  g_wrapped_alive.fetch_add(1, std::memory_order_relaxed);
  *managed = m;
  return w.release();
}

// ---- sources of publish_dlpack ----

struct Source {
  cudaipc::TensorDesc desc{};  // dense, byte strides
  const void* data = nullptr;
  std::uint64_t bytes = 0;
  cudaipc_dl_device device{};
};

const cudaipc_dl_tensor& dl_tensor_of(const void* managed, std::uint32_t flags) {
  if (flags & CUDAIPC_DLPACK_VERSIONED) {
    const auto* v = static_cast<const cudaipc_dl_managed_tensor_versioned*>(managed);
    if (v->version.major != CUDAIPC_DLPACK_MAJOR)
      throw Error(Errc::invalid_argument, "DLPack version " + std::to_string(v->version.major) +
                                              "." + std::to_string(v->version.minor) +
                                              " is not one cudaipc reads");
    return v->dl_tensor;
  }
  return static_cast<const cudaipc_dl_managed_tensor*>(managed)->dl_tensor;
}

std::string shape_text(const cudaipc_dl_tensor& t, const std::int64_t* values) {
  std::string s = "(";
  for (int32_t i = 0; i < t.ndim; ++i) s += (i ? ", " : "") + std::to_string(values[i]);
  return s + ")";
}

// Reads and checks a DLPack tensor a caller wants copied: a known dtype, a rank that fits, and a
// compact row-major layout (publish copies one contiguous span).
Source read_source(const void* managed, std::uint32_t flags) {
  const cudaipc_dl_tensor& t = dl_tensor_of(managed, flags);
  if (t.ndim < 0 || t.ndim > static_cast<int32_t>(CUDAIPC_MAX_RANK))
    throw Error(Errc::invalid_argument, "a tensor of rank " + std::to_string(t.ndim) +
                                            ": cudaipc carries rank 0 to " +
                                            std::to_string(CUDAIPC_MAX_RANK));
  if (t.ndim > 0 && !t.shape) throw Error(Errc::invalid_argument, "DLPack tensor without a shape");
  Source s;
  s.desc.dtype = from_dl(t.dtype);
  s.desc.rank = static_cast<std::uint32_t>(t.ndim);
  const auto item = static_cast<std::int64_t>(cudaipc::dtype_size(s.desc.dtype));
  std::int64_t step = 1;  // elements
  for (int32_t i = t.ndim - 1; i >= 0; --i) {
    const std::int64_t n = t.shape[i];
    if (n < 0 || (n > 0 && step > (std::int64_t{1} << 46) / n))
      throw Error(Errc::invalid_argument,
                  "DLPack shape " + shape_text(t, t.shape) + " is out of range");
    if (t.strides && n > 1 && t.strides[i] != step)
      throw Error(Errc::invalid_argument,
                  "publish needs a C-contiguous tensor; shape " + shape_text(t, t.shape) +
                      " has strides " + shape_text(t, t.strides) +
                      " (in elements; call .contiguous() or numpy.ascontiguousarray)");
    s.desc.shape[i] = n;
    s.desc.strides[i] = step * item;
    step *= n > 0 ? n : 1;
  }
  std::int64_t elements = 1;
  for (int32_t i = 0; i < t.ndim; ++i) elements *= t.shape[i];
  s.bytes = static_cast<std::uint64_t>(elements * item);
  s.desc.size = s.bytes;
  s.data = static_cast<const char*>(t.data) + t.byte_offset;
  s.device = t.device;
  return s;
}

bool same_layout(const cudaipc::TensorDesc& a, const cudaipc::TensorDesc& b) {
  if (a.dtype != b.dtype || a.rank != b.rank) return false;
  for (std::uint32_t i = 0; i < a.rank; ++i)
    if (a.shape[i] != b.shape[i]) return false;
  return true;
}

void release_source(const PendingSource& s) noexcept {
  if (s.versioned) {
    auto* m = static_cast<cudaipc_dl_managed_tensor_versioned*>(s.managed);
    if (m->deleter) m->deleter(m);
  } else {
    auto* m = static_cast<cudaipc_dl_managed_tensor*>(s.managed);
    if (m->deleter) m->deleter(m);
  }
}

// Hands back, oldest first, the sources whose copies the producer's stream has run. The deleters
// run outside the lock: one may take the runtime's lock (NumPy's takes the GIL).
void reap(cudaipc_producer* p) noexcept {
  for (;;) {
    PendingSource s;
    {
      std::lock_guard<std::mutex> lock(p->pending_mu);
      if (p->pending.empty() || !p->p->written(p->pending.front().seq)) return;
      s = p->pending.front();
      p->pending.pop_front();
    }
    release_source(s);
  }
}

void keep_source(cudaipc_producer* p, std::uint64_t seq, void* managed, bool versioned) {
  std::lock_guard<std::mutex> lock(p->pending_mu);
  p->pending.push_back(PendingSource{seq, managed, versioned});
}

void sleep_briefly() noexcept {
  timespec ts{0, 200'000};
  ::nanosleep(&ts, nullptr);
}

// ---- capsules ----

std::mutex g_capsule_mu;
cudaipc_capsule_api g_capsule{};
std::atomic<bool> g_capsule_set{false};

const cudaipc_capsule_api& capsule_api() {
  if (!g_capsule_set.load(std::memory_order_acquire))
    throw Error(Errc::invalid_argument, "cudaipc_set_capsule_api was not called");
  return g_capsule;
}

// The runtime's error for the failure guard() recorded, for calls that return an object.
void raise_in_runtime() {
  const cudaipc_capsule_api& api = g_capsule;
  if (g_capsule_set.load(std::memory_order_acquire) && api.set_error)
    api.set_error(api.error_type, cudaipc::capi::g_error.c_str());
}

extern "C" {
// A capsule dies. An importer that consumed it renamed it ("used_..."), and owns the tensor; one
// still named as made was never consumed, and its tensor is deleted here.
static void capsule_destructor(void* capsule) {
  const cudaipc_capsule_api& api = g_capsule;
  const char* name = api.capsule_get_name(capsule);
  if (!name) return;
  if (std::strcmp(name, kNameVersioned) == 0) {
    auto* m =
        static_cast<cudaipc_dl_managed_tensor_versioned*>(api.capsule_get_pointer(capsule, name));
    if (m && m->deleter) m->deleter(m);
  } else if (std::strcmp(name, kNameLegacy) == 0) {
    auto* m = static_cast<cudaipc_dl_managed_tensor*>(api.capsule_get_pointer(capsule, name));
    if (m && m->deleter) m->deleter(m);
  }
}
}

// Wraps a managed tensor made by one of the export calls; deletes it when the capsule cannot be
// made (the runtime's error is set then).
void* to_capsule(void* managed, bool versioned) {
  const cudaipc_capsule_api& api = g_capsule;
  void* capsule =
      api.capsule_new(managed, versioned ? kNameVersioned : kNameLegacy, capsule_destructor);
  if (!capsule) {
    // Its own deleter: exports and slot views keep different owners.
    if (versioned) {
      auto* m = static_cast<cudaipc_dl_managed_tensor_versioned*>(managed);
      m->deleter(m);
    } else {
      auto* m = static_cast<cudaipc_dl_managed_tensor*>(managed);
      m->deleter(m);
    }
  }
  return capsule;
}

// The managed tensor in a DLPack capsule not consumed yet, and whether it is versioned.
void* managed_of(void* capsule, bool* versioned) {
  const cudaipc_capsule_api& api = capsule_api();
  require(capsule, "capsule");
  const char* name = api.capsule_get_name(capsule);
  if (name && std::strcmp(name, kNameVersioned) == 0) {
    *versioned = true;
  } else if (name && std::strcmp(name, kNameLegacy) == 0) {
    *versioned = false;
  } else {
    throw Error(Errc::invalid_argument,
                "__dlpack__ returned something that is not a DLPack capsule (or one already "
                "consumed)");
  }
  void* managed = api.capsule_get_pointer(capsule, name);
  if (!managed) throw Error(Errc::invalid_argument, "a DLPack capsule holding no tensor");
  return managed;
}

// Lets the runtime's other threads run while `f` may wait (a full ring), when the binding gave the
// calls to do so.
template <typename F>
void without_runtime_lock(F&& f) {
  const cudaipc_capsule_api& api = g_capsule;
  if (!api.save_thread || !api.restore_thread) {
    f();
    return;
  }
  void* state = api.save_thread();
  try {
    f();
  } catch (...) {
    api.restore_thread(state);
    throw;
  }
  api.restore_thread(state);
}

void describe_to(const Source& s, cudaipc_tensor* out, int32_t* device_type, int32_t* device_id) {
  std::memcpy(out, &s.desc, sizeof *out);
  if (device_type) *device_type = s.device.device_type;
  if (device_id) *device_id = s.device.device_id;
}

}  // namespace

extern "C" {

uint64_t cudaipc_dlpack_exports_alive(void) {
  return g_exports_alive.load(std::memory_order_relaxed);
}

int cudaipc_frame_dlpack(cudaipc_frame* f, void* stream, uint32_t flags, void** out) {
  return guard([&] {
    require(f, "frame");
    require(out, "out");
    const bool cuda = f->cuda_device >= 0;
    const bool ordered = cuda && !(flags & CUDAIPC_DLPACK_NO_SYNC);
    DlExport* e = claim_export(f);
    e->frame = f;
    try {
      const cudaipc_dl_device device = cuda ? cudaipc_dl_device{CUDAIPC_DL_CUDA, f->cuda_device}
                                            : cudaipc_dl_device{CUDAIPC_DL_CPU, 0};
      void* m = fill_export(*e, f->f.desc().tensor, reinterpret_cast<std::uintptr_t>(f->f.data()),
                            device, !cuda, (flags & CUDAIPC_DLPACK_VERSIONED) != 0);
      if (ordered) f->f.order_reads(stream);
      e->stream = stream;
      e->ordered = ordered;
      f->refs.fetch_add(1, std::memory_order_relaxed);
      *out = m;
    } catch (...) {
      recycle(e);
      throw;
    }
  });
}

CUDAIPC_HOT int cudaipc_frame_slot(cudaipc_frame* f, uint32_t* slot, const void** set) {
  return guard([&] {
    require(f, "frame");
    require(slot, "slot");
    require(set, "set");
    // The set's identity only: a reference taken and dropped (two atomic operations) for it cost
    // a host frame's numpy() more code lines after each wait for a frame (issue #39).
    const void* memory = f->f.slot_set();
    if (!memory) throw Error(Errc::invalid_argument, "the frame was released");
    *slot = f->f.slot();
    *set = memory;
  });
}

int cudaipc_frame_slot_view(cudaipc_frame* f, uint32_t flags, void** out) {
  return guard([&] {
    require(f, "frame");
    require(out, "out");
    auto v = std::make_unique<SlotView>();
    v->memory = f->f.slot_memory();
    if (!v->memory) throw Error(Errc::invalid_argument, "the frame was released");
    const bool cuda = f->cuda_device >= 0;
    const cudaipc_dl_device device = cuda ? cudaipc_dl_device{CUDAIPC_DL_CUDA, f->cuda_device}
                                          : cudaipc_dl_device{CUDAIPC_DL_CPU, 0};
    const bool versioned = (flags & CUDAIPC_DLPACK_VERSIONED) != 0;
    void* m = fill_export(v->e, f->f.desc().tensor, reinterpret_cast<std::uintptr_t>(f->f.data()),
                          device, !cuda, versioned);
    give_to(v->e, versioned, v.get(), delete_view_versioned, delete_view_legacy);
    g_views_alive.fetch_add(1, std::memory_order_relaxed);
    v.release();  // the tensor's deleter owns it now
    *out = m;
  });
}

uint64_t cudaipc_dlpack_views_alive(void) {
  return g_views_alive.load(std::memory_order_relaxed);
}

int cudaipc_dlpack_wrap(const cudaipc_tensor* t, const void* data, cudaipc_dl_device device,
                        uint32_t flags, void (*done)(void* ctx), void* ctx, void** out) {
  return guard([&] {
    require(out, "out");
    Wrapped* w = new_wrapped(t, data, device, flags, out);
    w->done = done;
    w->ctx = ctx;
  });
}

uint64_t cudaipc_dlpack_wrapped_alive(void) {
  return g_wrapped_alive.load(std::memory_order_relaxed);
}

int cudaipc_producer_slot_dlpack(cudaipc_producer* p, void* stream, uint32_t flags, void** out) {
  return guard([&] {
    require(p, "producer");
    require(out, "out");
    if (!p->borrowed)
      throw Error(Errc::invalid_argument, "no borrowed slot: cudaipc_producer_begin comes first");
    const cudaipc::TensorDesc& t = p->p->format().tensor;
    const int device = p->p->cuda_device();
    const bool ordered = device >= 0 && !(flags & CUDAIPC_DLPACK_NO_SYNC);
    if (ordered) p->p->order_after_writes(stream);
    DlExport* e = claim_export(nullptr);
    try {
      const cudaipc_dl_device where = device >= 0 ? cudaipc_dl_device{CUDAIPC_DL_CUDA, device}
                                                  : cudaipc_dl_device{CUDAIPC_DL_CPU, 0};
      *out = fill_export(*e, t, p->borrowed.address() + t.byte_offset, where, false,
                         (flags & CUDAIPC_DLPACK_VERSIONED) != 0);
      if (ordered && std::find(p->slot_streams.begin(), p->slot_streams.end(), stream) ==
                         p->slot_streams.end())
        p->slot_streams.push_back(stream);
    } catch (...) {
      recycle(e);
      throw;
    }
  });
}

int cudaipc_dlpack_describe(const void* managed, uint32_t flags, cudaipc_tensor* out,
                            int32_t* device_type, int32_t* device_id) {
  return guard([&] {
    require(managed, "tensor");
    require(out, "out");
    describe_to(read_source(managed, flags), out, device_type, device_id);
  });
}

int cudaipc_producer_publish_dlpack(cudaipc_producer* p, void* managed, uint32_t flags,
                                    void* stream, const cudaipc_frame_info* info,
                                    cudaipc_publish* result) {
  return guard([&] {
    require(p, "producer");
    require(managed, "tensor");
    reap(p);
    const Source s = read_source(managed, flags);
    const cudaipc::Format& format = p->p->format();
    if (!same_layout(s.desc, format.tensor)) {
      if (result) *result = CUDAIPC_NEEDS_FORMAT;
      return;
    }
    const int device = p->p->cuda_device();
    const bool on_device = s.device.device_type == CUDAIPC_DL_CUDA;
    if (on_device && device < 0)
      throw Error(
          Errc::invalid_argument,
          p->p->path() + " is a host-memory channel: publish host arrays (e.g. tensor.cpu())");
    if (on_device && s.device.device_id != device)
      throw Error(Errc::invalid_argument,
                  "the tensor is on cuda:" + std::to_string(s.device.device_id) +
                      ", the channel on cuda:" + std::to_string(device));
    if (!on_device && s.device.device_type != CUDAIPC_DL_CPU &&
        s.device.device_type != CUDAIPC_DL_CUDA_HOST)
      throw Error(Errc::invalid_argument,
                  "cannot publish from DLPack device type " + std::to_string(s.device.device_type));
    for (std::uint32_t i = 0; i < format.tensor.rank; ++i)
      if (format.tensor.strides[i] != s.desc.strides[i] && format.tensor.shape[i] > 1)
        throw Error(Errc::invalid_argument,
                    "the channel's format is not C-contiguous (" + to_string(format.tensor) +
                        "): publish_dlpack copies C-contiguous tensors only");
    if (device >= 0 && !(flags & CUDAIPC_DLPACK_NO_SYNC)) p->p->write_after(stream);
    const bool versioned = (flags & CUDAIPC_DLPACK_VERSIONED) != 0;
    cudaipc::PublishStatus st;
    try {
      st = p->p->publish(s.data, s.bytes, cudaipc::capi::to_info(info), on_device);
    } catch (const Error& e) {
      // A CUDA failure may come after the copy was queued: the stream may still read the source,
      // so it is kept until that frame's successor has landed (or the producer is freed).
      if (e.code() == Errc::cuda) keep_source(p, p->p->last_seq() + 1, managed, versioned);
      throw;
    }
    if (st == cudaipc::PublishStatus::published)
      keep_source(p, p->p->last_seq(), managed, versioned);
    else
      release_source(PendingSource{0, managed, versioned});
    reap(p);  // host memory: written already
    if (result) *result = cudaipc::capi::to_c(st);
  });
}

int cudaipc_set_capsule_api(const cudaipc_capsule_api* api) {
  return guard([&] {
    require(api, "api");
    if (!api->capsule_new || !api->capsule_get_pointer || !api->capsule_get_name ||
        !api->capsule_set_name || !api->set_error || !api->error_type)
      throw Error(Errc::invalid_argument, "cudaipc_capsule_api lacks a function");
    std::lock_guard<std::mutex> lock(g_capsule_mu);
    if (g_capsule_set.load(std::memory_order_acquire)) {
      if (std::memcmp(&g_capsule, api, sizeof g_capsule) != 0)
        throw Error(Errc::invalid_argument, "cudaipc_set_capsule_api was called with others");
      return;
    }
    g_capsule = *api;
    g_capsule_set.store(true, std::memory_order_release);
  });
}

void* cudaipc_frame_dlpack_capsule(cudaipc_frame* f, void* stream, uint32_t flags) {
  void* managed = nullptr;
  if (guard([] { capsule_api(); }) != CUDAIPC_OK ||
      cudaipc_frame_dlpack(f, stream, flags, &managed) != CUDAIPC_OK) {
    raise_in_runtime();
    return nullptr;
  }
  return to_capsule(managed, (flags & CUDAIPC_DLPACK_VERSIONED) != 0);
}

void* cudaipc_frame_slot_view_capsule(cudaipc_frame* f, uint32_t flags) {
  void* managed = nullptr;
  if (guard([] { capsule_api(); }) != CUDAIPC_OK ||
      cudaipc_frame_slot_view(f, flags, &managed) != CUDAIPC_OK) {
    raise_in_runtime();
    return nullptr;
  }
  return to_capsule(managed, (flags & CUDAIPC_DLPACK_VERSIONED) != 0);
}

void* cudaipc_dlpack_wrap_capsule(const cudaipc_tensor* t, const void* data,
                                  cudaipc_dl_device device, uint32_t flags, void (*done)(void* ctx),
                                  void* ctx) {
  void* managed = nullptr;
  Wrapped* w = nullptr;
  if (guard([&] {
        capsule_api();
        w = new_wrapped(t, data, device, flags, &managed);
      }) != CUDAIPC_OK) {
    raise_in_runtime();
    return nullptr;
  }
  // A capsule that cannot be made deletes the tensor before `done` is set: what `ctx` holds
  // stays the caller's, as after any failure here.
  void* capsule = to_capsule(managed, (flags & CUDAIPC_DLPACK_VERSIONED) != 0);
  if (capsule) {
    w->done = done;
    w->ctx = ctx;
  }
  return capsule;
}

void* cudaipc_producer_slot_dlpack_capsule(cudaipc_producer* p, void* stream, uint32_t flags) {
  void* managed = nullptr;
  if (guard([] { capsule_api(); }) != CUDAIPC_OK ||
      cudaipc_producer_slot_dlpack(p, stream, flags, &managed) != CUDAIPC_OK) {
    raise_in_runtime();
    return nullptr;
  }
  return to_capsule(managed, (flags & CUDAIPC_DLPACK_VERSIONED) != 0);
}

int cudaipc_producer_publish_capsule(cudaipc_producer* p, void* capsule, void* stream,
                                     uint32_t flags, uint64_t pts, uint64_t duration,
                                     const void* metas, uint32_t metas_size) {
  cudaipc_publish result = CUDAIPC_PUBLISHED;
  bool versioned = false;
  void* managed = nullptr;
  int rc = guard([&] { managed = managed_of(capsule, &versioned); });
  if (rc != CUDAIPC_OK) return -rc;
  cudaipc_frame_info info{pts, CUDAIPC_NO_TIME, duration,  0, nullptr, nullptr,
                          0,   metas,           metas_size};
  const uint32_t f =
      (flags & ~CUDAIPC_DLPACK_VERSIONED) | (versioned ? CUDAIPC_DLPACK_VERSIONED : 0);
  bool taken = false;
  without_runtime_lock([&] {
    rc = cudaipc_producer_publish_dlpack(p, managed, f, stream, &info, &result);
    taken = (rc == CUDAIPC_OK && result != CUDAIPC_NEEDS_FORMAT) || rc == CUDAIPC_ERR_CUDA;
  });
  // Renamed once taken: the capsule's own destructor must no longer delete the tensor.
  if (taken) g_capsule.capsule_set_name(capsule, versioned ? kUsedVersioned : kUsedLegacy);
  return rc == CUDAIPC_OK ? static_cast<int>(result) : -rc;
}

int cudaipc_capsule_describe(void* capsule, cudaipc_tensor* out, int32_t* device_type,
                             int32_t* device_id) {
  return guard([&] {
    require(out, "out");
    bool versioned = false;
    void* managed = managed_of(capsule, &versioned);
    describe_to(read_source(managed, versioned ? CUDAIPC_DLPACK_VERSIONED : 0), out, device_type,
                device_id);
  });
}

}  // extern "C"

namespace cudaipc::capi {

// Waits (bounded) for the copies of the sources the producer still holds, then hands them back;
// those whose copies did not run in time are kept, never freed under a stream that may still read
// them.
void settle_sources(cudaipc_producer* p) noexcept {
  timespec start{};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    reap(p);
    std::size_t left;
    {
      std::lock_guard<std::mutex> lock(p->pending_mu);
      left = p->pending.size();
    }
    if (left == 0) return;
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    const std::uint64_t waited =
        static_cast<std::uint64_t>(now.tv_sec - start.tv_sec) * 1'000'000'000ull +
        static_cast<std::uint64_t>(now.tv_nsec) - static_cast<std::uint64_t>(start.tv_nsec);
    if (waited > kSettleNs) {
      cudaipc::log(LogLevel::error,
                   (std::to_string(left) +
                    " published tensor(s) kept until exit: the producer's stream did not run "
                    "their copies within 5 s")
                       .c_str());
      return;
    }
    sleep_briefly();
  }
}

}  // namespace cudaipc::capi
