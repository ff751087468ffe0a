// CIFAR-10 / CIFAR-100 binary readers. A record is the label byte(s) followed by 3072 pixel bytes:
// the 1024 red, then green, then blue values of a 32x32 image, row-major — already CHW, so pixels
// are copied as they are.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "../file_io.hpp"
#include "ddp/data/readers.hpp"
#include "ddp/data/subset.hpp"
#include "ddp/error.hpp"

namespace ddp::data {

namespace fs = std::filesystem;
using detail::quoted;

namespace {

constexpr std::int64_t kChannels = 3, kSide = 32, kImageBytes = kChannels * kSide * kSide;

struct CifarFormat {
  std::string name;           // "CIFAR-10"
  int label_bytes;            // 1 (label) or 2 (coarse, fine)
  int num_classes;            // of the label we keep (the last label byte)
  int coarse_classes;         // of the first label byte when there are two, else 0
  std::string listing;        // what a valid directory holds
  std::string subdir;         // the directory the official archive extracts to
  std::int64_t other_record;  // record size of the sibling format, to recognise a mix-up
  std::string other_name;
};

std::int64_t record_bytes(const CifarFormat& f) {
  return f.label_bytes + kImageBytes;
}

// The size of one file of the set, validated against the record size before anything is read, so
// a bad fifth file fails in milliseconds instead of after reading the first four.
std::int64_t count_records(const fs::path& root, const fs::path& file, const CifarFormat& f) {
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    std::string msg =
        quoted(file) + ": no such file; a " + f.name + " directory holds " + f.listing;
    if (fs::is_directory(root / f.subdir, ec)) {
      msg += "; " + quoted(root / f.subdir) + " exists: set the data root to that directory";
    } else if (fs::exists(file.parent_path() / file.stem(), ec)) {
      msg += "; found " + quoted(file.parent_path() / file.stem()) +
             ", which is the Python (pickle) version: download the binary version instead";
    }
    throw DataError(msg);
  }
  const std::uint64_t size = detail::regular_file_size(file, f.name + " binary records");
  const auto rec = static_cast<std::uint64_t>(record_bytes(f));
  if (size == 0) {
    throw DataError(quoted(file) + ": the file is empty (0 bytes); expected " + f.name +
                    " records of " + std::to_string(rec) + " bytes each");
  }
  if (size % rec != 0) {
    std::string msg =
        quoted(file) + ": " + std::to_string(size) + " bytes is not a multiple of the " +
        std::to_string(rec) + "-byte " + f.name + " record (" + std::to_string(f.label_bytes) +
        " label byte" + (f.label_bytes > 1 ? "s" : "") + " + " + std::to_string(kImageBytes) +
        " pixel bytes); the file is truncated or not in the " + f.name + " binary format";
    if (size % static_cast<std::uint64_t>(f.other_record) == 0) {
      msg += " (its size fits " + f.other_name + " records: is this a " + f.other_name + " file?)";
    }
    throw DataError(msg);
  }
  return static_cast<std::int64_t>(size / rec);
}

// The label of record `i` of `file` (validated: a corrupt label names the record and its offset).
std::uint8_t record_label(const fs::path& file, const CifarFormat& f, const std::uint8_t* in,
                          std::int64_t i) {
  const std::int64_t rec = record_bytes(f);
  if (f.label_bytes == 2 && in[0] >= f.coarse_classes) {
    throw DataError(quoted(file) + ": record " + std::to_string(i) + " (byte offset " +
                    std::to_string(i * rec) + ") has coarse label " + std::to_string(in[0]) +
                    ", but " + f.name + " coarse labels are 0.." +
                    std::to_string(f.coarse_classes - 1) + "; the file is corrupt or not " +
                    f.name + " binary");
  }
  const std::uint8_t label = in[f.label_bytes - 1];
  if (label >= f.num_classes) {
    throw DataError(quoted(file) + ": record " + std::to_string(i) + " (byte offset " +
                    std::to_string(i * rec) + ") has label " + std::to_string(label) + ", but " +
                    f.name + " labels are 0.." + std::to_string(f.num_classes - 1) +
                    "; the file is corrupt or not " + f.name + " binary");
  }
  return label;
}

// The set's files and their record counts, every file validated before anything is read.
struct CifarFiles {
  std::vector<fs::path> files;
  std::vector<std::int64_t> counts;
  std::int64_t total = 0;
};

CifarFiles list_files(const fs::path& root, const std::vector<std::string>& names,
                      const CifarFormat& f) {
  detail::require_directory(root, f.name, f.listing);
  CifarFiles set;
  for (const std::string& name : names) {
    set.files.push_back(root / name);
    set.counts.push_back(count_records(root, set.files.back(), f));
    set.total += set.counts.back();
  }
  return set;
}

std::string origin_of(const fs::path& root, const CifarFormat& f, Split split) {
  return f.name + (split == Split::train ? " train" : " test") + " set in " + quoted(root);
}

SampleSet read_cifar(const fs::path& root, const std::vector<std::string>& names,
                     const CifarFormat& f, Split split) {
  const CifarFiles set = list_files(root, names, f);
  // Appended record by record (reserved, not zero-filled first: a memset of the 150 MB of
  // CIFAR-10's training images was a fifth of a small run's start-up).
  std::vector<std::uint8_t> pixels;
  pixels.reserve(static_cast<std::size_t>(set.total * kImageBytes));
  std::vector<Label> labels(static_cast<std::size_t>(set.total));
  const std::int64_t rec = record_bytes(f);
  constexpr std::int64_t kRecordsPerChunk = 4096;  // ~12.6 MB reads
  std::int64_t base = 0;  // first record of the current file in the concatenated dataset
  for (std::size_t k = 0; k < set.files.size(); ++k) {
    const fs::path& file = set.files[k];
    detail::read_chunked(
        file, static_cast<std::uint64_t>(set.counts[k] * rec),
        static_cast<std::size_t>(kRecordsPerChunk * rec),
        [&](const std::uint8_t* data, std::size_t bytes, std::uint64_t offset) {
          const auto first = static_cast<std::int64_t>(offset) / rec;  // record index in file
          const auto n = static_cast<std::int64_t>(bytes) / rec;
          for (std::int64_t r = 0; r < n; ++r) {
            const std::uint8_t* in = data + r * rec;
            const std::int64_t i = first + r;
            labels[static_cast<std::size_t>(base + i)] = record_label(file, f, in, i);
            if (pixels.size() != static_cast<std::size_t>((base + i) * kImageBytes))
              throw Error("internal: " + quoted(file) + " read out of record order");
            pixels.insert(pixels.end(), in + f.label_bytes, in + f.label_bytes + kImageBytes);
          }
        });
    base += set.counts[k];
  }
  return SampleSet(origin_of(root, f, split), kChannels, kSide, kSide, f.num_classes,
                   std::move(pixels), std::move(labels));
}

LimitedSet read_cifar(const fs::path& root, const std::vector<std::string>& names,
                      const CifarFormat& f, Split split, const Limit& limit) {
  const CifarFiles set = list_files(root, names, f);
  const std::vector<std::int64_t> kept = limit.kept(set.total);
  if (kept.empty()) return {read_cifar(root, names, f, split), set.total};
  std::vector<std::uint8_t> pixels(kept.size() * static_cast<std::size_t>(kImageBytes));
  std::vector<Label> labels(kept.size());
  std::size_t next = 0;   // the next kept sample
  std::int64_t base = 0;  // first record of the current file in the concatenated dataset
  for (std::size_t k = 0; k < set.files.size(); ++k) {
    std::vector<std::int64_t> in_file;  // the kept records of this file, numbered in it
    for (std::size_t j = next; j < kept.size() && kept[j] < base + set.counts[k]; ++j)
      in_file.push_back(kept[j] - base);
    const fs::path& file = set.files[k];
    detail::read_records(
        file, 0, static_cast<std::size_t>(record_bytes(f)), in_file,
        [&](const std::uint8_t* in, std::int64_t i) {
          labels[next] = record_label(file, f, in, i);
          std::copy(in + f.label_bytes, in + f.label_bytes + kImageBytes,
                    pixels.begin() + static_cast<std::ptrdiff_t>(next * std::size_t{kImageBytes}));
          ++next;
        });
    base += set.counts[k];
  }
  return {SampleSet(limit.origin(origin_of(root, f, split), set.total), kChannels, kSide, kSide,
                    f.num_classes, std::move(pixels), std::move(labels)),
          set.total};
}

CifarFormat cifar10_format() {
  return {.name = "CIFAR-10",
          .label_bytes = 1,
          .num_classes = 10,
          .coarse_classes = 0,
          .listing =
              "data_batch_1.bin ... data_batch_5.bin and test_batch.bin (the binary "
              "version, cifar-10-binary.tar.gz)",
          .subdir = "cifar-10-batches-bin",
          .other_record = 2 + kImageBytes,
          .other_name = "CIFAR-100"};
}

std::vector<std::string> cifar10_files(Split split) {
  if (split == Split::test) return {"test_batch.bin"};
  std::vector<std::string> names;
  for (int i = 1; i <= 5; ++i) names.push_back("data_batch_" + std::to_string(i) + ".bin");
  return names;
}

CifarFormat cifar100_format() {
  return {.name = "CIFAR-100",
          .label_bytes = 2,
          .num_classes = 100,
          .coarse_classes = 20,
          .listing = "train.bin and test.bin (the binary version, cifar-100-binary.tar.gz)",
          .subdir = "cifar-100-binary",
          .other_record = 1 + kImageBytes,
          .other_name = "CIFAR-10"};
}

std::vector<std::string> cifar100_files(Split split) {
  return {split == Split::train ? "train.bin" : "test.bin"};
}

}  // namespace

SampleSet read_cifar10(const fs::path& root, Split split) {
  return read_cifar(root, cifar10_files(split), cifar10_format(), split);
}

LimitedSet read_cifar10(const fs::path& root, Split split, const Limit& limit) {
  return read_cifar(root, cifar10_files(split), cifar10_format(), split, limit);
}

SampleSet read_cifar100(const fs::path& root, Split split) {
  return read_cifar(root, cifar100_files(split), cifar100_format(), split);
}

LimitedSet read_cifar100(const fs::path& root, Split split, const Limit& limit) {
  return read_cifar(root, cifar100_files(split), cifar100_format(), split, limit);
}

}  // namespace ddp::data
