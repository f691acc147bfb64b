// Where the core's diagnostics go. The core never logs on the per-frame path; refusals, peer
// deaths and protocol errors are logged once each. The GStreamer elements route this to their
// debug categories; the default prints warnings and errors to stderr.
#pragma once

namespace cudaipc {

enum class LogLevel { error = 1, warning = 2, info = 3, debug = 4 };
using LogHandler = void (*)(LogLevel level, const char* message, void* user_data);

// Process-wide; nullptr restores the default.
void set_log_handler(LogHandler handler, void* user_data) noexcept;
void log(LogLevel level, const char* message) noexcept;

}  // namespace cudaipc
