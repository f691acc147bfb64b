// `cudaipc ls`: one snapshot of every channel, two when rates are wanted.
#include <cstdio>
#include <thread>

#include "args.hpp"
#include "channels.hpp"
#include "commands.hpp"

namespace cudaipc::cli {
namespace {

const char* kHelp =
    "usage: cudaipc ls [DIR|PATH...] [--json] [--interval SECONDS]\n"
    "\n"
    "Lists the channels in $XDG_RUNTIME_DIR/cudaipc (else /tmp/cudaipc-UID), or in the given\n"
    "directories, or the given channel paths. For each: the producer's pid and executable, the\n"
    "memory (host, or cuda vmm/legacy and the device), slots and slot size, the format (caps and\n"
    "tensor), frames published, frames/s, drops and connections refused for want of file\n"
    "descriptors; for each consumer its pid, mode (every-frame or latest), lag (frames published\n"
    "after the newest it took), leases (slots it holds), delivered frames and frames/s, and\n"
    "whether it was evicted. A socket no producer listens on is shown as stale; a channel this\n"
    "user may not open, as denied.\n"
    "\n"
    "Reading a channel takes no consumer place and holds no frame: the producer answers from\n"
    "counters it keeps anyway.\n"
    "\n"
    "  --json              one JSON object {\"channels\": [...]} for scripts\n"
    "  --interval SECONDS  time between the two snapshots rates come from (default 0.5;\n"
    "                      0: one snapshot, no rates)\n"
    "\n"
    "Exit status: 0, or 1 when a channel named on the command line is not live.\n";

}  // namespace

int run_ls(int argc, char** argv) {
  Args args(argc, argv, 2, {"interval"}, {"json"});
  if (args.flag("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  const double interval = args.number("interval", 0.5, 0, 60);
  const std::vector<std::string> paths = find_channels(args.positional());
  std::vector<ChannelView> views;
  std::vector<std::optional<Monitor>> monitors(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    try {
      monitors[i].emplace(paths[i]);
      views.push_back(query(*monitors[i]));
    } catch (const Error& e) {
      views.push_back(failed_view(paths[i], e));
    }
  }
  if (interval > 0) {
    // One wait for every channel: the second snapshot of each is `interval` after its first.
    std::this_thread::sleep_for(std::chrono::duration<double>(interval));
    for (std::size_t i = 0; i < paths.size(); ++i) {
      if (!monitors[i] || views[i].state != ChannelState::live) continue;
      ChannelView later = query(*monitors[i]);
      add_rates(later, views[i]);
      views[i] = std::move(later);
    }
  }
  int status = 0;
  // Only channels named one by one decide the exit status; a directory's are just listed.
  for (const auto& v : views)
    for (const auto& named : args.positional())
      if (named == v.path && v.state != ChannelState::live) status = 1;
  if (args.flag("json")) {
    Json j;
    j.begin_object().begin_array("channels");
    for (const auto& v : views) to_json(j, v);
    j.end_array().end_object();
    std::printf("%s\n", j.text().c_str());
    return status;
  }
  if (views.empty())
    std::printf("no channels in %s\n", args.positional().empty() ? default_channel_dir().c_str()
                                                                 : "the given directories");
  for (const auto& v : views) std::fputs(describe(v).c_str(), stdout);
  return status;
}

}  // namespace cudaipc::cli
