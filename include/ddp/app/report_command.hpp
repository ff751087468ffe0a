#pragma once
// `ddp_train report RUN_DIR`: writes RUN_DIR/report.html (see report.hpp for what it shows).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>

#include "ddp/app/config.hpp"

namespace ddp::app {

struct ReportCommand {
  std::string run_dir;
  std::string output;    // "" = RUN_DIR/report.html
  std::string snapshot;  // "" = the run's newest complete snapshot
  std::int64_t images = 48;
};

CLI::App* add_report_command(CLI::App& app, ReportCommand& cmd);

// One process. The test images are predicted with the snapshot's stored configuration (the
// command-line overrides and --config apply on top, as for eval). Prints where the page went.
int run_report(const ReportCommand& cmd, const std::filesystem::path& config_file,
               const Overrides& overrides, int world_size, std::ostream& out);

}  // namespace ddp::app
