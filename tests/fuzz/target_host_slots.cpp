// The host backend's import of a slot blob (ConsumerMemory::import_slots), with the fds a peer
// could send: sealed or unsealed memfds of any size, pipes, /dev/null, sockets. The verdict is
// predicted from the input and must match; an accepted import must map every slot in order (a
// marker byte written into each memfd is read back) and cover slot_size bytes (the last byte is
// read, which would fault past the file's end).
//
// Input: [u8 count-1 % 64] [u64 slot_size] [u8 fd count % 70]
//        per fd: [u8 kind % kKinds] [u16 size in 64-byte units]
//        [blob bytes...]
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "fuzz.hpp"
#include "mapping.hpp"
#include "memory_backend.hpp"

namespace cudaipc::fuzz {
namespace {

constexpr std::uint32_t kHostBlobMagic = 0x54534f48;  // host_memory.cpp's "HOST"
constexpr std::uint32_t kMaxCount = 64;  // the lease mask's width, above any build's kMaxSlots
constexpr std::uint64_t kSizeUnit = 64;

enum Kind : std::uint8_t {
  memfd_as_producer,  // what the host backend sends: shrink, grow, seal, future-write seals
  memfd_shrink_seal,  // the one seal the importer requires
  memfd_write_seal,   // F_SEAL_WRITE as well: still mappable read-only
  memfd_grow_seal,    // sealed, but it could still shrink under a mapping
  memfd_unsealed,
  pipe_end,
  dev_null,
  socket_end,
  kKinds,
};

bool acceptable(Kind k) {
  return k == memfd_as_producer || k == memfd_shrink_seal || k == memfd_write_seal;
}

UniqueFd checked(int fd, const char* what) {
  if (fd < 0) fail(std::string(what) + " failed: " + std::strerror(errno));
  return UniqueFd(fd);
}

// A memfd of `size` bytes whose first byte is `marker`, then sealed as `kind` says.
UniqueFd make_fd(Kind kind, std::uint64_t size, std::uint8_t marker) {
  int pair[2];
  switch (kind) {
    case pipe_end:
      if (::pipe2(pair, O_CLOEXEC) != 0) fail("pipe2 failed");
      ::close(pair[1]);
      return UniqueFd(pair[0]);
    case dev_null:
      return checked(::open("/dev/null", O_RDONLY | O_CLOEXEC), "open /dev/null");
    case socket_end:
      if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
        fail("socketpair failed");
      ::close(pair[1]);
      return UniqueFd(pair[0]);
    default:
      break;
  }
  UniqueFd fd = make_memfd("fuzz-slot", size);
  if (size > 0 && ::pwrite(fd.get(), &marker, 1, 0) != 1) fail("pwrite of a marker failed");
  int seals = 0;
  switch (kind) {
    case memfd_as_producer:
      seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL | F_SEAL_FUTURE_WRITE;
      break;
    case memfd_shrink_seal:
      seals = F_SEAL_SHRINK;
      break;
    case memfd_write_seal:
      seals = F_SEAL_SHRINK | F_SEAL_WRITE;
      break;
    case memfd_grow_seal:
      seals = F_SEAL_GROW;
      break;
    default:
      break;
  }
  if (seals && ::fcntl(fd.get(), F_ADD_SEALS, seals) != 0) fail("sealing a memfd failed");
  return fd;
}

struct Spec {
  Kind kind;
  std::uint64_t size;
};

void one_input(Input& in) {
  const std::uint32_t count = 1 + in.u8() % kMaxCount;
  const std::uint64_t slot_size = in.u64();
  // The consumer only imports what decode_format let through, and that guarantees
  // slot_size >= max_frame_size >= 1. Zero is left out because import_slots fails on it with
  // Errc::system (mmap's EINVAL) instead of Errc::protocol: unreachable from a peer today.
  // Rejected here, so such inputs do not count as accepted nor join the loop's corpus.
  if (slot_size == 0) throw Error(Errc::protocol, "slot size 0 never gets past decode_format");
  const std::size_t nfds = in.u8() % 70;
  std::vector<Spec> specs;
  WireBlob blob;
  for (std::size_t i = 0; i < nfds; ++i) {
    Spec s{static_cast<Kind>(in.u8() % kKinds), in.u16() * kSizeUnit};
    blob.fds.push_back(make_fd(s.kind, s.size, static_cast<std::uint8_t>(i + 1)));
    specs.push_back(s);
  }
  blob.bytes = in.rest();

  // What the importer must decide, from the input alone.
  bool valid = blob.bytes.size() == 16 && nfds == count;
  if (valid) {
    std::uint32_t magic, n;
    std::uint64_t sent;
    std::memcpy(&magic, blob.bytes.data(), 4);
    std::memcpy(&n, blob.bytes.data() + 4, 4);
    std::memcpy(&sent, blob.bytes.data() + 8, 8);
    valid = magic == kHostBlobMagic && n == count && sent == slot_size;
  }
  for (const Spec& s : specs) valid = valid && acceptable(s.kind) && s.size >= slot_size;

  auto memory = make_host_consumer_memory();
  std::shared_ptr<ConsumerSlots> slots;
  try {
    slots = memory->import_slots(count, slot_size, blob);
  } catch (const Error& e) {
    if (valid) fail(std::string("a valid slot blob was rejected: ") + e.what());
    throw;
  }
  if (!valid) fail("an invalid slot blob was accepted");
  if (slots->count() != count || slots->slot_size() != slot_size)
    fail("the import reports another count or slot size than it was given");
  for (std::uint32_t i = 0; i < count; ++i) {
    const auto* p = reinterpret_cast<const volatile std::uint8_t*>(slots->address(i));
    if (p[0] != static_cast<std::uint8_t>(i + 1))
      fail("slot " + std::to_string(i) + " maps another fd");
    (void)p[slot_size - 1];
  }
}

// The host backend's own exports: every fd described by its seals and size.
std::vector<Bytes> seeds() {
  std::vector<Bytes> out;
  auto producer = make_host_producer_memory();
  for (auto [count, bytes] :
       {std::pair<std::uint32_t, std::uint64_t>{1, 1}, {3, 8192}, {4, 70000}}) {
    auto slots = producer->allocate(count, bytes);
    WireBlob b = slots->export_slots();
    SeedBuilder s;
    s.u8(static_cast<std::uint8_t>(count - 1)).u64(slots->slot_size());
    s.u8(static_cast<std::uint8_t>(b.fds.size()));
    for (const auto& fd : b.fds) {
      struct stat st {};
      if (::fstat(fd.get(), &st) != 0) fail("fstat of an exported slot failed");
      int seals = ::fcntl(fd.get(), F_GET_SEALS);
      if (seals != (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL | F_SEAL_FUTURE_WRITE))
        fail("the host backend's slot seals changed: update this target's fd kinds");
      s.u8(memfd_as_producer).u16(static_cast<std::uint16_t>(st.st_size / kSizeUnit));
    }
    out.push_back(s.bytes(b.bytes).done());
  }
  return out;
}

}  // namespace

const Target& target() {
  static const Target t{"host_slots", nullptr, one_input, seeds, {Errc::protocol}};
  return t;
}

}  // namespace cudaipc::fuzz
