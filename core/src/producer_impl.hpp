// The producer's state, split by who touches it so that publishing never waits for the socket:
//   mu_        the publish path (slots, seq, generation); the socket thread never takes it.
//   table_mu_  the lease records (one per consumer page); held only for short loops, by the
//              publish path and by the socket thread, whose only syscall is the wake of a
//              consumer asleep on its page.
//   format_mu_ the newest format, which the socket thread sends to consumers.
// Lock order: mu_ before table_mu_; format_mu_ is never held with another.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "conn_page.hpp"
#include "control_block.hpp"
#include "cudaipc/monitor.hpp"
#include "cudaipc/producer.hpp"
#include "mapping.hpp"
#include "memory_backend.hpp"
#include "unique_fd.hpp"

namespace cudaipc {

// Records outlive their sockets while an evicted consumer still holds slots, so there are more of
// them than consumer places. Together with one private word they fit one futex_waitv (128).
inline constexpr std::uint32_t kMaxRecords = 96;
// Connections that have not finished their handshake; beyond this the oldest is cut.
inline constexpr std::size_t kMaxPending = 32;
// Monitor connections (cudaipc/monitor.hpp) at once; more are refused busy.
inline constexpr std::size_t kMaxMonitors = 8;

class ProducerImpl {
 public:
  explicit ProducerImpl(const ProducerOptions& opts);
  ~ProducerImpl();
  void close();

  void set_format(const Format& f);
  WriteSlot begin_frame(PublishStatus* status);
  void commit(WriteSlot& ws, const FrameInfo& info);
  void abort(WriteSlot& ws) noexcept;
  SlotHold hold(const WriteSlot& ws);
  void release(SlotHold& h) noexcept;
  PublishStatus publish(const void* data, std::uint64_t bytes, const FrameInfo& info,
                        SourceKind from);
  PublishStatus publish_2d(const void* src, std::uint64_t src_pitch, std::uint64_t width,
                           std::uint64_t height, std::uint64_t dst_pitch, const FrameInfo& info,
                           SourceKind from);
  void end_of_stream();
  void interrupt() noexcept;
  std::atomic<bool> interrupted_{false};
  ProducerStats stats() const;
  std::size_t consumer_count() const;
  void* stream() const noexcept { return memory_->stream(); }
  ProducerMemory& memory() const noexcept { return *memory_; }
  std::uint64_t last_seq() const;
  Producer::Stamp last_frame() const;

  ProducerOptions opts_;
  std::string path_;
  Format format_;

 private:
  // One consumer's page as the lease side sees it. Created at hello, freed by the socket thread
  // once the consumer is proven dead or, after it left or was evicted, holds no slot any more.
  struct Record {
    std::uint32_t id = 0;               // index in records_; also the backend's consumer id
    std::shared_ptr<Mapping> page_map;  // shared: a producer sleeping on the page keeps it mapped
    ConnPage* page = nullptr;
    UniqueFd pidfd;  // empty where the kernel gives none: the socket is then the only proof
    pid_t pid = 0;
    ConsumeMode mode = ConsumeMode::every_frame;
    bool active = false;   // between Start and leaving: its cursor counts for every-frame delivery
    bool evicted = false;  // we cut it off; its leases still count until it releases them
    bool has_socket = true;
    bool void_leases = false;            // it broke a page rule: nothing it claims counts any more
    const char* evict_reason = nullptr;  // set by the publish path, acted on by the socket thread
    PageSnapshot last;
    std::uint64_t progress_ns = 0;  // last time its leases or cursor changed
  };
  struct Occupancy {
    std::uint64_t leased = 0;
    std::uint64_t min_cursor = ~std::uint64_t{0};  // over active every-frame consumers
  };

  // monitor: sent a status request instead of a hello; it gets snapshots, never formats or slots.
  enum class ConnState { awaiting_hello, awaiting_ready, active, monitor };
  // Whether a connection is owed format messages: consumers from hello on, never monitors.
  static bool owes_formats(ConnState s) {
    return s == ConnState::awaiting_ready || s == ConnState::active;
  }
  struct Conn {
    UniqueFd fd;
    ConnState state = ConnState::awaiting_hello;
    int record = -1;
    pid_t pid = 0;
    ConsumeMode mode = ConsumeMode::every_frame;
    std::uint64_t accepted_ns = 0;
    std::uint64_t last_request_ns = 0;  // monitors: their newest status request
    std::uint64_t sent_generation = 0;
    std::uint64_t send_blocked_ns = 0;     // since when its socket has had no room for what it owes
    std::vector<std::uint64_t> sent_sets;  // slot sets whose fds this consumer already has
  };
  struct Retired {
    std::shared_ptr<ProducerSlots> set;
    std::uint64_t set_id;
  };
  struct FormatState {
    std::uint64_t generation = 0;
    std::uint64_t set_id = 0;
    Format format;
    std::shared_ptr<ProducerSlots> slots;
  };

  // producer.cpp: the publish path
  void create_control_block();
  void wake_consumers(bool everyone = false);
  void wake_space() noexcept;
  void post_to_server() noexcept;
  bool slot_free(std::uint32_t i, const Occupancy& occ) const;
  int claim_slot(std::uint64_t now);
  void free_retired(const Occupancy& occ);
  void wait_for_space(std::uint64_t until);

  // lease_table.cpp: the records, read by both threads
  Occupancy occupancy(std::uint64_t now);
  void evict_stalled(std::uint64_t now);
  void evict_gpu_holders(const std::vector<std::uint32_t>& ids);
  void mark_evicted(Record& r, const char* reason);
  void log_holdback(std::uint64_t now);
  void wake_sleepers(bool everyone);

  // producer_server.cpp: the socket thread
  void serve();
  void serve_once(std::vector<struct pollfd>& fds);
  void accept_new();
  enum class SpareUse { refused, none_waiting, unavailable };
  SpareUse refuse_on_spare(const class DescriptorShortage& e);
  void handle_message(Conn& c);
  void on_hello(Conn& c, struct Received& r);
  void on_ready(Conn& c, struct Received& r);
  // producer_status.cpp: monitors
  void on_status_request(Conn& c, struct Received& r);
  ChannelStatus status_snapshot() const;
  std::size_t monitor_count() const;
  void send_formats();
  void send_format_to(Conn& c, const FormatState& f);
  void act_on_records();
  // Hands a consumer's arrival or departure to opts_.on_consumer (socket thread).
  void tell_consumer(ConsumerChange::Kind kind, const Conn& c, std::string reason);
  void drop(Conn& c, const std::string& why);
  void retire_record(int id);
  bool peer_allowed(uid_t uid, gid_t gid, std::string& why) const;

  // Publish path (mu_).
  mutable std::mutex mu_;
  UniqueFd control_fd_;
  Mapping control_map_;
  ControlBlock* cb_ = nullptr;
  std::uint8_t* metas_ = nullptr;  // slot 0's meta area, in the control region
  std::size_t meta_stride_ = 0;
  std::uint32_t slot_count_ = 0;
  std::uint32_t max_leases_ = 0;
  std::uint64_t valid_mask_ = 0;
  std::unique_ptr<ProducerMemory> memory_;
  std::shared_ptr<ProducerSlots> slots_;
  std::uint64_t set_id_ = 0;
  std::vector<Retired> retired_;
  std::uint64_t generation_ = 0;
  std::uint64_t seq_ = 0;
  std::uint64_t last_publish_time_ = 0;  // seq_'s
  std::uint64_t dropped_ = 0;
  std::array<std::uint64_t, kMaxSlots> slot_seq_{};  // frame in each slot (0: none/invalidated)
  std::array<std::uint64_t, kMaxSlots> slot_set_{};  // slot set that frame lives in
  std::uint32_t next_slot_ = 0;
  // Slots this process still uses after their write ended (SlotHold): never claimed. Released
  // from any thread without mu_; held_set_ (under mu_) keeps a retired set while one is held.
  std::atomic<std::uint64_t> held_{0};
  std::array<std::uint64_t, kMaxSlots> held_set_{};
  bool writing_ = false;
  std::uint32_t writing_slot_ = 0;
  std::uint64_t starved_since_ = 0;  // when publishing last found no free slot, 0: it did
  std::uint64_t next_holdback_log_ns_ = 0;
  // Bumped by interrupt() and by the socket thread when it frees slots; a space wait sleeps on it.
  std::atomic<std::uint32_t> space_wake_{0};

  // Lease records (table_mu_).
  mutable std::mutex table_mu_;
  std::array<std::unique_ptr<Record>, kMaxRecords> records_;
  // One past the last record in use: every publish scans the records twice (occupancy(),
  // wake_sleepers()), and over all kMaxRecords places that was two thirds of a reply's publish
  // (callgrind, issue #39) for the one or two connections a channel has.
  std::uint32_t records_end_ = 0;
  template <typename T>
  struct Records {
    T* first;
    T* last;
    T* begin() const noexcept { return first; }
    T* end() const noexcept { return last; }
  };
  // Under table_mu_: the places up to the last record in use (some may be empty).
  Records<std::unique_ptr<Record>> live_records() noexcept {
    return {records_.data(), records_.data() + records_end_};
  }
  Records<const std::unique_ptr<Record>> live_records() const noexcept {
    return {records_.data(), records_.data() + records_end_};
  }

  // Formats for the socket thread (format_mu_): every recent generation, oldest first, because an
  // every-frame consumer needs each format whose frames it will read, not only the newest.
  mutable std::mutex format_mu_;
  std::deque<FormatState> format_history_;

  // Socket thread only.
  std::vector<Conn> conns_;
  UniqueFd listen_fd_;
  ino_t socket_inode_ = 0;
  UniqueFd notify_fd_;  // eventfd: stop, a new format, an eviction
  // Held back for the moment this process runs out of descriptors: given up, it lets one more
  // connection in, to be told why it cannot be served (producer_server.cpp).
  UniqueFd spare_fd_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> closed_{false};  // close() ran: the channel is gone, the memory stays
  std::uint64_t accept_paused_until_ = 0;
  // Connections turned away for want of a descriptor (spare or handshake), for monitors.
  std::uint64_t descriptor_refusals_ = 0;
  std::uint64_t next_accept_log_ns_ = 0;
  std::thread server_;
};

}  // namespace cudaipc
