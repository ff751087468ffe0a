#pragma once
// What the training loop reads (the [run] and [train] sections of the configuration), and
// train::Setup, every room's options together: what a Trainer is built from. app::Config is a
// Setup plus what only the application needs, so no room below app includes an app header.
#include <cstdint>
#include <string>
#include <vector>

#include "ddp/data/options.hpp"
#include "ddp/nn/model_options.hpp"
#include "ddp/optim/options.hpp"
#include "ddp/runtime/options.hpp"
#include "ddp/sync/options.hpp"

namespace ddp::train {

struct RunOptions {
  std::string dir = "runs/default";  // run.dir: outputs (metrics.jsonl, snapshots)
  bool overwrite = false;            // archive another run's files found in dir and start anew
  bool tensorboard = true;           // rank 0 writes dir/tensorboard/events.out.tfevents.*
  bool trace = false;                // every rank's step phases into dir/trace/ (Chrome trace JSON)
  bool verbose = false;              // the model's layer table in the log (always in dir/model.txt)
  // Steps between progress lines on stdout without a terminal (also every 30 s) and, at most,
  // between the per-step TensorBoard scalars (train/run_watch.hpp); 0 = none.
  std::int64_t log_every = 50;
};

// A key that takes a word or numbers: train.rank_shares ("equal", "auto" or one share per rank),
// train.max_micro_batch (a number or "auto"). Exactly one of the two is set.
struct WordOrNumbers {
  std::string word;             // one of the key's words, or "" when numbers are given
  std::vector<double> numbers;  // the numbers given (empty when a word is)
  friend bool operator==(const WordOrNumbers&, const WordOrNumbers&) = default;
};

struct Options {
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
  std::int64_t eval_every = 1;    // epochs between test evaluations (the last epoch always)
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
  // Bitwise-reproducible training (train/chunk_plan.hpp): every global batch is cut into chunks
  // of `chunk` samples whose gradients are computed alone and summed exactly, so the weights do not
  // depend on the ranks, their shares or the threads.
  bool reproducible = false;
  std::int64_t chunk = 32;
  std::string resume;          // "" (start fresh) | "auto" (newest snapshot in run.dir) | a path
  std::int64_t keep_last = 3;  // snapshots kept in run.dir (0 = all)
  // Fine-tuning (docs/finetuning.md). A new run starts from this file's tensors: a weights file
  // (scripts/torch_to_snapshot.py) or any run's snapshot of the same model ("": seeded init).
  std::string init;
  // Parameters that do not train: names, prefixes, globs or kinds (optim/param_pattern.hpp).
  std::vector<std::string> freeze;
  // A batch norm whose parameters are all frozen: "eval" (its running statistics) or "train".
  std::string frozen_bn = "eval";
  // An exponential moving average of the weights and batch-norm statistics (weight_average.hpp):
  // decay per optimizer step (0 = off), updated every ema_every steps once ema_start steps are
  // done, the decay ramped by (step / total steps)^ema_ramp (0 = constant); "average" keeps it
  // beside the weights (evaluated, snapshotted), "lookahead" also copies it into them.
  double ema = 0.0;
  std::int64_t ema_every = 1;
  std::int64_t ema_start = 0;
  double ema_ramp = 0.0;
  std::string ema_mode = "average";
};

// The [eval] section: how a model is scored (training's evaluations and `ddp_train eval`).
struct EvalOptions {
  // Test-time augmentation (test_time_augmentation.hpp): "none", "flip" (the image and its mirror,
  // logits averaged), "flip_translate" (also shifted by tta_shift pixels up-left and down-right,
  // reflected at the borders; airbench's tta_level 2).
  std::string tta = "none";
  std::int64_t tta_shift = 1;
  // Which weights: "auto" = the moving average when the run keeps one (train.ema) and it has
  // started, else the weights; "ema" = the average (an error without one); "live" = the weights.
  std::string weights = "auto";
};

struct Setup {
  RunOptions run;
  data::Options data;
  nn::ModelOptions model;
  Options train;
  EvalOptions eval;
  optim::Options optim;
  optim::ScheduleOptions schedule;
  sync::Options comm;
  runtime::Options runtime;
  std::string resolved_toml;  // the full configuration after overrides, as TOML text
};

}  // namespace ddp::train
