// A point on a caller's CUDA stream, for the CPU to learn when the work queued there before it has
// run without making the caller wait: a model's thread marks the point and goes on, a server's
// thread waits for it (cudaipc::Server::reply_after). Host-only builds have none to mark.
#pragma once

namespace cudaipc {

// The context whose work `stream` carries (the legacy and per-thread default streams: the calling
// thread's current one). Errc::invalid_argument when it has none, Errc::no_cuda without CUDA.
void* stream_context(void* stream);

class StreamPoint {
 public:
  StreamPoint() = default;
  StreamPoint(StreamPoint&& o) noexcept { *this = static_cast<StreamPoint&&>(o); }
  StreamPoint& operator=(StreamPoint&& o) noexcept;
  StreamPoint(const StreamPoint&) = delete;
  StreamPoint& operator=(const StreamPoint&) = delete;
  ~StreamPoint() { reset(); }

  // After the work queued on `stream` so far, in the stream's own context (the legacy and
  // per-thread default streams: the calling thread's current context). Empty when the stream has
  // nothing queued, and for a null stream (results computed on the host). Errc::invalid_argument
  // for a stream the driver does not know, Errc::no_cuda without a CUDA driver.
  static StreamPoint after(void* stream);
  // The same, reusing this point's event when the stream is of the context it was made in (a
  // ring of replies marks thousands a second and creates an event only once per place).
  void mark(void* stream);
  // Nothing to wait for any more; the event is kept for the next mark().
  void clear() noexcept { armed_ = false; }

  // Sleeps until the point is reached (an empty one: at once). Throws Errc::cuda when the work
  // before it failed.
  void wait();
  bool empty() const noexcept { return !armed_; }
  // Destroys the event.
  void reset() noexcept;

 private:
  void* context_ = nullptr;
  void* event_ = nullptr;
  bool armed_ = false;
};

}  // namespace cudaipc
