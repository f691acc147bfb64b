// Host memory backend: one sealed memfd per slot. Consumers map slots read-only, and the
// F_SEAL_FUTURE_WRITE seal makes that a guarantee rather than a courtesy.
#include <unistd.h>

#include <cstring>
#include <vector>

#include "hot_path.hpp"
#include "mapping.hpp"
#include "memory_backend.hpp"

namespace cudaipc {
namespace {

constexpr std::uint32_t kHostBlobMagic = 0x54534f48;  // "HOST"

std::uint64_t page_round(std::uint64_t bytes) {
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

class HostProducerSlots final : public ProducerSlots {
 public:
  HostProducerSlots(std::uint32_t count, std::uint64_t bytes) : size_(page_round(bytes)) {
    for (std::uint32_t i = 0; i < count; ++i) {
      UniqueFd fd = make_memfd("cudaipc-slot", size_);
      maps_.emplace_back(fd.get(), size_, true);
      seal_memfd(fd.get(), true);
      fds_.push_back(std::move(fd));
    }
  }
  std::uint32_t count() const noexcept override { return static_cast<std::uint32_t>(fds_.size()); }
  CUDAIPC_HOT std::uint64_t slot_size() const noexcept override { return size_; }
  CUDAIPC_HOT std::uintptr_t address(std::uint32_t slot) const noexcept override {
    return reinterpret_cast<std::uintptr_t>(maps_[slot].data());
  }
  WireBlob export_slots() const override {
    WireBlob b;
    b.put(kHostBlobMagic);
    b.put(count());
    b.put(size_);
    for (const auto& fd : fds_) b.fds.push_back(dup_fd(fd.get()));
    return b;
  }

 private:
  std::uint64_t size_;
  std::vector<UniqueFd> fds_;
  std::vector<Mapping> maps_;
};

class HostConsumerSlots final : public ConsumerSlots {
 public:
  HostConsumerSlots(std::uint32_t count, std::uint64_t slot_size, const WireBlob& blob)
      : size_(slot_size) {
    BlobReader r(blob);
    if (r.get<std::uint32_t>("host slot blob") != kHostBlobMagic)
      throw Error(Errc::protocol, "slot description is not for host memory");
    auto n = r.get<std::uint32_t>("host slot blob");
    auto sent_size = r.get<std::uint64_t>("host slot blob");
    if (n != count || blob.fds.size() != count || r.remaining() != 0)
      throw Error(Errc::protocol, "host slot blob describes " + std::to_string(n) + " slots with " +
                                      std::to_string(blob.fds.size()) + " fds, expected " +
                                      std::to_string(count));
    if (sent_size != slot_size)
      throw Error(Errc::protocol, "host slot blob size " + std::to_string(sent_size) +
                                      " differs from the announced " + std::to_string(slot_size));
    for (const auto& fd : blob.fds) {
      checked_memfd_size(fd.get(), slot_size, "slot memory file");
      maps_.emplace_back(fd.get(), slot_size, false);
    }
  }
  std::uint32_t count() const noexcept override { return static_cast<std::uint32_t>(maps_.size()); }
  CUDAIPC_HOT std::uint64_t slot_size() const noexcept override { return size_; }
  CUDAIPC_HOT std::uintptr_t address(std::uint32_t slot) const noexcept override {
    return reinterpret_cast<std::uintptr_t>(maps_[slot].data());
  }

 private:
  std::uint64_t size_;
  std::vector<Mapping> maps_;
};

class HostProducerMemory final : public ProducerMemory {
 public:
  CUDAIPC_HOT MemoryKind kind() const noexcept override { return MemoryKind::host; }
  std::unique_ptr<ProducerSlots> allocate(std::uint32_t count, std::uint64_t bytes) override {
    return std::make_unique<HostProducerSlots>(count, bytes);
  }
  void write(std::uintptr_t dst, const void* src, std::uint64_t bytes, SourceKind from) override {
    if (from != SourceKind::host)
      throw Error(Errc::invalid_argument,
                  "a host-memory channel cannot publish from device memory");
    std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  }
  void write_2d(std::uintptr_t dst, std::uint64_t dst_pitch, const void* src,
                std::uint64_t src_pitch, std::uint64_t width, std::uint64_t height,
                SourceKind from) override {
    if (from != SourceKind::host)
      throw Error(Errc::invalid_argument,
                  "a host-memory channel cannot publish from device memory");
    for (std::uint64_t row = 0; row < height; ++row)
      std::memcpy(reinterpret_cast<void*>(dst + row * dst_pitch),
                  static_cast<const std::uint8_t*>(src) + row * src_pitch, width);
  }
};

class HostConsumerMemory final : public ConsumerMemory {
 public:
  CUDAIPC_HOT MemoryKind kind() const noexcept override { return MemoryKind::host; }
  std::shared_ptr<ConsumerSlots> import_slots(std::uint32_t count, std::uint64_t slot_size,
                                              const WireBlob& blob) override {
    return std::make_shared<HostConsumerSlots>(count, slot_size, blob);
  }
};

}  // namespace

std::unique_ptr<ProducerMemory> make_host_producer_memory() {
  return std::make_unique<HostProducerMemory>();
}
std::unique_ptr<ConsumerMemory> make_host_consumer_memory() {
  return std::make_unique<HostConsumerMemory>();
}

}  // namespace cudaipc
