#pragma once
// The training loop: epochs of synchronous data-parallel steps, exact evaluation, metrics.
#include <cstdint>
#include <iosfwd>
#include <memory>

#include "ddp/app/config.hpp"
#include "ddp/backend/backend.hpp"
#include "ddp/comm/communicator.hpp"
#include "ddp/data/dataset.hpp"
#include "ddp/data/transform.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/optim/lr_schedule.hpp"
#include "ddp/optim/optimizer.hpp"
#include "ddp/train/metrics.hpp"

namespace ddp::train {

struct EvalResult {
  double loss = 0.0;         // mean over all test samples
  double accuracy = 0.0;     // fraction
  std::int64_t samples = 0;  // counted exactly once each over all ranks
};

struct TrainResult {
  EpochMetrics last;
  double total_s = 0.0;
};

class Trainer {
 public:
  // Loads data, builds the model (same initial weights on every rank), optimizer and schedule.
  // `out` receives the human log (pass a null stream on ranks other than 0).
  Trainer(const app::Config& cfg, comm::Communicator& comm, std::ostream& out);
  ~Trainer();

  TrainResult run();
  EvalResult evaluate();

  nn::Model& model() { return *model_; }
  const data::Dataset& train_set() const { return train_; }
  const data::Dataset& test_set() const { return test_; }

 private:
  EpochMetrics train_epoch(std::int64_t epoch);

  app::Config cfg_;
  comm::Communicator& comm_;
  std::ostream& out_;
  std::unique_ptr<backend::Backend> be_;
  data::Dataset train_, test_;
  data::Normalization norm_;
  std::unique_ptr<nn::Model> model_;
  std::unique_ptr<optim::Optimizer> opt_;
  std::unique_ptr<optim::LrSchedule> sched_;
  std::int64_t steps_per_epoch_ = 0;
  std::int64_t global_step_ = 0;
  Tensor dlogits_;
};

}  // namespace ddp::train
