#include "npy.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "cudaipc/error.hpp"

namespace cudaipc::cli {

std::vector<std::uint8_t> gather_dense(const TensorDesc& t, const std::uint8_t* data,
                                       std::uint64_t bytes) {
  const std::uint64_t esize = dtype_size(t.dtype);
  if (esize == 0) throw Error(Errc::protocol, "tensor has an unknown dtype");
  std::uint64_t count = 1;
  for (std::uint32_t i = 0; i < t.rank; ++i) {
    if (t.shape[i] < 0) throw Error(Errc::protocol, "tensor has a negative dimension");
    count *= static_cast<std::uint64_t>(t.shape[i]);
  }
  std::vector<std::uint8_t> out(count * esize);
  if (count == 0) return out;
  std::int64_t index[kMaxRank] = {};
  for (std::uint64_t n = 0; n < count; ++n) {
    std::int64_t off = 0;
    for (std::uint32_t d = 0; d < t.rank; ++d) off += index[d] * t.strides[d];
    if (off < 0 || static_cast<std::uint64_t>(off) + esize > bytes)
      throw Error(Errc::protocol,
                  "tensor strides reach outside the frame's " + std::to_string(bytes) + " bytes");
    for (std::uint64_t b = 0; b < esize; ++b)
      out[n * esize + b] = data[static_cast<std::uint64_t>(off) + b];
    for (int d = static_cast<int>(t.rank) - 1; d >= 0; --d) {
      if (++index[d] < t.shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

std::string npy_descr(DType t) {
  switch (t) {
    case DType::int8:
      return "|i1";
    case DType::uint8:
      return "|u1";
    case DType::boolean:
      return "|b1";
    case DType::int16:
      return "<i2";
    case DType::uint16:
    case DType::bfloat16:
      return "<u2";
    case DType::float16:
      return "<f2";
    case DType::int32:
      return "<i4";
    case DType::uint32:
      return "<u4";
    case DType::float32:
      return "<f4";
    case DType::int64:
      return "<i8";
    case DType::uint64:
      return "<u8";
    case DType::float64:
      return "<f8";
    case DType::invalid:
      break;
  }
  throw Error(Errc::invalid_argument, "no NumPy type for an invalid dtype");
}

void write_npy(const std::string& path, const TensorDesc& t,
               const std::vector<std::uint8_t>& dense) {
  std::string shape = "(";
  for (std::uint32_t i = 0; i < t.rank; ++i) shape += std::to_string(t.shape[i]) + ", ";
  if (t.rank > 1) shape.erase(shape.size() - 2);  // "(3,)" for one dimension, "(3, 4)" else
  if (t.rank == 1) shape.pop_back();
  shape += ")";
  std::string header =
      "{'descr': '" + npy_descr(t.dtype) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // The data starts on a 64-byte boundary; the header ends with a newline.
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(1);
  out += static_cast<char>(0);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_errno("creating '" + path + "'");
  auto write_all = [&](const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    while (n > 0) {
      const ssize_t w = ::write(fd, b, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        const int err = errno;
        ::close(fd);
        throw_errno("writing '" + path + "'", err);
      }
      b += w;
      n -= static_cast<std::size_t>(w);
    }
  };
  write_all(out.data(), out.size());
  write_all(dense.data(), dense.size());
  if (::close(fd) != 0) throw_errno("closing '" + path + "'");
}

}  // namespace cudaipc::cli
