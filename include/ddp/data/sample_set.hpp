#pragma once
// The samples of an image classification set: uint8 pixels, NCHW, one int32 label per image (any
// number of classes: ImageNet's 1,000 or more).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ddp::data {

using Label = std::int32_t;
// A sanity bound on data sets' class counts (a model's output layer has one logit per class).
inline constexpr int kMaxClasses = 1 << 24;

class SampleSet {
 public:
  SampleSet() = default;
  // Takes ownership of pixels (n*c*h*w bytes) and labels (n of them). Throws DataError when sizes
  // disagree or a label is >= num_classes (naming `origin`, e.g. the file).
  SampleSet(std::string origin, std::int64_t c, std::int64_t h, std::int64_t w, int num_classes,
            std::vector<std::uint8_t> pixels, std::vector<Label> labels);

  // Views memory owned by `owner` (e.g. an MPI shared-memory window holding a dataset that another
  // rank read and validated): no copy, no re-validation.
  SampleSet(std::string origin, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
            int num_classes, std::shared_ptr<const void> owner,
            std::span<const std::uint8_t> pixels, std::span<const Label> labels);

  // A set of encoded JPEG/PNG samples of any size (an `encoded` packed file whose images vary):
  // sample i is bytes [offsets[i], offsets[i+1]) of `bytes`. height() and width() are 0: the loader
  // decodes each sample and resizes it to data.train_size / data.eval_crop (sized_transform.hpp).
  static SampleSet encoded(std::string origin, std::int64_t c, int num_classes,
                           std::vector<std::uint8_t> bytes, std::vector<std::uint64_t> offsets,
                           std::vector<Label> labels);
  // The same, viewing memory owned by `owner` (a stream's reserved range): no copy, no checks.
  static SampleSet encoded_view(std::string origin, std::int64_t c, int num_classes,
                                std::shared_ptr<const void> owner,
                                std::span<const std::uint8_t> bytes,
                                std::span<const std::uint64_t> offsets,
                                std::span<const Label> labels);
  bool is_encoded() const { return !offsets_.empty(); }
  // Encoded sets: the n + 1 byte offsets of the samples in pixels() (the first is 0).
  std::span<const std::uint64_t> offsets() const { return offsets_; }
  std::span<const std::uint8_t> encoded_sample(std::int64_t i) const {
    const auto b = offsets_[static_cast<std::size_t>(i)];
    return pixels_.subspan(b, offsets_[static_cast<std::size_t>(i) + 1] - b);
  }

  const std::string& origin() const { return origin_; }
  std::int64_t size() const { return n_; }
  std::int64_t channels() const { return c_; }
  std::int64_t height() const { return h_; }
  std::int64_t width() const { return w_; }
  std::int64_t image_bytes() const { return c_ * h_ * w_; }
  int num_classes() const { return num_classes_; }

  std::span<const std::uint8_t> pixels() const { return pixels_; }
  std::span<const Label> labels() const { return labels_; }
  std::span<const std::uint8_t> image(std::int64_t i) const {
    return pixels_.subspan(static_cast<std::size_t>(i * image_bytes()),
                           static_cast<std::size_t>(image_bytes()));
  }
  Label label(std::int64_t i) const { return labels_[static_cast<std::size_t>(i)]; }

  // The first n samples (a cheap view sharing storage), for data.train_limit / data.test_limit.
  SampleSet head(std::int64_t n) const;
  // The samples at `indices`, in that order, copied into storage of their own; `origin` names
  // the result (in errors).
  SampleSet gather(std::span<const std::int64_t> indices, std::string origin) const;

 private:
  std::string origin_;
  std::int64_t n_ = 0, c_ = 0, h_ = 0, w_ = 0;
  int num_classes_ = 0;
  std::shared_ptr<const void> owner_;  // keeps pixel/label storage alive for views
  std::span<const std::uint8_t> pixels_;
  std::span<const Label> labels_;
  std::span<const std::uint64_t> offsets_;  // encoded sets only: n + 1 byte offsets into pixels_
};

}  // namespace ddp::data
