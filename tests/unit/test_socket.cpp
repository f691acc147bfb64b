// The producer's socket file: mode 0600 by default, a crashed producer's stale socket is
// replaced, a live producer's is not (Errc::busy), and nothing that is not a socket is touched.
// A consumer waits where a producer may yet come, and fails at once, naming the cause, where none
// can (a regular file, a directory, a listener that does not speak cudaipc).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"
#include "foreign_listener.hpp"
#include "poll_until.hpp"
#include "scoped_umask.hpp"
#include "temp_dir.hpp"
#include "unique_fd.hpp"

using namespace cudaipc;
using namespace std::chrono_literals;
using cudaipc::testing::ForeignListener;
using cudaipc::testing::poll_until;
using cudaipc::testing::ScopedUmask;
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

// Making a socket leaves the process's umask alone: it is shared by every thread, and a file the
// application creates meanwhile must get the application's mask, not the socket's 0177.
TEST(Socket, OtherThreadsFilesKeepTheProcessUmask) {
  TempDir dir;
  ScopedUmask mask(022);
  std::atomic<bool> done{false};
  std::atomic<int> wrong{0};
  std::atomic<int> made{0};
  std::thread other([&] {
    const std::string f = dir.file("app-file");
    while (!done.load(std::memory_order_acquire)) {
      UniqueFd fd(::open(f.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
      if (!fd) continue;
      struct stat st {};
      if (::fstat(fd.get(), &st) == 0 && (st.st_mode & 0777) != 0644) wrong.fetch_add(1);
      made.fetch_add(1);
      ::unlink(f.c_str());
    }
  });
  {
    // Stops and joins the thread however this block is left (a failed ASSERT, a throw).
    struct Stop {
      std::atomic<bool>& done;
      std::thread& thread;
      ~Stop() {
        done.store(true, std::memory_order_release);
        thread.join();
      }
    } stop{done, other};
    // Both running at once: the other thread has made a file before the first bind.
    ASSERT_TRUE(poll_until([&] { return made.load() > 0; }, 5000ms));
    for (int i = 0; i < 300; ++i) {
      ProducerOptions o = at(dir.file("ch" + std::to_string(i % 4)));
      o.memory = MemoryKind::host;
      Producer p(o);
    }
  }
  EXPECT_EQ(wrong.load(), 0) << "of " << made.load() << " files made while producers bound";
}

// Under an empty umask the socket file is still never open to others: the socket's own mode is
// set before bind, and the file is checked after it.
TEST(Socket, PrivateUnderAnEmptyUmask) {
  TempDir dir;
  ScopedUmask mask(0);
  ProducerOptions o = at(dir.file("ch"));
  o.memory = MemoryKind::host;
  Producer p(o);
  struct stat st {};
  ASSERT_EQ(::lstat(dir.file("ch").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
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

// Not "busy": no producer runs there, and saying so would send the user looking for one.
TEST(Socket, NonSocketFileIsNotReplaced) {
  TempDir dir;
  std::ofstream(dir.file("ch")) << "precious";
  Error e = producer_error(at(dir.file("ch")));
  EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
  EXPECT_NE(std::string(e.what()).find("not a socket (it is a regular file)"), std::string::npos)
      << e.what();
  EXPECT_NE(std::string(e.what()).find(dir.file("ch")), std::string::npos) << e.what();
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

// Processes started together come up over seconds: a consumer that has waited for its producer
// that long still meets it promptly, not after a wait grown to reconnect_interval (here 10 s; its
// attempts doubling from 5 ms would have been at 2.56 s and 5.12 s, the producer coming at 2.7).
TEST(Socket, ConsumerWaitingSecondsMeetsItsProducerPromptly) {
  TempDir dir;
  ConsumerOptions co;
  co.path = dir.file("late");
  co.reconnect = true;
  co.reconnect_interval = std::chrono::milliseconds(10000);
  Consumer waiting(co);
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < 2700ms) {
    Event ev = waiting.next(50ms);
    ASSERT_TRUE(ev.type == EventType::timeout || ev.type == EventType::disconnected);
  }
  ProducerOptions po = at(co.path);
  Producer p(po);
  const auto up = std::chrono::steady_clock::now();
  while (!waiting.connected() && std::chrono::steady_clock::now() - up < 5s)
    (void)waiting.next(10ms);
  ASSERT_TRUE(waiting.connected());
  EXPECT_LT(std::chrono::steady_clock::now() - up, 1s);
}

namespace {

// The Error a consumer's constructor throws on `path` with reconnect on (which retries whatever
// may pass), and how long it took; Errc::ok when it did not throw.
struct ConnectResult {
  Error error{Errc::ok, "no error"};
  std::chrono::milliseconds took{0};
};
ConnectResult reconnecting_consumer_on(const std::string& path) {
  ConsumerOptions co;
  co.path = path;
  co.reconnect = true;
  ConnectResult r;
  const auto start = std::chrono::steady_clock::now();
  try {
    Consumer c(co);
  } catch (const Error& e) {
    r.error = e;
  }
  r.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start);
  return r;
}

bool mentions(const Error& e, const std::string& text) {
  return std::string(e.what()).find(text) != std::string::npos;
}

}  // namespace

// Paths no producer can ever listen on fail at once, naming the path and what it is, even with
// reconnect on: retrying there would wait for ever (issue #34). Only those.
TEST(Socket, ConsumerFailsAtOnceOnlyWhereNoProducerCanEverListen) {
  TempDir dir;
  const std::string file = dir.file("file");
  std::ofstream(file) << "not a socket";
  const std::string subdir = dir.file("subdir");
  ASSERT_EQ(::mkdir(subdir.c_str(), 0700), 0);
  const struct {
    std::string path, says;
  } cases[] = {
      {file, "is a regular file, not a socket"},
      {subdir, "is a directory, not a socket"},
      {file + "/ch", "is not a directory"},
  };
  for (const auto& c : cases) {
    const ConnectResult r = reconnecting_consumer_on(c.path);
    EXPECT_EQ(r.error.code(), Errc::invalid_argument) << c.path << ": " << r.error.what();
    EXPECT_TRUE(mentions(r.error, c.path)) << r.error.what();
    EXPECT_TRUE(mentions(r.error, c.says)) << r.error.what();
    EXPECT_LT(r.took, 1000ms) << c.path;
  }
  std::string content;
  std::getline(std::ifstream(file), content);
  EXPECT_EQ(content, "not a socket");  // looked at, never touched

  // What may yet serve a consumer is still waited for: a path that does not exist yet, and a
  // stale socket a killed producer left (ECONNREFUSED on a socket file), the documented
  // reconnect case.
  make_stale_socket(dir.file("stale"));
  for (const std::string& path : {dir.file("missing"), dir.file("stale")}) {
    const ConnectResult r = reconnecting_consumer_on(path);
    EXPECT_EQ(r.error.code(), Errc::ok) << path << ": " << r.error.what();
  }
  ConsumerOptions co;
  co.path = dir.file("stale");
  co.reconnect = false;
  try {
    Consumer c(co);
    ADD_FAILURE() << "connected to a stale socket";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::disconnected) << e.what();
  }
  // A producer that comes later serves the waiting consumer.
  co.reconnect = true;
  co.reconnect_interval = 10ms;
  Consumer waiting(co);
  Producer p(at(dir.file("stale")));
  EXPECT_TRUE(poll_until(
      [&] {
        waiting.next(20ms);
        return waiting.connected();
      },
      5s));
}

// A listener that does not speak cudaipc: another socket type, one that never answers the hello,
// one that answers garbage. Each is a protocol error naming the path, not a wait.
TEST(Socket, ConsumerOnAForeignListenerFailsNamingIt) {
  TempDir dir;
  {
    ForeignListener stream(dir.file("stream"), SOCK_STREAM, "hi");
    const ConnectResult r = reconnecting_consumer_on(dir.file("stream"));
    EXPECT_EQ(r.error.code(), Errc::protocol) << r.error.what();
    EXPECT_TRUE(mentions(r.error, dir.file("stream"))) << r.error.what();
    EXPECT_TRUE(mentions(r.error, "socket of another type")) << r.error.what();
    EXPECT_LT(r.took, 1000ms);
  }
  {
    ForeignListener silent(dir.file("silent"), SOCK_SEQPACKET);
    const ConnectResult r = reconnecting_consumer_on(dir.file("silent"));
    EXPECT_EQ(r.error.code(), Errc::protocol) << r.error.what();
    EXPECT_TRUE(mentions(r.error, dir.file("silent"))) << r.error.what();
    EXPECT_TRUE(mentions(r.error, "not a cudaipc producer")) << r.error.what();
    EXPECT_LT(r.took, 10000ms) << "the handshake's own timeout (3 s) bounds it";
  }
  {
    ForeignListener garbage(dir.file("garbage"), SOCK_SEQPACKET,
                            "HTTP/1.1 400 Bad Request\r\n\r\n");
    const ConnectResult r = reconnecting_consumer_on(dir.file("garbage"));
    EXPECT_EQ(r.error.code(), Errc::protocol) << r.error.what();
    EXPECT_TRUE(mentions(r.error, "not a cudaipc endpoint")) << r.error.what();
    EXPECT_LT(r.took, 1000ms);
  }
}

// A producer does not take over a socket another program listens on with another socket type,
// and does not call that program a cudaipc producer.
TEST(Socket, SocketOfAnotherTypeIsNotReplaced) {
  TempDir dir;
  ForeignListener stream(dir.file("ch"), SOCK_STREAM);
  const ino_t ino = inode(dir.file("ch"));
  Error e = producer_error(at(dir.file("ch")));
  EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
  EXPECT_TRUE(mentions(e, "another type")) << e.what();
  EXPECT_EQ(inode(dir.file("ch")), ino);
}
