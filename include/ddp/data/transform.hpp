#pragma once
// Turning uint8 samples into normalised float batches, with deterministic augmentation.
#include <cstdint>
#include <span>
#include <vector>

#include "ddp/data/resized_crop.hpp"
#include "ddp/data/sample_set.hpp"

namespace ddp::data {

// Per-channel normalisation on the [0,1] pixel scale: x = (p/255 - mean[c]) / std[c].
struct Normalization {
  std::vector<float> mean;
  std::vector<float> std;
};

// Per-channel mean and (population) standard deviation of the dataset's pixels on the [0,1] scale.
Normalization compute_normalization(const SampleSet& ds);

struct Augmentation {
  // Pad by crop_padding black pixels (0 before normalisation, as torchvision pads), crop back.
  bool random_crop = false;
  int crop_padding = 4;
  bool hflip = false;  // horizontal flip with probability 1/2
  // With hflip: the flip of data.flip = "alternating" (flip_schedule.hpp) instead of a coin per
  // epoch. The crop's draws are the same either way.
  bool alternating_flip = false;

  // Large-image transforms (data.train_size / data.eval_resize / data.eval_crop), on when out_size
  // > 0: every sample becomes out_size x out_size whatever its own size. Training loaders
  // (random_resized_crop) take torchvision's RandomResizedCrop(out_size, range); evaluation loaders
  // Resize(eval_resize) + CenterCrop(out_size). random_crop is then not used; hflip still is.
  std::int64_t out_size = 0;
  bool random_resized_crop = false;
  ResizedCropRange range;
  std::int64_t eval_resize = 0;
  bool scaled_decode = true;  // TurboJPEG's scaled decoding for small crops (crop_decode.hpp)
};

struct Options;
// The training and evaluation loaders' augmentation from the [data] settings.
Augmentation train_augmentation(const Options& opt);
Augmentation eval_augmentation(const Options& opt);
// The side of the network's input with data.train_size set (train_size; eval_crop must agree),
// or 0 when off. ConfigError naming the keys when they disagree or eval_resize < eval_crop.
std::int64_t transform_output_side(const Options& opt);

// The floats per output sample: c * h * w of the dataset, or c * out_size^2 when resizing.
std::int64_t output_sample_floats(const SampleSet& ds, const Augmentation& aug);

// Writes images[indices[i]] normalised (and augmented) into out[i*c*h*w ...] and labels into
// out_labels[i]. Augmentation draws depend only on (seed, epoch, sample index).
void fill_batch(const SampleSet& ds, std::span<const std::int64_t> indices,
                const Normalization& norm, const Augmentation& aug, std::uint64_t seed,
                std::uint64_t epoch, float* out, std::int32_t* out_labels);

}  // namespace ddp::data
