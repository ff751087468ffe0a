#pragma once
// The snapshot layout in one place (docs/snapshot_format.md): group and dataset paths, attribute
// names, and how the model's named tensors map onto /model/<layer>/<param>.
#include <string>
#include <vector>

#include "ddp/nn/model.hpp"

namespace ddp::ckpt::layout {

inline constexpr const char* kModel = "/model";
inline constexpr const char* kOptimizer = "/optimizer";
inline constexpr const char* kMeta = "/meta";
inline constexpr const char* kConfigToml = "/meta/config_toml";
inline constexpr const char* kMetricsJsonl = "/meta/metrics_jsonl";

// Attributes of /meta.
inline constexpr const char* kFormatVersion = "format_version";
inline constexpr const char* kProgramVersion = "program_version";
inline constexpr const char* kEpoch = "epoch";
inline constexpr const char* kStepInEpoch = "step_in_epoch";
inline constexpr const char* kSamplesSeen = "samples_seen";
inline constexpr const char* kGlobalStep = "global_step";
inline constexpr const char* kSeed = "seed";
inline constexpr const char* kWorldSize = "world_size";
inline constexpr const char* kLossScale = "loss_scale";
inline constexpr const char* kLossScaleGoodSteps = "loss_scale_good_steps";
// Added within format version 1 (older files lack them; readers take the defaults).
inline constexpr const char* kRunId = "run_id";
inline constexpr const char* kGlobalBatch = "global_batch";
inline constexpr const char* kRunTrainSeconds = "run_train_s";
inline constexpr const char* kEpochLossSum = "epoch_loss_sum";
inline constexpr const char* kEpochCorrect = "epoch_correct";
inline constexpr const char* kEpochSamples = "epoch_samples";
inline constexpr const char* kEpochSteps = "epoch_steps";
inline constexpr const char* kEpochTrainSeconds = "epoch_train_s";
inline constexpr const char* kEpochCommWaitSeconds = "epoch_comm_wait_s";
inline constexpr const char* kRankShares = "rank_shares";  // an int64 array, one per rank
// Attributes of /optimizer.
inline constexpr const char* kOptimizerName = "name";
inline constexpr const char* kOptimizerSteps = "steps";

// One tensor of the model as the snapshot names it.
struct Entry {
  std::string name;   // "conv1.weight", as Model names it
  std::string layer;  // "conv1": the group
  std::string leaf;   // "weight": the dataset
  const nn::NamedTensor* tensor;
  bool is_param;  // false for buffers (batch-norm running statistics): no optimizer state
};

// The model's parameters and buffers in model order (each layer's parameters, then its buffers).
// Throws ConfigError for a layer name that cannot be an HDF5 group name.
std::vector<Entry> model_entries(const nn::Model& model);

inline std::string join(const std::string& group, const std::string& leaf) {
  return group + "/" + leaf;
}

}  // namespace ddp::ckpt::layout
