// Built when cuda.h was not found: CUDA channels fail with a clear reason, host channels work.
#include "memory_backend.hpp"
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
  o.event_ = o.context_ = nullptr;
  return *this;
}

StreamPoint StreamPoint::after(void* stream) {
  if (!stream) return StreamPoint{};
  throw Error(Errc::no_cuda,
              "this build of cudaipc has no CUDA backend: results on a CUDA stream "
              "cannot be waited for");
}

void StreamPoint::wait() {}
void StreamPoint::reset() noexcept {}

}  // namespace cudaipc
