// Reproducible mode's chunk plan: global batches cut into chunks in sample order, ranks taking
// contiguous runs of whole chunks by their shares, the short last batch ending in one short chunk,
// and the batch plan's refusals of settings that contradict chunks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "ddp/error.hpp"
#include "ddp/train/batch_plan.hpp"
#include "ddp/train/chunk_plan.hpp"

namespace ddp::train {
namespace {

using ::testing::HasSubstr;
using Sizes = std::vector<std::int64_t>;

Options reproducible(std::int64_t global_batch, std::int64_t chunk = 32) {
  Options o;
  o.global_batch = global_batch;
  o.reproducible = true;
  o.chunk = chunk;
  return o;
}

std::string chunk_config_error(const Options& o, int world) {
  try {
    BatchPlan(o, false, world, 0, 0, false);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ChunkPlan, ChunksInSampleOrderWithOneShortChunkLast) {
  EXPECT_EQ(chunk_count(128, 32), 4);
  EXPECT_EQ(chunk_count(80, 32), 3);
  EXPECT_EQ(chunk_count(0, 32), 0);
  const Sizes w{1, 1, 1};
  // 80 samples: 32, 32, 16, one chunk per rank.
  const ChunkRun r2 = rank_chunks(80, 32, w, 2);
  EXPECT_EQ(r2.first, 2);
  EXPECT_EQ(r2.count, 1);
  EXPECT_EQ(r2.begin, 64);
  EXPECT_EQ(r2.end, 80);
  EXPECT_EQ(r2.total, 3);
  EXPECT_EQ(chunk_in_slice(r2, 32, 0), (std::pair<std::int64_t, std::int64_t>{0, 16}));
}

TEST(ChunkPlan, RanksTakeContiguousRunsByTheirShares) {
  // 4 chunks of 32 over shares 3 : 1 : 2 (largest remainders): 2, 1, 1.
  const Sizes w{3, 1, 2};
  EXPECT_EQ(chunks_per_rank(128, 32, w), (Sizes{2, 1, 1}));
  std::int64_t next = 0, sample = 0;
  for (int r = 0; r < 3; ++r) {
    const ChunkRun run = rank_chunks(128, 32, w, r);
    EXPECT_EQ(run.first, next);
    EXPECT_EQ(run.begin, sample);
    next += run.count;
    sample = run.end;
  }
  EXPECT_EQ(next, 4);
  EXPECT_EQ(sample, 128);
  // A short batch may leave a rank without a chunk.
  EXPECT_EQ(chunks_per_rank(20, 32, w), (Sizes{1, 0, 0}));
  const ChunkRun none = rank_chunks(20, 32, w, 2);
  EXPECT_EQ(none.count, 0);
  EXPECT_EQ(none.begin, none.end);
}

TEST(ChunkPlan, EpochBatchesAreTheWholeBatchesCutByChunks) {
  data::SamplerOptions o;
  o.dataset_size = 250;
  o.global_batch = 96;
  o.world_size = 3;
  o.seed = 5;
  o.shares = {64, 32, 32};  // two chunks for rank 0
  data::SamplerOptions one = o;
  one.world_size = 1;
  one.shares.clear();
  const auto whole = data::epoch_batches(one, 1);
  std::vector<std::vector<data::RankBatch>> per_rank;
  for (int r = 0; r < 3; ++r) {
    o.rank = r;
    per_rank.push_back(chunk_batches(o, 32, 1));
  }
  ASSERT_EQ(whole.size(), 3u);  // 96, 96, 58
  for (std::size_t b = 0; b < whole.size(); ++b) {
    std::vector<std::int64_t> joined;
    std::int64_t offset = whole[b].global_offset;
    for (int r = 0; r < 3; ++r) {
      const auto& rb = per_rank[static_cast<std::size_t>(r)][b];
      EXPECT_EQ(rb.global_size, whole[b].global_size);
      if (!rb.indices.empty()) EXPECT_EQ(rb.global_offset, offset);
      offset += std::ssize(rb.indices);
      joined.insert(joined.end(), rb.indices.begin(), rb.indices.end());
    }
    EXPECT_EQ(joined, whole[b].indices);
  }
  // The short last batch of 58: chunks of 32 and 26, to ranks 0 and 1 (shares 2 : 1 : 1).
  EXPECT_EQ(per_rank[0][2].indices.size(), 32u);
  EXPECT_EQ(per_rank[1][2].indices.size(), 26u);
  EXPECT_EQ(per_rank[2][2].indices.size(), 0u);
}

TEST(ChunkPlan, BatchPlanSharesAreWholeChunks) {
  Options o = reproducible(128);
  o.rank_shares = {"", {3, 1, 2}};
  const Sizes want{64, 32, 32};
  for (int r = 0; r < 3; ++r) {
    const BatchPlan p(o, false, 3, r, 2560 + 80, false);
    EXPECT_EQ(p.chunk(), 32);
    EXPECT_EQ(p.shares(), want);
    EXPECT_EQ(p.micro_batch(), 32);
    const MicroBatchPlan s = p.step(128);
    EXPECT_EQ(s.chunk, 32);
    EXPECT_EQ(s.samples, want[static_cast<std::size_t>(r)]);
    EXPECT_EQ(s.total, want[static_cast<std::size_t>(r)] / 32);
    EXPECT_EQ(s.chunks.total, 4);
    // The short last batch of 80 (32, 32, 16) by the same shares, 2 : 1 : 1 chunks: largest
    // remainders give one each.
    const MicroBatchPlan last = p.step(80);
    EXPECT_EQ(last.chunks.total, 3);
    EXPECT_EQ(last.chunks.count, 1);
    EXPECT_EQ(last.samples, r == 2 ? 16 : 32);
  }
  // Sync batch norm does not pad ranks with empty micro-batches: the chunk step joins for them.
  EXPECT_FALSE(BatchPlan(o, true, 3, 0, 0, false).same_micro_count());
  // Measured shares become whole chunks too.
  const BatchPlan p(o, false, 3, 0, 0, false);
  EXPECT_EQ(p.shares_for({10, 10, 30}), (Sizes{32, 32, 64}));
  EXPECT_TRUE(p.fits({32, 32, 64}));
  EXPECT_FALSE(p.fits({40, 24, 64}));
  EXPECT_THROW(p.shares_for({1, 1, 100}), Error);  // rank 0 and 1 without a chunk
}

TEST(ChunkPlan, SettingsThatContradictChunksAreRefused) {
  EXPECT_THAT(chunk_config_error(reproducible(100), 1),
              HasSubstr("train.chunk = 32 does not divide the global batch of 100"));
  EXPECT_THAT(chunk_config_error(reproducible(64), 3), HasSubstr("rank 2 gets no chunk"));
  Options acc = reproducible(128);
  acc.accumulate = 2;
  EXPECT_THAT(chunk_config_error(acc, 1),
              HasSubstr("train.accumulate = 2 with train.reproducible"));
  Options cap = reproducible(128);
  cap.max_micro_batch = {"", {16}};
  EXPECT_THAT(chunk_config_error(cap, 1), HasSubstr("train.max_micro_batch = [16] with"));
  cap.max_micro_batch = {"auto", {}};
  EXPECT_THAT(chunk_config_error(cap, 1), HasSubstr("train.max_micro_batch = auto with"));
  EXPECT_THAT(chunk_config_error(reproducible(4096, 1), 1),
              HasSubstr("more than the exact sum's 2048"));
  Options frozen = reproducible(128);
  frozen.freeze = {"layer1"};
  EXPECT_THAT(chunk_config_error(frozen, 1), HasSubstr("train.freeze with train.reproducible"));
}

}  // namespace
}  // namespace ddp::train
