#include <dirent.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>

#include "fuzz.hpp"
#include "unix_socket.hpp"

namespace cudaipc::fuzz {
namespace {

std::string g_context;

std::size_t open_fd_count() {
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) fail("cannot list /proc/self/fd to look for leaked descriptors");
  std::size_t n = 0;
  while (const dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n;  // counts the directory's own fd, the same on every call
}

}  // namespace

std::uint64_t Input::take_le(std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n && pos_ < size_; ++i, ++pos_)
    v |= static_cast<std::uint64_t>(data_[pos_]) << (8 * i);
  return v;
}

Bytes Input::rest(std::size_t max) {
  std::size_t n = std::min(max, size_ - pos_);
  Bytes out(data_ + pos_, data_ + pos_ + n);
  pos_ = size_;
  return out;
}

void fail(const std::string& why) {
  std::fprintf(stderr, "FUZZ FINDING in target %s%s%s: %s\n", target().name,
               g_context.empty() ? "" : ", ", g_context.c_str(), why.c_str());
  std::fflush(stderr);
  std::abort();
}

void set_context(std::string context) {
  g_context = std::move(context);
}

void init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (target().init) target().init();
  });
}

Verdict run_input(const std::uint8_t* data, std::size_t size) {
  init_once();
  const std::size_t fds_before = open_fd_count();
  Verdict v = Verdict::accepted;
  try {
    Input in(data, size);
    target().one_input(in);
  } catch (const Error& e) {
    const auto& ok = target().rejections;
    if (std::find(ok.begin(), ok.end(), e.code()) == ok.end())
      fail("rejected with unexpected code " + std::to_string(static_cast<int>(e.code())) + ": " +
           e.what());
    if (e.what()[0] == '\0') fail("rejected with an empty message");
    v = Verdict::rejected;
  } catch (const std::exception& e) {
    fail(std::string("escaped std::exception: ") + e.what());
  }
  const std::size_t fds_after = open_fd_count();
  if (fds_after != fds_before)
    fail("open file descriptors went from " + std::to_string(fds_before) + " to " +
         std::to_string(fds_after));
  return v;
}

Captured capture(const std::function<void(int fd)>& send) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    fail("socketpair for capturing a seed failed");
  UniqueFd tx(sv[0]), rx(sv[1]);
  send(tx.get());
  RawMessage raw;
  if (recv_raw(rx.get(), raw, std::chrono::milliseconds(0)) != RecvStatus::ok)
    fail("an encoder sent nothing while a seed was captured");
  return Captured{std::move(raw.bytes), raw.fds.size()};
}

}  // namespace cudaipc::fuzz
