#pragma once
// The resolved run configuration: the TOML file plus command-line overrides, validated.
// Every key has a documented default in the schema (config_schema.hpp); this struct is what the
// rest of the program reads.
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "ddp/nn/layer_spec.hpp"
#include "ddp/optim/options.hpp"
#include "ddp/shape.hpp"

namespace ddp::backend {
class Backend;
}

namespace ddp::app {

struct RunConfig {
  std::string dir = "runs/default";  // run.dir: outputs (metrics.jsonl, snapshots)
  bool overwrite = false;            // archive another run's files found in dir and start anew
};

struct DataConfig {
  std::string dataset = "cifar10";  // cifar10 | cifar100 | mnist | fashion_mnist
  std::string root;                 // directory holding the dataset files
  // Normalisation on the [0,1] pixel scale: "config" uses mean/std below, "dataset" computes
  // per-channel mean/std from the training set, "none" leaves pixels in [0,1].
  std::string normalize = "config";
  std::vector<double> mean = {0.5};  // one value (all channels) or one per channel
  std::vector<double> std = {0.5};
  bool augment = false;  // random crop (zero padding crop_padding) + horizontal flip
  std::int64_t crop_padding = 4;
  std::int64_t train_limit = 0;  // use only the first N training samples (0 = all)
  std::int64_t test_limit = 0;   // use only the first N test samples (0 = all)
  bool prefetch = true;
  // each-reads: every rank reads the files (shared filesystem); broadcast: rank 0 reads them and
  // sends them over MPI, held once per node in MPI shared memory.
  std::string distribute = "each-reads";  // prepare the next batch on a background thread
};

struct ModelConfig {
  // A built-in architecture (presets.cpp: lenet, vgg_small, resnet20, resnet18, mobilenet_v2, ...);
  // "" when [[model.layers]] are given. Defaults to lenet so that a configuration without a [model]
  // section still describes a trainable model.
  std::string preset = "lenet";
  // resnet18/34/50 and mobilenet_v2: "imagenet" (torchvision's stem), "cifar" (a 3x3 stride-1
  // first convolution and no max pool) or "auto" (cifar for inputs of at most 64 px).
  std::string stem = "auto";
  bool zero_init_residual = false;  // resnet presets: each block's last batch norm starts at 0
  // [[model.layers]], or the preset's layers (load_config resolves the preset, sizing the last
  // linear layer to the dataset's classes).
  std::vector<nn::LayerSpec> layers;
  // Batch norm in training normalises with the statistics of all ranks' samples (PyTorch's
  // SyncBatchNorm): N ranks x B then train as 1 rank x N*B.
  bool sync_batchnorm = false;
};

// A key that takes a word or numbers: train.rank_shares ("equal", "auto" or one share per rank),
// train.max_micro_batch (a number or "auto"). Exactly one of the two is set.
struct WordOrNumbers {
  std::string word;             // one of the key's words, or "" when numbers are given
  std::vector<double> numbers;  // the numbers given (empty when a word is)
  friend bool operator==(const WordOrNumbers&, const WordOrNumbers&) = default;
};

struct TrainConfig {
  std::int64_t epochs = 10;
  std::int64_t batch_size = 256;  // per rank
  std::uint64_t seed = 42;
  std::int64_t save_every = 0;  // epochs between snapshots (0 = only at the end)
  bool drop_last = false;       // drop the last, short batch of an epoch
  bool shuffle = true;
  double label_smoothing = 0.0;
  // Dynamic loss scaling: 0 = automatic (on for runtime.precision = fp16, starting at 2^16, off
  // otherwise); > 0: on, starting at this scale. Overflowing steps are skipped and halve the scale.
  double loss_scale = 0.0;
  std::int64_t eval_every = 1;
  std::int64_t global_batch = 0;  // samples per step over all ranks (0 = batch_size x ranks)
  std::int64_t accumulate = 1;    // micro-batches per optimizer step (gradients synchronised once)
  // Each rank's share of every global batch: "equal", "auto" (equal, then measured; see
  // train::Trainer::set_rank_shares) or one positive weight per rank ([3, 1, 2]).
  WordOrNumbers rank_shares{"equal", {}};
  // The largest micro-batch a rank runs (0 = no cap): a larger share runs in several micro-batches
  // and synchronises once. "auto": none on the CPU, on a GPU what its free memory holds.
  WordOrNumbers max_micro_batch{"", {0.0}};
  // train.rank_shares = auto re-balances when the predicted step time improves by more than this.
  double rebalance_threshold = 0.05;
  std::string resume;          // "" (start fresh) | "auto" (newest snapshot in run.dir) | a path
  std::int64_t keep_last = 3;  // snapshots kept in run.dir (0 = all)  // epochs between test
                               // evaluations (the last epoch always)
};

// The optimizer's and the schedule's options live in their room (optim/options.hpp).
using OptimConfig = optim::Options;
using ScheduleConfig = optim::ScheduleOptions;

struct CommConfig {
  double bucket_mb = 4.0;        // gradient all-reduce bucket cap (MiB)
  double first_bucket_mb = 1.0;  // the first (last layers') bucket, sent early
  bool overlap = true;           // start bucket all-reduces during backward
  double timeout_s = 300.0;      // a collective that does not complete in time aborts the job
};

struct RuntimeConfig {
  std::string device = "auto";  // auto | cpu | cuda
  // fp32 | bf16 | fp16: the precision of convolutions and linear layers on GPUs (tensor cores);
  // master weights, activations and everything else stay fp32. fp16 implies dynamic loss scaling.
  std::string precision = "fp32";
  std::int64_t threads = 0;  // compute threads per rank (0 = the cores this rank may use)
};

struct Config {
  std::filesystem::path source;  // the config file ("" when none)
  RunConfig run;
  DataConfig data;
  ModelConfig model;
  TrainConfig train;
  OptimConfig optim;
  ScheduleConfig schedule;
  CommConfig comm;
  RuntimeConfig runtime;
  std::string resolved_toml;  // the full configuration after overrides, as TOML text
};

// "section.key" -> value text, as given on the command line (e.g. {"train.epochs", "5"}).
using Overrides = std::vector<std::pair<std::string, std::string>>;

// Reads `path` (may be empty: defaults only), applies overrides, validates everything.
// Throws ConfigError naming the file, key and line, with a "did you mean" suggestion for unknown
// keys.
Config load_config(const std::filesystem::path& path, const Overrides& overrides);

// The configuration against this machine, once the data's shape is known (config_memory.cpp):
// throws ConfigError when the model and batch clearly cannot fit in memory (more than the physical
// RAM), saying the estimate and which keys drive it (a layer's out_features/out_channels,
// train.batch_size or train.global_batch). `input`: one sample's shape; rank_batch and micro_batch:
// the samples per rank and step, and per forward pass, as the trainer allocates them.
void check_memory_fits(const Config& cfg, const Shape& input, std::int64_t rank_batch,
                       std::int64_t micro_batch, backend::Backend& be);

// What a preset is built for (the model.* keys and the dataset).
struct PresetOptions {
  std::string stem = "auto";     // model.stem
  std::int64_t image_side = 32;  // the input's larger side, for stem = auto
  bool zero_init_residual = false;
  std::int64_t classes = 10;  // the output layer's size
};

// Built-in architectures (presets.cpp); throws ConfigError for an unknown name (listing the known
// ones) or an option the preset does not take.
std::vector<nn::LayerSpec> preset_layers(const std::string& name, const PresetOptions& opts = {});
// The options `cfg` asks of its preset (its model.* keys, its dataset's image size and classes).
PresetOptions preset_options(const Config& cfg);
// One line for the start-up output: "resnet18, cifar stem (model.stem = auto: 32x32 inputs)".
std::string preset_description(const std::string& name, const PresetOptions& opts);

}  // namespace ddp::app
