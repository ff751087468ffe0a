#pragma once
// Dataset file readers. Every malformed input is a DataError naming the file and what is wrong:
// missing file, truncated file, record size not dividing the file, label out of range, bad magic.
#include <filesystem>
#include <string>

#include "ddp/data/options.hpp"
#include "ddp/data/sample_set.hpp"

namespace ddp::data {

enum class Split { train, test };

struct Limit;  // subset.hpp: which samples data.train_limit / data.test_limit keep

// A split as a run uses it: the samples a limit kept, and how many the files hold.
struct LimitedSet {
  SampleSet samples;
  std::int64_t source_size = 0;
};

// CIFAR-10 binary: data_batch_1..5.bin (train) or test_batch.bin (test) in root.
SampleSet read_cifar10(const std::filesystem::path& root, Split split);
// CIFAR-100 binary: train.bin / test.bin in root; records <coarse label, fine label, 3072 pixels>.
// Uses the fine labels (100 classes).
SampleSet read_cifar100(const std::filesystem::path& root, Split split);
// IDX image + label files (raw or gzip, detected by magic bytes, not by name).
SampleSet read_idx(const std::filesystem::path& images, const std::filesystem::path& labels,
                   int num_classes = 10);
// MNIST / Fashion-MNIST layout in root: {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz].
SampleSet read_mnist_dir(const std::filesystem::path& root, Split split);

// The same, reading only the samples `limit` keeps (in file order, named as limit_samples names
// them): a run on 256 samples of CIFAR-10 reads 256 records, not 180 MB. A gzipped IDX file is
// still decompressed whole (its checksum and size are checked), but never held whole.
LimitedSet read_cifar10(const std::filesystem::path& root, Split split, const Limit& limit);
LimitedSet read_cifar100(const std::filesystem::path& root, Split split, const Limit& limit);
LimitedSet read_idx(const std::filesystem::path& images, const std::filesystem::path& labels,
                    int num_classes, const Limit& limit);
LimitedSet read_mnist_dir(const std::filesystem::path& root, Split split, const Limit& limit);

// The reader of the configured dataset, from the registry (registry.hpp): built-ins from
// data.root, "packed" from data.train_file / data.test_file (packed_reader.hpp).
SampleSet read_dataset(const Options& opt, Split split);
// The configured dataset limited as data.train_limit / data.test_limit and data.limit_subset say
// (train.seed `seed`): only the kept samples read where the format allows (registry.hpp).
LimitedSet read_limited(const Options& opt, Split split, std::uint64_t seed);
// The same for a dataset name and root (built-ins only).
SampleSet read_dataset(const std::string& name, const std::filesystem::path& root, Split split);

}  // namespace ddp::data
