// NumPy's .npy format (version 1.0) for `cudaipc cat`: one tensor, gathered into C order from
// whatever strides the producer described.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cudaipc/tensor.hpp"

namespace cudaipc::cli {

// The tensor `t` whose element 0 is at `data`, `bytes` bytes from there readable (the frame's
// span), as dense C-order bytes. Throws Error(protocol) when a stride reaches outside `bytes`.
std::vector<std::uint8_t> gather_dense(const TensorDesc& t, const std::uint8_t* data,
                                       std::uint64_t bytes);

// NumPy's descr for a dtype ("<f4", "|u1"); bfloat16 has none and is written as "<u2".
std::string npy_descr(DType t);

// Writes `dense` (C order, of `t`'s shape and dtype) to `path`; throws Error naming the path.
void write_npy(const std::string& path, const TensorDesc& t,
               const std::vector<std::uint8_t>& dense);

}  // namespace cudaipc::cli
