// Hand-made socket messages for hostile-peer tests: any header fields, any body, any number of
// fds, any size, sent with sendmsg directly so nothing on the sending side checks them.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "protocol.hpp"

namespace cudaipc::testing {

inline std::vector<std::uint8_t> message(std::uint32_t type, std::vector<std::uint8_t> body,
                                         std::uint32_t magic = kWireMagic,
                                         std::uint32_t version = kProtocolVersion) {
  const std::uint32_t header[4] = {magic, version, type, static_cast<std::uint32_t>(body.size())};
  std::vector<std::uint8_t> out(sizeof header);
  std::memcpy(out.data(), header, sizeof header);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

inline std::vector<std::uint8_t> u32_body(std::uint32_t v) {
  std::vector<std::uint8_t> b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}

inline void send_message(int fd, const std::vector<std::uint8_t>& bytes,
                         const std::vector<int>& fds = {}) {
  iovec iov{const_cast<std::uint8_t*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  if (::sendmsg(fd, &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size()))
    throw std::runtime_error("sendmsg of a test message failed");
}

}  // namespace cudaipc::testing
