#pragma once
// The data a training run reads: both splits opened as the loader reads them (in memory, shared
// per node or streamed), checked against each other, with the normalisation and class names.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ddp/comm/communicator.hpp"
#include "ddp/data/dataset.hpp"
#include "ddp/data/options.hpp"
#include "ddp/data/transform.hpp"
#include "ddp/shape.hpp"

namespace ddp::train {

struct TrainingData {
  std::unique_ptr<data::Dataset> train, test;
  std::vector<std::int64_t> chunks;  // data.shuffle_window > 0: each training sample's chunk
  std::string note;                  // start-up lines on the data: limit subsets, data.cache = node
  data::Normalization norm;
  std::vector<std::string> class_names;
  Shape input;  // one sample as the model reads it (data.train_size resizes both splits)
};

// Collective over comm when the data is shared per node. seed: train.seed (the limits' subset).
// DataError when the test split does not fit the training split (check_test_split).
TrainingData open_training_data(const data::Options& d, std::uint64_t seed,
                                comm::Communicator& comm);

// The model reads images of `input` in `classes` classes (what `reference` holds, e.g. "the
// training split's"); a test split of other channels, size (unless data.train_size resizes both)
// or class count would be read out of bounds or scored against the wrong labels: DataError.
void check_test_split(const data::Options& d, const data::SampleSet& test, const Shape& input,
                      std::int64_t classes, const std::string& reference);

}  // namespace ddp::train
