#pragma once
// train.rank_shares = auto at an epoch's end: the shares every rank takes from the next epoch on.
// Every rank could decide from the same gathered table (rank_balance.hpp), but rank 0's decision
// is the one taken, so that ranks built by different compilers (pooled workstations) cannot
// disagree on a near-tie and train overlapping slices.
#include <cstdint>
#include <optional>
#include <vector>

#include "ddp/comm/communicator.hpp"
#include "ddp/train/rank_speed.hpp"

namespace ddp::train {

// Rank 0's rebalanced_shares(table, threshold) on every rank (collective over comm), or nothing:
// also when a rank would get fewer samples than `accumulate` micro-batches need.
std::optional<std::vector<std::int64_t>> agreed_rebalanced_shares(
    const std::vector<RankSpeed>& table, double threshold, std::int64_t accumulate,
    comm::Communicator& comm);

}  // namespace ddp::train
