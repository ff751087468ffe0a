#pragma once
// Optimizers over the model's flat buffers: one fused update pass per step (PyTorch's rules for
// SGD with momentum/Nesterov/weight decay, Adam and AdamW).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ddp/app/config.hpp"
#include "ddp/backend/backend.hpp"
#include "ddp/tensor.hpp"

namespace ddp::optim {

class Optimizer {
 public:
  // count: length of the flat parameter buffer. Throws ConfigError for an unknown optimizer.
  static std::unique_ptr<Optimizer> create(const app::OptimConfig& cfg, backend::Backend& be,
                                           std::size_t count);
  virtual ~Optimizer() = default;

  // One update of params from grads (already averaged over the global batch) at learning rate lr.
  virtual void step(std::span<float> params, std::span<const float> grads, double lr) = 0;

  // Named state buffers, each as long as the flat parameter buffer ("momentum"; "exp_avg",
  // "exp_avg_sq"), for snapshots.
  virtual std::vector<std::pair<std::string, Tensor>> state() = 0;
  std::int64_t steps_taken() const { return steps_; }
  void set_steps_taken(std::int64_t s) { steps_ = s; }

 protected:
  std::int64_t steps_ = 0;
};

}  // namespace ddp::optim
