#include "replies/ready_results.hpp"

#include <cstring>
#include <string>

#include "cudaipc/error.hpp"

namespace cudaipc::detail {

namespace {

bool is_float(DType t) noexcept {
  return t == DType::float32 || t == DType::float16 || t == DType::bfloat16 || t == DType::float64;
}

[[noreturn]] void refuse(const std::string& what) {
  throw Error(Errc::invalid_argument, "a reply's detections: " + what);
}

void check_array(const ResultArray& a, const char* name, bool labels, std::uint32_t n) {
  if (!a.data) return;
  if (labels ? a.dtype != DType::int64 && a.dtype != DType::int32 : !is_float(a.dtype))
    refuse(std::string(name) + " of dtype " + std::to_string(static_cast<unsigned>(a.dtype)) +
           (labels ? " (int64 or int32 are taken)"
                   : " (float32, float16, bfloat16 or float64 are taken)"));
  // One detection's stride is never followed; a box's four values always are.
  if ((n > 1 && a.stride < 1) || a.inner < 1)
    refuse(std::string(name) + " with strides " + std::to_string(a.stride) + ", " +
           std::to_string(a.inner) + " (elements, at least 1)");
}

// IEEE half and bfloat16 to float, exactly.
float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (!mant) {
    bits = sign;
  } else {  // subnormal: normalised into float's range
    exp = 113;
    while (!(mant & 0x400u)) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float load_float(const std::uint8_t* p, DType t) noexcept {
  switch (t) {
    case DType::float32: {
      float f;
      std::memcpy(&f, p, sizeof f);
      return f;
    }
    case DType::float64: {
      double v;
      std::memcpy(&v, p, sizeof v);
      return static_cast<float>(v);
    }
    case DType::float16: {
      std::uint16_t h;
      std::memcpy(&h, p, sizeof h);
      return half_to_float(h);
    }
    default: {  // bfloat16: the high half of a float
      std::uint16_t h;
      std::memcpy(&h, p, sizeof h);
      const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
      float f;
      std::memcpy(&f, &bits, sizeof f);
      return f;
    }
  }
}

// `a`'s n x per values as float32: in place when packed float32, else into `out`.
const float* floats(const ResultArray& a, std::uint32_t n, std::uint32_t per,
                    std::vector<float>& out) {
  if (!a.data) return nullptr;
  const bool packed = a.inner == 1 && (n <= 1 || a.stride == per);
  if (a.dtype == DType::float32 && packed) return static_cast<const float*>(a.data);
  if (out.size() < std::size_t{n} * per) out.resize(std::size_t{n} * per);
  const std::size_t es = dtype_size(a.dtype);
  const auto* base = static_cast<const std::uint8_t*>(a.data);
  for (std::uint32_t i = 0; i < n; ++i)
    for (std::uint32_t k = 0; k < per; ++k)
      out[std::size_t{i} * per + k] =
          load_float(base + (static_cast<std::int64_t>(i) * a.stride + k * a.inner) * es, a.dtype);
  return out.data();
}

const std::int64_t* labels_of(const ResultArray& a, std::uint32_t n,
                              std::vector<std::int64_t>& out) {
  if (!a.data) return nullptr;
  if (a.dtype == DType::int64 && (n <= 1 || a.stride == 1))
    return static_cast<const std::int64_t*>(a.data);
  if (out.size() < n) out.resize(n);
  const auto* base = static_cast<const std::uint8_t*>(a.data);
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint8_t* p = base + static_cast<std::int64_t>(i) * a.stride * dtype_size(a.dtype);
    if (a.dtype == DType::int64) {
      std::memcpy(&out[i], p, sizeof out[i]);
    } else {
      std::int32_t v;
      std::memcpy(&v, p, sizeof v);
      out[i] = v;
    }
  }
  return out.data();
}

}  // namespace

void check_results(const ResultDetections& d) {
  if (d.n > kMaxResultDetections)
    refuse(std::to_string(d.n) + " of them (at most " + std::to_string(kMaxResultDetections) + ")");
  if (d.n && !d.boxes.data) refuse(std::to_string(d.n) + " without boxes");
  check_array(d.boxes, "boxes", false, d.n);
  check_array(d.scores, "scores", false, d.n);
  check_array(d.labels, "labels", true, d.n);
  check_array(d.rotation, "rotation", false, d.n);
  if (d.name_count && (!d.names || !d.name_offsets))
    refuse(std::to_string(d.name_count) + " label names without their text or offsets");
  for (std::uint32_t i = 0; i < d.name_count; ++i)
    if (d.name_offsets[i + 1] < d.name_offsets[i])
      refuse("label name " + std::to_string(i) + " ends before it starts");
}

std::size_t packed_bytes(const ResultArray& a, std::uint32_t n, std::uint32_t per_detection) {
  return a.data ? std::size_t{n} * per_detection * dtype_size(a.dtype) : 0;
}

ReadyResults ready_results(const ResultDetections& d, ResultScratch& scratch) {
  ReadyResults r;
  r.detections = true;
  r.n = d.n;
  r.boxes = floats(d.boxes, d.n, 4, scratch.boxes);
  r.scores = floats(d.scores, d.n, 1, scratch.scores);
  r.rotation = floats(d.rotation, d.n, 1, scratch.rotation);
  r.labels = labels_of(d.labels, d.n, scratch.labels);
  r.names = d.names;
  r.name_offsets = d.name_offsets;
  r.name_count = d.name_count;
  return r;
}

}  // namespace cudaipc::detail
