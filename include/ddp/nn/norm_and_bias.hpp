#pragma once
// The parameters that the usual ResNet recipe exempts from weight decay (optim.no_decay_norm_bias):
// every batch-norm layer's weight and bias, and every parameter named *.bias.
#include <cstddef>
#include <utility>
#include <vector>

#include "ddp/nn/model.hpp"

namespace ddp::nn {

// Their [begin, end) ranges of the flat parameter buffer, in buffer order, each reaching up to the
// next parameter (the alignment padding between them is zero and stays zero under any update), so
// that neighbours such as bn.weight and bn.bias form one range.
std::vector<std::pair<std::size_t, std::size_t>> norm_and_bias_ranges(const Model& model);

}  // namespace ddp::nn
