// The producer's state, shared by the publish path (producer.cpp) and the socket thread that
// admits and reaps consumers (producer_server.cpp). One mutex guards everything both touch; it is
// uncontended on the per-frame path, so taking it costs no syscall.
#pragma once

#include <atomic>

#include <sys/types.h>

#include <array>
#include <mutex>
#include <thread>
#include <vector>

#include "control_block.hpp"
#include "cudaipc/producer.hpp"
#include "mapping.hpp"
#include "memory_backend.hpp"
#include "unique_fd.hpp"

namespace cudaipc {

class ProducerImpl {
 public:
  explicit ProducerImpl(const ProducerOptions& opts);
  ~ProducerImpl();

  void set_format(const Format& f);
  WriteSlot begin_frame(PublishStatus* status);
  void commit(WriteSlot& ws, const FrameInfo& info);
  void abort(WriteSlot& ws);
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

  ProducerOptions opts_;
  std::string path_;
  Format format_;

 private:
  enum class ConnState { awaiting_hello, awaiting_ready, active };
  struct Conn {
    UniqueFd fd;
    ConnState state = ConnState::awaiting_hello;
    std::uint32_t id = 0;  // consumer entry, valid from awaiting_ready on
    pid_t pid = 0;
    ConsumeMode mode = ConsumeMode::every_frame;
    std::uint64_t accepted_ns = 0;
  };
  struct Retired {
    std::shared_ptr<ProducerSlots> set;
    std::uint64_t set_id;
  };
  // What the consumers' entries say right now, sanitised.
  struct Occupancy {
    std::uint64_t leased = 0;
    std::uint64_t min_cursor = ~std::uint64_t{0};  // over every-frame consumers
  };

  // producer.cpp
  void create_control_block();
  Occupancy occupancy() const;
  bool slot_free(std::uint32_t i, const Occupancy& occ) const;
  int claim_slot();
  void free_retired(const Occupancy& occ);
  void send_format_to(Conn& c);
  void wake_consumers();
  void wake_producer();

  // producer_server.cpp
  void serve();
  void accept_new();
  void handle_message(Conn& c);
  void on_hello(Conn& c, struct Received& r);
  void on_ready(Conn& c, struct Received& r);
  void drop(Conn& c, const std::string& why);
  bool peer_allowed(uid_t uid, gid_t gid, std::string& why) const;

  mutable std::mutex mu_;
  UniqueFd control_fd_;
  Mapping control_map_;
  ControlBlock* cb_ = nullptr;
  std::uint32_t slot_count_ = 0;
  std::uint64_t valid_mask_ = 0;
  std::unique_ptr<ProducerMemory> memory_;
  std::shared_ptr<ProducerSlots> slots_;
  std::uint64_t set_id_ = 0;
  std::vector<Retired> retired_;
  std::uint64_t generation_ = 0;
  std::uint64_t seq_ = 0;
  std::uint64_t dropped_ = 0;
  std::array<std::uint64_t, kMaxSlots> slot_seq_{};  // frame in each slot (0: none/invalidated)
  std::array<std::uint64_t, kMaxSlots> slot_set_{};  // slot set that frame lives in
  std::uint32_t next_slot_ = 0;
  bool writing_ = false;
  std::uint32_t writing_slot_ = 0;

  std::vector<Conn> conns_;
  std::array<bool, kMaxConsumers> entry_used_{};
  std::array<ConsumeMode, kMaxConsumers> entry_mode_{};
  UniqueFd listen_fd_;
  ino_t socket_inode_ = 0;
  UniqueFd stop_fd_;  // eventfd that ends serve()
  std::thread server_;
};

}  // namespace cudaipc
