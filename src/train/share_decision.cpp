#include "ddp/train/share_decision.hpp"

#include <algorithm>
#include <span>

#include "ddp/train/rank_balance.hpp"

namespace ddp::train {

std::optional<std::vector<std::int64_t>> agreed_rebalanced_shares(
    const std::vector<RankSpeed>& table, double threshold, std::int64_t accumulate,
    comm::Communicator& comm) {
  // decided = {1, shares...} or {0, ...}: none.
  std::vector<std::int64_t> decided(static_cast<std::size_t>(comm.size()) + 1, 0);
  if (const auto mine = rebalanced_shares(table, threshold)) {
    decided[0] = 1;
    std::copy(mine->begin(), mine->end(), decided.begin() + 1);
  }
  if (comm.size() > 1) comm.broadcast(std::as_writable_bytes(std::span<std::int64_t>(decided)), 0);
  const std::vector<std::int64_t> next(decided.begin() + 1, decided.end());
  // Every micro-batch of train.accumulate needs a sample: shares below that are not taken.
  if (decided[0] != 1 || *std::min_element(next.begin(), next.end()) < accumulate)
    return std::nullopt;
  return next;
}

}  // namespace ddp::train
