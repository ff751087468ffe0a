#pragma once
// `ddp_train export --snapshot FILE --format onnx --output model.onnx`: the trained model as an
// ONNX file (nn/onnx_export.hpp), written atomically after ONNX's checker accepted it.
#include <CLI/CLI.hpp>
#include <ostream>
#include <string>

#include "ddp/app/config.hpp"

namespace ddp::app {

struct ExportCommand {
  std::string snapshot;
  std::string format = "onnx";
  std::string output;
};

CLI::App* add_export_command(CLI::App& app, ExportCommand& cmd);

// One process (world_size > 1 is refused).
int run_export(const ExportCommand& cmd, const Config& cfg, int world_size, std::ostream& out);

}  // namespace ddp::app
