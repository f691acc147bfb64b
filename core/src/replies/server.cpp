// cudaipc::Server: a consumer of the requests and a producer of the replies, with the pairing tag
// written from the request's own record so a reply can only name the frame it answers.
#include "cudaipc/server.hpp"

#include "cudaipc/error.hpp"

namespace cudaipc {

Format reply_format() {
  Format f;
  f.caps = "application/x-cudaipc-reply";
  f.tensor = make_tensor(DType::uint8, {1});
  return f;
}

ProducerOptions reply_channel_options(const std::string& request_path, std::uint32_t slots,
                                      std::uint32_t meta_size) {
  ProducerOptions o;
  o.path = reply_path(request_path);
  o.slots = slots;
  o.memory = MemoryKind::host;
  o.meta_size = meta_size;
  // A filter that stopped reading is gone or stuck: the model goes on with its next request
  // rather than wait on it (the filter gives up on late replies anyway).
  o.on_full = FullPolicy::block;
  o.block_timeout = std::chrono::milliseconds(100);
  return o;
}

PublishStatus publish_reply(Producer& replies, const FrameDesc& request, const void* metas,
                            std::uint32_t metas_size) {
  std::uint8_t tag[kReplyTagSize];
  write_reply_tag(request, tag);
  static const std::uint8_t kByte = 0;
  FrameInfo info;
  info.pts = request.pts;
  info.user_meta = tag;
  info.user_meta_size = kReplyTagSize;
  info.metas = metas_size ? metas : nullptr;
  info.metas_size = metas_size;
  return replies.publish(&kByte, 1, info);
}

namespace {

ProducerOptions producer_options(const ServerOptions& o) {
  ProducerOptions p = reply_channel_options(o.path, o.reply_slots, o.reply_meta_size);
  p.socket_mode = o.socket_mode;
  p.allowed_gid = o.allowed_gid;
  return p;
}

ConsumerOptions consumer_options(const ServerOptions& o) {
  if (o.path.empty())
    throw Error(Errc::invalid_argument, "a server needs the filter's socket path");
  ConsumerOptions c;
  c.path = o.path;
  c.mode = ConsumeMode::every_frame;
  c.reconnect = true;
  c.cuda = o.cuda;
  return c;
}

}  // namespace

Server::Server(const ServerOptions& options)
    : producer_(producer_options(options)), consumer_(consumer_options(options)) {
  producer_.set_format(reply_format());
}

Server::~Server() = default;

ServerEvent Server::next(std::chrono::nanoseconds timeout) {
  Event e = consumer_.next(timeout);
  ServerEvent s;
  switch (e.type) {
    case EventType::frame:
      s.type = ServerEventType::request;
      s.request = std::move(e.frame);
      break;
    case EventType::format:
      s.type = ServerEventType::format;
      s.format = std::move(e.format);
      break;
    case EventType::eos:
      s.type = ServerEventType::eos;
      break;
    case EventType::timeout:
      s.type = ServerEventType::timeout;
      break;
    case EventType::interrupted:
      s.type = ServerEventType::interrupted;
      break;
    case EventType::disconnected:
      s.type = ServerEventType::disconnected;
      s.message = std::move(e.message);
      break;
  }
  return s;
}

bool Server::reply(Frame& request, const void* metas, std::uint32_t metas_size, void* stream) {
  if (!request) throw Error(Errc::invalid_argument, "reply to a request already answered");
  const PublishStatus st = publish_reply(producer_, request.desc(), metas, metas_size);
  if (stream) request.order_release_after(stream);
  request.release();
  return st == PublishStatus::published;
}

void Server::interrupt() noexcept {
  consumer_.interrupt();
}

}  // namespace cudaipc
