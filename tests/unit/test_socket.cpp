// The producer's socket file: mode 0600 by default, a crashed producer's stale socket is
// replaced, a live producer's is not (Errc::busy), and nothing that is not a socket is touched.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <fstream>

#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"
#include "temp_dir.hpp"
#include "unique_fd.hpp"

using namespace cudaipc;
using cudaipc::testing::TempDir;

namespace {

Error producer_error(const ProducerOptions& o) {
  try {
    Producer p(o);
  } catch (const Error& e) {
    return e;
  }
  return Error(Errc::ok, "no error");
}

// A socket file with nobody listening, as a killed producer leaves it.
void make_stale_socket(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
}

ino_t inode(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

ProducerOptions at(const std::string& path) {
  ProducerOptions o;
  o.path = path;
  return o;
}

}  // namespace

TEST(Socket, ModeIs0600ByDefault) {
  TempDir dir;
  Producer p(at(dir.file("ch")));
  struct stat st {};
  ASSERT_EQ(::stat(dir.file("ch").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, ::geteuid());
}

TEST(Socket, ModeOpenToOthersIsRefused) {
  TempDir dir;
  ProducerOptions o = at(dir.file("ch"));
  o.socket_mode = 0666;
  EXPECT_EQ(producer_error(o).code(), Errc::invalid_argument);
  o.socket_mode = 0660;
  EXPECT_EQ(producer_error(o).code(), Errc::ok);
}

TEST(Socket, StaleSocketIsReplaced) {
  TempDir dir;
  const std::string path = dir.file("ch");
  make_stale_socket(path);
  ASSERT_NE(inode(path), 0u);
  Producer p(at(path));
  // (The inode number may be reused, so the proof is that the path now leads to a producer.)
  ConsumerOptions co;
  co.path = path;
  co.reconnect = false;
  Consumer c(co);
  EXPECT_TRUE(c.connected());
}

TEST(Socket, LiveProducerMakesTheSecondOneBusy) {
  TempDir dir;
  Producer first(at(dir.file("ch")));
  const ino_t ino = inode(dir.file("ch"));
  Error e = producer_error(at(dir.file("ch")));
  EXPECT_EQ(e.code(), Errc::busy) << e.what();
  EXPECT_NE(std::string(e.what()).find("already running"), std::string::npos) << e.what();
  // The live producer's socket was left alone.
  EXPECT_EQ(inode(dir.file("ch")), ino);
}

TEST(Socket, NonSocketFileIsNotReplaced) {
  TempDir dir;
  std::ofstream(dir.file("ch")) << "precious";
  Error e = producer_error(at(dir.file("ch")));
  EXPECT_EQ(e.code(), Errc::busy) << e.what();
  EXPECT_NE(std::string(e.what()).find("not a socket"), std::string::npos) << e.what();
  std::string content;
  std::ifstream(dir.file("ch")) >> content;
  EXPECT_EQ(content, "precious");
}

TEST(Socket, ProducerRemovesOnlyItsOwnSocket) {
  TempDir dir;
  const std::string path = dir.file("ch");
  auto old = std::make_unique<Producer>(at(path));
  ASSERT_EQ(::unlink(path.c_str()), 0);  // someone removed it, and a new producer came
  Producer fresh(at(path));
  const ino_t ino = inode(path);
  old.reset();
  EXPECT_EQ(inode(path), ino);
  { Producer gone(at(dir.file("other"))); }
  EXPECT_EQ(inode(dir.file("other")), 0u);
}

TEST(Socket, PathTooLongIsInvalid) {
  EXPECT_EQ(producer_error(at("/tmp/" + std::string(200, 'x'))).code(), Errc::invalid_argument);
}

TEST(Socket, ConsumerWithoutProducerIsDisconnected) {
  TempDir dir;
  ConsumerOptions co;
  co.path = dir.file("nobody");
  co.reconnect = false;
  try {
    Consumer c(co);
    ADD_FAILURE() << "connected to nothing";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::disconnected);
    EXPECT_NE(std::string(e.what()).find("no producer"), std::string::npos) << e.what();
  }
  // With reconnect, construction succeeds and next() reports the wait.
  co.reconnect = true;
  Consumer waiting(co);
  EXPECT_FALSE(waiting.connected());
  Event ev = waiting.next(std::chrono::milliseconds(20));
  EXPECT_TRUE(ev.type == EventType::disconnected || ev.type == EventType::timeout);
}
