// Built when cuda.h was not found: CUDA channels fail with a clear reason, host channels work.
#include "memory_backend.hpp"
#include "replies/result_staging.hpp"
#include "stream_point.hpp"

namespace cudaipc {

std::unique_ptr<ProducerMemory> make_cuda_producer_memory(const CudaOptions&, std::uint32_t) {
  throw Error(Errc::no_cuda, "this build of cudaipc has no CUDA backend (cuda.h was not found)");
}

std::unique_ptr<ConsumerMemory> make_cuda_consumer_memory(const CudaOptions&, std::uint32_t) {
  throw Error(Errc::no_cuda, "this build of cudaipc has no CUDA backend (cuda.h was not found)");
}

StreamPoint& StreamPoint::operator=(StreamPoint&& o) noexcept {
  event_ = o.event_;
  context_ = o.context_;
  armed_ = o.armed_;
  o.event_ = o.context_ = nullptr;
  o.armed_ = false;
  return *this;
}

void* stream_context(void*) {
  throw Error(Errc::no_cuda, "this build of cudaipc has no CUDA backend (cuda.h was not found)");
}

StreamPoint StreamPoint::after(void* stream) {
  StreamPoint p;
  p.mark(stream);
  return p;
}

void StreamPoint::mark(void* stream) {
  if (!stream) return;
  throw Error(Errc::no_cuda,
              "this build of cudaipc has no CUDA backend: results on a CUDA stream "
              "cannot be waited for");
}

void StreamPoint::wait() {}
void StreamPoint::reset() noexcept {}

namespace detail {

ResultStaging::ResultStaging(std::size_t, std::size_t place_bytes) : place_bytes_(place_bytes) {}
ResultStaging::~ResultStaging() = default;

void ResultStaging::prepare(int) noexcept {}

void ResultStaging::copy(std::size_t, const ResultDetections&, void*, ResultDetections&) {
  throw Error(Errc::no_cuda,
              "this build of cudaipc has no CUDA backend: detections in GPU memory cannot be "
              "copied");
}

}  // namespace detail

}  // namespace cudaipc
