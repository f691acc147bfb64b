// For tests that run the peer under other uids: the checkout may sit where those users cannot
// reach (a clone in a fresh 0700 directory), so the peer, the container launcher
// (cudaipc-test-container) and libcudaipc are copied into a directory everyone can enter, laid out
// as in the build tree so the peer's $ORIGIN/../../core run path still finds libcudaipc. The
// `cudaipc` tool (CUDAIPC_CLI, tests/cli) goes to core/cli, where its $ORIGIN/.. finds it too.
// CUDAIPC_TEST_PEER, CUDAIPC_TEST_CONTAINER and CUDAIPC_CLI point at the copies while the object
// lives.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "container.hpp"
#include "peer_process.hpp"
#include "temp_dir.hpp"

namespace cudaipc::testing {

class ReachablePeer {
 public:
  ReachablePeer() {
    namespace fs = std::filesystem;
    const fs::path peer = peer_program();
    const fs::path launcher = container_program();
    const fs::path root = dir_.path();
    fs::create_directories(root / "tests/peers");
    fs::create_directories(root / "core");
    fs::copy_file(peer, root / "tests/peers" / peer.filename());
    if (fs::exists(launcher)) fs::copy_file(launcher, root / "tests/peers" / launcher.filename());
    for (const auto& e : fs::directory_iterator(peer.parent_path() / "../../core"))
      if (e.path().filename().string().rfind("libcudaipc.so", 0) == 0)
        fs::copy(e.path(), root / "core" / e.path().filename(), fs::copy_options::copy_symlinks);
    const char* cli = ::getenv("CUDAIPC_CLI");
    if (cli && fs::exists(cli)) {
      fs::create_directories(root / "core/cli");
      fs::copy_file(cli, root / "core/cli" / fs::path(cli).filename());
      old_cli_ = cli;
      ::setenv("CUDAIPC_CLI", (root / "core/cli" / fs::path(cli).filename()).c_str(), 1);
    }
    for (const fs::path& d :
         {root, root / "tests", root / "tests/peers", root / "core", root / "core/cli"})
      ::chmod(d.c_str(), 0755);
    old_peer_ = peer.string();
    old_launcher_ = launcher.string();
    ::setenv("CUDAIPC_TEST_PEER", (root / "tests/peers" / peer.filename()).c_str(), 1);
    ::setenv("CUDAIPC_TEST_CONTAINER", (root / "tests/peers" / launcher.filename()).c_str(), 1);
  }
  ~ReachablePeer() {
    ::setenv("CUDAIPC_TEST_PEER", old_peer_.c_str(), 1);
    ::setenv("CUDAIPC_TEST_CONTAINER", old_launcher_.c_str(), 1);
    if (!old_cli_.empty()) ::setenv("CUDAIPC_CLI", old_cli_.c_str(), 1);
  }
  ReachablePeer(const ReachablePeer&) = delete;
  ReachablePeer& operator=(const ReachablePeer&) = delete;

 private:
  TempDir dir_;
  std::string old_peer_, old_launcher_, old_cli_;
};

}  // namespace cudaipc::testing
