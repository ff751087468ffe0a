#pragma once
// Optimizers over the model's flat buffers: one fused update pass per run of parameters that
// share hyper-parameters (PyTorch's rules for SGD with momentum/Nesterov/weight decay, Adam and
// AdamW; its param_groups as runs).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ddp/backend/backend.hpp"
#include "ddp/backend/mirrored.hpp"
#include "ddp/optim/options.hpp"
#include "ddp/optim/param_groups.hpp"
#include "ddp/tensor.hpp"

namespace ddp::optim {

// [begin, end) of the flat parameter buffer.
using ParamRange = std::pair<std::size_t, std::size_t>;

class Optimizer {
 public:
  // The update runs over the flat parameter buffer (optim/param_groups.hpp): their learning-rate
  // factors and weight decays, and where each keeps its state; parameters in no run (frozen) are
  // never touched and have no state. Throws ConfigError for an unknown optimizer.
  static std::unique_ptr<Optimizer> create(const Options& cfg, backend::Backend& be,
                                           std::vector<UpdateRun> runs);
  // Every parameter of a buffer of `count` floats, cfg.weight_decay on all but norm_and_bias
  // (nn::norm_and_bias_ranges) when cfg.no_decay_norm_bias is set.
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

  // Named state buffers ("momentum"; "exp_avg", "exp_avg_sq"), each holding the runs back to back
  // (state_offset maps a parameter there), for snapshots: the host mirrors of the backend's
  // buffers, current after pull_state(); what is written into them reaches the backend by
  // push_state().
  std::vector<std::pair<std::string, Tensor>> state() const;
  void pull_state() const;
  void push_state();
  // Where the state of the parameter at `param_offset` of the flat buffer lies in each state
  // buffer; nullopt for a parameter in no run (frozen: it has no state).
  std::optional<std::size_t> state_offset(std::size_t param_offset) const;
  const std::vector<UpdateRun>& runs() const { return runs_; }
  std::int64_t steps_taken() const { return steps_; }
  void set_steps_taken(std::int64_t s) { steps_ = s; }

 protected:
  explicit Optimizer(std::vector<UpdateRun> runs);
  // Adds a zero state buffer (the runs' total length) in be's memory; returns its backend pointer.
  float* add_state(const std::string& name, backend::Backend& be);

  std::vector<UpdateRun> runs_;
  std::int64_t steps_ = 0;

 private:
  std::vector<std::pair<std::string, backend::Mirrored>> state_;
};

}  // namespace ddp::optim
