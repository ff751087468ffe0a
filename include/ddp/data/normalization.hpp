#pragma once
// The normalisation data.normalize asks for: "config" (data.mean / data.std), "none", or
// "dataset" (computed from the training set). Training and the commands that use a trained model
// (predict) take it from here, so both normalise alike.
#include <cstdint>

#include "ddp/data/options.hpp"
#include "ddp/data/sample_set.hpp"
#include "ddp/data/transform.hpp"

namespace ddp::data {

// channels: the images'. train: the training set (only read for normalize = "dataset"; may be null
// otherwise). ConfigError for a mean/std list that fits neither 1 nor `channels` values.
Normalization make_normalization(const Options& opt, std::int64_t channels, const SampleSet* train);

// What training normalised with, for a command that has no training set at hand (predict,
// report): data.normalize = "dataset" reads the training split and takes the data.train_limit
// subset training took (picked with `seed`, train.seed); the other modes read nothing.
Normalization training_normalization(const Options& opt, std::int64_t channels, std::uint64_t seed);

}  // namespace ddp::data
