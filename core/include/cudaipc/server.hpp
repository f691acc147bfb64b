// The model side of cudaipcfilter (docs/elements.md): a process that takes the frames a pipeline
// sends on a request channel and answers each with results (a meta area, docs/metas.md) on the
// reply channel it creates beside it (cudaipc/reply.hpp). The requests are read zero-copy, like any
// consumer's frames; a reply is one small host frame. Across a pipeline restart, or this process's
// own, nothing needs reconfiguring: the request side reconnects, the filter reconnects to the
// reply side.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cudaipc/consumer.hpp"
#include "cudaipc/producer.hpp"
#include "cudaipc/reply.hpp"

namespace cudaipc {

struct ServerOptions {
  std::string path;  // the filter's socket-path; replies go to reply_path(path)
  CudaOptions cuda;  // how requests are read (a consumer's options)
  std::uint32_t reply_slots = 8;
  // The most bytes of results per reply (the reply channel's meta area).
  std::uint32_t reply_meta_size = kDefaultMetaSize;
  std::uint32_t socket_mode = 0600;  // of the reply channel, as ProducerOptions
  std::optional<gid_t> allowed_gid;
};

enum class ServerEventType {
  request,       // `request` holds a frame to answer
  format,        // the requests' format changed (`format`)
  eos,           // the pipeline sent EOS; more requests may follow a restart
  timeout,       // nothing within the timeout
  interrupted,   // interrupt() was called
  disconnected,  // the pipeline went away (`message` says how); the server waits for the next
};

struct ServerEvent {
  ServerEventType type = ServerEventType::timeout;
  Frame request;  // the frame, leased until reply() or destruction
  Format format;
  std::string message;
};

class Server {
 public:
  // Creates the reply channel (Errc::busy when another live process serves the path) and connects
  // to the request channel, now or whenever a pipeline creates it.
  explicit Server(const ServerOptions& options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  ServerEvent next(std::chrono::nanoseconds timeout);
  // Answers `request` with `metas_size` bytes of results (a meta area, or nothing) and releases
  // it, after the work queued on `stream` so far when one is given (CUDA requests: the model's
  // reads finish on the GPU before the slot is reused, with no CPU wait). Returns false when the
  // reply could not be published (the filter holds every reply slot: it is gone or stuck).
  bool reply(Frame& request, const void* metas = nullptr, std::uint32_t metas_size = 0,
             void* stream = nullptr);
  void interrupt() noexcept;

  Consumer& requests() noexcept { return consumer_; }
  Producer& replies() noexcept { return producer_; }

 private:
  Producer producer_;
  Consumer consumer_;
};

// Publishes the reply to `request` on `replies` (Server::reply without the release): for servers
// built from a Consumer and a Producer of their own (the C API, Python).
PublishStatus publish_reply(Producer& replies, const FrameDesc& request, const void* metas,
                            std::uint32_t metas_size);
// The reply channel's format: one byte per reply frame; the results are its metas.
Format reply_format();
ProducerOptions reply_channel_options(const std::string& request_path, std::uint32_t slots,
                                      std::uint32_t meta_size);

}  // namespace cudaipc
