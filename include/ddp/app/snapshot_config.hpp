#pragma once
// The configuration the commands that use a trained model (eval, predict, export) run with: the
// one stored in the snapshot (what it was trained with), unless --config names a file; the
// command-line overrides apply on top either way.
#include <filesystem>

#include "ddp/app/config.hpp"
#include "ddp/ckpt/snapshot.hpp"

namespace ddp::app {

Config config_for_snapshot(const std::filesystem::path& snapshot,
                           const std::filesystem::path& config_file, const Overrides& overrides);
// The same from a snapshot already read (`meta` of the file `snapshot`): eval reads its file once.
Config config_for_snapshot(const ckpt::SnapshotMeta& meta, const std::filesystem::path& snapshot,
                           const std::filesystem::path& config_file, const Overrides& overrides);

}  // namespace ddp::app
