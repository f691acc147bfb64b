// Page-locked host memory the detections of replies computed on the GPU are copied into, one place
// per reply of the server's ring of later replies: one region, made ahead (prepare(), as the first
// pipeline whose frames are in CUDA memory comes) or else on the first such reply, and a
// place's own larger block only when a reply brings more detections than the region's share holds.
// The copies go on the model's stream; nothing is allocated per reply once the places are large
// enough.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "cudaipc/server.hpp"

namespace cudaipc::detail {

class ResultStaging {
 public:
  ResultStaging(std::size_t places, std::size_t place_bytes);
  ~ResultStaging();
  ResultStaging(const ResultStaging&) = delete;
  ResultStaging& operator=(const ResultStaging&) = delete;

  // Queues on `stream` the copies of `d`'s arrays (GPU memory, checked by check_results) into
  // place `place`; `out` describes the copies (host memory, packed, `d`'s dtypes), to be read once
  // the stream has run them.
  void copy(std::size_t place, const ResultDetections& d, void* stream, ResultDetections& out);
  // Makes the region now (from another thread than copy()'s), in `device`'s primary context;
  // what fails is logged and left to the first copy().
  void prepare(int device) noexcept;

 private:
  std::uint8_t* memory(std::size_t place, std::size_t bytes);
  // Under made_mu_: the primary context the memory is freed in (the current context's device
  // when `device` < 0), and the region.
  void retain_context(int device);
  void* make_region();

  struct Block {
    void* p = nullptr;
    std::size_t size = 0;
  };
  const std::size_t place_bytes_;
  std::mutex made_mu_;  // making context_ and region_: prepare() may run beside copy()
  std::atomic<void*> region_{nullptr};
  std::vector<Block> own_;               // copy()'s alone
  std::atomic<void*> context_{nullptr};  // the primary context the memory is freed in (retained)
  int device_ = -1;
};

}  // namespace cudaipc::detail
