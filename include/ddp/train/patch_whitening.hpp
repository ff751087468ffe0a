#pragma once
// Patch whitening at the start of a run: every conv2d with init = "patch_whitening" gets the
// whitening filters (nn/init_whitening.hpp) of the training images' k x k patches. The images are
// model.whitening_samples of the training split chosen by train.seed, as the evaluation transform
// gives them (normalised, not augmented), so the filters depend on the seed and the data alone.
#include <cstdint>
#include <string>

#include "ddp/data/dataset.hpp"
#include "ddp/data/options.hpp"
#include "ddp/data/transform.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/nn/model_options.hpp"

namespace ddp::train {

// Whether any layer of `model` asks for it.
bool wants_patch_whitening(const nn::Model& model);

// Sets those layers' weights in the model's host mirror and pushes them; returns a start-up line
// per layer ("" when none). ConfigError naming the layer when it does not read the model input
// directly, has groups or dilation, or has other than 2 * c * kh * kw filters.
std::string apply_patch_whitening(nn::Model& model, const data::Dataset& train,
                                  const data::Normalization& norm, const data::Options& data,
                                  const nn::ModelOptions& opt, std::uint64_t seed);

}  // namespace ddp::train
