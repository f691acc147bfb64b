// Built when cuda.h was not found: CUDA channels fail with a clear reason, host channels work.
#include "memory_backend.hpp"

namespace cudaipc {

std::unique_ptr<ProducerMemory> make_cuda_producer_memory(const CudaOptions&, std::uint32_t) {
  throw Error(Errc::no_cuda, "this build of cudaipc has no CUDA backend (cuda.h was not found)");
}

std::unique_ptr<ConsumerMemory> make_cuda_consumer_memory(const CudaOptions&, std::uint32_t) {
  throw Error(Errc::no_cuda, "this build of cudaipc has no CUDA backend (cuda.h was not found)");
}

}  // namespace cudaipc
