#include "ddp/data/transform.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "ddp/data/flip_schedule.hpp"
#include "ddp/error.hpp"
#include "sized_transform.hpp"
#include "transform_check.hpp"

// rng.hpp uses unsigned __int128, which -Wpedantic flags; it is a GCC/Clang extension we rely on.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include "ddp/rng.hpp"
#pragma GCC diagnostic pop

namespace ddp::data {

namespace detail {

namespace {

void check_entries(const SampleSet& ds, const std::vector<float>& v, const char* name) {
  if (v.size() != 1 && static_cast<std::int64_t>(v.size()) != ds.channels()) {
    throw DataError("normalisation " + std::string(name) + " has " + std::to_string(v.size()) +
                    " entries, but " + ds.origin() + " has " + std::to_string(ds.channels()) +
                    " channel(s); give 1 value (used for every channel) or " +
                    std::to_string(ds.channels()));
  }
}

}  // namespace

void validate_transform(const SampleSet& ds, const Normalization& norm, const Augmentation& aug) {
  check_entries(ds, norm.mean, "mean");
  check_entries(ds, norm.std, "std");
  for (std::size_t c = 0; c < norm.mean.size(); ++c) {
    if (!std::isfinite(norm.mean[c])) {
      throw DataError("normalisation mean[" + std::to_string(c) +
                      "] = " + std::to_string(norm.mean[c]) + " is not a finite number");
    }
  }
  for (std::size_t c = 0; c < norm.std.size(); ++c) {
    if (!(norm.std[c] > 0.0f) || !std::isfinite(norm.std[c])) {
      throw DataError("normalisation std[" + std::to_string(c) +
                      "] = " + std::to_string(norm.std[c]) + " must be a positive finite number");
    }
  }
  if (aug.out_size < 0 ||
      (aug.out_size > 0 && !aug.random_resized_crop && aug.eval_resize < aug.out_size)) {
    throw DataError("evaluation resize " + std::to_string(aug.eval_resize) +
                    " must be at least the centre crop " + std::to_string(aug.out_size));
  }
  if (ds.is_encoded() && aug.out_size == 0) {
    throw DataError(ds.origin() +
                    ": its images vary in size; set data.train_size (with data.eval_resize and "
                    "data.eval_crop) so that every sample is resized to the network's input");
  }
  if (aug.crop_padding < 0) {
    throw DataError("augmentation crop_padding = " + std::to_string(aug.crop_padding) +
                    " must be >= 0");
  }
}

}  // namespace detail

Normalization compute_normalization(const SampleSet& ds) {
  if (ds.size() == 0) {
    throw DataError("cannot compute the normalisation of " + ds.origin() + ": it has no samples");
  }
  if (ds.is_encoded()) {
    throw DataError(
        ds.origin() +
        ": its images vary in size and stay encoded, so data.normalize = \"dataset\" "
        "cannot be computed; give data.mean and data.std (data.normalize = \"config\")");
  }
  const std::int64_t n = ds.size(), c_count = ds.channels(), hw = ds.height() * ds.width();
  const std::uint8_t* px = ds.pixels().data();
  // Integer sums are exact; a uint32 block sum of squares is safe for 66051 pixels (255^2 each).
  constexpr std::int64_t kBlock = 65536;
  std::vector<std::uint64_t> sum(static_cast<std::size_t>(c_count), 0);
  std::vector<std::uint64_t> sum_sq(static_cast<std::size_t>(c_count), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t c = 0; c < c_count; ++c) {
      const std::uint8_t* plane = px + (i * c_count + c) * hw;
      for (std::int64_t b = 0; b < hw; b += kBlock) {
        const std::int64_t e = std::min(hw, b + kBlock);
        std::uint32_t s = 0, q = 0;
        for (std::int64_t p = b; p < e; ++p) {
          const std::uint32_t v = plane[p];
          s += v;
          q += v * v;
        }
        sum[static_cast<std::size_t>(c)] += s;
        sum_sq[static_cast<std::size_t>(c)] += q;
      }
    }
  }
  Normalization norm;
  const double count = static_cast<double>(n) * static_cast<double>(hw);
  for (std::size_t c = 0; c < sum.size(); ++c) {
    const double mean = static_cast<double>(sum[c]) / count;  // on the 0..255 scale
    const double var = std::max(0.0, static_cast<double>(sum_sq[c]) / count - mean * mean);
    norm.mean.push_back(static_cast<float>(mean / 255.0));
    norm.std.push_back(static_cast<float>(std::sqrt(var) / 255.0));
  }
  return norm;
}

namespace {

// dst[x] = src[x] * scale + offset for x in [0, n): the compiler vectorises this.
inline void convert(const std::uint8_t* __restrict src, float* __restrict dst, std::int64_t n,
                    float scale, float offset) {
  for (std::int64_t x = 0; x < n; ++x) dst[x] = static_cast<float>(src[x]) * scale + offset;
}

inline void fill(float* dst, std::int64_t n, float v) {
  std::fill(dst, dst + n, v);
}

}  // namespace

std::int64_t output_sample_floats(const SampleSet& ds, const Augmentation& aug) {
  return aug.out_size > 0 ? ds.channels() * aug.out_size * aug.out_size : ds.image_bytes();
}

void fill_batch(const SampleSet& ds, std::span<const std::int64_t> indices,
                const Normalization& norm, const Augmentation& aug, std::uint64_t seed,
                std::uint64_t epoch, float* out, std::int32_t* out_labels) {
  detail::validate_transform(ds, norm, aug);
  if (aug.out_size > 0) {
    const std::int64_t floats = output_sample_floats(ds, aug);
    for (std::size_t i = 0; i < indices.size(); ++i) {
      const std::int64_t idx = indices[i];
      if (idx < 0 || idx >= ds.size()) {
        throw DataError("sample index " + std::to_string(idx) + " is out of range for " +
                        ds.origin() + " (" + std::to_string(ds.size()) + " samples)");
      }
      out_labels[i] = ds.label(idx);
      detail::transform_sized_sample(ds, idx, norm, aug, seed, epoch,
                                     out + static_cast<std::int64_t>(i) * floats);
    }
    return;
  }
  const std::int64_t C = ds.channels(), H = ds.height(), W = ds.width(), hw = H * W;
  const std::int64_t chw = C * hw;
  const std::int64_t P = aug.random_crop ? aug.crop_padding : 0;
  const bool augment = aug.random_crop || aug.hflip;

  for (std::size_t i = 0; i < indices.size(); ++i) {
    const std::int64_t idx = indices[i];
    if (idx < 0 || idx >= ds.size()) {
      throw DataError("sample index " + std::to_string(idx) + " is out of range for " +
                      ds.origin() + " (" + std::to_string(ds.size()) + " samples)");
    }
    out_labels[i] = ds.label(idx);

    // The three draws are always made in this order, so enabling one augmentation never changes
    // the other's decisions; they depend only on (seed, epoch, dataset index).
    std::int64_t dy = 0, dx = 0;  // crop offset relative to the unpadded image, in [-P, P]
    bool flip = false;
    if (augment) {
      CounterRng rng(hash_words(seed, static_cast<std::uint64_t>(RngStream::augment), epoch,
                                static_cast<std::uint64_t>(idx)));
      const auto span = static_cast<std::uint64_t>(2 * P + 1);
      dy = static_cast<std::int64_t>(rng.next_below(span)) - P;
      dx = static_cast<std::int64_t>(rng.next_below(span)) - P;
      flip = (rng.next_u64() >> 63) != 0;
      if (aug.alternating_flip) flip = alternating_flip(seed, epoch, idx);
      if (!aug.hflip) flip = false;
    }

    const std::uint8_t* img = ds.pixels().data() + idx * chw;
    float* dst_img = out + static_cast<std::int64_t>(i) * chw;
    for (std::int64_t c = 0; c < C; ++c) {
      const double mean = norm.mean[norm.mean.size() == 1 ? 0 : static_cast<std::size_t>(c)];
      const double sd = norm.std[norm.std.size() == 1 ? 0 : static_cast<std::size_t>(c)];
      // (p/255 - mean)/sd as one multiply-add; a padded (black, p = 0) pixel is `offset`.
      const auto scale = static_cast<float>(1.0 / (255.0 * sd));
      const auto offset = static_cast<float>(-mean / sd);
      const std::uint8_t* src = img + c * hw;
      float* dst = dst_img + c * hw;
      if (dy == 0 && dx == 0 && !flip) {
        convert(src, dst, hw, scale, offset);
        continue;
      }
      // Output pixel (y, x) of the crop reads source (y + dy, x + dx); with the flip applied after
      // the crop (torchvision's RandomCrop then RandomHorizontalFlip), x reads W-1-x + dx instead.
      const std::int64_t x0 = std::clamp<std::int64_t>(flip ? dx : -dx, 0, W);
      const std::int64_t x1 = std::clamp<std::int64_t>(flip ? W + dx : W - dx, 0, W);
      for (std::int64_t y = 0; y < H; ++y) {
        float* drow = dst + y * W;
        const std::int64_t sy = y + dy;
        if (sy < 0 || sy >= H || x0 >= x1) {
          fill(drow, W, offset);
          continue;
        }
        const std::uint8_t* srow = src + sy * W;
        fill(drow, x0, offset);
        if (!flip) {
          convert(srow + x0 + dx, drow + x0, x1 - x0, scale, offset);
        } else {
          const std::int64_t base = W - 1 + dx;  // source column of x = 0
          for (std::int64_t x = x0; x < x1; ++x) {
            drow[x] = static_cast<float>(srow[base - x]) * scale + offset;
          }
        }
        fill(drow + x1, W - x1, offset);
      }
    }
  }
}

}  // namespace ddp::data
