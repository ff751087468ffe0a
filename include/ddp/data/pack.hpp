#pragma once
// `ddp_train pack`: a source (image folder, CSV list, NumPy arrays, a built-in dataset) into one
// packed dataset file. Files are read and decoded on several threads, in a bounded window ahead
// of the writer, and written in the source's order.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "ddp/data/packed_format.hpp"
#include "ddp/data/readers.hpp"

namespace ddp::data {

struct PackOptions {
  std::string format;  // imagefolder | csv | npy | cifar10 | cifar100 | mnist | fashion_mnist
  std::string input;   // a path, or IMAGES.npy,LABELS.npy
  std::filesystem::path output;
  packed::Encoding encoding = packed::Encoding::raw;
  std::int64_t height = 0, width = 0;  // --size (raw): resize every image to it; 0 = keep
  Split split = Split::train;          // for the built-in datasets
  bool skip_bad = false;               // skip undecodable / mismatched images, list them
  int channels = 0;                    // 1 or 3; 0 = those of the first image
  int threads = 0;                     // 0 = std::thread::hardware_concurrency()
  // --val-fraction: this fraction of each class (chosen by `seed`) goes to `val_output` instead
  // of `output`; 0 = none.
  double val_fraction = 0;
  std::filesystem::path val_output;
  std::uint64_t seed = 0;
  // Called from the packing thread after each sample (done, total).
  std::function<void(std::int64_t, std::int64_t)> progress;
  // Polled while listing and after each sample: true stops the pack (SIGINT/SIGTERM), leaving no
  // output file.
  std::function<bool()> cancelled;
};

struct PackSummary {
  std::int64_t samples = 0, classes = 0, channels = 0, height = 0, width = 0;  // 0x0: mixed sizes
  std::uint64_t payload_bytes = 0, file_bytes = 0;
  std::int64_t val_samples = 0;  // in val_output (--val-fraction)
  std::uint64_t val_file_bytes = 0;
  double seconds = 0;
  std::int64_t converted = 0;        // grey images converted to RGB (as ImageFolder does)
  std::vector<std::string> skipped;  // "file: why", with --skip-bad
  std::vector<std::string> notes;    // what the listing left out (loops, files not images)
  std::vector<std::string> removed_temporaries;  // of killed packs to the same output
};

// The largest image a pack writes or decodes (2^28 pixels, e.g. 16384x16384).
inline constexpr std::int64_t kMaxPackPixels = std::int64_t{1} << 28;

// Which samples go to validation: `fraction` of each class (rounded; at least one sample of a
// class stays in training), chosen by a hash of (seed, sample index), so the split depends only on
// the seed and the labels. One flag per sample.
std::vector<bool> validation_split(const std::vector<std::int32_t>& labels, double fraction,
                                   std::uint64_t seed);

PackSummary pack(const PackOptions& opt);

}  // namespace ddp::data
