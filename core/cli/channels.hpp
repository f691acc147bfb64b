// Finding channels and reading their state: the part `ls` and `top` share. Every way a channel
// can fail to answer (a stale socket, one we may not open, a producer of another version, one
// that went away) becomes a state with a sentence, never an exception that reaches the user.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cudaipc/error.hpp"
#include "cudaipc/monitor.hpp"
#include "json.hpp"

namespace cudaipc::cli {

// Where channels live by default: $XDG_RUNTIME_DIR/cudaipc, else /tmp/cudaipc-UID (never created
// here: listing must not make directories).
std::string default_channel_dir();

// The socket paths named by `args` (directories are listed, sorted; anything else is taken as a
// channel path), or those of the default directory when `args` is empty. A named path that does
// not exist is kept: querying it says so.
std::vector<std::string> find_channels(const std::vector<std::string>& args);

enum class ChannelState { live, stale, missing, denied, busy, version, error };
const char* state_name(ChannelState s);

struct ChannelView {
  std::string path;
  ChannelState state = ChannelState::error;
  std::string message;                  // why it is not live
  std::optional<ChannelStatus> status;  // when live
  double rate = -1;                     // frames/s between two snapshots; < 0: unknown
  std::vector<double> consumer_rates;   // per status.consumers entry; < 0: unknown
};

// The state of a failed query, from the error it threw.
ChannelView failed_view(const std::string& path, const Error& e);
ChannelView query(Monitor& m);
ChannelView query(const std::string& path);
// Fills in rates from an earlier snapshot of the same channel.
void add_rates(ChannelView& now, const ChannelView& before);

// Human-readable lines for one channel (indented details below a header line).
std::string describe(const ChannelView& v);
// The channel as one JSON object.
void to_json(Json& j, const ChannelView& v);

std::string memory_text(const ChannelStatus& s);
std::string mode_text(ConsumeMode m);

}  // namespace cudaipc::cli
