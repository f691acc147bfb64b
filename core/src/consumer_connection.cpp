#include "consumer_connection.hpp"

#include <algorithm>

#include "cudaipc/log.hpp"
#include "futex.hpp"

namespace cudaipc {
namespace {

constexpr std::chrono::milliseconds kHandshakeTimeout{3000};

}  // namespace

ConsumerConnection::ConsumerConnection(const ConsumerOptions& opts) {
  const std::string path = opts.path.empty() ? default_channel_path("cudaipc") : opts.path;
  sock_ = connect_unix(path);
  try {
    send_hello(sock_.get(), HelloMsg{opts.mode});
  } catch (const Error& e) {
    // A producer refusing our credentials answers at accept and hangs up, often before our hello
    // goes out: the refusal then waits on our socket, and it, not the hang-up, is the cause.
    if (e.code() != Errc::disconnected) throw;
    RawMessage raw;
    if (recv_raw(sock_.get(), raw, std::chrono::milliseconds(0)) == RecvStatus::ok) {
      Received r = parse_header(std::move(raw));
      if (r.type == MsgType::refused) throw_refused(r);
    }
    throw;
  }

  Received r = receive(kHandshakeTimeout, "welcome");
  if (r.type != MsgType::welcome)
    throw Error(Errc::protocol, "producer sent message type " +
                                    std::to_string(static_cast<std::uint32_t>(r.type)) +
                                    " instead of a welcome");
  WelcomeMsg w = decode_welcome(r);
  if (w.slot_count < 1 || w.slot_count > kMaxSlots)
    throw Error(Errc::protocol, "producer announced " + std::to_string(w.slot_count) + " slots");
  if (w.consumer_id >= kMaxConsumers)
    throw Error(Errc::protocol, "producer assigned consumer entry " + std::to_string(w.consumer_id));
  if (w.control_size < sizeof(ControlBlock))
    throw Error(Errc::protocol, "control block of " + std::to_string(w.control_size) +
                                    " bytes is smaller than this build's layout");
  checked_memfd_size(w.control_fd.get(), w.control_size, "control block");
  control_ = Mapping(w.control_fd.get(), w.control_size, true);
  cb_ = static_cast<ControlBlock*>(control_.data());
  if (cb_->magic != kControlMagic)
    throw Error(Errc::protocol, "control block has a bad magic number: not a cudaipc channel");
  if (cb_->version != kLayoutVersion)
    throw Error(Errc::version_mismatch, "control block layout version " +
                                            std::to_string(cb_->version) + ", this build reads " +
                                            std::to_string(kLayoutVersion));
  if (cb_->block_size != sizeof(ControlBlock) || cb_->slot_count != w.slot_count ||
      cb_->memory_kind != static_cast<std::uint32_t>(w.memory) ||
      w.consumer_id >= cb_->max_consumers)
    throw Error(Errc::protocol, "control block header disagrees with the welcome message");
  id_ = w.consumer_id;
  slot_count_ = w.slot_count;

  memory_ = w.memory == MemoryKind::cuda ? make_cuda_consumer_memory(opts.cuda, slot_count_)
                                         : make_host_consumer_memory();
  memory_->import_sync(w.sync);
  send_ready(sock_.get(), memory_->export_sync());

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

ConsumerConnection::~ConsumerConnection() {
  // Slot imports go before the backend that made them (CUDA contexts, streams).
  gens_.clear();
}

Received ConsumerConnection::receive(std::chrono::milliseconds timeout, const char* waiting_for) {
  RawMessage raw;
  switch (recv_raw(sock_.get(), raw, timeout)) {
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

void ConsumerConnection::apply_format(FormatMsg&& m) {
  if (!gens_.empty() && m.generation <= gens_.back().generation)
    throw Error(Errc::protocol, "producer sent format generation " + std::to_string(m.generation) +
                                    " after " + std::to_string(gens_.back().generation));
  std::shared_ptr<ConsumerSlots> slots;
  for (const auto& g : gens_)
    if (g.set_id == m.set_id && g.slots->slot_size() == m.slot_size) slots = g.slots;
  if (!slots) slots = memory_->import_slots(slot_count_, m.slot_size, m.slots);
  gens_.push_back(Generation{m.generation, m.set_id, std::move(m.format), std::move(slots)});
}

void ConsumerConnection::sync_formats(std::uint64_t g) {
  while (newest_generation() < g) {
    Received r = receive(kHandshakeTimeout, "format");
    if (r.type != MsgType::format)
      throw Error(Errc::protocol, "unexpected message type " +
                                      std::to_string(static_cast<std::uint32_t>(r.type)) +
                                      " instead of a format");
    apply_format(decode_format(r));
  }
}

const ConsumerConnection::Generation* ConsumerConnection::find_generation(std::uint64_t g) const {
  for (const auto& e : gens_)
    if (e.generation == g) return &e;
  return nullptr;
}

void ConsumerConnection::prune_before(std::uint64_t g) {
  gens_.erase(std::remove_if(gens_.begin(), gens_.end(),
                             [g](const Generation& e) { return e.generation < g; }),
              gens_.end());
}

void ConsumerConnection::release(std::uint32_t slot) noexcept {
  try {
    memory_->on_release(slot);
  } catch (const Error& e) {
    // The lease must end regardless, or the producer would wait on this slot forever.
    log(LogLevel::error, (std::string("releasing a frame: ") + e.what()).c_str());
  }
  entry().leases.fetch_and(~(1ull << slot), std::memory_order_seq_cst);
  cb_->space_futex.fetch_add(1, std::memory_order_seq_cst);
  if (cb_->space_waiters.load(std::memory_order_seq_cst) != 0) {
    try {
      futex_wake_all(cb_->space_futex);
    } catch (const Error& e) {
      log(LogLevel::error, e.what());
    }
  }
}

}  // namespace cudaipc
