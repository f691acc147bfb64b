// The replies cudaipc-gst-filter-model publishes: the well-behaved answer (the frame's result) and
// the hostile behaviour's abuse around it (filter_model.hpp says which frame gets which).
#pragma once

#include <cstdint>
#include <vector>

#include "cudaipc/server.hpp"
#include "filter_model.hpp"

namespace filter_model {

// A meta area holding the result for frame `id` alone.
std::vector<std::uint8_t> result_area(std::uint64_t id);

// Publishes the answer to `request` (frame `id`) with `abuse`'s replies around it, and releases
// the request. Returns whether the answer itself was published (a full reply channel refuses it).
bool answer_hostile(cudaipc::Server& server, cudaipc::Request& request, std::uint64_t id,
                    cudaipc::testing::gstmp::Abuse abuse);

}  // namespace filter_model
