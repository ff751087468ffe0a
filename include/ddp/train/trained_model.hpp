#pragma once
// A trained model rebuilt from a snapshot (on the CPU unless given a backend), without its dataset:
// the layers from the configuration, the image shape and class count from the dataset's
// description (data/dataset_geometry.hpp), the weights and batch-norm statistics from the
// snapshot (its moving average /ema instead when eval.weights says so). What `ddp_train eval`,
// `predict` and `export` work on.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ddp/backend/backend.hpp"
#include "ddp/ckpt/snapshot.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/train/options.hpp"

namespace ddp::train {

class TrainedModel {
 public:
  // cfg: the configuration the snapshot was trained with (possibly overridden). ConfigError
  // naming the snapshot and every tensor whose name or shape differs from the configured model.
  // be: where the model computes (null: the CPU).
  TrainedModel(const Setup& cfg, const ckpt::Snapshot& snap,
               std::unique_ptr<backend::Backend> be = nullptr);
  ~TrainedModel();

  nn::Model& model() { return *model_; }
  backend::Backend& backend() { return *be_; }
  const std::vector<std::string>& class_names() const { return class_names_; }
  // Whether the weights are the snapshot's moving average (/ema, eval.weights), not /model.
  bool uses_average() const { return uses_average_; }

  // Logits [n, classes] (host memory, row-major) of n normalised images [n, C, H, W] in eval mode
  // (on the CPU backend).
  std::vector<float> logits(const float* images, std::int64_t n);

 private:
  std::unique_ptr<backend::Backend> be_;
  std::unique_ptr<nn::Model> model_;
  std::vector<std::string> class_names_;
  std::int64_t reserved_ = 0;
  bool uses_average_ = false;
};

}  // namespace ddp::train
