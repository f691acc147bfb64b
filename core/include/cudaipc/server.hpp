// The model side of cudaipcfilter (docs/elements.md): a process that takes the frames pipelines
// send on request channels and answers each with results (a meta area, docs/metas.md) on the reply
// channel it creates beside each (cudaipc/reply.hpp). One server serves any number of pipelines:
// the paths given, and every channel that appears in a directory, picked up live as pipelines
// start and stop. Requests are read zero-copy, like any consumer's frames, on a thread per
// pipeline, so they are taken ahead while the model runs; batch() hands out requests of every
// pipeline fairly (one busy pipeline cannot starve another), each pipeline's in its own order.
// Across a pipeline restart, or this process's own, nothing needs reconfiguring: the request side
// reconnects, the filter reconnects to the reply side.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cudaipc/consumer.hpp"
#include "cudaipc/producer.hpp"
#include "cudaipc/reply.hpp"

namespace cudaipc {

struct ServerOptions {
  // The filters' socket-paths; replies go to reply_path(path) of each. `path` is one more.
  std::string path;
  std::vector<std::string> paths;
  // Every filter channel that appears in this directory (not the replies, "*.reply", nor other
  // producers' channels), picked up as it appears (inotify); a pipeline whose channel is removed
  // leaves, closing its reply channel at once. It must exist (the default channel directory is
  // made, as pipelines make it). The server says it watches the directory (kServerMarkName,
  // cudaipc/reply.hpp), so a filter that starts there waits for it. Empty: none.
  std::string directory;
  // How often the directory is listed while it cannot be watched (it does not exist yet, no
  // inotify watch is left); a watched one is listed every 10 × this, for events missed.
  std::chrono::milliseconds scan_interval{100};
  CudaOptions cuda;  // how requests are read (a consumer's options; the model's device)
  std::uint32_t reply_slots = 8;
  // The most bytes of results per reply (the reply channel's meta area).
  std::uint32_t reply_meta_size = kDefaultMetaSize;
  // Requests (and stream events) read ahead per pipeline, 1..kMaxInflight. A pipeline's requests
  // past it wait in its channel, where its filter's max-inflight bounds them anyway.
  std::uint32_t queue_depth = 16;
  std::uint32_t socket_mode = 0600;  // of the reply channels, as ProducerOptions
  std::optional<gid_t> allowed_gid;
};

namespace detail {
class Pipeline;
struct StreamFormat;
}  // namespace detail
class ServerImpl;

// One frame to answer, and the pipeline it came from.
class Request {
 public:
  Request() = default;
  Request(Request&&) noexcept = default;
  Request& operator=(Request&&) noexcept = default;
  ~Request();
  // As a default-constructed one: the frame released, the pipeline and format let go. Cheaper
  // than assigning Request{}, which builds a whole Frame to move in.
  void reset() noexcept;

  explicit operator bool() const noexcept { return static_cast<bool>(frame); }
  // The pipeline's number in this server (from 1, never reused) and its request channel.
  std::uint32_t pipeline() const noexcept { return pipeline_id_; }
  const std::string& path() const noexcept;
  // The pipeline's stream format this request belongs to.
  const Format& format() const noexcept;
  // Where the frame lives in this process: the CUDA device ordinal (-1: host memory) and the
  // CUstream the server's reads of this pipeline are ordered on while the request is held (see
  // Consumer::cuda_stream(): asking for it makes that pipeline's releases query the stream).
  int cuda_device() const noexcept;
  void* cuda_stream() const noexcept;
  // The format's generation (as consumers see it), and a handle that stays the same object for
  // every request of one format of one pipeline connection (and keeps it alive while held).
  std::uint64_t format_generation() const noexcept;
  std::shared_ptr<const void> format_handle() const noexcept { return format_; }
  // When the server read it (CLOCK_MONOTONIC ns): what batch()'s max_delay counts from.
  std::uint64_t taken_ns() const noexcept { return taken_ns_; }

  Frame frame;  // leased until reply() or destruction

 private:
  friend class ServerImpl;
  friend class detail::Pipeline;
  std::shared_ptr<detail::Pipeline> pipeline_;
  std::shared_ptr<const detail::StreamFormat> format_;
  std::uint32_t pipeline_id_ = 0;
  std::uint64_t taken_ns_ = 0;
};

enum class ServerEventType {
  request,       // `request` holds a frame to answer
  format,        // a pipeline's format changed (`format`)
  eos,           // a pipeline sent EOS; more requests may follow a restart
  timeout,       // nothing within the timeout
  interrupted,   // interrupt() was called
  disconnected,  // a pipeline went away (`message` says how); the server waits for the next
  joined,        // a pipeline's channel appeared in the directory and is served from now on
  left,          // a pipeline's channel was removed from the directory: no longer served
};

struct ServerEvent {
  ServerEventType type = ServerEventType::timeout;
  Request request;
  Format format;
  std::string message;
  std::uint32_t pipeline = 0;  // 0 for timeout and interrupted
  std::string path;
};

struct ServerPipelineInfo {
  std::uint32_t id = 0;
  std::string path;
  bool connected = false;          // a pipeline is publishing on the channel now
  std::uint32_t queued = 0;        // requests read and not yet handed out
  std::uint64_t requests = 0;      // read so far
  std::uint64_t replies = 0;       // published so far
  std::uint64_t replies_lost = 0;  // not taken by the filter in time (gone or stuck)
};

// One array of a detector's results where the model left it: its first element, dtype, and the
// elements from one detection to the next (`stride`) and, for boxes, from one coordinate of a box
// to the next (`inner`). No data: absent.
struct ResultArray {
  const void* data = nullptr;
  DType dtype = DType::invalid;
  std::int64_t stride = 1;
  std::int64_t inner = 1;
};

// A detector's results for Server::send_reply_results: `n` boxes (x1 y1 x2 y2; float32, float16,
// bfloat16 or float64), scores and rotation (the same dtypes), labels (int64 or int32 indexes
// into the names table: UTF-8 back to back, name i at [name_offsets[i], name_offsets[i + 1])).
// `on_device`: the arrays are GPU memory (the server copies them); else host memory the work on
// the reply's stream fills, read once it has run.
struct ResultDetections {
  std::uint32_t n = 0;
  ResultArray boxes, scores, labels, rotation;
  const std::uint8_t* names = nullptr;
  const std::uint32_t* name_offsets = nullptr;
  std::uint32_t name_count = 0;
  bool on_device = true;
};

// The results of a reply as its encoder gets them, on the host: boxes n x 4 float32, scores and
// rotation float32, labels int64 (nullptr: absent), the names table, and the records that were
// ready on the host. `detections`: the reply has detections (maybe none).
struct ReadyResults {
  bool detections = false;
  std::uint32_t n = 0;
  const float* boxes = nullptr;
  const float* scores = nullptr;
  const float* rotation = nullptr;
  const std::int64_t* labels = nullptr;
  const std::uint8_t* names = nullptr;
  const std::uint32_t* name_offsets = nullptr;
  std::uint32_t name_count = 0;
  const std::uint8_t* metas = nullptr;
  std::uint32_t metas_size = 0;
};
// Writes a reply's meta area from its results; its size (throws: sent without results).
using ResultEncoder = std::uint32_t (*)(const ReadyResults& results, std::uint8_t* area,
                                        std::uint32_t capacity);

class Server {
 public:
  // Creates the reply channel of every path given (Errc::busy when another live process serves
  // one) and connects to their request channels, now or whenever a pipeline creates them. A
  // directory's channels another server serves are left to it (and tried again later).
  // Errc::invalid_argument naming the path and the cause for what can never be a filter's
  // channel: a file there that is not a socket, a missing directory, a channel of another role
  // (a cudaipcsink's). One that takes a path later is said once (a warning, and a disconnected
  // event) and not served; in a directory, other roles' channels are skipped.
  explicit Server(const ServerOptions& options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The next event of any pipeline, in each pipeline's order.
  ServerEvent next(std::chrono::nanoseconds timeout);
  // Up to `max_batch` requests into `out` (cleared first; no allocation once it has the
  // capacity): waits up to `timeout` for the first, then until `max_batch` are waiting or the
  // oldest has waited `max_delay`. Fair: pipelines take turns, one request each per turn, the
  // first turn going round the pipelines from batch to batch; each pipeline's requests come in
  // its order. The stream events met on the way (EOS, a pipeline going away, joining, leaving;
  // not format changes, which requests carry) are kept, the latest 256, for event() and next().
  // Returns false when interrupted.
  bool batch(std::vector<Request>& out, std::uint32_t max_batch, std::chrono::nanoseconds max_delay,
             std::chrono::nanoseconds timeout);
  // How many stream events are kept, and the oldest of them (false when none): what a caller
  // that batches reads between batches to say what happened to its pipelines.
  std::size_t events() const;
  bool event(ServerEvent& out);
  // Answers `request` with `metas_size` bytes of results (a meta area, or nothing) and releases
  // it, after the work queued on `stream` so far when one is given (CUDA requests: the model's
  // reads finish on the GPU before the slot is reused, with no CPU wait). Never waits for the
  // filter: a reply its filter has no room for yet is published by the pipeline's own thread,
  // in order, or given up after 1 s (the filter is gone or stuck). Returns false when given
  // up now, as every answer to a pipeline that has left is (replies_lost counts every one).
  bool reply(Request& request, const void* metas = nullptr, std::uint32_t metas_size = 0,
             void* stream = nullptr);
  // Runs `publish` with the reply channel of `request`'s pipeline, for tools that publish on it
  // themselves (tests forging replies), in order with reply()'s; Errc::disconnected once the
  // pipeline has left.
  void with_reply_channel(const Request& request, const std::function<void(Producer&)>& publish);
  // Answers `request` with results the GPU is still computing, without waiting for them: returns
  // at once, and once the work queued on `stream` so far has run (the model's kernels and its
  // copies of the results into host memory), `encode` writes the reply's meta area on a thread
  // of the server's own and returns its size (0: none; a throw: the reply goes without results,
  // said once per cause). The request is released after `stream`, as reply() does. A null
  // `stream` waits for nothing (the encoder runs on the server's thread at once). Returns the
  // reply's ticket: once replies_done() reaches it, the host memory `encode` read may be reused.
  // Waits only when 256 such replies are queued.
  using Encoder = std::function<std::uint32_t(std::uint8_t* area, std::uint32_t capacity)>;
  std::uint64_t reply_after(Request& request, void* stream, Encoder encode);
  // reply_after() without the release (the C API's frames end their leases themselves).
  std::uint64_t send_reply_after(const Request& route, const FrameDesc& request, void* stream,
                                 Encoder encode);
  // reply_after() for a detector's results as the model left them (`results`: null for none),
  // with `metas_size` bytes of records ready on the host: arrays in GPU memory are copied on
  // `stream` into page-locked memory the server keeps (no allocation per reply once it is large
  // enough), the names and records are copied now, and `encode` writes the reply on the server's
  // thread once the stream has run the copies. Nothing of the caller's is read after it returns
  // but the device arrays, which the stream's copies read in their turn.
  std::uint64_t send_reply_results(const Request& route, const FrameDesc& request, void* stream,
                                   const ResultDetections* results, const void* metas,
                                   std::uint32_t metas_size, ResultEncoder encode);
  std::uint64_t replies_done() const noexcept;
  // reply() without the release, for callers that end the lease themselves (the C API, whose
  // frames live on in DLPack exports): `route` is the request as handed out (its frame may have
  // been moved out since), `request` the frame's description.
  bool send_reply(const Request& route, const FrameDesc& request, const void* metas,
                  std::uint32_t metas_size);
  // Serves one more filter path from now on (Errc::busy as the constructor); its number.
  std::uint32_t add(const std::string& path);
  void interrupt() noexcept;

  std::vector<ServerPipelineInfo> pipelines() const;

 private:
  std::unique_ptr<class ServerImpl> impl_;
};

// Publishes the reply to `request` on `replies`: the reply tag and the results. For servers built
// from a Consumer and a Producer of their own.
PublishStatus publish_reply(Producer& replies, const FrameDesc& request, const void* metas,
                            std::uint32_t metas_size);
// The reply channel's format: one byte per reply frame; the results are its metas.
Format reply_format();
ProducerOptions reply_channel_options(const std::string& request_path, std::uint32_t slots,
                                      std::uint32_t meta_size);

}  // namespace cudaipc
