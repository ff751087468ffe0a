#pragma once
// What builds the model (the [model] section of the configuration), defined here and aggregated by
// app::Config.
#include <string>
#include <vector>

#include "ddp/nn/layer_spec.hpp"

namespace ddp::nn {

struct ModelOptions {
  // A built-in architecture (presets.cpp: lenet, vgg_small, resnet20, resnet18, mobilenet_v2, ...);
  // "" when [[model.layers]] are given. Defaults to lenet so that a configuration without a [model]
  // section still describes a trainable model.
  std::string preset = "lenet";
  // resnet18/34/50 and mobilenet_v2: "imagenet" (torchvision's stem), "cifar" (a 3x3 stride-1
  // first convolution and no max pool) or "auto" (cifar for inputs of at most 64 px).
  std::string stem = "auto";
  bool zero_init_residual = false;  // resnet presets: each block's last batch norm starts at 0
  // [[model.layers]], or the preset's layers (load_config resolves the preset, sizing the last
  // linear layer to the dataset's classes).
  std::vector<LayerSpec> layers;
  // Batch norm in training normalises with the statistics of all ranks' samples (PyTorch's
  // SyncBatchNorm): N ranks x B then train as 1 rank x N*B.
  bool sync_batchnorm = false;
  // A conv2d with init = "patch_whitening" (train/patch_whitening.hpp): the training images its
  // patch covariance is estimated from (chosen by train.seed; 0 = all) and the eigenvalue floor.
  std::int64_t whitening_samples = 5000;
  double whitening_eps = 5e-4;
};

}  // namespace ddp::nn
