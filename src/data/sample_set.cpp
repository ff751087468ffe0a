#include "ddp/data/sample_set.hpp"

#include <algorithm>
#include <utility>

#include "ddp/error.hpp"

namespace ddp::data {

namespace {

// Both buffers live in one shared block so that views made by head() keep them alive.
struct Storage {
  std::vector<std::uint8_t> pixels;
  std::vector<Label> labels;
  std::vector<std::uint64_t> offsets;  // encoded sets only
};

}  // namespace

SampleSet::SampleSet(std::string origin, std::int64_t c, std::int64_t h, std::int64_t w,
                     int num_classes, std::vector<std::uint8_t> pixels, std::vector<Label> labels)
    : origin_(std::move(origin)), c_(c), h_(h), w_(w), num_classes_(num_classes) {
  if (c <= 0 || h <= 0 || w <= 0) {
    throw DataError(origin_ + ": invalid image shape " + std::to_string(c) + "x" +
                    std::to_string(h) + "x" + std::to_string(w) +
                    " (channels x height x width must all be positive)");
  }
  if (num_classes < 1 || num_classes > kMaxClasses) {
    throw DataError(origin_ + ": invalid number of classes " + std::to_string(num_classes) +
                    " (1.." + std::to_string(kMaxClasses) + ")");
  }
  n_ = static_cast<std::int64_t>(labels.size());
  const std::uint64_t expected =
      static_cast<std::uint64_t>(n_) * static_cast<std::uint64_t>(c * h * w);
  if (pixels.size() != expected) {
    throw DataError(origin_ + ": " + std::to_string(labels.size()) + " labels of " +
                    std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w) +
                    " images need " + std::to_string(expected) + " pixel bytes, but there are " +
                    std::to_string(pixels.size()));
  }
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes) {
      throw DataError(origin_ + ": sample " + std::to_string(i) + " has label " +
                      std::to_string(labels[i]) + ", but labels must be in 0.." +
                      std::to_string(num_classes - 1));
    }
  }
  auto storage = std::make_shared<Storage>(Storage{std::move(pixels), std::move(labels), {}});
  pixels_ = storage->pixels;
  labels_ = storage->labels;
  owner_ = std::move(storage);
}

SampleSet::SampleSet(std::string origin, std::int64_t n, std::int64_t c, std::int64_t h,
                     std::int64_t w, int num_classes, std::shared_ptr<const void> owner,
                     std::span<const std::uint8_t> pixels, std::span<const Label> labels)
    : origin_(std::move(origin)),
      n_(n),
      c_(c),
      h_(h),
      w_(w),
      num_classes_(num_classes),
      owner_(std::move(owner)),
      pixels_(pixels),
      labels_(labels) {
  if (static_cast<std::int64_t>(labels.size()) != n ||
      static_cast<std::int64_t>(pixels.size()) != n * c * h * w)
    throw DataError(origin_ + ": shared dataset buffers do not match " + std::to_string(n) +
                    " samples of " + std::to_string(c) + "x" + std::to_string(h) + "x" +
                    std::to_string(w));
}

SampleSet SampleSet::encoded(std::string origin, std::int64_t c, int num_classes,
                             std::vector<std::uint8_t> bytes, std::vector<std::uint64_t> offsets,
                             std::vector<Label> labels) {
  if (c <= 0) throw DataError(origin + ": invalid channel count " + std::to_string(c));
  if (num_classes < 1 || num_classes > kMaxClasses)
    throw DataError(origin + ": invalid number of classes " + std::to_string(num_classes) +
                    " (1.." + std::to_string(kMaxClasses) + ")");
  if (offsets.size() != labels.size() + 1 || offsets.front() != 0 ||
      !std::is_sorted(offsets.begin(), offsets.end()) || offsets.back() != bytes.size())
    throw DataError(origin + ": the encoded samples' offsets do not describe their bytes");
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (labels[i] < 0 || labels[i] >= num_classes)
      throw DataError(origin + ": sample " + std::to_string(i) + " has label " +
                      std::to_string(labels[i]) + ", but labels must be in 0.." +
                      std::to_string(num_classes - 1));
  SampleSet d;
  d.origin_ = std::move(origin);
  d.n_ = static_cast<std::int64_t>(labels.size());
  d.c_ = c;
  d.num_classes_ = num_classes;
  auto storage =
      std::make_shared<Storage>(Storage{std::move(bytes), std::move(labels), std::move(offsets)});
  d.pixels_ = storage->pixels;
  d.labels_ = storage->labels;
  d.offsets_ = storage->offsets;
  d.owner_ = std::move(storage);
  return d;
}

SampleSet SampleSet::encoded_view(std::string origin, std::int64_t c, int num_classes,
                                  std::shared_ptr<const void> owner,
                                  std::span<const std::uint8_t> bytes,
                                  std::span<const std::uint64_t> offsets,
                                  std::span<const Label> labels) {
  if (offsets.size() != labels.size() + 1 || offsets.back() != bytes.size())
    throw DataError(origin + ": the encoded samples' offsets do not describe their bytes");
  SampleSet d;
  d.origin_ = std::move(origin);
  d.n_ = static_cast<std::int64_t>(labels.size());
  d.c_ = c;
  d.num_classes_ = num_classes;
  d.owner_ = std::move(owner);
  d.pixels_ = bytes;
  d.labels_ = labels;
  d.offsets_ = offsets;
  return d;
}

SampleSet SampleSet::head(std::int64_t n) const {
  if (n < 0) {
    throw DataError(origin_ + ": cannot take the first " + std::to_string(n) +
                    " samples; the count must be >= 0");
  }
  if (n >= n_) return *this;
  SampleSet d = *this;
  d.origin_ = origin_ + " (first " + std::to_string(n) + " of " + std::to_string(n_) + " samples)";
  d.n_ = n;
  if (is_encoded()) {
    d.offsets_ = offsets_.first(static_cast<std::size_t>(n + 1));
  } else {
    d.pixels_ = pixels_.first(static_cast<std::size_t>(n * image_bytes()));
  }
  d.labels_ = labels_.first(static_cast<std::size_t>(n));
  return d;
}

SampleSet SampleSet::gather(std::span<const std::int64_t> indices, std::string origin) const {
  if (is_encoded()) {
    std::vector<std::uint8_t> bytes;
    std::vector<Label> labels(indices.size());
    std::vector<std::uint64_t> offsets{0};
    for (std::size_t k = 0; k < indices.size(); ++k) {
      const std::int64_t i = indices[k];
      if (i < 0 || i >= n_)
        throw DataError(origin_ + ": sample " + std::to_string(i) + " is out of range (" +
                        std::to_string(n_) + " samples)");
      const auto src = encoded_sample(i);
      bytes.insert(bytes.end(), src.begin(), src.end());
      offsets.push_back(bytes.size());
      labels[k] = label(i);
    }
    return encoded(std::move(origin), c_, num_classes_, std::move(bytes), std::move(offsets),
                   std::move(labels));
  }
  const auto bytes = static_cast<std::size_t>(image_bytes());
  std::vector<std::uint8_t> pixels(indices.size() * bytes);
  std::vector<Label> labels(indices.size());
  for (std::size_t k = 0; k < indices.size(); ++k) {
    const std::int64_t i = indices[k];
    if (i < 0 || i >= n_)
      throw DataError(origin_ + ": sample " + std::to_string(i) + " is out of range (" +
                      std::to_string(n_) + " samples)");
    const auto src = image(i);
    std::copy(src.begin(), src.end(), pixels.begin() + static_cast<std::ptrdiff_t>(k * bytes));
    labels[k] = label(i);
  }
  return SampleSet(std::move(origin), c_, h_, w_, num_classes_, std::move(pixels),
                   std::move(labels));
}

}  // namespace ddp::data
