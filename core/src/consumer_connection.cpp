#include "consumer_connection.hpp"
#include "hot_path.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "channel_role.hpp"
#include "clock.hpp"
#include "cudaipc/log.hpp"
#include "futex.hpp"
#include "keep_until_exit.hpp"
#include "process_watch.hpp"
#include "retire.hpp"

namespace cudaipc {
namespace {

constexpr std::chrono::milliseconds kHandshakeTimeout{3000};

}  // namespace

ConsumerConnection::ConsumerConnection(const ConsumerOptions& opts, int wake_fd)
    : wake_fd_(wake_fd) {
  const std::string path = opts.path.empty() ? default_channel_path("cudaipc") : opts.path;
  sock_ = connect_unix(path);
  try {
    // Proof of the producer's death, for releasing GPU work that waits on it (cuda backend), in
    // whatever PID namespace it runs.
    producer_pid_ = peer_credentials(sock_.get()).pid;
    producer_pidfd_ = peer_pidfd(sock_.get(), producer_pid_);
  } catch (const Error& e) {
    // Already gone: the handshake below fails with the reason.
    if (e.code() != Errc::disconnected) throw;
  }
  if (!producer_pidfd_ && producer_pid_ == 0)
    log(LogLevel::warning,
        ("the producer on " + path +
         " runs in a PID namespace this process cannot see and the kernel gives no pidfd for it "
         "(SO_PEERPIDFD, Linux 6.5+): its death is noticed when its socket closes, and GPU work "
         "waiting on it is released at the next call rather than at once")
            .c_str());
  try {
    send_hello(sock_.get(), HelloMsg{opts.mode});
  } catch (const Error& e) {
    // A producer refusing our credentials answers at accept and hangs up, often before our hello
    // goes out: the refusal then waits on our socket, and it, not the hang-up, is the cause.
    if (e.code() != Errc::disconnected) throw;
    throw_parting_refusal();
    throw;
  }

  Received r = receive_welcome(path);
  if (r.type != MsgType::welcome)
    throw Error(Errc::protocol, "producer sent message type " +
                                    std::to_string(static_cast<std::uint32_t>(r.type)) +
                                    " instead of a welcome");
  WelcomeMsg w = decode_welcome(r);
  if (w.slot_count < 1 || w.slot_count > kMaxSlots)
    throw Error(Errc::protocol, "producer announced " + std::to_string(w.slot_count) + " slots");
  if (w.max_leases < 1 || w.max_leases > w.slot_count)
    throw Error(Errc::protocol, "producer allows " + std::to_string(w.max_leases) + " leases of " +
                                    std::to_string(w.slot_count) + " slots");
  if (w.control_size < sizeof(ControlBlock))
    throw Error(Errc::protocol, "control block of " + std::to_string(w.control_size) +
                                    " bytes is smaller than this build's layout");
  if (w.page_size < sizeof(ConnPage))
    throw Error(Errc::protocol, "connection page of " + std::to_string(w.page_size) +
                                    " bytes is smaller than this build's layout");
  checked_memfd_size(w.control_fd.get(), w.control_size, "control block");
  checked_memfd_size(w.page_fd.get(), w.page_size, "connection page");
  // Read-only: the producer sealed it against writable mappings anyway.
  control_ = Mapping(w.control_fd.get(), w.control_size, false);
  cb_ = static_cast<ControlBlock*>(control_.data());
  if (cb_->magic != kControlMagic)
    throw Error(Errc::protocol, "control block has a bad magic number: not a cudaipc channel");
  if (cb_->version != kLayoutVersion)
    throw Error(Errc::version_mismatch, "control block layout version " +
                                            std::to_string(cb_->version) + ", this build reads " +
                                            std::to_string(kLayoutVersion));
  if (cb_->block_size != sizeof(ControlBlock) || cb_->slot_count != w.slot_count ||
      cb_->memory_kind != static_cast<std::uint32_t>(w.memory))
    throw Error(Errc::protocol, "control block header disagrees with the welcome message");
  // Before Ready: a channel of another role is left without taking a place there.
  check_channel_role(cb_->role, opts.role, path);
  // Read once: the bounds checked are the bounds used.
  const std::uint64_t meta_size = cb_->meta_size, meta_offset = cb_->meta_offset,
                      meta_stride = cb_->meta_stride;
  if (meta_size > kMaxMetaSize || meta_stride < meta_size || meta_offset < sizeof(ControlBlock) ||
      meta_offset > w.control_size ||
      (meta_stride != 0 && (w.control_size - meta_offset) / meta_stride < w.slot_count))
    throw Error(Errc::protocol, "control block places the meta areas (" +
                                    std::to_string(meta_size) + " bytes each, every " +
                                    std::to_string(meta_stride) + " from " +
                                    std::to_string(meta_offset) + ") outside its " +
                                    std::to_string(w.control_size) + " bytes");
  meta_base_ = static_cast<const std::uint8_t*>(control_.data()) + meta_offset;
  meta_stride_ = meta_stride;
  meta_size_ = static_cast<std::uint32_t>(meta_size);
  page_map_ = Mapping(w.page_fd.get(), w.page_size, true);
  page_ = static_cast<ConnPage*>(page_map_.data());
  if (page_->magic != kPageMagic || page_->version != kLayoutVersion ||
      page_->page_size != w.page_size)
    throw Error(Errc::protocol, "connection page header is not this build's layout");
  slot_count_ = w.slot_count;
  max_leases_ = w.max_leases;

  memory_ = w.memory == MemoryKind::cuda ? make_cuda_consumer_memory(opts.cuda, slot_count_)
                                         : make_host_consumer_memory();
  memory_->import_sync(w.sync);
  // Host memory has no GPU work to release: the socket alone tells of the producer's death, so
  // the pidfd would be a descriptor per stream for nothing.
  if (w.memory != MemoryKind::cuda) producer_pidfd_.reset();
  memory_->attach_page(page_, w.page_size, producer_pidfd_ ? producer_pidfd_.get() : -1);
  if (producer_pidfd_) {
    ConsumerMemory* memory = memory_.get();
    watch_ =
        std::make_unique<DeathWatch>(producer_pidfd_.get(), [memory] { memory->producer_gone(); });
  }
  try {
    send_ready(sock_.get(), memory_->export_sync());
  } catch (const Error& e) {
    // Short of descriptors for our slots, the producer refuses after its welcome.
    if (e.code() != Errc::disconnected) throw;
    throw_parting_refusal();
    throw;
  }

  for (;;) {
    Received m = receive(kHandshakeTimeout, "start");
    if (m.type == MsgType::format) {
      apply_format(decode_format(m));
    } else if (m.type == MsgType::start) {
      start_cursor_ = decode_start(m).cursor;
      return;
    } else {
      throw Error(Errc::protocol, "unexpected message type " +
                                      std::to_string(static_cast<std::uint32_t>(m.type)) +
                                      " during the handshake");
    }
  }
}

void ConsumerConnection::hang_up() noexcept {
  if (sock_ && ::shutdown(sock_.get(), SHUT_RDWR) != 0 && errno != ENOTCONN)
    log(LogLevel::debug,
        (std::string("shutdown of a consumer's socket: ") + std::strerror(errno)).c_str());
}

ConsumerConnection::~ConsumerConnection() {
  watch_.reset();  // before the memory it would release
  const bool retirable = memory_ && memory_->retirable();
  // In order: the stream drained (queued GPU reads finish before the memory they read is
  // unmapped), the slot imports this connection alone holds torn down before the backend that
  // made them, the socket closed last (a producer serves a consumer whose stream still waits on its
  // words until it hangs up). Where the stream did not drain, the page it writes and the
  // registration of it stay until exit: freeing them under a stream that may still run would turn a
  // stall into a GPU fault.
  auto teardown = [memory = std::move(memory_), page = std::move(page_map_),
                   gens = std::move(gens_), pidfd = std::move(producer_pidfd_),
                   sock = std::move(sock_)]() mutable noexcept {
    const bool drained = !memory || memory->close();
    gens.clear();
    if (!drained)
      keep_until_exit(std::make_pair(std::move(memory), std::move(page)),
                      "a consumer's CUDA stream did not drain: its connection page is kept");
    memory.reset();  // before the page its words may be registered in
    page = Mapping();
    pidfd.reset();
    sock.reset();
  };
  // The drain and the frees may wait on the driver's device-wide lock: on the retiring thread
  // (retire.hpp), not the one that let go of the connection last, where the memory allows.
  if (retirable)
    detail::retire(std::move(teardown));
  else
    teardown();
}

Received ConsumerConnection::receive(std::chrono::milliseconds timeout, const char* waiting_for) {
  RawMessage raw;
  switch (recv_raw(sock_.get(), raw, timeout, wake_fd_)) {
    case RecvStatus::interrupted:
      throw Error(Errc::interrupted,
                  std::string("interrupted while waiting for the producer's ") + waiting_for);
    case RecvStatus::closed:
      throw Error(Errc::disconnected,
                  std::string("producer closed the connection while we waited for ") + waiting_for);
    case RecvStatus::timeout:
      throw Error(Errc::timeout, std::string("producer sent no ") + waiting_for + " within " +
                                     std::to_string(timeout.count()) + " ms");
    case RecvStatus::ok:
      break;
  }
  Received r = parse_header(std::move(raw));
  if (r.type == MsgType::refused) throw_refused(r);
  return r;
}

Received ConsumerConnection::receive_welcome(const std::string& path) {
  try {
    return receive(kHandshakeTimeout, "welcome");
  } catch (const Error& e) {
    // A cudaipc producer answers a hello at once, or refuses saying why: silence is a listener
    // that does not speak cudaipc, which retrying would wait on for ever.
    if (e.code() != Errc::timeout) throw;
    throw Unanswered(Errc::protocol,
                     "nothing on '" + path + "' answered the cudaipc handshake within " +
                         std::to_string(kHandshakeTimeout.count()) +
                         " ms: what listens there is not a cudaipc producer (or the "
                         "producer's process is stopped)");
  }
}

void ConsumerConnection::apply_format(FormatMsg&& m) {
  if (!gens_.empty() && m.generation <= gens_.back().generation)
    throw Error(Errc::protocol, "producer sent format generation " + std::to_string(m.generation) +
                                    " after " + std::to_string(gens_.back().generation));
  std::shared_ptr<ConsumerSlots> slots;
  for (const auto& g : gens_)
    if (g.set_id == m.set_id && g.slots->slot_size() == m.slot_size) slots = g.slots;
  if (!slots && !m.has_slots)
    throw Error(Errc::protocol, "producer's format names slot set " + std::to_string(m.set_id) +
                                    " that it never sent");
  if (!slots) {
    try {
      slots = memory_->import_slots(slot_count_, m.slot_size, m.slots);
    } catch (const Error& e) {
      // Legacy IPC handles fail between PID namespaces (docs/deployment.md): say so where we can
      // tell that the producer runs in another one.
      if (e.code() != Errc::cuda || producer_pid_ != 0 ||
          std::string(e.what()).find("cuIpcOpenMemHandle failed") == std::string::npos)
        throw;
      throw Error(e.code(), std::string(e.what()) +
                                "; the producer runs in another PID namespace, and CUDA's legacy "
                                "IPC handles need one shared PID namespace (docker run "
                                "--pid=container:<producer>); VMM handles (ipc-mode=vmm) do not");
    }
  }
  gens_.push_back(Generation{m.generation, m.set_id, std::move(m.format), std::move(slots)});
}

bool ConsumerConnection::sync_formats(std::uint64_t g, std::uint64_t deadline_ns) {
  const std::uint64_t start = monotonic_ns();
  if (format_owed_since_ == 0) format_owed_since_ = start;
  const std::uint64_t owed_until =
      format_owed_since_ +
      static_cast<std::uint64_t>(std::chrono::nanoseconds(kHandshakeTimeout).count());
  while (newest_generation() < g) {
    const std::uint64_t now = monotonic_ns();
    if (now >= owed_until)
      throw Error(Errc::protocol, "producer announced format generation " + std::to_string(g) +
                                      " but sent no format for it within " +
                                      std::to_string(kHandshakeTimeout.count()) + " ms");
    // Past the deadline, what already waits on the socket is still read; nothing more.
    const auto wait =
        now >= deadline_ns
            ? std::chrono::milliseconds(0)
            : std::max(std::chrono::milliseconds(1),
                       std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::nanoseconds(std::min(deadline_ns, owed_until) - now)));
    RawMessage raw;
    switch (recv_raw(sock_.get(), raw, wait, wake_fd_)) {
      case RecvStatus::interrupted:
        return false;
      case RecvStatus::timeout:
        if (now >= deadline_ns) return false;
        continue;
      case RecvStatus::closed:
        throw Error(Errc::disconnected,
                    "producer closed the connection while we waited for a format");
      case RecvStatus::ok:
        break;
    }
    Received r = parse_header(std::move(raw));
    if (r.type == MsgType::refused) throw_refused(r);
    if (r.type != MsgType::format)
      throw Error(Errc::protocol, "unexpected message type " +
                                      std::to_string(static_cast<std::uint32_t>(r.type)) +
                                      " instead of a format");
    apply_format(decode_format(r));
  }
  format_owed_since_ = 0;
  return true;
}

CUDAIPC_HOT const ConsumerConnection::Generation* ConsumerConnection::find_generation(
    std::uint64_t g) const {
  for (const auto& e : gens_)
    if (e.generation == g) return &e;
  return nullptr;
}

CUDAIPC_HOT void ConsumerConnection::prune_before(std::uint64_t g) {
  gens_.erase(std::remove_if(gens_.begin(), gens_.end(),
                             [g](const Generation& e) { return e.generation < g; }),
              gens_.end());
}

CUDAIPC_HOT void ConsumerConnection::release(std::uint32_t slot, std::uint64_t seq) noexcept {
  try {
    memory_->on_release(slot, seq);
  } catch (const Error& e) {
    // The lease must end regardless, or the producer would wait on this slot forever.
    log(LogLevel::error, (std::string("releasing a frame: ") + e.what()).c_str());
  }
  unlease(1ull << slot);
}

CUDAIPC_HOT void ConsumerConnection::unlease(std::uint64_t bit) noexcept {
  page_->leases.fetch_and(~bit, std::memory_order_seq_cst);
  page_->release_futex.fetch_add(1, std::memory_order_seq_cst);
  // The producer waiting for space, or our own next() waiting at its lease limit (one waiting for
  // a frame does not wait on release_futex: no syscall for it).
  if (cb_->producer_waiting.load(std::memory_order_seq_cst) != 0 ||
      page_->sleeping.load(std::memory_order_seq_cst) == kSleepingAtLimit)
    futex_wake_all_noexcept(page_->release_futex);
}

void ConsumerConnection::throw_parting_refusal() {
  RawMessage raw;
  while (recv_raw(sock_.get(), raw, std::chrono::milliseconds(0)) == RecvStatus::ok) {
    Received r = parse_header(std::move(raw));
    if (r.type == MsgType::refused) throw_refused(r);
  }
}

std::string ConsumerConnection::parting_words() noexcept {
  try {
    throw_parting_refusal();
  } catch (const Refused& r) {
    constexpr std::string_view kEvicted = "evicted: ";
    if (r.reason().compare(0, kEvicted.size(), kEvicted) == 0)
      return "the producer evicted this consumer: " + r.reason().substr(kEvicted.size());
    return r.what();
  } catch (const Error& e) {
    return e.what();
  }
  if (cb_ && cb_->closed.load(std::memory_order_acquire))
    return "the producer closed the channel: its pipeline stopped";
  if (producer_exited()) return "the producer's process ended without closing the channel";
  return {};
}

// A hang-up comes as the dying process's descriptors close, a moment before the kernel says it
// exited: its pidfd is given a short while to say so.
bool ConsumerConnection::producer_exited() const noexcept {
  if (producer_pidfd_) {
    pollfd p{producer_pidfd_.get(), POLLIN, 0};
    int rc;
    do {
      rc = ::poll(&p, 1, 200);
    } while (rc < 0 && errno == EINTR);
    return rc > 0;
  }
  return producer_pid_ > 0 && ::kill(producer_pid_, 0) != 0 && errno == ESRCH;
}

}  // namespace cudaipc
