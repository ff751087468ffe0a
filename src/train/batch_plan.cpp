#include "ddp/train/batch_plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <span>
#include <string>

#include "ddp/data/sampler.hpp"
#include "ddp/error.hpp"
#include "ddp/sync/fixed_point_sum.hpp"
#include "joined_numbers.hpp"

namespace ddp::train {
namespace {

// "[3, 1, 2]", as the key is written in a file.
std::string list_text(const std::vector<double>& v) {
  std::string out;
  for (const double x : v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", x);
    out += (out.empty() ? "" : ", ") + std::string(buf);
  }
  return "[" + out + "]";
}

std::string mib_text(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

// train.rank_shares as slices of the global batch; ConfigError for a list that does not fit the
// world or leaves a rank without a sample.
std::vector<std::int64_t> configured_shares(const WordOrNumbers& s, std::int64_t global_batch,
                                            int world) {
  // "auto" starts equal; the measured shares come through BatchPlan::with_shares.
  if (!s.word.empty()) return data::slice_sizes(global_batch, data::equal_shares(world));
  const std::string key = "train.rank_shares = " + list_text(s.numbers);
  if (std::ssize(s.numbers) != world)
    throw ConfigError(key + ": " + std::to_string(s.numbers.size()) + " share(s) for " +
                      std::to_string(world) +
                      " rank(s): give one share per rank (or \"equal\", "
                      "\"auto\")");
  const auto sizes = data::slice_sizes(global_batch, std::span<const double>(s.numbers));
  for (std::size_t r = 0; r < sizes.size(); ++r) {
    if (sizes[r] > 0) continue;
    // The smallest global batch that gives every rank a sample (largest remainders are not
    // monotone in the batch, so it is searched; by sum / smallest share every quota is >= 1).
    double total = 0.0, smallest = s.numbers[0];
    for (const double w : s.numbers) {
      total += w;
      smallest = std::min(smallest, w);
    }
    // Shares as uneven as 1e-300 : 1 put the bound beyond any batch (and any integer).
    const double bound_d = std::ceil(total / smallest);
    const std::int64_t bound = bound_d < 1e12 ? static_cast<std::int64_t>(bound_d) : 0;
    std::int64_t least = bound;
    for (std::int64_t g = global_batch + 1; g < std::min(bound, global_batch + 1000000); ++g) {
      const auto t = data::slice_sizes(g, std::span<const double>(s.numbers));
      if (std::all_of(t.begin(), t.end(), [](std::int64_t n) { return n > 0; })) {
        least = g;
        break;
      }
    }
    throw ConfigError(key + ": rank " + std::to_string(r) +
                      " gets no sample of the global batch of " + std::to_string(global_batch) +
                      " (train.global_batch): every rank needs at least one; " +
                      (least > 0 ? "a global batch of at least " + std::to_string(least) +
                                       " gives each rank one, or raise rank "
                                 : std::string("raise rank ")) +
                      std::to_string(r) + "'s share");
  }
  return sizes;
}

// Reproducible mode: each rank's share is a whole number of chunks, cut from the global batch's
// chunks by train.rank_shares (largest remainders); ConfigError for settings that contradict it.
std::vector<std::int64_t> reproducible_shares(const Options& train, std::int64_t global_batch,
                                              int world) {
  const std::int64_t chunk = train.chunk;
  if (chunk < 1)
    throw ConfigError("train.chunk = " + std::to_string(chunk) + ": a chunk needs a sample");
  if (train.accumulate != 1)
    throw ConfigError("train.accumulate = " + std::to_string(train.accumulate) +
                      " with train.reproducible: the chunks (train.chunk) are the micro-batches; "
                      "leave train.accumulate at 1");
  // The chunk replicas train every parameter and keep batch norm in training mode: frozen
  // layers (fine-tuning) are not in them yet.
  if (!train.freeze.empty())
    throw ConfigError(
        "train.freeze with train.reproducible: frozen layers are not supported in "
        "reproducible mode yet; leave train.freeze empty or train.reproducible off");
  const auto& cap = train.max_micro_batch;
  if (!cap.word.empty() || (!cap.numbers.empty() && cap.numbers[0] != 0.0))
    throw ConfigError(
        "train.max_micro_batch = " + (cap.word.empty() ? list_text(cap.numbers) : cap.word) +
        " with train.reproducible: every pass runs one chunk of train.chunk = " +
        std::to_string(chunk) + " samples; leave train.max_micro_batch at 0");
  if (global_batch % chunk != 0)
    throw ConfigError("train.chunk = " + std::to_string(chunk) +
                      " does not divide the global batch of " + std::to_string(global_batch) +
                      " (train.global_batch): reproducible mode cuts every global batch into "
                      "whole chunks; choose a chunk that divides it");
  const std::int64_t chunks = global_batch / chunk;
  if (chunks > sync::fixed::kMaxTerms)
    throw ConfigError("train.chunk = " + std::to_string(chunk) + " cuts the global batch of " +
                      std::to_string(global_batch) + " into " + std::to_string(chunks) +
                      " chunks, more than the exact sum's " +
                      std::to_string(sync::fixed::kMaxTerms) + "; choose a larger chunk");
  const auto& s = train.rank_shares;
  const std::vector<std::int64_t> counts =
      s.word.empty() ? data::slice_sizes(chunks, std::span<const double>(s.numbers))
                     : data::slice_sizes(chunks, data::equal_shares(world));
  if (std::ssize(counts) != world)
    throw ConfigError("train.rank_shares = " + list_text(s.numbers) + ": " +
                      std::to_string(counts.size()) + " share(s) for " + std::to_string(world) +
                      " rank(s): give one share per rank (or \"equal\", \"auto\")");
  std::vector<std::int64_t> sizes;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] < 1)
      throw ConfigError("train.reproducible: rank " + std::to_string(r) +
                        " gets no chunk of the global batch of " + std::to_string(global_batch) +
                        " (" + std::to_string(chunks) + " chunks of train.chunk = " +
                        std::to_string(chunk) + " for " + std::to_string(world) + " rank(s)" +
                        (s.word.empty() ? ", train.rank_shares = " + list_text(s.numbers) : "") +
                        "): every rank needs a chunk; use a larger train.global_batch or a "
                        "smaller train.chunk");
    sizes.push_back(counts[r] * chunk);
  }
  return sizes;
}

}  // namespace

BatchPlan::BatchPlan(const Options& train, bool sync_batchnorm, int world, int rank,
                     std::int64_t dataset_size, bool drop_last)
    : accumulate_(train.accumulate), rank_(rank) {
  if (world < 1 || rank < 0 || rank >= world || train.accumulate < 1)
    throw Error("internal: a batch plan for rank " + std::to_string(rank) + " of " +
                std::to_string(world) +
                " with train.accumulate = " + std::to_string(train.accumulate));
  const std::int64_t k = accumulate_;
  global_batch_ = train.global_batch > 0 ? train.global_batch : train.batch_size * world;
  if (global_batch_ < world * k)
    throw ConfigError("train.global_batch = " + std::to_string(global_batch_) +
                      " is smaller than " + std::to_string(world) + " ranks x " +
                      std::to_string(k) +
                      " micro-batches (train.accumulate): every micro-batch needs a sample");
  if (train.reproducible) {
    chunk_ = train.chunk;
    shares_ = reproducible_shares(train, global_batch_, world);
  } else {
    shares_ = configured_shares(train.rank_shares, global_batch_, world);
  }
  for (std::size_t r = 0; r < shares_.size(); ++r)
    if (shares_[r] < k)
      throw ConfigError("train.rank_shares = " + list_text(train.rank_shares.numbers) + ": rank " +
                        std::to_string(r) + "'s share of the global batch of " +
                        std::to_string(global_batch_) + " is " + std::to_string(shares_[r]) +
                        " sample(s), fewer than train.accumulate = " + std::to_string(k) +
                        " micro-batches: every micro-batch needs a sample");
  // A number is every rank's cap; "auto" is none until measured (with_caps).
  const auto& cap = train.max_micro_batch;
  caps_.assign(static_cast<std::size_t>(world),
               cap.word == "auto" ? 0 : static_cast<std::int64_t>(cap.numbers.at(0)));
  // (Reproducible mode runs a rank's chunks and joins the collectives of the chunks it lacks
  // itself: chunk_step.hpp.)
  same_micro_count_ = sync_batchnorm && world > 1 && chunk_ == 0;
  // The configured global batch and the epoch's short last one.
  global_sizes_ = {global_batch_};
  if (dataset_size > 0) {
    data::SamplerOptions so;
    so.dataset_size = dataset_size;
    so.global_batch = global_batch_;
    so.world_size = world;
    so.rank = rank;
    so.drop_last = drop_last;
    for (const auto g : data::global_batch_sizes(so)) global_sizes_.push_back(g);
  }
  size();
}

MicroBatchPlan BatchPlan::step(std::int64_t global_size) const {
  if (chunk_ > 0) {
    MicroBatchPlan p;
    p.chunk = chunk_;
    p.chunks = rank_chunks(global_size, chunk_, shares_, rank_);
    p.samples = p.chunks.end - p.chunks.begin;
    p.real = p.total = p.chunks.count;
    return p;
  }
  const auto slices = data::slice_sizes(global_size, std::span<const std::int64_t>(shares_));
  return plan_micro_batches(slices, caps_, accumulate_, rank_, same_micro_count_);
}

void BatchPlan::size() {
  rank_batch_ = 1;
  micro_batch_ = 1;
  max_micro_batches_ = 1;
  // Largest remainders can give a rank more of a smaller batch.
  for (const auto g : global_sizes_) {
    const MicroBatchPlan p = step(g);
    if (chunk_ > 0) {  // one chunk per pass
      rank_batch_ = std::max(rank_batch_, p.samples);
      micro_batch_ = chunk_;
      max_micro_batches_ = std::max(max_micro_batches_, p.total);
      continue;
    }
    rank_batch_ = std::max(rank_batch_, p.samples);
    micro_batch_ = std::max(micro_batch_, p.largest());
    max_micro_batches_ = std::max(max_micro_batches_, p.total);
  }
}

std::vector<std::int64_t> BatchPlan::shares_for(const std::vector<std::int64_t>& weights) const {
  if (std::ssize(weights) != world())
    throw Error("set_rank_shares: " + std::to_string(weights.size()) + " share(s) for " +
                std::to_string(world()) + " rank(s)");
  for (const auto w : weights)
    if (w <= 0) throw Error("set_rank_shares: share " + std::to_string(w) + " is not positive");
  if (chunk_ > 0)
    return chunk_shares(chunks_per_rank(global_batch_, chunk_, weights),
                        "set_rank_shares: shares " + joined_numbers(weights));
  auto sizes = data::slice_sizes(global_batch_, std::span<const std::int64_t>(weights));
  for (std::size_t r = 0; r < sizes.size(); ++r)
    if (sizes[r] < accumulate_)
      throw Error("set_rank_shares: shares " + joined_numbers(weights) + " give rank " +
                  std::to_string(r) + " " + std::to_string(sizes[r]) +
                  " sample(s) of the global batch of " + std::to_string(global_batch_) +
                  ", fewer than its " + std::to_string(accumulate_) + " micro-batch(es)");
  return sizes;
}

bool BatchPlan::fits(const std::vector<std::int64_t>& shares) const {
  return std::ssize(shares) == world() &&
         std::accumulate(shares.begin(), shares.end(), std::int64_t{0}) == global_batch_ &&
         std::all_of(shares.begin(), shares.end(), [&](std::int64_t n) {
           return n >= accumulate_ && (chunk_ == 0 || (n > 0 && n % chunk_ == 0));
         });
}

BatchPlan BatchPlan::with_shares(std::vector<std::int64_t> shares) const {
  if (!fits(shares))
    throw Error("internal: shares " + joined_numbers(shares) +
                " are no slices of the global batch of " + std::to_string(global_batch_) + " for " +
                std::to_string(world()) + " rank(s)");
  BatchPlan p = *this;
  p.shares_ = std::move(shares);
  p.size();
  return p;
}

BatchPlan BatchPlan::with_caps(std::vector<std::int64_t> caps) const {
  if (std::ssize(caps) != world() ||
      std::any_of(caps.begin(), caps.end(), [](std::int64_t c) { return c < 0; }))
    throw Error("internal: caps " + joined_numbers(caps) + " for " + std::to_string(world()) +
                " rank(s)");
  BatchPlan p = *this;
  p.caps_ = std::move(caps);
  p.size();
  return p;
}

std::vector<std::int64_t> BatchPlan::chunk_shares(const std::vector<std::int64_t>& counts,
                                                  const std::string& what) const {
  std::vector<std::int64_t> sizes(counts.size());
  for (std::size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] < 1)
      throw Error(what + " leave rank " + std::to_string(r) + " no chunk of the global batch of " +
                  std::to_string(global_batch_) + " (" + std::to_string(global_batch_ / chunk_) +
                  " chunks of train.chunk = " + std::to_string(chunk_) + ")");
    sizes[r] = counts[r] * chunk_;
  }
  return sizes;
}

std::int64_t auto_micro_batch_cap(const DeviceMemoryFigures& m) {
  // What the device has left once the weights, gradients and optimizer state are in it, less the
  // batch slots and an accumulation buffer, in micro-batches of the model's activations.
  const double f = sizeof(float);
  const double sample_bytes = f * (m.activations_per_sample + static_cast<double>(m.classes));
  const double fixed_bytes = f * (2.0 * static_cast<double>(m.rank_batch * m.sample_floats) +
                                  static_cast<double>(m.gradient_floats));
  const std::int64_t cap = micro_batch_cap_for_memory(m.free_bytes, fixed_bytes, sample_bytes);
  if (cap < 1)
    throw ConfigError(
        "train.max_micro_batch = auto: rank " + std::to_string(m.rank) + "'s device has " +
        mib_text(m.free_bytes) + " free once the model is in it, not enough for the batch slots (" +
        mib_text(fixed_bytes) + ") and one sample's activations (" + mib_text(sample_bytes) +
        "); use a smaller model or train.batch_size, or another device");
  return cap;
}

}  // namespace ddp::train
