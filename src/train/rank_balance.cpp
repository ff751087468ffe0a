#include "ddp/train/rank_balance.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "ddp/error.hpp"

namespace ddp::train {
namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// "41.2 ms": three significant digits or so, without exponents.
std::string milliseconds(double s) {
  const double ms = s * 1e3;
  return fixed(ms, ms >= 100 ? 0 : ms >= 10 ? 1 : ms >= 1 ? 2 : 3) + " ms";
}

// "rank 2 (ws-b, 1 thread, CPUs 1)", leaving out what the table does not know.
std::string describe(const RankSpeed& s) {
  std::string where = s.host;
  const auto add = [&where](const std::string& part) {
    where += (where.empty() ? "" : ", ") + part;
  };
  if (s.threads > 0) add(std::to_string(s.threads) + (s.threads == 1 ? " thread" : " threads"));
  if (!s.cpus.empty()) add("CPUs " + s.cpus);
  return "rank " + std::to_string(s.rank) + (where.empty() ? "" : " (" + where + ")");
}

}  // namespace

std::vector<std::int64_t> auto_shares(const std::vector<double>& per_sample_s,
                                      std::int64_t global_batch) {
  const auto n = per_sample_s.size();
  const auto ranks = static_cast<std::int64_t>(n);
  if (n == 0) throw Error("internal: auto shares for no rank");
  if (global_batch < ranks)
    throw ConfigError("a global batch of " + std::to_string(global_batch) +
                      " cannot give each of " + std::to_string(ranks) +
                      " ranks a sample: set train.global_batch to at least " +
                      std::to_string(ranks));
  for (std::size_t r = 0; r < n; ++r)
    if (!std::isfinite(per_sample_s[r]) || per_sample_s[r] <= 0.0)
      throw Error("internal: rank " + std::to_string(r) + "'s compute per sample is " +
                  std::to_string(per_sample_s[r]) + " s; auto shares need positive times");
  std::vector<double> quota(n);
  double total_speed = 0.0;
  for (std::size_t r = 0; r < n; ++r) total_speed += 1.0 / per_sample_s[r];
  if (!std::isfinite(total_speed))
    throw Error("internal: compute times per sample too small to divide by");
  std::vector<std::int64_t> share(n);
  std::int64_t given = 0;
  for (std::size_t r = 0; r < n; ++r) {
    quota[r] = static_cast<double>(global_batch) * (1.0 / per_sample_s[r]) / total_speed;
    share[r] =
        std::clamp(static_cast<std::int64_t>(std::floor(quota[r])), std::int64_t{0}, global_batch);
    given += share[r];
  }
  // Largest remainder first, ties to the lower rank (a stable sort of the rank order).
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return quota[a] - static_cast<double>(share[a]) > quota[b] - static_cast<double>(share[b]);
  });
  for (std::size_t i = 0; given < global_batch; ++i, ++given) ++share[order[i % n]];
  // Rounding of the quotas could in principle hand out one too many: the smallest remainders give
  // it back.
  for (std::size_t i = 0; given > global_batch; ++i)
    if (share[order[n - 1 - i % n]] > 0) {
      --share[order[n - 1 - i % n]];
      --given;
    }
  // At least one sample each: taken from the rank whose share exceeds its quota most (one that
  // keeps at least one; there is one, since global_batch >= ranks).
  for (std::size_t r = 0; r < n; ++r) {
    if (share[r] > 0) continue;
    std::size_t donor = n;
    for (std::size_t d = 0; d < n; ++d)
      if (share[d] > 1 && (donor == n || static_cast<double>(share[d]) - quota[d] >
                                             static_cast<double>(share[donor]) - quota[donor]))
        donor = d;
    --share[donor];
    share[r] = 1;
  }
  return share;
}

double predicted_step_s(const std::vector<std::int64_t>& shares,
                        const std::vector<double>& per_sample_s) {
  if (shares.size() != per_sample_s.size())
    throw Error("internal: " + std::to_string(shares.size()) + " shares for " +
                std::to_string(per_sample_s.size()) + " ranks' times");
  double longest = 0.0;
  for (std::size_t r = 0; r < shares.size(); ++r)
    longest = std::max(longest, static_cast<double>(shares[r]) * per_sample_s[r]);
  return longest;
}

bool should_rebalance(const std::vector<std::int64_t>& current,
                      const std::vector<std::int64_t>& proposed,
                      const std::vector<double>& per_sample_s, double threshold) {
  const double now = predicted_step_s(current, per_sample_s);
  const double then = predicted_step_s(proposed, per_sample_s);
  return now > 0.0 && now - then > threshold * now;
}

std::vector<double> per_sample_times(const std::vector<RankSpeed>& table) {
  std::vector<double> t;
  t.reserve(table.size());
  for (const auto& s : table) {
    const double v = s.compute_per_sample_s();
    if (!std::isfinite(v) || v <= 0.0) return {};
    t.push_back(v);
  }
  return t;
}

namespace {

std::vector<std::int64_t> shares_of(const std::vector<RankSpeed>& table) {
  std::vector<std::int64_t> shares;
  for (const auto& s : table) shares.push_back(s.share);
  return shares;
}

// The shares' global batch, or 0 when they cannot be compared with auto shares (a rank without a
// share: the table was not filled by a trainer).
std::int64_t global_batch_of(const std::vector<std::int64_t>& shares) {
  std::int64_t total = 0;
  for (const auto s : shares) {
    if (s <= 0) return 0;
    total += s;
  }
  return total;
}

}  // namespace

std::optional<std::vector<std::int64_t>> rebalanced_shares(const std::vector<RankSpeed>& table,
                                                           double threshold) {
  const auto t = per_sample_times(table);
  const auto current = shares_of(table);
  const std::int64_t batch = global_batch_of(current);
  if (t.empty() || batch == 0) return std::nullopt;
  auto proposed = auto_shares(t, batch);
  if (proposed == current || !should_rebalance(current, proposed, t, threshold))
    return std::nullopt;
  return proposed;
}

std::string rebalance_line(const std::vector<RankSpeed>& table,
                           const std::vector<std::int64_t>& next, std::int64_t from_epoch) {
  const auto t = per_sample_times(table);
  std::string line = "rank_shares = auto: ";
  for (std::size_t r = 0; r < next.size(); ++r) {
    if (r > 0) line += '/';
    line += std::to_string(next[r]);
  }
  line += " samples per rank from epoch " + std::to_string(from_epoch);
  line += " (predicted step " + fixed(1000.0 * predicted_step_s(next, t), 1);
  line += " ms instead of " + fixed(1000.0 * predicted_step_s(shares_of(table), t), 1) + " ms)";
  return line;
}

std::string straggler_report(const std::vector<RankSpeed>& table, double threshold,
                             bool shares_auto) {
  const auto t = per_sample_times(table);
  const auto current = shares_of(table);
  const std::int64_t batch = global_batch_of(current);
  if (t.size() < 2 || batch == 0) return "";
  const auto fastest = static_cast<std::size_t>(std::min_element(t.begin(), t.end()) - t.begin());
  std::vector<std::size_t> slow;
  for (std::size_t r = 0; r < t.size(); ++r)
    if (t[r] > kStragglerRatio * t[fastest]) slow.push_back(r);
  if (slow.empty()) return "";
  const auto proposed = auto_shares(t, batch);
  if (!should_rebalance(current, proposed, t, threshold)) return "";
  std::string line = slow.size() == 1 ? "straggler: " : "stragglers: ";
  for (std::size_t i = 0; i < slow.size(); ++i) {
    if (i > 0) line += i + 1 == slow.size() ? " and " : ", ";
    line += describe(table[slow[i]]) + (i == 0 ? " computes " : " ") +
            fixed(t[slow[i]] / t[fastest], 2) + "x";
  }
  line += " slower per sample than the fastest rank (" + std::to_string(fastest) + "); ";
  const std::string now = milliseconds(predicted_step_s(current, t));
  const std::string then = milliseconds(predicted_step_s(proposed, t));
  line += shares_auto ? "re-balancing the shares (rank_shares = auto): a step's compute takes ~" +
                            then + " instead of ~" + now
                      : "with rank_shares = auto a step's compute would take ~" + then +
                            " instead of ~" + now;
  return line;
}

}  // namespace ddp::train
