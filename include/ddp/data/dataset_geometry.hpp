#pragma once
// What a configured dataset's samples look like to the network, without reading its pixels: the
// shape of one input image and the class count (fixed for the built-in datasets; a packed file's
// header says; data.train_size makes every image train_size x train_size whatever the files hold).
// The commands that rebuild a trained model without its data (predict, export, report) size it
// from this, and the configuration checks compare the two packed splits with it.
#include <cstdint>
#include <string>

#include "ddp/data/options.hpp"

namespace ddp::data {

struct Geometry {
  std::int64_t channels = 0, height = 0, width = 0;
  int classes = 0;
};

// The network's input: the dataset's image shape, or train_size x train_size with data.train_size.
// ConfigError naming the file for a packed file whose images vary in size without data.train_size
// (the fix: set it); DataError naming the file for one that cannot be read.
Geometry dataset_geometry(const Options& opt);

// data.dataset = packed: the test file must hold what the model trained on the training file
// takes: the same channels and classes, and (without data.train_size, which resizes both) the same
// image size. ConfigError naming both files and what each holds ("3x64x64", "3 channels of
// varying sizes").
void check_packed_splits(const Options& opt);

}  // namespace ddp::data
