// The meta area's framing (docs/metas.md): a header, then records back to back.
#include <cstring>

#include "bytes_io.hpp"
#include "cudaipc/metas.hpp"

namespace cudaipc::metas {

using io::load;
using io::pad8;
using io::store;

namespace {
constexpr std::size_t kRecordHeader = 8;
}  // namespace

AreaWriter::AreaWriter(void* area, std::size_t capacity) noexcept
    : area_(static_cast<std::uint8_t*>(area)), capacity_(area ? capacity : 0) {}

std::size_t AreaWriter::size() const noexcept {
  return count_ ? used_ : 0;
}
std::uint16_t AreaWriter::record_count() const noexcept {
  return count_;
}
std::size_t AreaWriter::remaining() const noexcept {
  return capacity_ - used_;
}

std::uint8_t* AreaWriter::begin_record(RecordKind kind, std::string_view name,
                                       std::size_t max_body) noexcept {
  if (open_ || count_ == 0xffff || name.size() > kMaxNameLength) return nullptr;
  const std::size_t start = count_ ? used_ : kAreaHeaderSize;
  const std::size_t head = kRecordHeader + pad8(name.size());
  // The body is padded to 8 at commit: room for that is checked now, so a commit never fails.
  if (start > capacity_ || head > capacity_ - start || max_body > capacity_ - start - head ||
      pad8(max_body) > capacity_ - start - head)
    return nullptr;
  std::uint8_t* r = area_ + start;
  store<std::uint32_t>(r, 0);  // size, set at commit
  store<std::uint16_t>(r + 4, static_cast<std::uint16_t>(kind));
  store<std::uint16_t>(r + 6, static_cast<std::uint16_t>(name.size()));
  if (!name.empty()) std::memcpy(r + kRecordHeader, name.data(), name.size());
  std::memset(r + kRecordHeader + name.size(), 0, head - kRecordHeader - name.size());
  open_ = start;
  open_max_ = max_body;
  return r + head;
}

std::size_t AreaWriter::body_offset() const noexcept {
  if (!open_) return 0;
  const std::uint16_t name_len = load<std::uint16_t>(area_ + open_ + 6);
  return open_ + kRecordHeader + pad8(name_len);
}

void AreaWriter::commit_record(std::size_t body_size) noexcept {
  if (!open_) return;
  if (body_size > open_max_) body_size = open_max_;
  const std::size_t body = body_offset();
  const std::size_t end = body + pad8(body_size);
  std::memset(area_ + body + body_size, 0, end - body - body_size);
  store<std::uint32_t>(area_ + open_, static_cast<std::uint32_t>(end - open_));
  used_ = end;
  ++count_;
  store<std::uint32_t>(area_, kAreaMagic);
  store<std::uint16_t>(area_ + 4, kAreaVersion);
  store<std::uint16_t>(area_ + 6, count_);
  store<std::uint32_t>(area_ + 8, static_cast<std::uint32_t>(used_));
  store<std::uint32_t>(area_ + 12, 0);
  open_ = 0;
}

void AreaWriter::cancel_record() noexcept {
  open_ = 0;
}

bool AreaWriter::add_record(RecordKind kind, std::string_view name, const void* body,
                            std::size_t size) noexcept {
  std::uint8_t* p = begin_record(kind, name, size);
  if (!p) return false;
  if (size) std::memcpy(p, body, size);
  commit_record(size);
  return true;
}

AreaReader::AreaReader(const void* area, std::size_t bytes) noexcept
    : area_(static_cast<const std::uint8_t*>(area)), bytes_(area ? bytes : 0) {
  if (bytes_ == 0) return;  // no metas: nothing to read, no error
  if (bytes_ < kAreaHeaderSize) {
    error_ = "meta area shorter than its header";
    return;
  }
  const auto magic = load<std::uint32_t>(area_);
  const auto version = load<std::uint16_t>(area_ + 4);
  const auto count = load<std::uint16_t>(area_ + 6);
  const auto used = load<std::uint32_t>(area_ + 8);
  if (magic != kAreaMagic) {
    error_ = "meta area has a bad magic number";
  } else if (version != kAreaVersion) {
    error_ = "meta area of another encoding version";
  } else if (used < kAreaHeaderSize || used > bytes_) {
    error_ = "meta area claims more bytes than the frame has";
  } else {
    count_ = count;
    end_ = used;
    pos_ = kAreaHeaderSize;
  }
}

bool AreaReader::next(Record* out) noexcept {
  if (error_ || read_ >= count_) return false;
  if (!io::within(pos_, kRecordHeader, end_)) {
    error_ = "meta record header past the area's end";
    return false;
  }
  const std::uint8_t* r = area_ + pos_;
  const auto size = load<std::uint32_t>(r);
  const auto kind = load<std::uint16_t>(r + 4);
  const auto name_len = load<std::uint16_t>(r + 6);
  if (size < kRecordHeader || size % 8 != 0 || !io::within(pos_, size, end_)) {
    error_ = "meta record size out of range";
    return false;
  }
  if (name_len > kMaxNameLength || kRecordHeader + pad8(name_len) > size) {
    error_ = "meta record name longer than the record";
    return false;
  }
  const std::size_t head = kRecordHeader + pad8(name_len);
  out->kind = static_cast<RecordKind>(kind);
  out->name = std::string_view(reinterpret_cast<const char*>(r + kRecordHeader), name_len);
  out->body = Bytes{r + head, size - head};
  pos_ += size;
  ++read_;
  return true;
}

}  // namespace cudaipc::metas
