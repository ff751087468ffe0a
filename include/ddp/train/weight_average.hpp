#pragma once
// An exponential moving average of the weights (train.ema), kept on the backend beside the model
// as two flat buffers laid out as its parameters and buffers. Every ema_every optimizer steps
// after ema_start the average moves towards the weights:
//   average = lerp(average, weights, 1 - decay_t),  decay_t = ema^ema_every * (t / T)^ema_ramp
// (t: steps done, T: the run's steps; the first update copies the weights). The batch-norm running
// statistics are averaged with the parameters, as timm's ModelEmaV2 and airbench's lookahead do
// (torch.optim.swa_utils.AveragedModel(use_buffers=True) likewise). "lookahead" mode also copies
// the average into the weights after each update and at each epoch's end (airbench94's
// LookaheadState). Every rank computes the same average from its identical weights; only the
// buffers, which each rank updates from its own samples, are averaged over the ranks at each
// epoch's end like the model's. Evaluation (eval.weights) and snapshots (/ema) use it.
#include <cstdint>
#include <span>
#include <string>

#include "ddp/backend/backend.hpp"
#include "ddp/backend/mirrored.hpp"
#include "ddp/comm/communicator.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/train/options.hpp"

namespace ddp::train {

class WeightAverage {
 public:
  // opt: train.ema*; total_steps: the run's optimizer steps (the ramp's T). ConfigError for an
  // unknown mode.
  WeightAverage(const Options& opt, nn::Model& model, std::int64_t total_steps);

  // After the run's optimizer step `steps_done` (1 for the first): an update when one is due.
  void after_step(std::int64_t steps_done);
  // At an epoch's end, after the model's buffers were averaged over the ranks: the average's
  // buffers likewise over `comm` (samples: this rank's since the last time; nullptr where the
  // model's were not averaged: sync batch norm, reproducible mode), then, in lookahead mode, the
  // weights take the average. Collective over `comm`.
  void after_epoch(comm::Communicator* comm, std::int64_t samples);

  // Updates made so far (0: not started; the weights are then all there is).
  std::int64_t updates() const { return updates_; }
  bool started() const { return updates_ > 0; }
  bool lookahead() const { return lookahead_; }
  // The decay of the update after step t (before 1 - it is the lerp weight).
  double decay_at(std::int64_t steps_done) const;
  // Whether step t updates.
  bool due(std::int64_t steps_done) const;
  // "ema: decay 0.95 per step, every 5 steps after step 144, ramp (t/T)^3, lookahead".
  std::string describe() const;

  // Exchanges the model's parameters and buffers with the average (call again to undo): what
  // evaluating or exporting the average does. The model must not train in between.
  void swap_with_model();

  // Snapshots and resume: the host mirrors (pull() first; push() after writing them).
  void pull() const;
  void push();
  std::span<float> host_params() const { return params_.host_span(); }
  std::span<float> host_buffers() const { return buffers_.host_span(); }
  // A resumed average: `updates` made (0: none, the next due step starts it), the mirrors written.
  void set_updates(std::int64_t updates) { updates_ = updates; }

 private:
  void copy_into(bool model_to_average);

  nn::Model& model_;
  backend::Backend& be_;
  double decay_;
  std::int64_t every_, start_, total_;
  double ramp_;
  bool lookahead_;
  std::int64_t updates_ = 0;
  backend::Mirrored params_, buffers_;
  Tensor scratch_;  // swap_with_model's temporary, made at first use
};

}  // namespace ddp::train
