// The producer's reader of a connection page (core/src/conn_page.cpp): a consumer may write any
// bytes there. Whatever they are, the snapshot claims only leases of real slots, never more than
// the limit, and no cursor past the newest frame; a broken rule is named, never trusted.
#include <bitset>
#include <cstring>
#include <new>

#include "conn_page.hpp"
#include "fuzz.hpp"

namespace cudaipc::fuzz {
namespace {

void one_input(Input& in) {
  const std::uint32_t slot_count = 1 + in.u8() % 32;
  const std::uint32_t max_leases = 1 + in.u8() % slot_count;
  const std::uint64_t published = in.u64();
  alignas(ConnPage) unsigned char raw[sizeof(ConnPage)] = {};
  Bytes b = in.rest(sizeof raw);
  if (!b.empty()) std::memcpy(raw, b.data(), b.size());
  const auto* page = std::launder(reinterpret_cast<const ConnPage*>(raw));
  PageSnapshot s = read_conn_page(*page, slot_count, max_leases, published);
  if (s.violation) {
    if (s.leases != 0) fail("a page that broke a rule still had its leases honoured");
    return;
  }
  if (slot_count < 64 && (s.leases >> slot_count) != 0)
    fail("snapshot leases a slot that does not exist");
  if (std::bitset<64>(s.leases).count() > max_leases) fail("snapshot holds more than the limit");
  if (!s.retired && s.cursor > published) fail("snapshot cursor is past the newest frame");
}

std::vector<Bytes> seeds() {
  std::vector<Bytes> out;
  // Pages an honest consumer leaves: nothing held, one or two frames held, retired.
  for (std::uint64_t leases : {0ull, 1ull, 6ull}) {
    for (std::uint64_t cursor : {0ull, 5ull, ~0ull}) {
      alignas(ConnPage) unsigned char raw[sizeof(ConnPage)] = {};
      auto* p = new (raw) ConnPage{};
      p->magic = kPageMagic;
      p->version = 2;
      p->page_size = 4096;
      p->leases.store(leases);
      p->cursor.store(cursor);
      Bytes page(raw, raw + sizeof raw);
      out.push_back(SeedBuilder().u8(3).u8(1).u64(9).bytes(page).done());
    }
  }
  return out;
}

}  // namespace

const Target& target() {
  static const Target t{"conn_page", nullptr, one_input, seeds, {}};
  return t;
}

}  // namespace cudaipc::fuzz
