#include "sized_transform.hpp"

#include <string>

#include "ddp/data/crop_decode.hpp"
#include "ddp/data/flip_schedule.hpp"
#include "ddp/data/resized_crop.hpp"

// rng.hpp uses unsigned __int128, which -Wpedantic flags; it is a GCC/Clang extension we rely on.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include "ddp/rng.hpp"
#pragma GCC diagnostic pop

namespace ddp::data::detail {

namespace {

Image stored_image(const SampleSet& ds, std::int64_t idx) {
  const auto px = ds.image(idx);
  return Image{ds.channels(), ds.height(), ds.width(), {px.begin(), px.end()}};
}

std::string sample_name(const SampleSet& ds, std::int64_t idx) {
  return ds.origin() + ": sample " + std::to_string(idx);
}

}  // namespace

void transform_sized_sample(const SampleSet& ds, std::int64_t idx, const Normalization& norm,
                            const Augmentation& aug, std::uint64_t seed, std::uint64_t epoch,
                            float* out) {
  const std::int64_t S = aug.out_size;
  const int channels = static_cast<int>(ds.channels());
  Image img;
  bool flip = false;
  if (aug.random_resized_crop) {
    // The flip is drawn first, then the box's draws (a variable number: 4 per try until one fits),
    // all from one stream keyed by (seed, epoch, sample index) alone.
    CounterRng rng(hash_words(seed, static_cast<std::uint64_t>(RngStream::augment), epoch,
                              static_cast<std::uint64_t>(idx)));
    flip = aug.hflip && (rng.next_u64() >> 63) != 0;
    if (aug.hflip && aug.alternating_flip) flip = alternating_flip(seed, epoch, idx);
    const auto pick = [&](std::int64_t h, std::int64_t w) {
      return random_resized_crop_box(h, w, aug.range, [&] { return rng.next_double(); });
    };
    img = ds.is_encoded()
              ? decode_resized_crop(ds.encoded_sample(idx), sample_name(ds, idx), channels, pick, S,
                                    S, aug.scaled_decode)
              : resized_crop(stored_image(ds, idx), pick(ds.height(), ds.width()), S, S);
  } else {
    img = resize_center_crop(
        ds.is_encoded() ? decode_image(ds.encoded_sample(idx), sample_name(ds, idx), channels)
                        : stored_image(ds, idx),
        aug.eval_resize, S);
  }
  const std::int64_t hw = S * S;
  for (std::int64_t c = 0; c < ds.channels(); ++c) {
    const double mean = norm.mean[norm.mean.size() == 1 ? 0 : static_cast<std::size_t>(c)];
    const double sd = norm.std[norm.std.size() == 1 ? 0 : static_cast<std::size_t>(c)];
    // The same multiply-add as fill_batch's fixed-size path.
    const auto scale = static_cast<float>(1.0 / (255.0 * sd));
    const auto offset = static_cast<float>(-mean / sd);
    const std::uint8_t* src = img.pixels.data() + c * hw;
    float* dst = out + c * hw;
    for (std::int64_t y = 0; y < S; ++y)
      for (std::int64_t x = 0; x < S; ++x)
        dst[y * S + x] = static_cast<float>(src[y * S + (flip ? S - 1 - x : x)]) * scale + offset;
  }
}

}  // namespace ddp::data::detail
