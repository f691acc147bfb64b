// `cudaipc top`: `ls`, refreshed, busiest channel first. On a terminal it redraws the screen; on a
// pipe it prints one plain line per channel per refresh, so logs and tests can read it.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <optional>
#include <set>

#include "args.hpp"
#include "channels.hpp"
#include "commands.hpp"

namespace cudaipc::cli {
namespace {

const char* kHelp =
    "usage: cudaipc top [DIR|PATH...] [--interval SECONDS] [--count N] [--plain]\n"
    "\n"
    "What `cudaipc ls` shows, refreshed every interval (default 1 s), the channels sorted by\n"
    "frames/s, busiest first. New channels appear as their producers start. On a terminal the\n"
    "screen is redrawn; otherwise (or with --plain) each refresh prints one line a channel:\n"
    "  TIME PATH live RATE frames/s published P dropped D consumers C max-lag L\n"
    "  TIME PATH STATE: why\n"
    "A producer that goes away is reported once, as a line naming the channel.\n"
    "\n"
    "  --interval SECONDS  time between refreshes (default 1)\n"
    "  --count N           stop after N refreshes (default: until SIGINT)\n"
    "  --plain             plain lines even on a terminal\n"
    "\n"
    "Exit status: 0; 1 when every channel named on the command line has gone away.\n";

std::string clock_text() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

std::string plain_line(const std::string& when, const ChannelView& v) {
  if (!v.status) return when + " " + v.path + " " + state_name(v.state) + ": " + v.message;
  const ChannelStatus& s = *v.status;
  std::uint64_t max_lag = 0;
  for (const auto& c : s.consumers) max_lag = std::max(max_lag, c.lag);
  char rate[32];
  if (v.rate < 0)
    std::snprintf(rate, sizeof rate, "?");
  else
    std::snprintf(rate, sizeof rate, "%.1f", v.rate);
  return when + " " + v.path + " live " + rate + " frames/s published " +
         std::to_string(s.published) + " dropped " + std::to_string(s.dropped) + " consumers " +
         std::to_string(s.consumers.size()) + " max-lag " + std::to_string(max_lag);
}

}  // namespace

int run_top(int argc, char** argv) {
  Args args(argc, argv, 2, {"interval", "count"}, {"plain"});
  if (args.flag("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  const double interval = args.number("interval", 1, 0.05, 3600);
  const std::uint64_t count = args.count("count", 0, 0, ~std::uint64_t{0} >> 1);
  const bool screen = !args.flag("plain") && ::isatty(STDOUT_FILENO);
  // Channels named one by one: when all of them are gone there is nothing left to watch.
  std::set<std::string> named;
  for (const auto& p : find_channels(args.positional()))
    for (const auto& a : args.positional())
      if (a == p) named.insert(p);
  install_stop_signals();

  std::map<std::string, std::optional<Monitor>> monitors;
  std::map<std::string, ChannelView> last;
  std::set<std::string> reported_gone;
  for (std::uint64_t round = 0; !g_stop.load() && (count == 0 || round < count); ++round) {
    if (round > 0 && !sleep_unless_stopped(interval)) break;
    std::vector<ChannelView> views;
    for (const auto& path : find_channels(args.positional())) {
      auto& m = monitors[path];
      ChannelView v;
      if (!m) {
        try {
          m.emplace(path);
        } catch (const Error& e) {
          v = failed_view(path, e);
        }
      }
      if (m) {
        v = query(*m);
        // A failed connection is not reused: the next round connects afresh, so a producer
        // restarted on the same path is picked up.
        if (v.state != ChannelState::live) m.reset();
      }
      if (auto it = last.find(path); it != last.end()) add_rates(v, it->second);
      views.push_back(v);
    }
    std::stable_sort(views.begin(), views.end(),
                     [](const ChannelView& a, const ChannelView& b) { return a.rate > b.rate; });
    const std::string when = clock_text();
    std::string frame;
    bool all_named_gone = !named.empty();
    for (const auto& v : views) {
      const bool live = v.state == ChannelState::live;
      if (named.count(v.path) && live) all_named_gone = false;
      const bool was_live = last.count(v.path) && last[v.path].state == ChannelState::live;
      if (screen) {
        frame += describe(v);
      } else if (live || !reported_gone.count(v.path)) {
        std::string line = plain_line(when, v);
        if (!live && was_live) line = when + " " + v.path + " " + "producer gone: " + v.message;
        frame += line + "\n";
      }
      if (live)
        reported_gone.erase(v.path);
      else
        reported_gone.insert(v.path);
      last[v.path] = v;
    }
    if (screen) {
      std::printf("\x1b[H\x1b[2Jcudaipc top  %s  every %g s  (%zu channels)\n\n%s", when.c_str(),
                  interval, views.size(), frame.c_str());
    } else {
      if (views.empty()) frame = when + " no channels\n";
      std::fputs(frame.c_str(), stdout);
    }
    std::fflush(stdout);
    if (all_named_gone) {
      std::fprintf(stderr, "cudaipc top: no channel left to watch\n");
      return 1;
    }
  }
  return 0;
}

}  // namespace cudaipc::cli
