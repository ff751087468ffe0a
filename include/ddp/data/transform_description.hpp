#pragma once
// The training and evaluation transforms in words, as torchvision would write them, for the
// start-up lines (what crop, resize, flip and normalisation the images really get):
//   transforms: train RandomResizedCrop(64, scale=(0.08, 1), ratio=(0.75, 1.3333)),
//     RandomHorizontalFlip(), Normalize(mean=(0.5), std=(0.25)); eval Resize(74), CenterCrop(64),
//     Normalize(mean=(0.5), std=(0.25))
// and a note for a setting that is not used (data.crop_padding with data.train_size).
#include <string>

#include "ddp/data/options.hpp"
#include "ddp/data/transform.hpp"

namespace ddp::data {

// "transforms: train ...; eval ...\n" (plus "note: ...\n" lines); `norm` is what training
// normalises with (data.normalize = dataset: the computed statistics).
std::string describe_transforms(const Options& opt, const Normalization& norm);

// The same as metadata for an exported model: the evaluation transform alone ("Resize(74),
// CenterCrop(64)" or "none (images of 32x32)") and the normalisation ("mean=(0.5), std=(0.25)").
std::string describe_eval_transform(const Options& opt);
std::string describe_normalization(const Options& opt, const Normalization& norm);

}  // namespace ddp::data
