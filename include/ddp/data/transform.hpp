#pragma once
// Turning uint8 samples into normalised float batches, with deterministic augmentation.
#include <cstdint>
#include <span>
#include <vector>

#include "ddp/data/dataset.hpp"

namespace ddp::data {

// Per-channel normalisation on the [0,1] pixel scale: x = (p/255 - mean[c]) / std[c].
struct Normalization {
  std::vector<float> mean;
  std::vector<float> std;
};

// Per-channel mean and (population) standard deviation of the dataset's pixels on the [0,1] scale.
Normalization compute_normalization(const Dataset& ds);

struct Augmentation {
  // Pad by crop_padding black pixels (0 before normalisation, as torchvision pads), crop back.
  bool random_crop = false;
  int crop_padding = 4;
  bool hflip = false;  // horizontal flip with probability 1/2
};

// Writes images[indices[i]] normalised (and augmented) into out[i*c*h*w ...] and labels into
// out_labels[i]. Augmentation draws depend only on (seed, epoch, sample index).
void fill_batch(const Dataset& ds, std::span<const std::int64_t> indices, const Normalization& norm,
                const Augmentation& aug, std::uint64_t seed, std::uint64_t epoch, float* out,
                std::int32_t* out_labels);

}  // namespace ddp::data
