#pragma once
// What the optimizer and the learning-rate schedule read: defined here, in their room, and
// aggregated by app::Config (optim and schedule sections of the configuration).
#include <cstdint>
#include <string>

namespace ddp::optim {

struct Options {
  std::string name = "sgd";  // sgd | adam | adamw
  double lr = 0.01;
  double momentum = 0.0;      // sgd
  bool nesterov = false;      // sgd
  double weight_decay = 0.0;  // L2 for sgd/adam, decoupled for adamw
  double beta1 = 0.9;         // adam/adamw
  double beta2 = 0.999;
  double eps = 1e-8;
  bool no_decay_norm_bias = false;  // no weight decay on batch-norm parameters and biases
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
