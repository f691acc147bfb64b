// NNStreamer's dimension strings and the layout of a frame's tensors (caps_tensor.h).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "format/caps_messages.h"
#include "format/caps_tensor.h"

namespace cudaipc::gst {

using caps_messages::fail;
using caps_messages::quoted;
using caps_messages::trimmed;

namespace {

// Index of the first dimension left once outermost 1s are dropped.
std::uint32_t first_significant(const TensorDesc& t, std::uint32_t rank) {
  std::uint32_t i = 0;
  while (i < rank && t.shape[i] == 1) ++i;
  return i;
}

}  // namespace

bool parse_dimensions(const char* text, std::uint32_t* rank, std::int64_t* shape,
                      std::string* error) {
  if (!text) return fail(error, "dimensions are missing");
  const std::string_view all(text);
  if (trimmed(all).empty()) return fail(error, "dimensions are empty (rank 0)");
  std::vector<std::int64_t> dims;  // innermost first, as written
  std::size_t begin = 0;
  while (true) {
    std::size_t end = all.find_first_of(":.", begin);
    std::string_view part = trimmed(
        all.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin));
    if (part.empty()) return fail(error, "dimensions=" + quoted(all) + " have an empty dimension");
    std::int64_t value = 0;
    for (char c : part) {
      if (c < '0' || c > '9')
        return fail(error, "dimension " + quoted(part) + " in dimensions=" + quoted(all) +
                               " is not a positive integer");
      if (__builtin_mul_overflow(value, 10, &value) ||
          __builtin_add_overflow(value, c - '0', &value))
        return fail(error, "dimension " + quoted(part) + " in dimensions=" + quoted(all) +
                               " does not fit in 64 bits");
    }
    if (value == 0)
      return fail(error, "dimension " + quoted(part) + " in dimensions=" + quoted(all) +
                             " is not a positive integer");
    dims.push_back(value);
    if (end == std::string_view::npos) break;
    begin = end + 1;
  }
  while (dims.size() > kMaxRank && dims.back() == 1) dims.pop_back();
  if (dims.size() > kMaxRank)
    return fail(error, "dimensions=" + quoted(all) + " have rank " + std::to_string(dims.size()) +
                           "; cudaipc carries at most rank " + std::to_string(kMaxRank));
  *rank = static_cast<std::uint32_t>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) shape[dims.size() - 1 - i] = dims[i];
  return true;
}

std::string format_dimensions(const TensorDesc& tensor) {
  const std::uint32_t rank = tensor.rank < kMaxRank ? tensor.rank : kMaxRank;
  const std::uint32_t first = first_significant(tensor, rank);
  if (first == rank) return "1";
  std::string s;
  for (std::uint32_t i = rank; i-- > first;) {
    if (!s.empty()) s += ':';
    s += std::to_string(tensor.shape[i]);
  }
  return s;
}

bool same_dimensions(const TensorDesc& a, const TensorDesc& b) {
  if (a.rank > kMaxRank || b.rank > kMaxRank) return false;
  std::uint32_t i = first_significant(a, a.rank), j = first_significant(b, b.rank);
  if (a.rank - i != b.rank - j) return false;
  for (; i < a.rank; ++i, ++j)
    if (a.shape[i] != b.shape[j]) return false;
  return true;
}

std::uint64_t tensors_span(const std::vector<TensorDesc>& tensors) {
  return tensors.empty() ? 0 : tensors.back().byte_offset + tensors.back().size;
}

}  // namespace cudaipc::gst
