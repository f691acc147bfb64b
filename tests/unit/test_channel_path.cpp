// default_channel_path: sockets live in a directory only this user can enter, created 0700, and a
// directory that is not private is refused rather than used.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cudaipc/error.hpp"
#include "cudaipc/options.hpp"
#include "cudaipc/producer.hpp"
#include "scoped_umask.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using cudaipc::testing::ScopedUmask;
using cudaipc::testing::TempDir;

namespace {

// Sets XDG_RUNTIME_DIR for one test and restores it after.
class RuntimeDir {
 public:
  explicit RuntimeDir(const char* value) {
    if (const char* old = ::getenv("XDG_RUNTIME_DIR")) old_ = old, had_ = true;
    if (value)
      ::setenv("XDG_RUNTIME_DIR", value, 1);
    else
      ::unsetenv("XDG_RUNTIME_DIR");
  }
  ~RuntimeDir() {
    if (had_)
      ::setenv("XDG_RUNTIME_DIR", old_.c_str(), 1);
    else
      ::unsetenv("XDG_RUNTIME_DIR");
  }

 private:
  std::string old_;
  bool had_ = false;
};

mode_t mode_of(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 0;
  return st.st_mode;
}

}  // namespace

TEST(ChannelPath, UnderXdgRuntimeDirInAPrivateDirectory) {
  TempDir dir;
  RuntimeDir env(dir.path().c_str());
  EXPECT_EQ(default_channel_path("cam0"), dir.path() + "/cudaipc/cam0");
  const mode_t m = mode_of(dir.path() + "/cudaipc");
  EXPECT_TRUE(S_ISDIR(m));
  EXPECT_EQ(m & 0777, 0700u);
  // A second call accepts the directory it made.
  EXPECT_EQ(default_channel_path("cam1"), dir.path() + "/cudaipc/cam1");
}

TEST(ChannelPath, FallsBackToTmpPerUser) {
  RuntimeDir env(nullptr);
  const std::string dir = "/tmp/cudaipc-" + std::to_string(::geteuid());
  struct stat st {};
  if (::lstat(dir.c_str(), &st) == 0 && (st.st_mode & 077) != 0)
    GTEST_SKIP() << dir << " exists and is not private; not touching it";
  EXPECT_EQ(default_channel_path("x"), dir + "/x");
  EXPECT_EQ(mode_of(dir) & 0777, 0700u);
}

TEST(ChannelPath, RefusesADirectoryOthersCanEnter) {
  TempDir dir;
  RuntimeDir env(dir.path().c_str());
  ASSERT_EQ(::mkdir((dir.path() + "/cudaipc").c_str(), 0755), 0);
  ASSERT_EQ(::chmod((dir.path() + "/cudaipc").c_str(), 0755), 0);
  try {
    default_channel_path("cam0");
    ADD_FAILURE() << "a world-readable directory was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::permission_denied);
    EXPECT_NE(std::string(e.what()).find("not a private directory"), std::string::npos) << e.what();
  }
}

TEST(ChannelPath, RefusesASymlinkInPlaceOfTheDirectory) {
  TempDir dir, target;
  RuntimeDir env(dir.path().c_str());
  ASSERT_EQ(::chmod(target.path().c_str(), 0700), 0);
  ASSERT_EQ(::symlink(target.path().c_str(), (dir.path() + "/cudaipc").c_str()), 0);
  try {
    default_channel_path("cam0");
    ADD_FAILURE() << "a symlink was accepted as the private directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::permission_denied) << e.what();
  }
}

TEST(ChannelPath, RejectsBadNames) {
  TempDir dir;
  RuntimeDir env(dir.path().c_str());
  for (const char* name : {"", "a/b", "../x"}) {
    try {
      default_channel_path(name);
      ADD_FAILURE() << "accepted '" << name << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
    }
  }
}

// A producer whose socket goes straight into the default directory makes that directory when it
// is missing (so the README's `socket-path=$XDG_RUNTIME_DIR/cudaipc/cam0` works on a fresh login,
// and `cudaipc ls` finds the channel there); any other missing directory stays an error.
TEST(ChannelPath, ProducerMakesTheMissingDefaultDirectory) {
  TempDir dir;
  RuntimeDir env(dir.path().c_str());
  ProducerOptions o;
  o.memory = MemoryKind::host;
  o.path = dir.path() + "/cudaipc/cam0";
  Producer p(o);
  EXPECT_EQ(p.path(), o.path);
  const mode_t m = mode_of(dir.path() + "/cudaipc");
  EXPECT_TRUE(S_ISDIR(m));
  EXPECT_EQ(m & 0777, 0700u);
  EXPECT_TRUE(S_ISSOCK(mode_of(o.path)));
}

TEST(ChannelPath, ProducerLeavesAPreparedDefaultDirectoryAsItIs) {
  TempDir dir;
  RuntimeDir env(dir.path().c_str());
  const std::string shared = dir.path() + "/cudaipc";
  ASSERT_EQ(::mkdir(shared.c_str(), 0750), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0750), 0);
  ProducerOptions o;
  o.memory = MemoryKind::host;
  o.path = shared + "/cam0";
  Producer p(o);
  EXPECT_EQ(mode_of(shared) & 0777, 0750u);
  EXPECT_TRUE(S_ISSOCK(mode_of(o.path)));
}

TEST(ChannelPath, ProducerMakesNoOtherDirectory) {
  TempDir dir;
  RuntimeDir env(dir.path().c_str());
  ProducerOptions o;
  o.memory = MemoryKind::host;
  o.path = dir.path() + "/elsewhere/cam0";
  EXPECT_THROW(Producer{o}, Error);
  EXPECT_EQ(mode_of(dir.path() + "/elsewhere"), 0u);
  // Nor a directory inside the default one.
  o.path = dir.path() + "/cudaipc/sub/cam0";
  EXPECT_THROW(Producer{o}, Error);
  EXPECT_EQ(mode_of(dir.path() + "/cudaipc/sub"), 0u);
}

// The directory is 0700 whatever the umask: one without the owner's x bit (0177) would otherwise
// leave a directory nobody can put a socket in.
TEST(ChannelPath, DefaultDirectoryIs0700WhateverTheUmask) {
  TempDir dir;
  RuntimeDir env(dir.path().c_str());
  ScopedUmask mask(0177);
  ProducerOptions o;
  o.memory = MemoryKind::host;
  o.path = dir.path() + "/cudaipc/cam0";
  Producer p(o);
  EXPECT_EQ(mode_of(dir.path() + "/cudaipc") & 0777, 0700u);
  EXPECT_TRUE(S_ISSOCK(mode_of(o.path)));
}

// A private directory its owner cannot enter (0600: what a umask of 0177 made before) is refused
// with what to do, not failed later in bind with EACCES.
TEST(ChannelPath, RefusesADirectoryItsOwnerCannotEnter) {
  TempDir dir;
  RuntimeDir env(dir.path().c_str());
  const std::string made = dir.path() + "/cudaipc";
  ASSERT_EQ(::mkdir(made.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(made.c_str(), 0600), 0);
  try {
    default_channel_path("cam0");
    ADD_FAILURE() << "a 0600 channel directory was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::permission_denied);
    EXPECT_NE(std::string(e.what()).find("chmod 700"), std::string::npos) << e.what();
  }
  ::chmod(made.c_str(), 0700);
}
