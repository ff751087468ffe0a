#include "ddp/app/snapshot_config.hpp"

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"

namespace ddp::app {

Config config_for_snapshot(const std::filesystem::path& snapshot,
                           const std::filesystem::path& config_file, const Overrides& overrides) {
  if (!config_file.empty()) return load_config(config_file, overrides);
  return config_for_snapshot(ckpt::read_meta(snapshot), snapshot, config_file, overrides);
}

Config config_for_snapshot(const ckpt::SnapshotMeta& meta, const std::filesystem::path& snapshot,
                           const std::filesystem::path& config_file, const Overrides& overrides) {
  if (!config_file.empty()) return load_config(config_file, overrides);
  if (meta.config_toml.empty() && meta.kind == ckpt::kWeightsKind)
    throw ConfigError(snapshot.string() + ": a weights file (imported from " + meta.imported_from +
                      ") holds no configuration: give one with --config naming the model (its "
                      "model.preset and model.stem) and the dataset");
  if (meta.config_toml.empty())
    throw ConfigError(snapshot.string() +
                      ": the snapshot holds no configuration; give the training one with --config");
  return load_config_text(meta.config_toml, snapshot.string() + " (stored configuration)",
                          overrides);
}

}  // namespace ddp::app
