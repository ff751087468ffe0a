// The schema tables: every configuration key and every [[model.layers]] key, described once.
#include "ddp/app/config_schema.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <type_traits>

#include "ddp/app/config_detail.hpp"
#include "ddp/data/registry.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/layer_registry.hpp"
#include "ddp/nn/presets.hpp"

// The tables below use designated initializers and leave the fields a key does not need at their
// defaults; GCC < 14 warns about every such omission (GCC bug 96868), so silence it in this file.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace ddp::app {
namespace {

// DDP_KEY(train, epochs) names the key and points at its field in one go, so the two cannot
// diverge.
#define DDP_KEY(section, key) \
  .name = #section "." #key, .field = [](Config& c) -> ConfigField { return &c.section.key; }
#define DDP_LAYER_KEY(key) \
  .name = #key, .field = [](nn::LayerSpec& s) -> LayerField { return &s.key; }

Range at_least(double lo) {
  return {.lo = lo};
}
Range above(double lo) {
  return {.lo = lo, .lo_open = true};
}
// [lo, hi]: keys whose absurd values would overflow a size or a product of sizes, or ask for
// memory no machine has, are bounded where a user would plausibly stop.
Range between(double lo, double hi) {
  return {.lo = lo, .hi = hi};
}
Range unit_open() {
  return {.lo = 0.0, .hi = 1.0, .hi_open = true};
}  // [0, 1)

std::vector<std::string_view> preset_choices() {
  std::vector<std::string_view> out = {""};
  for (auto name : nn::preset_names()) out.push_back(name);
  return out;
}

std::string join(const std::vector<std::string_view>& items, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i].empty() ? std::string("\"\"") : std::string(items[i]);
  }
  return out;
}

template <class Variant>
ValueType type_of(const Variant& field) {
  return std::visit(
      [](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, bool>)
          return ValueType::kBool;
        else if constexpr (std::is_integral_v<T>)
          return ValueType::kInt;
        else if constexpr (std::is_floating_point_v<T>)
          return ValueType::kFloat;
        else if constexpr (std::is_same_v<T, std::string>)
          return ValueType::kString;
        else if constexpr (std::is_same_v<T, nn::Extent2>)
          return ValueType::kIntPair;
        else if constexpr (std::is_same_v<T, std::vector<std::string>>)
          return ValueType::kStringList;
        else if constexpr (std::is_same_v<T, WordOrNumbers>)
          return ValueType::kWordOrNumbers;
        else
          return ValueType::kFloatList;
      },
      field);
}

template <class Variant>
Value read(const Variant& field) {
  return std::visit(
      [](auto* p) -> Value {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, bool>)
          return *p;
        else if constexpr (std::is_integral_v<T>)
          return static_cast<std::int64_t>(*p);
        else if constexpr (std::is_floating_point_v<T>)
          return static_cast<double>(*p);
        else if constexpr (std::is_same_v<T, nn::Extent2>)
          return IntPair{p->h, p->w};
        else
          return *p;
      },
      field);
}

template <class Variant>
void write(const Variant& field, const Value& v) {
  std::visit(
      [&v](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, bool>)
          *p = std::get<bool>(v);
        else if constexpr (std::is_integral_v<T>)
          *p = static_cast<T>(std::get<std::int64_t>(v));
        else if constexpr (std::is_floating_point_v<T>)
          *p = static_cast<T>(std::get<double>(v));
        else if constexpr (std::is_same_v<T, nn::Extent2>)
          *p = nn::Extent2(std::get<IntPair>(v)[0], std::get<IntPair>(v)[1]);
        else
          *p = std::get<T>(v);
      },
      field);
}

// "1 or 3".
std::string sizes_text(const std::vector<std::size_t>& sizes) {
  std::string out;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (i) out += i + 1 == sizes.size() ? " or " : ", ";
    out += std::to_string(sizes[i]);
  }
  return out;
}

std::optional<std::string> check_number(double v, const Range& r, std::string_view prefix) {
  if (!std::isfinite(v)) return std::string(prefix) + "must be a finite number";
  if (!r.contains(v)) return std::string(prefix) + "must be " + r.text();
  return std::nullopt;
}

std::optional<std::string> check_choice(const std::string& s,
                                        const std::vector<std::string_view>& choices) {
  if (choices.empty() || std::find(choices.begin(), choices.end(), s) != choices.end())
    return std::nullopt;
  std::vector<std::string> names(choices.begin(), choices.end());
  return "must be one of " + join(choices, ", ") + detail::did_you_mean(s, names);
}

// Checks shared by ConfigKey and LayerKey (a float layer field is stored as float, hence
// `as_float`: the value must survive the narrowing).
std::optional<std::string> check_scalar(const Value& v, const Range& range,
                                        const std::vector<std::string_view>& choices,
                                        bool as_float) {
  if (const auto* i = std::get_if<std::int64_t>(&v))
    return check_number(static_cast<double>(*i), range, "");
  if (const auto* d = std::get_if<double>(&v)) {
    if (auto e = check_number(*d, range, "")) return e;
    const auto f = static_cast<float>(*d);
    if (as_float && (!std::isfinite(f) || (*d != 0.0 && f == 0.0f)))
      return std::string("must be representable as a 32-bit float");
    return std::nullopt;
  }
  if (const auto* s = std::get_if<std::string>(&v)) return check_choice(*s, choices);
  if (const auto* pair = std::get_if<IntPair>(&v)) {
    for (auto x : *pair)
      if (auto e = check_number(static_cast<double>(x), range, "each value ")) return e;
  }
  return std::nullopt;
}

// Names a layer can be given (and referred to by): they become HDF5 paths in snapshots.
std::optional<std::string> check_identifier(const std::string& s) {
  const bool ok = !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.';
  });
  if (!ok) return std::string("must be non-empty and use only letters, digits, '_', '-' and '.'");
  // It is also an HDF5 group name, where "." means the current group: refused here rather than
  // at the first snapshot, after an epoch of training. Dots alone ("..") are refused with it.
  if (std::all_of(s.begin(), s.end(), [](char ch) { return ch == '.'; }))
    return std::string(
        "must not consist of dots only: the name is an HDF5 group in snapshots, "
        "where '.' means the current group");
  return std::nullopt;
}

}  // namespace

bool Range::contains(double v) const {
  if (lo && (lo_open ? !(v > *lo) : !(v >= *lo))) return false;
  if (hi && (hi_open ? !(v < *hi) : !(v <= *hi))) return false;
  return true;
}

std::string Range::text() const {
  using detail::format_float;
  if (lo && hi) {
    return "in " + std::string(lo_open ? "(" : "[") + format_float(*lo) + ", " + format_float(*hi) +
           (hi_open ? ")" : "]");
  }
  if (lo) return (lo_open ? "> " : ">= ") + format_float(*lo);
  if (hi) return (hi_open ? "< " : "<= ") + format_float(*hi);
  return "";
}

// ---- configuration keys ----

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = {
      {DDP_KEY(run, dir),
       .help = "the run's directory (run.json, config.toml, metrics.jsonl, snapshots); one run "
               "per directory",
       .non_empty = true},
      {DDP_KEY(run, overwrite),
       .help = "start a new run in a run.dir that holds another run: its files move to "
               "run.dir/archive/<its run id>/"},
      {DDP_KEY(run, tensorboard),
       .help = "rank 0 writes TensorBoard event files into run.dir/tensorboard (every "
               "metrics.jsonl field per epoch; loss, learning rate and images/s every "
               "run.log_every steps, more often in a short run, and with every progress line); "
               "false: none"},
      {DDP_KEY(run, verbose), .help =
                                  "print the model's layer table at start (it is always written to "
                                  "run.dir/model.txt)"},
      {DDP_KEY(run, trace),
       .help = "every rank's step phases (data wait, forward, backward, each bucket's "
               "all-reduce, optimizer, evaluation, snapshots) as a Chrome trace: "
               "run.dir/trace/rank_NNNN.json, merged by rank 0 into run.dir/trace.json"},
      {DDP_KEY(run, log_every),
       .help = "steps between progress lines (time, step/total, loss, images/s, ETA) when "
               "stdout is not a terminal, at least one every 30 s; also the longest interval "
               "between TensorBoard step scalars (0 = neither)",
       .range = at_least(0)},

      {DDP_KEY(data, dataset),
       .help = "dataset format and class count; packed = files made by ddp_train pack "
               "(data.train_file, data.test_file)",
       .choices = data::dataset_names()},
      {DDP_KEY(data, root), .help = "directory holding the dataset files"},
      {DDP_KEY(data, train_file),
       .help = "data.dataset = packed: the packed training file (ddp_train pack --output)"},
      {DDP_KEY(data, test_file),
       .help = "data.dataset = packed: the packed test file (ddp_train pack --output)"},
      {DDP_KEY(data, normalize),
       .help = "pixel normalisation: config = data.mean/std, dataset = computed from the training "
               "set, none = [0,1]",
       .choices = {"config", "dataset", "none"}},
      {DDP_KEY(data, mean),
       .help = "per-channel mean on the [0,1] pixel scale (one value for all channels)",
       .range = {.lo = 0.0, .hi = 1.0}, .sizes = {1, 3}},
      {DDP_KEY(data, std), .help = "per-channel standard deviation on the [0,1] pixel scale",
       .range = above(0.0), .sizes = {1, 3}},
      {DDP_KEY(data, augment),
       .help = "training augmentation: random crop (zero padding data.crop_padding) + "
               "horizontal flip; with data.train_size, RandomResizedCrop(data.rrc_scale, "
               "data.rrc_ratio) + horizontal flip (the start-up lines print both transforms)"},
      {DDP_KEY(data, crop_padding),
       .help = "padding of the random crop, at most half the image side (not used with "
               "data.train_size)",
       .range = between(0, 32768)},
      {DDP_KEY(data, rrc_scale),
       .help = "with data.train_size and data.augment: the random-resized crop's area as a "
               "fraction of the image's, min,max (torchvision's scale)",
       .range = {.lo = 0.0, .hi = 1.0, .lo_open = true}, .sizes = {2}},
      {DDP_KEY(data, rrc_ratio),
       .help = "with data.train_size and data.augment: the random-resized crop's aspect ratio "
               "(width / height), min,max (torchvision's ratio)",
       .range = {.lo = 0.01, .hi = 100.0}, .sizes = {2}},
      {DDP_KEY(data, flip),
       .help = "data.augment's horizontal flip: random = each sample with probability 1/2 every "
               "epoch; alternating = drawn once per sample (by train.seed), then inverted every "
               "other epoch (airbench's); none",
       .choices = {"random", "alternating", "none"}},
      {DDP_KEY(data, train_size),
       .help = "network input side for images of any size (0 = the dataset's own): training "
               "takes torchvision's RandomResizedCrop(train_size) + flip with data.augment "
               "(else the eval transform), eval Resize(eval_resize) + CenterCrop(eval_crop)",
       .range = between(0, 8192)},
      {DDP_KEY(data, eval_resize),
       .help = "with data.train_size: shorter side of the eval resize (0 = ceil(eval_crop * 8/7))",
       .range = between(0, 16384)},
      {DDP_KEY(data, eval_crop),
       .help = "with data.train_size: eval centre crop, must equal train_size (0 = train_size)",
       .range = between(0, 8192)},
      {DDP_KEY(data, scaled_decode),
       .help = "encoded JPEGs: decode at a TurboJPEG scale when the random crop is at most half "
               "the image (faster; an approximation, not PIL's pixels)"},
      {DDP_KEY(data, train_limit),
       .help = "use only N training samples (0 = all), picked as data.limit_subset says",
       .range = at_least(0)},
      {DDP_KEY(data, test_limit),
       .help = "use only N test samples (0 = all), picked as data.limit_subset says",
       .range = at_least(0)},
      {DDP_KEY(data, limit_subset),
       .help = "how the limits pick their samples: random = a subset chosen by train.seed (the "
               "same on every rank and world size), first = the first N of the file",
       .choices = {"random", "first"}},
      {DDP_KEY(data, cache_mb),
       .help = "data.dataset = packed: 0 = hold each file whole in memory; N > 0 = stream it from "
               "disk through a cache of N MiB of chunks per split (for files larger than memory)",
       .range = between(0, 1 << 30)},
      {DDP_KEY(data, workers),
       .help = "streaming (data.cache_mb > 0): loader threads per split reading and decoding "
               "chunks ahead of the trainer (0 = the rank's spare CPUs, 1..8)",
       .range = {.lo = 0.0, .hi = 8.0}},
      {DDP_KEY(data, shuffle_window),
       .help = "streaming (data.cache_mb > 0): 0 = shuffle all samples every epoch; N > 0 = "
               "visit the file's chunks in a random order, N at a time, shuffling the samples of "
               "those N chunks (with a cache of N chunks each chunk is read once an epoch; the "
               "order, and so the result, depends on N)",
       .range = at_least(0)},
      {DDP_KEY(data, cache),
       .help = "streaming (data.cache_mb > 0): rank = each rank caches chunks of its own; node = "
               "hold the whole split once per node in shared memory when it fits in the node's "
               "ranks x data.cache_mb (read by rank 0 and sent over MPI, as data.distribute = "
               "broadcast does), else stream per rank and say so",
       .choices = {"rank", "node"}},
      {DDP_KEY(data, prefetch), .help = "prepare the next batch on a background thread"},
      {DDP_KEY(data, distribute),
       .help = "each-reads = every rank reads the files; broadcast = rank 0 reads, the data "
               "travels over MPI and is held once per node in shared memory",
       .choices = {"each-reads", "broadcast"}},

      {DDP_KEY(model, preset),
       .help = "built-in architecture (\"\" when [[model.layers]] are given in the file)",
       .choices = preset_choices()},
      {DDP_KEY(model, stem),
       .help = "resnet18/34/50, mobilenet_v2: imagenet = torchvision's stem; cifar = a 3x3 "
               "stride-1 first convolution and no max pool; auto = cifar for images of at most 64 "
               "px (resnet20/56 are always CIFAR nets)",
       .choices = {"auto", "imagenet", "cifar"}},
      {DDP_KEY(model, zero_init_residual),
       .help = "resnet presets: the last batch norm of each residual block starts with weight 0 "
               "(torchvision's zero_init_residual)"},
      {DDP_KEY(model, sync_batchnorm),
       .help = "batch norm in training uses the statistics of every rank's samples (PyTorch's "
               "SyncBatchNorm), so N ranks x B train as 1 rank x N*B; costs collectives per "
               "batch-norm layer"},
      {DDP_KEY(model, whitening_samples),
       .help = "a convolution with init = patch_whitening: training images (chosen by train.seed, "
               "without augmentation) whose patch covariance sets the filters (0 = all)",
       .range = at_least(0)},
      {DDP_KEY(model, whitening_eps),
       .help = "a convolution with init = patch_whitening: filters are eigenvectors / "
               "sqrt(eigenvalue + eps)",
       .range = above(0.0)},

      {DDP_KEY(train, epochs), .help = "passes over the training set", .range = at_least(1)},
      {DDP_KEY(train, batch_size), .help = "samples per step on each rank", .range = at_least(1)},
      // TOML integers are signed 64-bit, so that is the seed's range too.
      {DDP_KEY(train, seed), .help = "seed of weights, sample order and augmentation",
       .range = at_least(0)},
      {DDP_KEY(train, save_every), .help = "epochs between snapshots (0 = only at the end)",
       .range = at_least(0)},
      {DDP_KEY(train, drop_last), .help = "drop the last, short batch of an epoch"},
      {DDP_KEY(train, shuffle), .help = "shuffle the training set every epoch"},
      {DDP_KEY(train, label_smoothing), .help = "cross-entropy label smoothing",
       .range = unit_open()},
      {DDP_KEY(train, loss_scale),
       .help = "initial dynamic loss scale (0 = automatic: 65536 with fp16, off otherwise)",
       .range = between(0.0, 1e30)},
      {DDP_KEY(train, eval_every),
       .help = "epochs between test evaluations (the last epoch is always evaluated)",
       .range = at_least(1)},
      {DDP_KEY(train, global_batch),
       .help = "samples per optimizer step over all ranks (0 = train.batch_size x ranks), at "
               "least ranks x train.accumulate; need not divide evenly: each step's samples are "
               "split over the ranks in slices differing by at most one (256 on 3 ranks: 86, 85, "
               "85; train.rank_shares makes them uneven), each slice over the micro-batches "
               "likewise, and the gradient is the mean over the whole global batch",
       .range = between(0, 1 << 30)},
      {DDP_KEY(train, accumulate),
       .help = "micro-batches per optimizer step; gradients are synchronised on the last only",
       .range = between(1, 1 << 20)},
      {DDP_KEY(train, rank_shares),
       .help = "each rank's share of every global batch: equal, auto (equal, then measured) or "
               "one weight per rank, e.g. 3,1,2 ([3, 1, 2] in a file); the global batch is cut "
               "into slices of these proportions (largest remainders rounded up, every rank at "
               "least one sample) and the gradient stays the mean over the whole global batch",
       .range = {.lo = 0.0, .hi = 1048576.0, .lo_open = true}, .choices = {"equal", "auto"}},
      {DDP_KEY(train, max_micro_batch),
       .help = "the most samples one forward/backward pass of a rank takes (0 = no cap): a "
               "larger share runs in several micro-batches and synchronises once; auto = no cap "
               "on the CPU, on a GPU what its free memory holds",
       .range = between(0, 1 << 30), .choices = {"auto"}, .sizes = {1}, .whole = true},
      {DDP_KEY(train, rebalance_threshold),
       .help = "train.rank_shares = auto re-balances at an epoch's end when the predicted step "
               "time improves by more than this fraction",
       .range = at_least(0.0)},
      {DDP_KEY(train, reproducible),
       .help = "bitwise-reproducible training: the same final weights on any number of ranks, "
               "rank shares and threads, and across a resume on another world size (each chunk's "
               "gradient computed alone, summed exactly in fixed point; batch norm by chunk; "
               "docs/data_parallelism.md)"},
      {DDP_KEY(train, chunk),
       .help = "train.reproducible: samples per chunk, dividing the global batch (an epoch's "
               "short last batch ends with one short chunk); ranks and threads take whole chunks",
       .range = at_least(1)},
      {DDP_KEY(train, resume),
       .help = "\"\" = start a new run (run.dir must not hold another), auto = continue the run "
               "in run.dir from its newest complete snapshot (or start it; a complete run exits "
               "at once unless train.epochs grew), or a snapshot path"},
      {DDP_KEY(train, keep_last), .help = "snapshots kept in run.dir (0 = all)",
       .range = between(0, 1048576)},
      {DDP_KEY(train, init),
       .help = "fine-tuning: a new run starts from this file's weights (a weights file of "
               "scripts/torch_to_snapshot.py, or a snapshot of the same model); a classifier of "
               "another class count is re-initialised; not a resume (\"\" = seeded init)"},
      {DDP_KEY(train, freeze),
       .help = "parameters that do not train (no gradient, no all-reduce, no optimizer state): "
               "names or prefixes (layer1), globs (\"*.bias\") or kinds (bn, conv, linear)"},
      {DDP_KEY(train, frozen_bn),
       .help = "batch norm whose parameters train.freeze freezes: eval = normalise with its "
               "running statistics (they stay as loaded); train = batch statistics",
       .choices = {"eval", "train"}},
      {DDP_KEY(train, ema),
       .help = "exponential moving average of the weights and batch-norm statistics: decay per "
               "optimizer step (0 = off); evaluated (eval.weights) and kept in snapshots",
       .range = unit_open()},
      {DDP_KEY(train, ema_every),
       .help = "optimizer steps between moving-average updates (each then decays by "
               "train.ema^ema_every)",
       .range = at_least(1)},
      {DDP_KEY(train, ema_start),
       .help = "optimizer steps before the moving average starts (as a copy of the weights)",
       .range = at_least(0)},
      {DDP_KEY(train, ema_ramp),
       .help = "the moving average's decay times (step / total steps)^ema_ramp: weak early, "
               "strong at the end (airbench's 3); 0 = constant",
       .range = at_least(0.0)},
      {DDP_KEY(train, ema_mode),
       .help = "average = kept beside the weights; lookahead = also copied into the weights "
               "after each update and at each epoch's end (airbench's)",
       .choices = {"average", "lookahead"}},

      {DDP_KEY(optim, name), .help = "optimizer", .choices = {"sgd", "adam", "adamw"}},
      {DDP_KEY(optim, lr), .help = "base learning rate", .range = above(0.0)},
      {DDP_KEY(optim, momentum), .help = "sgd momentum", .range = unit_open()},
      {DDP_KEY(optim, nesterov), .help = "sgd Nesterov momentum (needs optim.momentum > 0)"},
      {DDP_KEY(optim, weight_decay), .help = "L2 penalty (sgd, adam) or decoupled decay (adamw)",
       .range = at_least(0.0)},
      {DDP_KEY(optim, beta1), .help = "adam/adamw first-moment decay", .range = unit_open()},
      {DDP_KEY(optim, beta2), .help = "adam/adamw second-moment decay", .range = unit_open()},
      {DDP_KEY(optim, eps), .help = "adam/adamw denominator epsilon", .range = above(0.0)},
      {DDP_KEY(optim, no_decay_norm_bias),
       .help = "no weight decay on batch-norm weights and biases and on every *.bias (the usual "
               "ResNet recipe)"},

      {DDP_KEY(schedule, name), .help = "learning-rate schedule",
       .choices = {"constant", "step", "cosine", "onecycle"}},
      {DDP_KEY(schedule, warmup_epochs),
       .help = "linear warm-up length in epochs, <= train.epochs (constant, step, cosine)",
       .range = at_least(0.0)},
      {DDP_KEY(schedule, warmup_start_factor),
       .help = "warm-up starts at this fraction of optim.lr", .range = {.lo = 0.0, .hi = 1.0}},
      {DDP_KEY(schedule, step_size), .help = "step: epochs between decays", .range = at_least(1)},
      {DDP_KEY(schedule, gamma), .help = "step: decay factor",
       .range = {.lo = 0.0, .hi = 1.0, .lo_open = true}},
      {DDP_KEY(schedule, min_lr), .help = "cosine: final learning rate, <= optim.lr",
       .range = at_least(0.0)},
      {DDP_KEY(schedule, pct_start),
       .help = "onecycle: fraction of the steps spent increasing the learning rate",
       .range = {.lo = 0.0, .hi = 1.0, .lo_open = true, .hi_open = true}},
      {DDP_KEY(schedule, div_factor), .help = "onecycle: initial lr = optim.lr / div_factor",
       .range = at_least(1.0)},
      {DDP_KEY(schedule, final_div_factor),
       .help = "onecycle: final lr = initial lr / final_div_factor", .range = at_least(1.0)},

      {DDP_KEY(eval, tta),
       .help = "test-time augmentation: none; flip = the mean of the image's and its mirror's "
               "logits; flip_translate = also shifted by eval.tta_shift pixels up-left and "
               "down-right (reflected borders), weighted as airbench's tta_level 2",
       .choices = {"none", "flip", "flip_translate"}},
      {DDP_KEY(eval, tta_shift), .help = "eval.tta = flip_translate: the shift in pixels",
       .range = at_least(1)},
      {DDP_KEY(eval, weights),
       .help = "the weights evaluated: auto = the moving average (train.ema) once it has "
               "started, else the weights; ema = the average (an error without one); live = the "
               "weights",
       .choices = {"auto", "ema", "live"}},

      {DDP_KEY(comm, bucket_mb), .help = "gradient all-reduce bucket cap in MiB",
       .range = {.lo = 0.0, .hi = 65536.0, .lo_open = true}},
      {DDP_KEY(comm, first_bucket_mb),
       .help = "cap of the first bucket (the last layers' gradients), sent early",
       .range = {.lo = 0.0, .hi = 65536.0, .lo_open = true}},
      {DDP_KEY(comm, overlap), .help = "start each bucket's all-reduce during backward"},
      {DDP_KEY(comm, timeout_s),
       .help = "seconds a collective may take before the job is aborted, naming the missing ranks",
       .range = {.lo = 0.0, .hi = 31536000.0, .lo_open = true}},

      {DDP_KEY(runtime, device), .help = "compute device", .choices = {"auto", "cpu", "cuda"}},
      {DDP_KEY(runtime, precision),
       .help = "precision of convolutions and linear layers on GPUs (fp32 master weights)",
       .choices = {"fp32", "bf16", "fp16"}},
      {DDP_KEY(runtime, threads),
       .help = "compute threads per rank (0 = the cores this rank may use)", .range = at_least(0)},
  };
  return keys;
}

const ConfigKey* find_config_key(std::string_view name) {
  for (const auto& k : config_keys())
    if (k.name == name) return &k;
  return nullptr;
}

std::vector<std::string> config_sections() {
  std::vector<std::string> out;
  for (const auto& k : config_keys()) {
    std::string s(k.section());
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  return out;
}

ValueType ConfigKey::type() const {
  Config c;
  return type_of(field(c));
}

std::string_view ConfigKey::section() const {
  return name.substr(0, name.find('.'));
}
std::string_view ConfigKey::leaf() const {
  return name.substr(name.find('.') + 1);
}

std::string ConfigKey::default_text() const {
  const Config defaults;
  return detail::format_value(get(defaults));
}

std::string ConfigKey::constraint_text() const {
  if (type() == ValueType::kWordOrNumbers) {
    // "equal|auto|numbers each > 0", "auto|integer >= 0".
    const auto r = range.text();
    const bool one = sizes.size() == 1 && sizes[0] == 1;
    std::string numbers = one ? (whole ? "integer" : "number") : (whole ? "integers" : "numbers");
    if (!r.empty()) numbers += (one ? " " : " each ") + r;
    return join(choices, "|") + "|" + numbers;
  }
  std::string out;
  if (!choices.empty()) out = join(choices, "|");
  if (!sizes.empty()) {
    out = sizes_text(sizes) + " values";
    if (auto r = range.text(); !r.empty()) out += ", each " + r;
  } else if (auto r = range.text(); !r.empty()) {
    out = r;
  }
  if (non_empty) out = "not empty";
  return out;
}

std::optional<std::string> ConfigKey::check(const Value& v) const {
  if (const auto* s = std::get_if<std::string>(&v); s && non_empty && s->empty())
    return std::string("must not be empty");
  if (const auto* wn = std::get_if<WordOrNumbers>(&v)) return check_word_or_numbers(*wn);
  if (const auto* list = std::get_if<std::vector<double>>(&v)) {
    if (list->empty() ||
        (!sizes.empty() && std::find(sizes.begin(), sizes.end(), list->size()) == sizes.end())) {
      return "must have " + (sizes.empty() ? std::string("at least 1") : sizes_text(sizes)) +
             " values, not " + std::to_string(list->size());
    }
    for (double x : *list)
      if (auto e = check_number(x, range, "each value ")) return e;
    return std::nullopt;
  }
  return check_scalar(v, range, choices, false);
}

std::optional<std::string> ConfigKey::check_word_or_numbers(const WordOrNumbers& v) const {
  const bool one = sizes.size() == 1 && sizes[0] == 1;
  if (v.numbers.empty()) {
    if (std::find(choices.begin(), choices.end(), v.word) != choices.end()) return std::nullopt;
    std::vector<std::string> names(choices.begin(), choices.end());
    return "must be " + join(choices, ", ") + " or " +
           (one ? std::string(whole ? "an integer" : "a number")
                : std::string(whole ? "a list of integers" : "a list of numbers")) +
           detail::did_you_mean(v.word, names);
  }
  if (!sizes.empty() && std::find(sizes.begin(), sizes.end(), v.numbers.size()) == sizes.end())
    return "must be one value, not " + std::to_string(v.numbers.size());
  const char* prefix = one ? "" : "each value ";
  for (double x : v.numbers) {
    if (auto e = check_number(x, range, prefix)) return e;
    if (whole && x != std::floor(x)) return std::string(prefix) + "must be an integer";
  }
  return std::nullopt;
}

Value ConfigKey::get(const Config& c) const {
  // `field` only computes an address; nothing is written through it here.
  return read(field(const_cast<Config&>(c)));
}

void ConfigKey::set(Config& c, const Value& v) const {
  write(field(c), v);
}

// ---- [[model.layers]] keys ----

const std::vector<std::string_view>& layer_types() {
  static const std::vector<std::string_view> types = [] {
    std::vector<std::string_view> out;
    for (const auto& t : nn::layer_registry()) out.push_back(t.type);
    return out;
  }();
  return types;
}

namespace {

// The keys of every layer type: type, name, input(s), then each key a layer type registers
// (nn/layer_registry.hpp), once, in the registry's order. A key two types share must be one
// definition (same field, help and values): it is one entry here.
std::vector<LayerKey> collect_layer_keys() {
  std::vector<LayerKey> keys = {
      {DDP_LAYER_KEY(type), .help = "layer type", .choices = layer_types(), .every_type = true},
      {DDP_LAYER_KEY(name),
       .help = "unique name (default: conv1, relu1, pool1, fc1, bn1, drop1, flatten1, ...)",
       .every_type = true, .identifier = true},
      {.name = "input",
       .field = [](nn::LayerSpec& s) -> LayerField { return &s.inputs; },
       .help = "the layer whose output this one reads (default: the layer above)",
       .every_type = true,
       .identifier = true,
       .alias = true,
       .max_items = 1},
      {DDP_LAYER_KEY(inputs),
       .help = "the layers whose outputs this one reads, e.g. [\"conv2\", \"pool1\"] (add, "
               "concat); only layers above may be named",
       .every_type = true, .identifier = true},
  };
  const std::size_t common = keys.size();
  nn::LayerSpec probe;
  for (const auto& t : nn::layer_registry()) {
    for (const nn::LayerKeyDef& d : t.keys) {
      const Range range{.lo = d.range.lo,
                        .hi = d.range.hi,
                        .lo_open = d.range.lo_open,
                        .hi_open = d.range.hi_open};
      const auto same = [&](const LayerKey& k) { return k.name == d.name; };
      const auto it = std::find_if(keys.begin(), keys.end(), same);
      if (it == keys.end()) {
        keys.push_back({.name = d.name,
                        .field = d.field,
                        .help = d.help,
                        .range = range,
                        .choices = d.choices});
        continue;
      }
      const bool equal = it - keys.begin() >= static_cast<std::ptrdiff_t>(common) &&
                         it->field(probe) == d.field(probe) && it->help == d.help &&
                         it->range.lo == range.lo && it->range.hi == range.hi &&
                         it->range.lo_open == range.lo_open && it->range.hi_open == range.hi_open &&
                         it->choices == d.choices;
      if (!equal)
        throw Error("internal: layer type '" + std::string(t.type) + "' defines key '" +
                    std::string(d.name) +
                    "' otherwise than another type or the common keys do; share one definition "
                    "(src/nn/layers/shared_keys.hpp)");
    }
  }
  return keys;
}

}  // namespace

const std::vector<LayerKey>& layer_keys() {
  static const std::vector<LayerKey> keys = collect_layer_keys();
  return keys;
}

const LayerKey* find_layer_key(std::string_view name) {
  for (const auto& k : layer_keys())
    if (k.name == name) return &k;
  return nullptr;
}

ValueType LayerKey::type() const {
  nn::LayerSpec s;
  return type_of(field(s));
}

bool LayerKey::applies(std::string_view layer_type) const {
  if (every_type) return true;
  const nn::LayerType* t = nn::find_layer_type(layer_type);
  return t && std::any_of(t->keys.begin(), t->keys.end(),
                          [this](const nn::LayerKeyDef& k) { return k.name == name; });
}

bool LayerKey::required(std::string_view layer_type) const {
  const nn::LayerType* t = nn::find_layer_type(layer_type);
  return t && std::find(t->required.begin(), t->required.end(), name) != t->required.end();
}

std::optional<std::string> LayerKey::check(const Value& v) const {
  if (const auto* s = std::get_if<std::string>(&v); s && identifier) {
    if (auto e = check_identifier(*s)) return e;
  }
  if (const auto* list = std::get_if<std::vector<std::string>>(&v)) {
    if (list->empty())
      return std::string("names no layer; leave the key out to read the layer above");
    if (max_items > 0 && list->size() > max_items)
      return "takes " + std::to_string(max_items) + " name; use inputs = [...] for several";
    for (const auto& item : *list)
      if (auto e = check_identifier(item)) return "'" + item + "' " + *e;
  }
  return check_scalar(v, range, choices, type() == ValueType::kFloat);
}

Value LayerKey::get(const nn::LayerSpec& s) const {
  // `field` only computes an address; nothing is written through it here.
  return read(field(const_cast<nn::LayerSpec&>(s)));
}

void LayerKey::set(nn::LayerSpec& s, const Value& v) const {
  write(field(s), v);
}

#undef DDP_KEY
#undef DDP_LAYER_KEY

}  // namespace ddp::app
