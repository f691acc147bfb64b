// The subcommands. Each parses its own arguments (argv[0] is the tool, argv[1] the subcommand)
// and returns the process's exit status: 0 done, 1 a channel failed (a line on stderr says why),
// 2 a usage error.
#pragma once

#include <atomic>

namespace cudaipc::cli {

int run_ls(int argc, char** argv);
int run_top(int argc, char** argv);
int run_probe(int argc, char** argv);
int run_cat(int argc, char** argv);
int run_pub(int argc, char** argv);

// Set by SIGINT/SIGTERM once install_stop_signals() ran: long-running commands end cleanly.
extern std::atomic<bool> g_stop;
void install_stop_signals();
// Sleeps up to `seconds`, returning early (false) once a stop signal came.
bool sleep_unless_stopped(double seconds);

}  // namespace cudaipc::cli
