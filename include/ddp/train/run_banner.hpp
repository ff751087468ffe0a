#pragma once
// The lines a training segment starts its log with (rank 0 prints them): every rank's resident
// memory, the model in one line (its full layer table goes to run.dir/model.txt, and to the log
// with run.verbose), the data and how each global batch is cut. And the lines it ends with.
#include <cstdint>
#include <string>
#include <vector>

#include "ddp/comm/communicator.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/train/batch_plan.hpp"
#include "ddp/train/metrics.hpp"

namespace ddp::train {

// "memory (MiB resident, private/shared): rank 0 812/95, rank 1 ...": collective over comm (shows
// that data.distribute = "broadcast" holds the dataset once per node).
std::string memory_line(comm::Communicator& comm);

// "model: 8 layers, 61,706 parameters (241 KiB), activations 13 MiB for a micro-batch of 64;
// layer table in DIR/model.txt". activations_per_sample: floats (nn::estimate_memory).
std::string model_line(const nn::Model& model, double activations_per_sample,
                       std::int64_t micro_batch, const std::string& table_file);

// "data: 60000 training / 10000 test samples of 1x28x28, 10 classes; 235 steps per epoch, global
// batch 256 (1 rank(s) x 256)". slices: every rank's share the first epoch trains.
std::string data_line(std::int64_t train_samples, std::int64_t test_samples, const Shape& input,
                      std::int64_t classes, std::int64_t steps_per_epoch, const BatchPlan& plan,
                      const std::vector<std::int64_t>& slices);

// "rank shares: 96 + 32 + 64 samples of each global batch of 192" (shares that changed).
std::string shares_line(const BatchPlan& plan);

// "final test accuracy: 91.20% (10000 samples), test loss 0.2500, weights digest 0123456789abcdef"
std::string final_line(const EpochMetrics& last, std::uint64_t digest);

// The line of a stop (runtime::stop_signal(): this rank's signal, 0 when another rank's stopped the
// run), naming the snapshot it writes. Mid-epoch (step_in_epoch > 0, of 0-based `epoch`):
//   stop requested (SIGINT): after 1 epoch(s) and 45 step(s) of epoch 2, saving
//   snapshot_e0001_s000045.h5
// With an epoch's last step (step_in_epoch 0, `epoch` epochs done and saved):
//   stop requested (SIGTERM) with the epoch's last step: saved after 2 epoch(s),
//   snapshot_e0002.h5
std::string stop_line(int signal, std::int64_t epoch, std::int64_t step_in_epoch);

}  // namespace ddp::train
