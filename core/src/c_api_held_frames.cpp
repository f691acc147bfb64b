// The C frame handle's and HeldFrames' code off the frame's path: a handle's destruction, a new
// handle, and more frames held at once than HeldFrames' arrays hold (c_api_handles.hpp).
#include <algorithm>

#include "c_api_handles.hpp"

cudaipc_frame::~cudaipc_frame() = default;

namespace cudaipc::capi {

std::unique_ptr<cudaipc_frame> HeldFrames::take_slow(std::uint64_t seq,
                                                     std::unique_lock<std::mutex>& lock) {
  std::unique_ptr<cudaipc_frame> f;
  if (spare_count_ > 0) {
    f = std::move(spares_[--spare_count_]);
  } else {
    lock.unlock();
    f = std::make_unique<cudaipc_frame>();  // the only allocation: before the seq is counted
    lock.lock();
  }
  if (held_ < kInline)
    seqs_[held_++] = seq;
  else
    more_seqs_.push_back(seq);  // throws before the seq counts; the handle is freed
  return f;
}

void HeldFrames::forget_slow(std::uint64_t seq) noexcept {
  auto it = std::find(more_seqs_.begin(), more_seqs_.end(), seq);
  if (it == more_seqs_.end()) return;
  *it = more_seqs_.back();
  more_seqs_.pop_back();
}

}  // namespace cudaipc::capi
