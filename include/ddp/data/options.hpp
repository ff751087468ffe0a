#pragma once
// What the data room reads (the [data] section of the configuration), defined here and aggregated
// by app::Config.
#include <cstdint>
#include <string>
#include <vector>

namespace ddp::data {

struct Options {
  std::string dataset = "cifar10";  // a name of the registry (registry.hpp)
  std::string root;                 // directory holding the dataset files
  // data.dataset = "packed": the files made by `ddp_train pack` (docs/dataset_format.md).
  std::string train_file;
  std::string test_file;
  // Normalisation on the [0,1] pixel scale: "config" uses mean/std below, "dataset" computes
  // per-channel mean/std from the training set, "none" leaves pixels in [0,1].
  std::string normalize = "config";
  std::vector<double> mean = {0.5};  // one value (all channels) or one per channel
  std::vector<double> std = {0.5};
  // Training augmentation: random crop (zero padding crop_padding) + horizontal flip; with
  // train_size, RandomResizedCrop(train_size, rrc_scale, rrc_ratio) + horizontal flip (and
  // crop_padding is not used).
  bool augment = false;
  // data.augment's flip: "random" (each sample with probability 1/2, drawn per epoch),
  // "alternating" (drawn once per sample, then inverted every other epoch: airbench's),
  // "none".
  std::string flip = "random";
  std::int64_t crop_padding = 4;
  // RandomResizedCrop's ranges (torchvision's defaults): the fraction of the image's area a crop
  // covers, and its aspect ratio (width / height).
  std::vector<double> rrc_scale = {0.08, 1.0};
  std::vector<double> rrc_ratio = {3.0 / 4.0, 4.0 / 3.0};
  // Large-image transforms (0 = off: images keep the dataset's size). With train_size, training
  // takes torchvision's RandomResizedCrop(train_size) + flip (with data.augment; without it,
  // training takes the evaluation transform) and evaluation Resize(eval_resize) +
  // CenterCrop(eval_crop); the network's input is train_size (= eval_crop).
  std::int64_t train_size = 0;
  std::int64_t eval_resize = 0;  // 0: ceil(eval_crop * 8 / 7), torchvision's 256 for 224
  std::int64_t eval_crop = 0;    // 0: train_size
  bool scaled_decode = true;     // TurboJPEG's scaled decoding of small crops (an approximation)
  std::int64_t train_limit = 0;  // use only N training samples (0 = all)
  std::int64_t test_limit = 0;   // use only N test samples (0 = all)
  // How the limits pick: "random" = a subset chosen by train.seed (the same on every rank and
  // world size), "first" = the first N (subset.hpp).
  std::string limit_subset = "random";
  // data.dataset = "packed": 0 = read each file whole into memory; > 0 = stream it, holding at
  // most this many MiB of its chunks per split (packed_stream.hpp).
  std::int64_t cache_mb = 0;
  // Streaming: loader threads per split reading, checking and decoding chunks (0 = the CPUs this
  // rank may use beyond its compute threads, at least 1, at most 8).
  std::int64_t workers = 0;
  // Streaming: 0 = a full shuffle every epoch; N > 0 = shuffle chunk by chunk (the file's chunks in
  // a random order, the samples of each N consecutive ones shuffled among themselves), so a cache
  // of N chunks reads each chunk once an epoch (sampler.hpp, epoch_order_by_chunks).
  std::int64_t shuffle_window = 0;
  // Streaming: "rank" = each rank's own chunk cache; "node" = when the split fits in what the
  // node's ranks may cache together (ranks on the node x cache_mb), it is held once per node in
  // shared memory as data.distribute = "broadcast" holds it; otherwise each rank streams it (said
  // at start-up).
  std::string cache = "rank";
  bool prefetch = true;  // prepare the next batch on a background thread
  // each-reads: every rank reads the files (shared filesystem); broadcast: rank 0 reads them and
  // sends them over MPI, held once per node in MPI shared memory.
  std::string distribute = "each-reads";
};

}  // namespace ddp::data
