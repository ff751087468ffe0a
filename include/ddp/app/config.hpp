#pragma once
// The resolved run configuration: the TOML file plus command-line overrides, validated.
// Every key has a documented default in the schema (config_schema.hpp); this struct is what the
// rest of the program reads.
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "ddp/nn/layer_spec.hpp"
#include "ddp/nn/presets.hpp"
#include "ddp/shape.hpp"
#include "ddp/train/options.hpp"

namespace ddp::app {

// Each room defines the options it reads; the configuration aggregates them (train::Setup) and
// adds what only the application needs. The aliases keep the section names.
using RunConfig = train::RunOptions;
using DataConfig = data::Options;
using ModelConfig = nn::ModelOptions;
using TrainConfig = train::Options;
using OptimConfig = optim::Options;
using ScheduleConfig = optim::ScheduleOptions;
using CommConfig = sync::Options;
using RuntimeConfig = runtime::Options;
using WordOrNumbers = train::WordOrNumbers;

struct Config : train::Setup {
  std::filesystem::path source;  // the config file ("" when none)
};

// "section.key" -> value text, as given on the command line (e.g. {"train.epochs", "5"}).
using Overrides = std::vector<std::pair<std::string, std::string>>;

// Reads `path` (may be empty: defaults only), applies overrides, validates everything.
// Throws ConfigError naming the file, key and line, with a "did you mean" suggestion for unknown
// keys.
Config load_config(const std::filesystem::path& path, const Overrides& overrides);
// The same from TOML text held elsewhere (a snapshot's stored configuration); `origin` names it in
// messages ("snapshot_e0003.h5 (stored config)"). Config::source stays empty.
Config load_config_text(const std::string& toml_text, const std::string& origin,
                        const Overrides& overrides);

// For `doctor`, which reports a configuration error as one of its checks and goes on with the
// others: the configuration load_config gives, or, when that fails, its message in `problem` and
// the keys as far as they could be read (the file and overrides without the model and the checks
// across keys; defaults when even that fails). Its resolved_toml holds the keys as given, the
// model not resolved (what the ranks compare: resolving reads the dataset, which may differ from
// host to host). Never throws a ddp::Error.
Config load_config_for_doctor(const std::filesystem::path& path, const Overrides& overrides,
                              std::string& problem);

// The options `cfg` asks of its preset (nn/presets.hpp): its model.* keys, its dataset's image
// size and classes.
nn::PresetOptions preset_options(const Config& cfg);

}  // namespace ddp::app
