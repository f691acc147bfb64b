// Bytes plus file descriptors that describe a backend object (slot memory, sync events) to the
// other process. A received blob is untrusted: its reader checks every length and count.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "cudaipc/error.hpp"
#include "unique_fd.hpp"

namespace cudaipc {

struct WireBlob {
  std::vector<std::uint8_t> bytes;
  std::vector<UniqueFd> fds;

  template <typename T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
  }
};

// Reads fixed-size values from a received blob, failing with Errc::protocol on a short blob.
class BlobReader {
 public:
  explicit BlobReader(const WireBlob& b) : blob_(b) {}
  template <typename T>
  T get(const char* what) {
    if (blob_.bytes.size() - pos_ < sizeof(T))
      throw Error(Errc::protocol, std::string("peer sent a truncated ") + what);
    T v;
    std::memcpy(&v, blob_.bytes.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::size_t remaining() const noexcept { return blob_.bytes.size() - pos_; }

 private:
  const WireBlob& blob_;
  std::size_t pos_ = 0;
};

}  // namespace cudaipc
