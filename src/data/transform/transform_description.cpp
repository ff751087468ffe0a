#include "ddp/data/transform_description.hpp"

#include <charconv>
#include <vector>

namespace ddp::data {
namespace {

// Shortest text that reads back as the same float ("0.1", not "0.100000001").
std::string number(double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  return ec == std::errc() ? std::string(buf, end) : std::string("?");
}

template <class T>
std::string tuple(const std::vector<T>& v) {
  std::string out = "(";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + number(v[i]);
  return out + ")";
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out.empty() ? "none" : out;
}

std::vector<std::string> eval_steps(const Options& opt) {
  const Augmentation aug = eval_augmentation(opt);
  if (aug.out_size == 0) return {};
  return {"Resize(" + std::to_string(aug.eval_resize) + ")",
          "CenterCrop(" + std::to_string(aug.out_size) + ")"};
}

}  // namespace

std::string describe_normalization(const Options& opt, const Normalization& norm) {
  if (opt.normalize == "none") return "none (pixels / 255)";
  return "mean=" + tuple(norm.mean) + ", std=" + tuple(norm.std) +
         (opt.normalize == "dataset" ? " (computed from the training set)" : "");
}

std::string describe_eval_transform(const Options& opt) {
  return join(eval_steps(opt));
}

std::string describe_transforms(const Options& opt, const Normalization& norm) {
  const Augmentation train = train_augmentation(opt);
  std::vector<std::string> t;
  if (train.out_size > 0 && train.random_resized_crop) {
    t.push_back("RandomResizedCrop(" + std::to_string(train.out_size) + ", scale=(" +
                number(train.range.scale_min) + ", " + number(train.range.scale_max) +
                "), ratio=(" + number(train.range.ratio_min) + ", " +
                number(train.range.ratio_max) + "))");
  } else if (train.out_size > 0) {
    t = eval_steps(opt);  // data.train_size without data.augment: the evaluation transform
  } else if (train.random_crop) {
    t.push_back("RandomCrop(padding=" + std::to_string(train.crop_padding) + ")");
  }
  // data.flip = "alternating": drawn once per sample, inverted every other epoch (flip_schedule).
  if (train.hflip)
    t.push_back(train.alternating_flip ? "AlternatingHorizontalFlip()" : "RandomHorizontalFlip()");
  const std::string normalize = opt.normalize == "none"
                                    ? std::string()
                                    : "Normalize(" + describe_normalization(opt, norm) + ")";
  auto with_norm = [&](std::vector<std::string> steps) {
    if (!normalize.empty()) steps.push_back(normalize);
    return join(steps);
  };
  std::string out = "transforms: train " + with_norm(t) + "; eval " + with_norm(eval_steps(opt)) +
                    (opt.normalize == "none" ? " (pixels / 255, not normalised)" : "") + "\n";
  if (opt.augment && opt.train_size > 0)
    out += "note: data.crop_padding (" + std::to_string(opt.crop_padding) +
           ") is not used: with data.train_size, training takes random-resized crops\n";
  return out;
}

}  // namespace ddp::data
