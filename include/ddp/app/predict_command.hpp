#pragma once
// `ddp_train predict --snapshot FILE IMAGE... | DIR`: classifies JPEG/PNG files with a trained
// model on the CPU, as evaluation sees images (resized to the model's input as `pack --size`
// resizes, normalised as in training), and prints each file's top-k classes with probabilities.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "ddp/app/config.hpp"

namespace ddp::app {

struct PredictCommand {
  std::string snapshot;
  std::vector<std::string> inputs;  // image files, or directories of them
  std::int64_t top_k = 5;
  std::string output;  // predictions CSV ("" = none)
};

CLI::App* add_predict_command(CLI::App& app, PredictCommand& cmd);

// One process (world_size > 1 is refused). Prints to `out`.
int run_predict(const PredictCommand& cmd, const Config& cfg, int world_size, std::ostream& out);

}  // namespace ddp::app
