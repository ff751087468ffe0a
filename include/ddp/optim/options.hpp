#pragma once
// What the optimizer and the learning-rate schedule read: defined here, in their room, and
// aggregated by app::Config (optim and schedule sections of the configuration).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddp::optim {

// One [[optim.groups]] table: the parameters its patterns match (optim/param_pattern.hpp) train
// with their own learning-rate factor and weight decay. A parameter belongs to the first group
// that matches it; the others to the default group (optim.lr, optim.weight_decay).
struct GroupOptions {
  std::vector<std::string> match;      // names, prefixes, globs ("*.bias", "fc.*") or kinds ("bn")
  double lr_mult = 1.0;                // the group's lr = lr_mult x the schedule's lr
  std::optional<double> weight_decay;  // unset: optim.weight_decay (and no_decay_norm_bias)
  std::int64_t line = 0;               // in the config file, for messages (0: unknown)
};

struct Options {
  std::string name = "sgd";  // sgd | adam | adamw
  double lr = 0.01;
  double momentum = 0.0;      // sgd
  bool nesterov = false;      // sgd
  double weight_decay = 0.0;  // L2 for sgd/adam, decoupled for adamw
  double beta1 = 0.9;         // adam/adamw
  double beta2 = 0.999;
  double eps = 1e-8;
  bool no_decay_norm_bias = false;   // no weight decay on batch-norm parameters and biases
  std::vector<GroupOptions> groups;  // [[optim.groups]], in file order
};

struct ScheduleOptions {
  std::string name = "constant";  // constant | step | cosine | onecycle
  double warmup_epochs = 0.0;  // linear warm-up from warmup_start_factor*lr (constant/step/cosine)
  double warmup_start_factor = 0.0;
  std::int64_t step_size = 30;    // step: epochs between decays
  double gamma = 0.1;             // step: decay factor
  double min_lr = 0.0;            // cosine: final lr
  double pct_start = 0.3;         // onecycle: fraction of steps spent increasing
  double div_factor = 25.0;       // onecycle: initial lr = lr / div_factor
  double final_div_factor = 1e4;  // onecycle: final lr = initial lr / final_div_factor
};

}  // namespace ddp::optim
