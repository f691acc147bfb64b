#include "conn_page.hpp"

#include <bitset>

#include "futex.hpp"

namespace cudaipc {

void wake_page(ConnPage& page) noexcept {
  page.frame_wake.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all_noexcept(page.frame_wake);
}

PageSnapshot read_conn_page(const ConnPage& page, std::uint32_t slot_count,
                            std::uint32_t max_leases, std::uint64_t published) noexcept {
  PageSnapshot s;
  const std::uint64_t valid = slot_count >= 64 ? ~0ull : ((1ull << slot_count) - 1);
  // seq_cst: pairs with the producer's invalidation of a slot (control_block.hpp).
  const std::uint64_t leases = page.leases.load(std::memory_order_seq_cst);
  s.cursor = page.cursor.load(std::memory_order_acquire);
  if (leases & ~valid) {
    s.violation = "leased slots that do not exist";
    return s;
  }
  if (std::bitset<64>(leases).count() > max_leases) {
    s.violation = "held more frames than its limit";
    return s;
  }
  s.leases = leases;
  if (s.cursor == ~std::uint64_t{0}) {
    s.retired = true;
  } else if (s.cursor > published) {
    // A cursor past the newest frame claims to have read what does not exist yet; it holds nothing
    // back, so only the consumer itself loses by it.
    s.cursor = published;
  }
  return s;
}

}  // namespace cudaipc
