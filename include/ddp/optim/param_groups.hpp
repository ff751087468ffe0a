#pragma once
// Parameter groups ([[optim.groups]], optim.no_decay_norm_bias, train.freeze) as the optimizer's
// fused update sees them: the flat parameter buffer cut into runs that share a learning-rate
// factor and a weight decay, each with its place in the optimizer's state buffers. Frozen
// parameters lie in no run: no update, no state. PyTorch's param_groups, over ranges.
#include <cstddef>
#include <vector>

#include "ddp/optim/options.hpp"
#include "ddp/optim/param_pattern.hpp"

namespace ddp::optim {

struct UpdateRun {
  std::size_t begin = 0, end = 0;  // [begin, end) of the flat parameter buffer
  double lr_mult = 1.0;            // this run's lr = lr_mult x the schedule's
  double weight_decay = 0.0;
  std::size_t state = 0;  // where the run starts in each state buffer (momentum, exp_avg, ...)

  friend bool operator==(const UpdateRun&, const UpdateRun&) = default;
};

// The runs for `params` (param_infos, buffer order) under cfg: each parameter takes the lr_mult
// and weight decay of the first of cfg.groups that matches it; otherwise lr_mult 1 and
// cfg.weight_decay, or 0 for batch-norm parameters and *.bias with cfg.no_decay_norm_bias.
// Adjacent parameters with the same values form one run; frozen ones none. State offsets pack the
// runs back to back. Throws ConfigError naming a group whose patterns match no parameter.
std::vector<UpdateRun> plan_update_runs(const Options& cfg, const std::vector<ParamInfo>& params);

// The runs of a model without names: [0, count) at cfg.weight_decay, but for the no-decay ranges
// (nn::norm_and_bias_ranges) when cfg.no_decay_norm_bias. Throws Error for ranges that overlap or
// lie outside the buffer.
std::vector<UpdateRun> plain_update_runs(const Options& cfg, std::size_t count,
                                         std::vector<std::pair<std::size_t, std::size_t>> no_decay);

}  // namespace ddp::optim
