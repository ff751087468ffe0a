// The loaders' Augmentation from data.augment, data.crop_padding, data.train_size,
// data.rrc_scale, data.rrc_ratio, data.eval_resize, data.eval_crop and data.scaled_decode.
#include <string>

#include "ddp/data/options.hpp"
#include "ddp/data/transform.hpp"
#include "ddp/error.hpp"

namespace ddp::data {

namespace {

std::int64_t eval_crop_of(const Options& opt) {
  return opt.eval_crop > 0 ? opt.eval_crop : opt.train_size;
}

std::int64_t eval_resize_of(const Options& opt) {
  // ceil(crop * 8 / 7): torchvision's ImageNet recipe resizes to 256 for a 224 crop.
  return opt.eval_resize > 0 ? opt.eval_resize : (eval_crop_of(opt) * 8 + 6) / 7;
}

std::string range_text(const std::vector<double>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

}  // namespace

std::int64_t transform_output_side(const Options& opt) {
  for (const auto* key : {"scale", "ratio"}) {
    const auto& r = key[0] == 's' ? opt.rrc_scale : opt.rrc_ratio;
    if (r.size() != 2 || !(r[0] <= r[1]))
      throw ConfigError(std::string("data.rrc_") + key + " = " + range_text(r) +
                        ": give min,max with min <= max (torchvision's " + key + ")");
  }
  if (opt.train_size == 0) {
    if (opt.eval_crop > 0 || opt.eval_resize > 0)
      throw ConfigError(
          "data.eval_resize / data.eval_crop need data.train_size (the network's "
          "input side); set it to the crop size");
    return 0;
  }
  const std::int64_t crop = eval_crop_of(opt), resize = eval_resize_of(opt);
  if (crop != opt.train_size)
    throw ConfigError("data.eval_crop = " + std::to_string(crop) +
                      " differs from data.train_size = " + std::to_string(opt.train_size) +
                      ": both are the network's input side, so they must be equal");
  if (resize < crop)
    throw ConfigError("data.eval_resize = " + std::to_string(resize) +
                      " is smaller than data.eval_crop = " + std::to_string(crop) +
                      ": the centre crop must fit in the resized image");
  return opt.train_size;
}

Augmentation train_augmentation(const Options& opt) {
  // With data.train_size but without data.augment, training sees the evaluation transform.
  if (opt.train_size > 0 && !opt.augment) return eval_augmentation(opt);
  Augmentation aug;
  aug.out_size = transform_output_side(opt);
  aug.random_resized_crop = aug.out_size > 0;
  aug.range = {opt.rrc_scale.at(0), opt.rrc_scale.at(1), opt.rrc_ratio.at(0), opt.rrc_ratio.at(1)};
  aug.random_crop = opt.augment && aug.out_size == 0;
  aug.hflip = opt.augment && opt.flip != "none";
  aug.alternating_flip = opt.flip == "alternating";
  aug.crop_padding = static_cast<int>(opt.crop_padding);
  aug.scaled_decode = opt.scaled_decode;
  return aug;
}

Augmentation eval_augmentation(const Options& opt) {
  Augmentation aug;
  aug.out_size = transform_output_side(opt);
  if (aug.out_size > 0) aug.eval_resize = eval_resize_of(opt);
  return aug;
}

}  // namespace ddp::data
