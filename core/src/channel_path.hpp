// Where channels live by default: $XDG_RUNTIME_DIR/cudaipc, else /tmp/cudaipc-UID (where
// `cudaipc ls` and `top` look).
#pragma once

#include <string>
#include <vector>

namespace cudaipc {

std::string default_channel_dir();

// A producer whose socket goes straight into the default directory creates that directory
// (0700) when it is missing, so `socket-path=$XDG_RUNTIME_DIR/cudaipc/cam0` works on a fresh
// login. Any other directory must exist already.
void make_default_dir_for(const std::string& path);

// The sockets in `dir` (channels, and reply channels "*.reply"), sorted; Errc::system naming the
// directory when it cannot be read.
std::vector<std::string> list_channels(const std::string& dir);

}  // namespace cudaipc
