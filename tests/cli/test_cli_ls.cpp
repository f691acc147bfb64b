// `cudaipc ls` against live channels (issue #21): its numbers are checked against what the test's
// own producer published and what a deliberately stuck consumer holds; stale and forbidden
// sockets read as such, in text and JSON.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <optional>

#include "channel_helpers.hpp"
#include "cli_process.hpp"
#include "cudaipc/consumer.hpp"
#include "mini_json.hpp"
#include "peer_process.hpp"
#include "reachable_peer.hpp"
#include "temp_dir.hpp"
#include "unix_socket.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

ProducerOptions drop_options(const TempDir& dir) {
  ProducerOptions o;
  o.path = dir.file("chan");
  o.slots = 4;
  o.on_full = FullPolicy::drop;
  return o;
}

JsonValue ls_json(const std::vector<std::string>& where, int expect_code = 0) {
  std::vector<std::string> args{"ls", "--json", "--interval", "0"};
  args.insert(args.end(), where.begin(), where.end());
  auto [code, out] = run_cli(args);
  EXPECT_EQ(code, expect_code) << out;
  return parse_json(out);
}

}  // namespace

// A consumer that holds frame 1 and reads no further: with the drop policy the producer fills
// the three other slots and drops the rest. ls must report exactly that.
TEST(CliLs, NumbersOfALiveChannel) {
  TempDir dir;
  Producer p(drop_options(dir));
  p.set_format(pattern_format(4096, "test/cli-ls"));
  PeerProcess stuck(
      {"consume", "--path", dir.file("chan"), "--hold", "1", "--timeout-ms", "30000"});
  ASSERT_TRUE(stuck.wait_for("connected", 10s)) << stuck.transcript();
  ASSERT_TRUE(wait_consumers(p, 1));
  ASSERT_EQ(publish_next(p), PublishStatus::published);
  ASSERT_TRUE(stuck.wait_for("held 1", 10s)) << stuck.transcript();
  for (int i = 0; i < 9; ++i) publish_next(p);
  const ProducerStats truth = p.stats();
  ASSERT_EQ(truth.published, 4u);
  ASSERT_EQ(truth.dropped, 6u);

  JsonValue j = ls_json({dir.path()});
  ASSERT_EQ(j["channels"].items.size(), 1u);
  const JsonValue& c = j["channels"][0];
  EXPECT_EQ(c["path"].s, dir.file("chan"));
  EXPECT_EQ(c["state"].s, "live");
  EXPECT_EQ(c["producer"]["pid"].n, ::getpid());
  EXPECT_NE(c["producer"]["exe"].s.find("cli_ls"), std::string::npos) << c["producer"]["exe"].s;
  EXPECT_EQ(c["memory"].s, "host");
  EXPECT_EQ(c["slots"].n, 4);
  EXPECT_GE(c["slot_size"].n, 4096);
  EXPECT_EQ(c["caps"].s, "test/cli-ls");
  EXPECT_EQ(c["tensor"]["dtype"].s, "uint8");
  EXPECT_EQ(c["tensor"]["shape"][0].n, 4096);
  EXPECT_EQ(c["published"].n, 4);
  EXPECT_EQ(c["dropped"].n, 6);
  EXPECT_EQ(c["descriptor_refusals"].n, 0);
  EXPECT_EQ(c["frames_per_second"].kind, JsonValue::null) << "no rate from one snapshot";
  ASSERT_EQ(c["consumers"].items.size(), 1u);
  const JsonValue& k = c["consumers"][0];
  EXPECT_EQ(k["pid"].n, stuck.pid());
  EXPECT_EQ(k["mode"].s, "every-frame");
  EXPECT_EQ(k["cursor"].n, 1);
  EXPECT_EQ(k["lag"].n, 3);
  EXPECT_EQ(k["leases"].n, 1);
  EXPECT_EQ(k["delivered"].n, 1);
  EXPECT_FALSE(k["evicted"].b);

  // The text form says the same, and reading did not change the channel.
  auto [code, text] = run_cli({"ls", "--interval", "0", dir.file("chan")});
  EXPECT_EQ(code, 0) << text;
  EXPECT_NE(text.find("published 4,"), std::string::npos) << text;
  EXPECT_NE(text.find("dropped 6"), std::string::npos) << text;
  EXPECT_NE(text.find("pid " + std::to_string(stuck.pid()) + "  every-frame  lag 3  leases 1"),
            std::string::npos)
      << text;
  EXPECT_EQ(p.consumer_count(), 1u);
  EXPECT_EQ(p.stats().consumers.at(0).leases, 1u);
}

// A producer publishing at 200 frames/s: ls's rate, over a 1 s interval, within 25 %.
TEST(CliLs, RateOfAPublisher) {
  TempDir dir;
  CliProcess pub({"pub", dir.file("cam"), "--caps", "video/x-raw,format=GRAY8,width=64,height=16",
                  "--rate", "200"});
  ASSERT_TRUE(pub.wait_for("publishing", 10s)) << pub.transcript();
  std::this_thread::sleep_for(300ms);
  auto [code, out] = run_cli({"ls", "--json", "--interval", "1", dir.path()});
  ASSERT_EQ(code, 0) << out;
  JsonValue j = parse_json(out);
  const JsonValue& c = j["channels"][0];
  EXPECT_EQ(c["state"].s, "live");
  EXPECT_EQ(c["producer"]["pid"].n, pub.pid());
  EXPECT_NEAR(c["frames_per_second"].n, 200, 50) << out;
  EXPECT_GT(c["published"].n, 200) << "a second and more at 200 frames/s";
  EXPECT_EQ(c["tensor"]["shape"][0].n, 16);
  EXPECT_EQ(c["tensor"]["shape"][1].n, 64);
}

// What a killed producer leaves: a socket nobody listens on. Listed in a directory it is one
// "stale" entry (exit 0: a directory is only listed); named on its own it fails the command.
TEST(CliLs, StaleSocket) {
  TempDir dir;
  { UniqueFd l = listen_unix(dir.file("dead"), 0600, std::nullopt); }
  JsonValue j = ls_json({dir.path()});
  ASSERT_EQ(j["channels"].items.size(), 1u);
  EXPECT_EQ(j["channels"][0]["state"].s, "stale");
  EXPECT_NE(j["channels"][0]["error"].s.find("no producer listens"), std::string::npos);

  auto [code, text] = run_cli({"ls", "--interval", "0", dir.file("dead")});
  EXPECT_EQ(code, 1) << text;
  EXPECT_NE(text.find(dir.file("dead") + "  stale: stale socket: no producer listens"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("terminate"), std::string::npos) << text;

  auto [code2, missing] = run_cli({"ls", "--interval", "0", dir.file("nothing")});
  EXPECT_EQ(code2, 1) << missing;
  EXPECT_NE(missing.find("missing: no such channel"), std::string::npos) << missing;

  auto [code3, empty] = run_cli({"ls", "--interval", "0", dir.path() + "/"});
  EXPECT_EQ(code3, 0) << empty;
}

// A channel this user may not read is "denied" with the reason. Not root: the socket's mode says
// no. Root (whom modes do not stop): ls runs as nobody against a socket opened to everyone, so
// the producer's own admission check (same uid or allowed group) is what refuses it.
TEST(CliLs, PermissionDenied) {
  TempDir dir;
  Producer p(drop_options(dir));
  p.set_format(pattern_format(64));
  long uid = -1;
  std::optional<ReachablePeer> reachable;  // the tool, run as nobody, from where nobody reaches
  if (::geteuid() != 0) {
    ASSERT_EQ(::chmod(dir.file("chan").c_str(), 0), 0);
  } else {
    uid = 65534;
    reachable.emplace();
    ASSERT_EQ(::chmod(dir.path().c_str(), 0711), 0);
    ASSERT_EQ(::chmod(dir.file("chan").c_str(), 0666), 0);
  }
  auto [code, text] = run_cli({"ls", "--interval", "0", dir.file("chan")}, 20s, uid);
  ASSERT_NE(code, 126) << "could not switch to uid " << uid;
  EXPECT_EQ(code, 1) << text;
  EXPECT_NE(text.find(dir.file("chan") + "  denied: permission denied"), std::string::npos) << text;
  if (uid >= 0) {
    EXPECT_NE(text.find("peer uid 65534"), std::string::npos) << text;
  }
  EXPECT_EQ(p.consumer_count(), 0u);
  auto [jcode, json] = run_cli({"ls", "--json", "--interval", "0", dir.file("chan")}, 20s, uid);
  EXPECT_EQ(jcode, 1) << json;
  EXPECT_EQ(parse_json(json)["channels"][0]["state"].s, "denied") << json;
}

TEST(CliLs, HelpAndUsage) {
  for (const char* cmd : {"ls", "top", "probe", "cat", "pub"}) {
    auto [code, text] = run_cli({cmd, "--help"});
    EXPECT_EQ(code, 0) << text;
    EXPECT_EQ(text.rfind(std::string("usage: cudaipc ") + cmd, 0), 0u) << text;
  }
  auto [code, text] = run_cli({"ls", "--bogus"});
  EXPECT_EQ(code, 2) << text;
  EXPECT_NE(text.find("unknown option --bogus"), std::string::npos) << text;
  auto [pcode, ptext] = run_cli({"pub", "/tmp/x"});
  EXPECT_EQ(pcode, 2) << ptext;
  EXPECT_NE(ptext.find("pub needs --caps"), std::string::npos) << ptext;
}

// A producer out of descriptors (issue #21's last part): ls itself is turned away with the
// reason while it lasts, and once descriptors return, ls shows how many connections were refused:
// the five consumers the test sent, and ls's own first try.
TEST(CliLs, DescriptorRefusalsAreCounted) {
  TempDir dir;
  const std::string path = dir.file("ch");
  PeerProcess producer({"produce", "--path", path, "--bytes", "4096", "--frames", "0", "--then",
                        "hold", "--fd-headroom", "0", "--fd-ballast", "16"});
  ASSERT_TRUE(producer.wait_for("listening", 10s)) << producer.transcript();
  ConsumerOptions once;
  once.path = path;
  once.reconnect = false;
  for (int i = 0; i < 5; ++i) {
    try {
      Consumer c(once);
      FAIL() << "a producer with no descriptors served consumer " << i;
    } catch (const Error& e) {
      ASSERT_EQ(e.code(), Errc::busy) << e.what();
    }
  }
  auto [code, text] = run_cli({"ls", "--interval", "0", path});
  EXPECT_EQ(code, 1) << text;
  EXPECT_NE(text.find(path + "  busy: producer refused the connection: the producer has no file "
                             "descriptors left"),
            std::string::npos)
      << text;
  ASSERT_EQ(::kill(producer.pid(), SIGUSR1), 0);
  ASSERT_TRUE(producer.wait_for("fds returned", 10s)) << producer.transcript();
  JsonValue j = ls_json({path});
  EXPECT_EQ(j["channels"][0]["state"].s, "live");
  EXPECT_EQ(j["channels"][0]["descriptor_refusals"].n, 6);
}
