// `cudaipc pub`, `probe`, `cat` and `top` against live channels (issue #21): cat's files hold
// the very pattern pub wrote for each frame index, probe's rate matches pub's, and top reports a
// producer killed under it in a line and exits instead of hanging.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <iterator>
#include <sstream>

#include "cli_process.hpp"
#include "mini_json.hpp"
#include "pub_pattern.hpp"
#include "temp_dir.hpp"

using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// A running `cudaipc pub` on `path`, up once it said so.
std::unique_ptr<CliProcess> start_pub(const std::string& path, const std::string& caps,
                                      const std::string& rate) {
  auto pub = std::make_unique<CliProcess>(
      std::vector<std::string>{"pub", path, "--caps", caps, "--rate", rate});
  if (!pub->wait_for("publishing", 10s))
    ADD_FAILURE() << "pub did not start: " << pub->transcript();
  return pub;
}

}  // namespace

// Each frame cat writes is the tensor of the frame it names, byte for byte what pub wrote for that
// frame index; the format JSON and each frame's JSON parse and say the same.
TEST(CliStream, CatWritesThePattern) {
  TempDir dir;
  auto pub = start_pub(dir.file("cam"), "video/x-raw,format=RGBA,width=64,height=48", "60");
  auto [code, out] = run_cli({"cat", dir.file("cam"), "--frames", "3", "--out", dir.file("out")});
  ASSERT_EQ(code, 0) << out;
  JsonValue format = parse_json(slurp(dir.file("out/format.json")));
  EXPECT_EQ(format["caps"].s, "video/x-raw,format=RGBA,width=64,height=48");
  EXPECT_EQ(format["tensor"]["shape"][2].n, 4);
  int frames = 0;
  std::uint64_t last_seq = 0;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() < 4 || line.compare(line.size() - 4, 4, ".npy") != 0) continue;
    const auto dash = line.rfind("frame-");
    const std::uint64_t seq = std::stoull(line.substr(dash + 6));
    EXPECT_GT(seq, last_seq) << "frames come in order";
    last_seq = seq;
    const std::string npy = slurp(line);
    ASSERT_GE(npy.size(), 10u);
    ASSERT_EQ(npy.compare(0, 6, "\x93NUMPY"), 0);
    const std::size_t header = static_cast<unsigned char>(npy[8]) |
                               static_cast<std::size_t>(static_cast<unsigned char>(npy[9])) << 8;
    EXPECT_EQ((10 + header) % 64, 0u);
    const std::string dict = npy.substr(10, header);
    EXPECT_NE(dict.find("'descr': '|u1'"), std::string::npos) << dict;
    EXPECT_NE(dict.find("'shape': (48, 64, 4)"), std::string::npos) << dict;
    const std::string data = npy.substr(10 + header);
    ASSERT_EQ(data.size(), 48u * 64 * 4);
    std::size_t wrong = data.size();
    for (std::size_t i = 0; i < data.size() && wrong == data.size(); ++i)
      if (static_cast<std::uint8_t>(data[i]) != cudaipc::cli::pattern_byte(seq, i)) wrong = i;
    EXPECT_EQ(wrong, data.size()) << "frame " << seq << " differs from its pattern at byte "
                                  << wrong;
    JsonValue fj = parse_json(slurp(dir.file("out/frame-" + std::to_string(seq) + ".json")));
    EXPECT_EQ(fj["seq"].n, static_cast<double>(seq));
    ++frames;
  }
  EXPECT_EQ(frames, 3) << out;
}

// probe joins as a `latest` consumer of a 100 frames/s channel for 2 s: its rate within 25 %, a
// latency that is positive and well under a frame interval on p50, and no frame older than the
// channel's newest handed to it.
TEST(CliStream, ProbeMeasuresRateAndLatency) {
  TempDir dir;
  auto pub = start_pub(dir.file("cam"), "video/x-raw,format=GRAY8,width=32,height=32", "100");
  auto [code, out] = run_cli({"probe", dir.file("cam"), "--seconds", "2", "--json"});
  ASSERT_EQ(code, 0) << out;
  JsonValue j = parse_json(out);
  EXPECT_NEAR(j["frames_per_second"].n, 100, 25) << out;
  EXPECT_NEAR(j["seconds"].n, 2, 0.5) << out;
  EXPECT_GT(j["latency_p50_us"].n, 0) << out;
  EXPECT_LT(j["latency_p50_us"].n, 10000) << out;
  EXPECT_GE(j["latency_p99_us"].n, j["latency_p50_us"].n) << out;
  EXPECT_EQ(j["last_seq"].n - j["first_seq"].n + 1, j["frames"].n + j["skipped"].n) << out;
  EXPECT_EQ(j["disconnected"].kind, JsonValue::null) << out;

  auto [tcode, text] = run_cli({"probe", dir.file("cam"), "--seconds", "0.5"});
  EXPECT_EQ(tcode, 0) << text;
  EXPECT_NE(text.find("frames/s, latency p50"), std::string::npos) << text;
}

// The producer is killed while probe runs: one clear line, exit 1, within the probe's time.
TEST(CliStream, ProbeOfAProducerThatDies) {
  TempDir dir;
  auto pub = start_pub(dir.file("cam"), "video/x-raw,format=GRAY8,width=32,height=32", "100");
  CliProcess probe({"probe", dir.file("cam"), "--seconds", "30"});
  std::this_thread::sleep_for(500ms);
  pub->signal(SIGKILL);
  auto st = probe.finish(10s);
  ASSERT_TRUE(st) << "probe hung after its producer died: " << probe.transcript();
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 1) << probe.transcript();
  EXPECT_NE(probe.transcript().find("cudaipc probe: " + dir.file("cam") + ": "), std::string::npos)
      << probe.transcript();
}

// top on a pipe prints plain lines; its producer killed, it says so in a line naming the channel
// and exits (the only channel it was given is gone), well within its time limit.
TEST(CliStream, TopReportsAProducerKilledUnderIt) {
  TempDir dir;
  auto pub = start_pub(dir.file("cam"), "video/x-raw,format=GRAY8,width=32,height=32", "100");
  CliProcess top({"top", dir.file("cam"), "--interval", "0.2"});
  auto live = top.wait_for(" live ", 10s);
  ASSERT_TRUE(live) << top.transcript();
  auto rated = top.wait_for(" frames/s published", 10s);
  ASSERT_TRUE(rated) << top.transcript();
  pub->signal(SIGKILL);
  auto gone = top.wait_for("producer gone", 10s);
  ASSERT_TRUE(gone) << top.transcript();
  EXPECT_NE(gone->find(dir.file("cam")), std::string::npos) << *gone;
  auto st = top.finish(10s);
  ASSERT_TRUE(st) << "top did not exit: " << top.transcript();
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 1) << top.transcript();
  EXPECT_NE(top.transcript().find("no channel left to watch"), std::string::npos)
      << top.transcript();
  EXPECT_EQ(top.transcript().find("terminate"), std::string::npos) << top.transcript();
}

// top on a terminal redraws the screen each refresh (a clear, its header, the channel) instead of
// printing lines; its producer killed, it still ends with the one line on why.
TEST(CliStream, TopOnATerminalRedrawsTheScreen) {
  if (!pseudo_terminals())
    GTEST_SKIP() << "no pseudo-terminal on this machine (/dev/ptmx, /dev/pts)";
  TempDir dir;
  auto pub = start_pub(dir.file("cam"), "video/x-raw,format=GRAY8,width=32,height=32", "100");
  CliProcess top({"top", dir.file("cam"), "--interval", "0.2"}, -1, "", true);
  const std::string redraw = "\x1b[H\x1b[2Jcudaipc top";
  for (int i = 0; i < 3; ++i) {
    auto screen = top.wait_for(redraw, 10s);
    ASSERT_TRUE(screen) << "refresh " << i << ": " << top.transcript();
    auto channel = top.wait_for(dir.file("cam"), 10s);
    ASSERT_TRUE(channel) << top.transcript();
  }
  EXPECT_EQ(top.transcript().find(" frames/s published"), std::string::npos)
      << "plain lines on a terminal: " << top.transcript();
  pub->signal(SIGKILL);
  auto st = top.finish(10s);
  ASSERT_TRUE(st) << "top did not exit: " << top.transcript();
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 1) << top.transcript();
  EXPECT_NE(top.transcript().find("no channel left to watch"), std::string::npos)
      << top.transcript();
}

// top over a directory, two publishers: each refresh lists the busier one first, and the counts
// go up between refreshes.
TEST(CliStream, TopSortsByRate) {
  TempDir dir;
  auto slow = start_pub(dir.file("slow"), "video/x-raw,format=GRAY8,width=8,height=8", "20");
  auto fast = start_pub(dir.file("fast"), "video/x-raw,format=GRAY8,width=8,height=8", "200");
  auto [code, out] = run_cli({"top", dir.path(), "--interval", "0.5", "--count", "3"});
  ASSERT_EQ(code, 0) << out;
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 6u) << out;
  // The last refresh has rates for both: the fast one first.
  EXPECT_NE(lines[4].find(dir.file("fast") + " live"), std::string::npos) << out;
  EXPECT_NE(lines[5].find(dir.file("slow") + " live"), std::string::npos) << out;
}

// A CUDA channel needs a GPU; where there is none, pub says why in one line instead of a trace.
TEST(CliStream, CudaWithoutAGpu) {
  TempDir dir;
  auto [code, out] =
      run_cli({"pub", dir.file("gpu"), "--caps", "video/x-raw,format=RGBA,width=64,height=48",
               "--memory", "cuda", "--frames", "3"},
              20s);
  if (code == 0 || out.find("publishing") != std::string::npos)
    GTEST_SKIP() << "this machine has a GPU: tests/cli/gpu_cli.sh covers CUDA channels";
  EXPECT_EQ(code, 1) << out;
  EXPECT_EQ(out.rfind("cudaipc pub: ", 0), 0u) << out;
  std::printf("pub --memory cuda without a GPU: %s", out.c_str());
}

// cat's download of CUDA frames: only where there is a GPU (tests/cli/gpu_cli.sh runs it there).
TEST(CliStream, CatOfACudaChannel) {
  TempDir dir;
  CliProcess pub({"pub", dir.file("gpu"), "--caps", "video/x-raw,format=RGBA,width=64,height=48",
                  "--memory", "cuda", "--rate", "30"});
  auto up = pub.wait_for("publishing", 10s);
  if (!up) GTEST_SKIP() << "no CUDA channel can be made here: " << pub.transcript();
  auto [code, out] = run_cli({"cat", dir.file("gpu"), "--frames", "2", "--out", dir.file("out")});
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(slurp(dir.file("out/format.json")).find("\"memory\":\"cuda\""), std::string::npos);
}
