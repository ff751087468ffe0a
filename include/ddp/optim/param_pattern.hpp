#pragma once
// Which parameters a pattern names, for train.freeze and [[optim.groups]]: the parameters as the
// optimizer sees them (name, kind, place in the flat buffer), and the one matching rule both keys
// share. A pattern matches a parameter when it is
//   - a name or a prefix of names at a dot: "layer1" matches layer1.0.conv1.weight (not
//     layer10.*), "fc.weight" matches fc.weight;
//   - a glob with * (any characters, dots too) or ?: "*.bias", "fc.*", "layer4.*.bn?.weight";
//   - a kind: "bn" (or "batchnorm"), "conv" (or "conv2d"), "linear": every parameter of such
//     layers.
// Names are the model's (torchvision's for the presets: `ddp_train inspect` lists them).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ddp/nn/model.hpp"

namespace ddp::optim {

struct ParamInfo {
  std::string name;                // "layer1.0.conv1.weight"
  std::string kind;                // its layer's type: "conv2d", "batchnorm", "linear", ...
  std::size_t begin = 0, end = 0;  // [begin, end) of the flat buffer, up to the next parameter
                                   // (the alignment padding after it is its own: zero, it stays
                                   // zero), so that neighbours form one range
  bool frozen = false;             // train.freeze: no gradient, no update, no optimizer state
};

// The model's parameters in buffer order, with the model's frozen flags.
std::vector<ParamInfo> param_infos(const nn::Model& model);

bool matches(std::string_view pattern, const ParamInfo& p);

// For each parameter, whether any of `patterns` matches it. Throws ConfigError naming `key`
// ("train.freeze") and every pattern that matches no parameter, with some of the names there are.
std::vector<bool> select(const std::vector<std::string>& patterns,
                         const std::vector<ParamInfo>& params, const std::string& key);

}  // namespace ddp::optim
