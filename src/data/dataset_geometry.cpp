#include "ddp/data/dataset_geometry.hpp"

#include "ddp/data/packed_format.hpp"
#include "ddp/data/registry.hpp"
#include "ddp/data/transform.hpp"
#include "ddp/error.hpp"

namespace ddp::data {
namespace {

// "3x64x64 in 10 classes", or "3 channels of varying sizes in 10 classes" (an encoded pack of
// images as they came, whose header stores no size).
std::string describe(const packed::Header& h) {
  const std::string size = h.fixed_size()
                               ? std::to_string(h.channels) + "x" + std::to_string(h.height) + "x" +
                                     std::to_string(h.width)
                               : std::to_string(h.channels) + " channel(s) of varying sizes";
  return size + " in " + std::to_string(h.classes.size()) + " classes";
}

}  // namespace

Geometry dataset_geometry(const Options& opt) {
  const DatasetShape s = dataset_shape(opt);
  // data.train_size resizes every image (training and evaluation alike) to the network's input.
  const std::int64_t side = transform_output_side(opt);
  if (side == 0 && (s.height == 0 || s.width == 0))
    throw ConfigError("data.train_file = '" + opt.train_file +
                      "' holds images of varying sizes: set data.train_size (the network's "
                      "input side; see data.eval_resize, data.eval_crop)");
  return {s.channels, side > 0 ? side : s.height, side > 0 ? side : s.width,
          static_cast<int>(s.classes)};
}

void check_packed_splits(const Options& opt) {
  const auto train = packed::read_header(opt.train_file);
  const auto test = packed::read_header(opt.test_file);
  // With data.train_size both splits are resized to it, so their own sizes do not matter.
  const bool sized = transform_output_side(opt) > 0;
  const bool same_size = sized ||
                         (train.fixed_size() && test.fixed_size() && train.height == test.height &&
                          train.width == test.width) ||
                         (!train.fixed_size() && !test.fixed_size());
  if (test.channels == train.channels && test.classes == train.classes && same_size) return;
  throw ConfigError(
      "data.test_file = '" + opt.test_file + "' holds images " + describe(test) +
      ", data.train_file = '" + opt.train_file + "' holds " + describe(train) +
      (test.classes.size() == train.classes.size() && test.classes != train.classes
           ? " (the class names differ)"
           : "") +
      (sized ? ": both splits must have the same channels and classes (from folders with the "
               "same class folders)"
             : ": both splits must have the same channels, size and classes (pack both with the "
               "same --size, or set data.train_size to resize both; from folders with the same "
               "class folders)"));
}

}  // namespace ddp::data
