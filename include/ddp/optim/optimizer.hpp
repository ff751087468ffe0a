#pragma once
// Optimizers over the model's flat buffers: one fused update pass per step (PyTorch's rules for
// SGD with momentum/Nesterov/weight decay, Adam and AdamW).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ddp/backend/backend.hpp"
#include "ddp/backend/mirrored.hpp"
#include "ddp/optim/options.hpp"
#include "ddp/tensor.hpp"

namespace ddp::optim {

// [begin, end) of the flat parameter buffer.
using ParamRange = std::pair<std::size_t, std::size_t>;

class Optimizer {
 public:
  // count: length of the flat parameter buffer. norm_and_bias: where the batch-norm parameters and
  // the biases lie (nn::norm_and_bias_ranges), which get no weight decay when
  // cfg.no_decay_norm_bias is set. Throws ConfigError for an unknown optimizer.
  static std::unique_ptr<Optimizer> create(const Options& cfg, backend::Backend& be,
                                           std::size_t count,
                                           const std::vector<ParamRange>& norm_and_bias = {});
  virtual ~Optimizer() = default;

  // One update of params from grads (already averaged over the global batch) at learning rate lr.
  // skip_if: an overflow flag (Backend::unscale_flag): where it is set the backend does nothing;
  // the step still counts until step_was_skipped() says so.
  virtual void step(std::span<float> params, std::span<const float> grads, double lr,
                    const std::uint32_t* skip_if = nullptr) = 0;
  // A step counted already was skipped on the device (learnt later from its flag): the
  // snapshot's count goes on from the steps really taken.
  void step_was_skipped() { --steps_; }
  // Whether an update depends on the number of updates applied before it (Adam's bias
  // correction): then a skipped step must be known before the next one is enqueued.
  virtual bool needs_applied_step_count() const { return false; }

  // Named state buffers, each as long as the flat parameter buffer ("momentum"; "exp_avg",
  // "exp_avg_sq"), for snapshots: the host mirrors of the backend's buffers, current after
  // pull_state(); what is written into them reaches the backend by push_state().
  std::vector<std::pair<std::string, Tensor>> state() const;
  void pull_state() const;
  void push_state();
  std::int64_t steps_taken() const { return steps_; }
  void set_steps_taken(std::int64_t s) { steps_ = s; }

 protected:
  // Adds a zero state buffer of `count` floats in be's memory; returns its backend pointer.
  float* add_state(const std::string& name, backend::Backend& be, std::size_t count);

  // The buffer as runs of parameters with and without weight decay, adjacent runs of the same
  // kind merged: one run (one fused pass) unless optim.no_decay_norm_bias has work to do.
  struct Run {
    std::size_t begin = 0, end = 0;
    bool decay = true;
  };
  static std::vector<Run> decay_runs(const Options& cfg, std::size_t count,
                                     std::vector<ParamRange> norm_and_bias);

  std::int64_t steps_ = 0;

 private:
  std::vector<std::pair<std::string, backend::Mirrored>> state_;
};

}  // namespace ddp::optim
