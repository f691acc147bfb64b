// Access control by credentials: a peer running as another uid that file permissions would let
// in is refused by the producer's SO_PEERCRED check, with the producer's reason; the same peer is
// admitted when the channel is opened to its group.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "channel_helpers.hpp"
#include "peer_process.hpp"
#include "reachable_peer.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

constexpr uid_t kNobody = 65534;
constexpr gid_t kNogroup = 65534;

// The peer keeps root's group as a supplementary group, so the 0660 socket and the 0710
// directory let it reach connect(): only the credential check stands in its way.
RunAs nobody_in_root_group() {
  return RunAs{kNobody, kNogroup, {kNogroup, 0}};
}

}  // namespace

TEST(ForeignUid, OtherUserIsRefusedByCredentials) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to start a peer under another uid";
  ReachablePeer reachable;
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0710), 0);
  ProducerOptions o;
  o.path = dir.file("ch");
  o.socket_mode = 0660;
  Producer p(o);
  p.set_format(pattern_format(1024));
  // Repeated, because the refusal races the peer's hello: it must never be lost.
  PeerProcess peer({"connect", "--path", o.path, "--repeat", "50"}, nobody_in_root_group());
  auto done = peer.wait_for("done", 30s);
  ASSERT_TRUE(done) << peer.transcript();
  const std::string t = peer.transcript();
  EXPECT_NE(t.find("outcome 5 50\n"), std::string::npos) << t;
  EXPECT_NE(t.find("peer uid 65534 gid 65534 is not allowed"), std::string::npos) << t;
  EXPECT_EQ(p.consumer_count(), 0u);
}

TEST(ForeignUid, GroupOpenedChannelAdmitsTheGroup) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to start a peer under another uid";
  ReachablePeer reachable;
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0711), 0);
  ProducerOptions o;
  o.path = dir.file("ch");
  o.socket_mode = 0660;
  o.allowed_gid = kNogroup;
  Producer p(o);
  p.set_format(pattern_format(1024));
  struct stat st {};
  ASSERT_EQ(::stat(o.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(st.st_gid, kNogroup);
  PeerProcess peer({"consume", "--path", o.path, "--frames", "3"}, RunAs{kNobody, kNogroup, {}});
  ASSERT_TRUE(peer.wait_for("connected", 10s)) << peer.transcript();
  ASSERT_TRUE(wait_consumers(p, 1));
  for (int i = 0; i < 3; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);
  auto done = peer.wait_for("done", 10s);
  ASSERT_TRUE(done) << peer.transcript();
  EXPECT_EQ(field(*done, "frames"), 3) << *done;
  EXPECT_EQ(field(*done, "bad"), 0) << *done;
}
