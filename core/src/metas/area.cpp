// The meta area's framing (docs/metas.md): a header, then records back to back.
#include <cstdarg>
#include <cstdio>
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

void AreaReader::fail(const char* format, ...) noexcept {
  va_list args;
  va_start(args, format);
  std::vsnprintf(message_, sizeof message_, format, args);
  va_end(args);
  failed_ = true;
}

AreaReader::AreaReader(const void* area, std::size_t bytes) noexcept
    : area_(static_cast<const std::uint8_t*>(area)), bytes_(area ? bytes : 0) {
  if (bytes_ == 0) return;  // no metas: nothing to read, no error
  if (bytes_ < kAreaHeaderSize) {
    fail("an area of %zu bytes is shorter than its 16-byte header", bytes_);
    return;
  }
  const auto magic = load<std::uint32_t>(area_);
  const auto version = load<std::uint16_t>(area_ + 4);
  const auto count = load<std::uint16_t>(area_ + 6);
  const auto used = load<std::uint32_t>(area_ + 8);
  if (magic != kAreaMagic) {
    fail("area magic 0x%08x is not 0x%08x (CIMT)", magic, kAreaMagic);
  } else if (version != kAreaVersion) {
    other_version_ = true;
    fail("area version %u: this reader knows %u; all skipped", unsigned{version},
         unsigned{kAreaVersion});
  } else if (used < kAreaHeaderSize || used > bytes_) {
    fail("area claims %u bytes in use of the %zu published", used, bytes_);
  } else {
    count_ = count;
    end_ = used;
    pos_ = kAreaHeaderSize;
  }
}

bool AreaReader::next(Record* out) noexcept {
  if (failed_ || read_ >= count_) return false;
  if (!io::within(pos_, kRecordHeader, end_)) {
    fail("record %u of %u starts past the %zu bytes in use", unsigned{read_}, unsigned{count_},
         end_);
    return false;
  }
  const std::uint8_t* r = area_ + pos_;
  const auto size = load<std::uint32_t>(r);
  const auto kind = load<std::uint16_t>(r + 4);
  const auto name_len = load<std::uint16_t>(r + 6);
  const std::size_t head = kRecordHeader + pad8(name_len);
  // A size that cannot be trusted leaves no trusted place for the next record: the walk ends.
  if (size < head || size % 8 != 0 || !io::within(pos_, size, end_) || name_len > kMaxNameLength) {
    fail(
        "record %u (kind %u) at byte %zu: size %u with a name of %u bytes (needs a multiple of "
        "8, at least %zu, within the %zu bytes left; names <= %zu)",
        unsigned{read_}, unsigned{kind}, pos_, size, unsigned{name_len}, head, end_ - pos_,
        kMaxNameLength);
    return false;
  }
  out->kind = static_cast<RecordKind>(kind);
  out->name = std::string_view(reinterpret_cast<const char*>(r + kRecordHeader), name_len);
  out->body = Bytes{r + head, size - head};
  pos_ += size;
  ++read_;
  return true;
}

}  // namespace cudaipc::metas
