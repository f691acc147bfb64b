// What the C API's handles are (c_api.cpp, c_api_dlpack.cpp): the C++ objects behind the opaque
// types of cudaipc.h, and the boundary that turns exceptions into status codes.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "cudaipc/consumer.hpp"
#include "cudaipc/cudaipc.h"
#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"
#include "cudaipc/server.hpp"
#include "hot_path.hpp"

namespace cudaipc::capi {

// The seqs of one consumer's (or server's) frames whose leases have not ended, and the spare C
// handles of frames that ended. Frames share it with their consumer, so it outlives a consumer
// freed before its frames. A frame's handle is a spare made again when there is one: once as many
// frames were held at once as will be, handing one out allocates nothing (the hot path's rule).
// Both live in fixed arrays, with what outgrows them (more frames held at once than kInline) in a
// vector on a path of its own: a vector's growth and search on the frame's path was 16 more code
// lines to refill after each wait for a frame (issue #39).
class HeldFrames {
 public:
  HeldFrames() = default;
  ~HeldFrames();
  HeldFrames(const HeldFrames&) = delete;
  HeldFrames& operator=(const HeldFrames&) = delete;

  // A handle for frame `seq`, counted held: a spare, or a new one when none is left.
  std::unique_ptr<cudaipc_frame> take(std::uint64_t seq);
  // Frame `seq`'s last hold ended: no longer held; its handle (lease ended, emptied) kept as a
  // spare while there is room.
  void give_back(std::uint64_t seq, std::unique_ptr<cudaipc_frame> handle) noexcept;
  std::vector<std::uint64_t> sorted() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::uint64_t> out(seqs_, seqs_ + held_);
    out.insert(out.end(), more_seqs_.begin(), more_seqs_.end());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  static constexpr std::size_t kInline = 64;
  // take() without a spare or room in seqs_ (under the lock, which a new handle's allocation is
  // made outside of).
  std::unique_ptr<cudaipc_frame> take_slow(std::uint64_t seq, std::unique_lock<std::mutex>& lock);
  void forget_slow(std::uint64_t seq) noexcept;

  mutable std::mutex mu_;
  std::size_t held_ = 0;
  std::size_t spare_count_ = 0;
  std::uint64_t seqs_[kInline];
  std::vector<std::uint64_t> more_seqs_;  // held beyond kInline at once
  std::unique_ptr<cudaipc_frame> spares_[kInline];
};

// One DLPack export: the managed tensor handed out (versioned or legacy) and the arrays it points
// to. Consumer exports hold a reference to their frame, and end it, ordered after `stream`, when
// the importer deletes the tensor.
struct DlExport {
  cudaipc_dl_managed_tensor_versioned versioned;
  cudaipc_dl_managed_tensor legacy;
  std::int64_t shape[CUDAIPC_MAX_RANK];
  std::int64_t strides[CUDAIPC_MAX_RANK];
  cudaipc_frame* frame = nullptr;
  void* stream = nullptr;
  bool ordered = false;  // order the release after `stream`
  bool inline_in_frame = false;
};

// A copy's source the library owns until the producer's stream has run the copy (frame `seq`).
struct PendingSource {
  std::uint64_t seq = 0;
  void* managed = nullptr;
  bool versioned = false;
};

}  // namespace cudaipc::capi

struct cudaipc_producer {
  std::unique_ptr<cudaipc::Producer> p;
  cudaipc::WriteSlot borrowed;
  // Streams DLPack exports of the borrowed slot named: the commit waits for them.
  std::vector<void*> slot_streams;
  std::mutex pending_mu;
  std::deque<cudaipc::capi::PendingSource> pending;  // oldest first
};

struct cudaipc_consumer {
  std::unique_ptr<cudaipc::Consumer> c;
  std::string caps;  // keeps FORMAT events' caps alive until the next call
  std::shared_ptr<cudaipc::capi::HeldFrames> held = std::make_shared<cudaipc::capi::HeldFrames>();
  cudaipc::TensorDesc last_tensor{};  // of the previous frame, for cudaipc_frame_view::tensor_id
  std::uint32_t tensor_id = 0;
};

// A frame handed out: the caller's hold plus one per live DLPack export; the lease ends with the
// last of them. The first export of a frame lives in it (no allocation per frame for the usual
// one).
struct alignas(64) cudaipc_frame {
  cudaipc_frame() = default;
  // Out of line: inlined, its Request's and Frame's destruction filled every function that may free
  // a handle with code the frame's path jumps over (c_api_held_frames.cpp).
  ~cudaipc_frame();
  cudaipc_frame(const cudaipc_frame&) = delete;
  cudaipc_frame& operator=(const cudaipc_frame&) = delete;

  // What every hand-out and release touches comes first, in the line the frame's own head starts
  // in: spread out, they refilled two lines more per frame after a wait.
  std::atomic<std::uint32_t> refs{1};
  int cuda_device = -1;  // -1: host memory
  std::shared_ptr<cudaipc::capi::HeldFrames> held;
  std::atomic<bool> inline_busy{false};
  std::atomic<bool> answered{false};
  bool routed = false;  // `route` is set (a server's request)
  cudaipc::Frame f;
  cudaipc::capi::DlExport inline_export;
  // A server's request: its pipeline and format (the frame itself is `f`), answered once.
  cudaipc::Request route;
};

namespace cudaipc::capi {

inline HeldFrames::~HeldFrames() = default;

CUDAIPC_HOT inline std::unique_ptr<cudaipc_frame> HeldFrames::take(std::uint64_t seq) {
  std::unique_lock<std::mutex> lock(mu_);
  if (spare_count_ == 0 || held_ == kInline) return take_slow(seq, lock);
  seqs_[held_++] = seq;
  return std::move(spares_[--spare_count_]);
}

CUDAIPC_HOT inline void HeldFrames::give_back(std::uint64_t seq,
                                              std::unique_ptr<cudaipc_frame> f) noexcept {
  // The handle's own reference to this set may be the last one: it is let go only after the lock.
  std::shared_ptr<HeldFrames> keep;
  if (f) {
    // As a new handle is: no lease, no pipeline or format kept alive, one hold, not answered.
    f->f.release();
    // Only a server's request carries a route: a reader's release skips its lines.
    if (f->routed) {
      f->route.reset();
      f->routed = false;
    }
    keep = std::move(f->held);
    f->cuda_device = -1;
    f->refs.store(1, std::memory_order_relaxed);
    f->inline_busy.store(false, std::memory_order_relaxed);
    f->answered.store(false, std::memory_order_relaxed);
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::size_t i = 0;
  while (i < held_ && seqs_[i] != seq) ++i;
  if (i < held_)
    seqs_[i] = seqs_[--held_];  // the order is sorted()'s to make
  else
    forget_slow(seq);
  if (f && spare_count_ < kInline) spares_[spare_count_++] = std::move(f);
}

inline thread_local std::string g_error;
inline thread_local int g_code = CUDAIPC_OK;
// Whether a call of this process has failed yet: until one has, no thread has an error to clear
// after a call that works, and the call reads no thread-local. (In a library loaded at run time,
// as the plugin and the Python binding are, each read is a __tls_get_addr call: 6 cache lines
// after each wait for a frame on the GPU machine's CPU, issue #39.) A thread's own failure sets
// it before that thread's next call, so the relaxed read sees it there.
inline std::atomic<bool> g_failed_once{false};

inline int fail(Errc code, const char* what) {
  g_failed_once.store(true, std::memory_order_relaxed);
  g_error = what;
  g_code = static_cast<int>(code);
  return g_code;
}

template <typename F>
int guard(F&& f) {
  try {
    f();
    // The text is cleared only after a failure (g_failed_once): a call on the frame's path reads
    // no thread-local until one.
    if (g_failed_once.load(std::memory_order_relaxed) && g_code != CUDAIPC_OK) {
      g_error.clear();
      g_code = CUDAIPC_OK;
    }
    return CUDAIPC_OK;
  } catch (const Error& e) {
    return fail(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return fail(Errc::system, "out of memory");
  } catch (const std::exception& e) {
    return fail(Errc::system, e.what());
  }
}

// C callers pass unsigned nanoseconds, UINT64_MAX meaning "wait for ever": clamp instead of
// letting it wrap to a negative (already expired) duration.
inline std::chrono::nanoseconds to_duration(uint64_t ns) {
  constexpr auto kMax = static_cast<uint64_t>(std::chrono::nanoseconds::max().count());
  return std::chrono::nanoseconds(static_cast<std::int64_t>(ns > kMax ? kMax : ns));
}

// A frame handle's view (what cudaipc_consumer_next_frame and cudaipc_server_batch hand out).
inline void describe_frame(cudaipc_frame* f, std::uint32_t tensor_id, cudaipc_frame_view* view) {
  const FrameDesc& d = f->f.desc();
  *view = cudaipc_frame_view{};
  view->type = CUDAIPC_EVENT_FRAME;
  view->tensor_id = tensor_id;
  view->frame = f;
  view->seq = d.seq;
  view->data = reinterpret_cast<uintptr_t>(f->f.data());
  view->size = d.tensor.size;
  view->pts = d.pts;
  view->dts = d.dts;
  view->duration = d.duration;
  view->publish_time_ns = d.publish_time_ns;
  view->flags = d.flags;
  view->cuda_device = f->cuda_device;
}

inline void require(const void* p, const char* what) {
  if (!p) throw Error(Errc::invalid_argument, std::string(what) + " is NULL");
}

inline FrameInfo to_info(const cudaipc_frame_info* in) {
  FrameInfo info;
  if (!in) return info;
  info.pts = in->pts;
  info.dts = in->dts;
  info.duration = in->duration;
  info.flags = in->flags;
  info.tensor = reinterpret_cast<const TensorDesc*>(in->tensor);
  info.user_meta = in->user_meta;
  info.user_meta_size = in->user_meta_size;
  info.metas = in->metas;
  info.metas_size = in->metas_size;
  return info;
}

inline cudaipc_publish to_c(PublishStatus s) {
  switch (s) {
    case PublishStatus::published:
      return CUDAIPC_PUBLISHED;
    case PublishStatus::dropped:
      return CUDAIPC_DROPPED;
    case PublishStatus::timeout:
      return CUDAIPC_TIMED_OUT;
    case PublishStatus::interrupted:
      return CUDAIPC_INTERRUPTED_PUBLISH;
  }
  return CUDAIPC_DROPPED;
}

// Drops one hold on `f` (the caller's or an export's); the last one ends the lease. With
// `ordered`, the release is first ordered after the work queued on `stream`: the frame is
// released even when that fails, and the failure is rethrown after.
void unref(cudaipc_frame* f, void* stream, bool ordered);

// Before a producer goes: hands back the DLPack sources of its copies once they have run, waiting
// up to 5 s; any left are kept until exit (their copies may still read them).
void settle_sources(cudaipc_producer* p) noexcept;

}  // namespace cudaipc::capi
