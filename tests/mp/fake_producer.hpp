// A hostile producer built from the core's own pieces (listen_unix, the protocol's send_*
// functions, memfds): it speaks the handshake with whatever lies a test wants, and exposes the
// control block it shares so the test can write out-of-range values into it.
#pragma once

#include <poll.h>
#include <sys/mman.h>

#include <functional>
#include <memory>
#include <new>
#include <thread>

#include "conn_page.hpp"
#include "control_block.hpp"
#include "mapping.hpp"
#include "memory_backend.hpp"
#include "protocol.hpp"
#include "unix_socket.hpp"

namespace cudaipc::testing {

class FakeProducer {
 public:
  static constexpr std::uint32_t kSlots = 4;
  static constexpr std::uint64_t kSlotBytes = 4096;
  static constexpr std::uint32_t kMetaBytes = 4096;  // each slot's meta area
  static constexpr std::size_t kMetaOffset = (sizeof(ControlBlock) + 4095) / 4096 * 4096;

  explicit FakeProducer(const std::string& path) : listen_(listen_unix(path, 0600, std::nullopt)) {
    const std::size_t size = kMetaOffset + kSlots * kMetaBytes;
    control_fd_ = make_memfd("fake-control", size);
    control_ = Mapping(control_fd_.get(), size, true);
    seal_memfd(control_fd_.get(), false);
    cb_ = new (control_.data()) ControlBlock{};
    cb_->magic = kControlMagic;
    cb_->version = kLayoutVersion;
    cb_->block_size = sizeof(ControlBlock);
    cb_->slot_count = kSlots;
    cb_->max_consumers = 4;
    cb_->memory_kind = static_cast<std::uint32_t>(MemoryKind::host);
    cb_->meta_size = kMetaBytes;
    cb_->meta_offset = kMetaOffset;
    cb_->meta_stride = kMetaBytes;
    cb_->role = static_cast<std::uint32_t>(ChannelRole::frames);
    page_fd_ = make_memfd("fake-page", 4096);
    page_ = Mapping(page_fd_.get(), 4096, true);
    seal_memfd(page_fd_.get(), false);
    auto* pg = new (page_.data()) ConnPage{};
    pg->magic = kPageMagic;
    pg->version = kLayoutVersion;
    pg->page_size = 4096;
    memory_ = make_host_producer_memory();
    slots_ = memory_->allocate(kSlots, kSlotBytes);
  }
  ~FakeProducer() {
    if (thread_.joinable()) thread_.join();
  }

  ControlBlock& cb() { return *cb_; }
  ConnPage& page() { return *static_cast<ConnPage*>(page_.data()); }
  ProducerSlots& slots() { return *slots_; }

  // Runs `script` on the first connection, on a thread; every wait in it is bounded.
  void run(std::function<void(int fd)> script) {
    thread_ = std::thread([this, script] {
      pollfd p{listen_.get(), POLLIN, 0};
      if (::poll(&p, 1, 10000) != 1) return;
      conn_ = accept_unix(listen_.get());
      if (conn_) script(conn_.get());
    });
  }

  // Reads the consumer's next message (hello, ready) and ignores it.
  static void expect_message(int fd) {
    RawMessage raw;
    recv_raw(fd, raw, std::chrono::milliseconds(5000));
  }

  WelcomeMsg welcome() const {
    WelcomeMsg w;
    w.consumer_id = 0;
    w.slot_count = kSlots;
    w.memory = MemoryKind::host;
    w.control_size = static_cast<std::uint32_t>(control_.size());
    w.page_size = 4096;
    w.max_leases = kSlots - 1;
    w.control_fd = dup_fd(control_fd_.get());
    w.page_fd = dup_fd(page_fd_.get());
    return w;
  }

  FormatMsg format(std::uint64_t generation = 1) const {
    FormatMsg m;
    m.generation = generation;
    m.set_id = 1;
    m.slot_size = kSlotBytes;
    m.format.caps = "test/fake";
    m.format.tensor = make_tensor(DType::uint8, {1024});
    m.format.max_frame_size = 1024;
    m.slots = slots_->export_slots();
    return m;
  }

  // The whole handshake done right: the consumer's constructor returns, and the test then lies
  // through the control block.
  void run_honest_handshake() {
    run([this](int fd) {
      expect_message(fd);
      send_welcome(fd, welcome());
      send_format(fd, format());
      expect_message(fd);
      send_start(fd, StartMsg{0});
      cb_->generation.store(1);
    });
  }

  // Publishes frame `seq` in `slot` with descriptor `d` (whatever lies it holds) and wakes.
  void publish_raw(std::uint64_t seq, std::uint32_t ring_slot, std::uint32_t desc_slot,
                   const FrameDesc& d) {
    cb_->slots[desc_slot].desc = d;
    cb_->slots[desc_slot].seq.store(seq);
    cb_->ring[seq % kRing].store(ring_entry(seq, ring_slot));
    cb_->published.store(seq);
    cb_->frame_futex.fetch_add(1);
    // The consumer sleeps on its page's word (conn_page.hpp): woken there, as a producer does.
    wake_page(page());
  }

  FrameDesc good_desc(std::uint64_t seq) const {
    FrameDesc d{};
    d.seq = seq;
    d.generation = 1;
    d.pts = d.dts = d.duration = kNoTime;
    d.tensor = make_tensor(DType::uint8, {1024});
    return d;
  }

 private:
  UniqueFd listen_;
  UniqueFd control_fd_;
  Mapping control_;
  UniqueFd page_fd_;
  Mapping page_;
  ControlBlock* cb_ = nullptr;
  std::unique_ptr<ProducerMemory> memory_;
  std::unique_ptr<ProducerSlots> slots_;
  UniqueFd conn_;
  std::thread thread_;
};

}  // namespace cudaipc::testing
