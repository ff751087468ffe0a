#pragma once
// From measured speeds to shares of the global batch, and the straggler report. Pure functions of
// the gathered table (rank_speed.hpp): every rank holds the same bytes and runs the same arithmetic
// (divisions, sums in rank order, comparisons; nothing from libm), so every rank takes the same
// decision without another collective.
//
// The model: a step's compute takes max over ranks of share_r x t_r, with t_r the rank's compute
// time per sample. Fixed costs per step (the optimizer update, launches) do not depend on the
// shares and are left out. The speed used is the latest epoch's mean over all its steps: hundreds
// of steps already average out per-step noise, and a figure that follows the last epoch reacts to
// a node that got busier (or was freed) within one epoch, where an average over epochs would lag
// behind; the re-balance threshold keeps noise from moving shares back and forth.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ddp/train/rank_speed.hpp"

namespace ddp::train {

// A rank whose compute per sample exceeds the fastest rank's by more than this factor is named by
// the straggler report. The fastest rank, not the median, is the reference: with one fast rank and
// two slow ones the median is slow and names nobody, though auto shares would make each step a
// third shorter; every rank more than 20% over the median is more than 20% over the fastest too.
inline constexpr double kStragglerRatio = 1.2;
// train.rebalance_threshold's default: re-balance (or advise it) when a step's predicted compute
// improves by more than this fraction.
inline constexpr double kDefaultRebalanceThreshold = 0.05;

// Shares of `global_batch` proportional to each rank's speed (1 / per_sample_s[r]): largest
// remainder rounding, ties to the lower rank, then every rank raised to at least one sample (taken
// from the ranks whose share exceeds their exact quota most). They sum to global_batch. Throws
// ConfigError when global_batch is smaller than the number of ranks, Error when a time is not a
// positive finite number.
std::vector<std::int64_t> auto_shares(const std::vector<double>& per_sample_s,
                                      std::int64_t global_batch);

// Seconds of compute of one step with these shares: max over ranks of shares[r] x per_sample_s[r].
double predicted_step_s(const std::vector<std::int64_t>& shares,
                        const std::vector<double>& per_sample_s);

// Whether moving from `current` to `proposed` shortens the predicted step by more than
// `threshold` (a fraction of the current prediction).
bool should_rebalance(const std::vector<std::int64_t>& current,
                      const std::vector<std::int64_t>& proposed,
                      const std::vector<double>& per_sample_s, double threshold);

// Every rank's compute per sample from the table; empty when some rank timed no sample (no speed
// to balance by).
std::vector<double> per_sample_times(const std::vector<RankSpeed>& table);

// The epoch-boundary decision of rank_shares = auto: the table's shares (RankSpeed::share, which
// sum to the global batch) compared with auto_shares of the same global batch; the new shares when
// they shorten the predicted step by more than `threshold`, nothing otherwise (or when a rank has
// no timing). The same on every rank given the same gathered table.
std::optional<std::vector<std::int64_t>> rebalanced_shares(const std::vector<RankSpeed>& table,
                                                           double threshold);

// The line that announces re-balanced shares `next`, taken from 1-based epoch `from_epoch` on, with
// the step the table's shares and `next` predict, e.g.
//   rank_shares = auto: 96/32/64 samples per rank from epoch 2 (predicted step 41.2 ms instead of
//   78.3 ms)
std::string rebalance_line(const std::vector<RankSpeed>& table,
                           const std::vector<std::int64_t>& next, std::int64_t from_epoch);

// One line naming the ranks whose compute per sample is more than kStragglerRatio x the fastest
// rank's, with what auto shares would make of a step, e.g.
//   straggler: rank 2 (ws-b, 1 thread, CPUs 1) computes 1.90x slower per sample than the
//   fastest rank (0); with rank_shares = auto a step's compute would take ~41.2 ms instead of ~78.3
//   ms
// "" when no rank is that slow, or when auto shares would not shorten the predicted step by more
// than `threshold`: a slow rank whose share is already small holds nobody back, so there is nothing
// to advise (the figures are in metrics.jsonl's ranks array all the same). `shares_auto`: the run
// already uses rank_shares = auto (the line then says it re-balances).
std::string straggler_report(const std::vector<RankSpeed>& table, double threshold,
                             bool shares_auto);

}  // namespace ddp::train
