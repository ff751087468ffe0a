#pragma once
// `ddp_train pack`: its command-line options, and running it with a progress bar on a terminal
// and a summary line at the end.
#include <CLI/CLI.hpp>
#include <ostream>
#include <string>

#include "ddp/data/pack.hpp"

namespace ddp::app {

struct PackCommand {
  data::PackOptions options;
  std::string output, encoding = "raw", size, split = "train", val_output;
};

// Adds the `pack` subcommand to `app`; its options land in `cmd`.
CLI::App* add_pack_command(CLI::App& app, PackCommand& cmd);

// Packs; prints the summary to `out`. `world_size` > 1 is refused (packing is one process's job).
// A failure is reported here, on stderr without a rank (pack is not a ranked run), and returns 1.
int run_pack(PackCommand& cmd, int world_size, std::ostream& out);

// Prints "ddp_train pack: error: MESSAGE" on stderr and returns 1 (also for pack's command-line
// errors, which main reports).
int report_pack_error(const std::string& message);

}  // namespace ddp::app
