// Device assignment (one GPU per rank) as pure functions: no GPU needed, these run everywhere.
#include "ddp/backend/device_assign.hpp"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "ddp/error.hpp"

namespace ddp::backend {
namespace {

DeviceRequest request(const std::string& host, int rank, int local_rank, int local_size,
                      int visible, std::vector<int> host_ranks = {}) {
  DeviceRequest r;
  r.host = host;
  r.rank = rank;
  r.local_rank = local_rank;
  r.local_size = local_size;
  r.visible_devices = visible;
  r.host_ranks = std::move(host_ranks);
  return r;
}

std::string config_error(const DeviceRequest& r) {
  try {
    (void)assign_device(r);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceAssign, LocalRankPicksItsGpu) {
  // 4 ranks on a node with 4 GPUs, all visible to every rank (mpirun on a workstation, or srun
  // --gpus-per-node=4 without binding).
  for (int lr = 0; lr < 4; ++lr) EXPECT_EQ(assign_device(request("n1", 4 + lr, lr, 4, 4)), lr);
  // More GPUs than ranks: the first ones.
  EXPECT_EQ(assign_device(request("ws", 0, 0, 1, 2)), 0);
  EXPECT_EQ(assign_device(request("ws", 1, 1, 3, 8)), 1);
}

TEST(DeviceAssign, BoundRankUsesItsOnlyGpu) {
  // Slurm --gpus-per-task=1 / --gpu-bind=single:1, or CUDA_VISIBLE_DEVICES per rank: each rank
  // sees exactly one GPU and uses it, whatever its local rank.
  for (int lr = 0; lr < 8; ++lr) EXPECT_EQ(assign_device(request("n2", lr, lr, 8, 1)), 0);
  // One rank, one GPU.
  EXPECT_EQ(assign_device(request("laptop", 0, 0, 1, 1)), 0);
}

TEST(DeviceAssign, MoreRanksThanGpusNamesHostAndRanks) {
  auto r = request("node07", 6, 2, 4, 2, {4, 5, 6, 7});
  r.cuda_visible_devices = "0,1";
  const std::string msg = config_error(r);
  ASSERT_FALSE(msg.empty());
  EXPECT_NE(msg.find("node07"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4 ranks"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ranks 4-7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("only 2 GPUs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CUDA_VISIBLE_DEVICES='0,1'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("at most 2 ranks"), std::string::npos) << msg;
  // The ranks that do have a GPU get theirs.
  EXPECT_EQ(assign_device(request("node07", 4, 0, 4, 2, {4, 5, 6, 7})), 0);
  EXPECT_EQ(assign_device(request("node07", 5, 1, 4, 2, {4, 5, 6, 7})), 1);
  // Without the rank list, the rank itself is named.
  const std::string msg2 = config_error(request("node07", 3, 3, 4, 3));
  EXPECT_NE(msg2.find("rank 3"), std::string::npos) << msg2;
}

// What Slurm's srun --gpus-per-task=2 gives 4 tasks on a 8-GPU node: each rank sees its own pair,
// numbered 0 and 1 in each. The ranks do not compete: each takes the first GPU of its pair.
TEST(DeviceAssign, SeveralGpusPerTaskEachRankItsOwnSet) {
  const std::vector<std::string> sets = {"GPU-a,GPU-b", "GPU-c,GPU-d", "GPU-e,GPU-f",
                                         "GPU-g,GPU-h"};
  for (int lr = 0; lr < 4; ++lr) {
    auto r = request("gpu12", 8 + lr, lr, 4, 2, {8, 9, 10, 11});
    r.host_device_sets = sets;
    r.cuda_visible_devices = "0,1";
    EXPECT_EQ(assign_device(r), 0) << "local rank " << lr;
  }
  // The same sets without the set information: local ranks 2 and 3 would have no GPU (the defect).
  EXPECT_FALSE(config_error(request("gpu12", 10, 2, 4, 2, {8, 9, 10, 11})).empty());
}

TEST(DeviceAssign, RanksSharingASetSplitIt) {
  // 4 ranks, 2 pairs of ranks each bound to the same 2 GPUs (--gpus-per-task with 2 tasks per
  // set, or a wrapper): each pair splits its GPUs, position among the ranks with the same set.
  const std::vector<std::string> sets = {"GPU-a,GPU-b", "GPU-c,GPU-d", "GPU-a,GPU-b",
                                         "GPU-c,GPU-d"};
  const int expected[] = {0, 0, 1, 1};
  for (int lr = 0; lr < 4; ++lr) {
    auto r = request("n3", lr, lr, 4, 2, {0, 1, 2, 3});
    r.host_device_sets = sets;
    EXPECT_EQ(assign_device(r), expected[lr]) << "local rank " << lr;
  }
  // Every rank sees all 4 GPUs (one set): local rank i takes GPU i, as before.
  for (int lr = 0; lr < 4; ++lr) {
    auto r = request("n3", lr, lr, 4, 4, {0, 1, 2, 3});
    r.host_device_sets.assign(4, "GPU-a,GPU-b,GPU-c,GPU-d");
    EXPECT_EQ(assign_device(r), lr);
  }
}

TEST(DeviceAssign, TooManyRanksOnOneSetNamesThoseRanks) {
  // Ranks 4, 6 and 7 see the same two GPUs; rank 5 has its own. Rank 7 (third on its set) has none.
  auto r = request("node08", 7, 3, 4, 2, {4, 5, 6, 7});
  r.host_device_sets = {"GPU-a,GPU-b", "GPU-c,GPU-d", "GPU-a,GPU-b", "GPU-a,GPU-b"};
  const std::string msg = config_error(r);
  ASSERT_FALSE(msg.empty());
  EXPECT_NE(msg.find("node08 runs 3 ranks (ranks 4, 6, 7) that see the same 2 GPUs"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("rank 7 has none"), std::string::npos) << msg;
  // The others get theirs: rank 4 GPU 0, rank 5 GPU 0 of its own pair, rank 6 GPU 1.
  const std::tuple<int, int, int> others[] = {{4, 0, 0}, {5, 1, 0}, {6, 2, 1}};
  for (const auto& [rank, lr, want] : others) {
    auto q = request("node08", rank, lr, 4, 2, {4, 5, 6, 7});
    q.host_device_sets = r.host_device_sets;
    EXPECT_EQ(assign_device(q), want) << "rank " << rank;
  }
  // A set list that does not match the host's ranks is a bug of the caller.
  auto bad = request("node08", 4, 0, 4, 2, {4, 5, 6, 7});
  bad.host_device_sets = {"GPU-a,GPU-b"};
  EXPECT_THROW(assign_device(bad), Error);
}

TEST(DeviceAssign, NoGpuVisible) {
  auto r = request("cpu-node", 2, 0, 1, 0);
  r.cuda_visible_devices = "";
  const std::string msg = config_error(r);
  EXPECT_NE(msg.find("cpu-node"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 2 sees no GPU"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CUDA_VISIBLE_DEVICES=''"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"cpu\""), std::string::npos) << msg;
  EXPECT_NE(config_error(request("x", 0, 0, 1, 0)).find("CUDA_VISIBLE_DEVICES is not set"),
            std::string::npos);
}

TEST(DeviceAssign, InconsistentPlacementIsAnInternalError) {
  EXPECT_THROW(assign_device(request("h", 0, 2, 2, 4)), Error);
  EXPECT_THROW(assign_device(request("h", 0, 0, 0, 4)), Error);
}

TEST(DeviceAssign, DistinctGpusPass) {
  check_distinct_devices({{0, "a", 0, "GPU-1", "A100"},
                          {1, "a", 1, "GPU-2", "A100"},
                          {2, "b", 0, "GPU-1", "A100"},  // another host may have the same UUID text
                          {3, "b", 0, "GPU-9", "A100"}});
  check_distinct_devices({});
}

TEST(DeviceAssign, TwoRanksOnOneGpuNamesHostGpuAndRanks) {
  // Two ranks that each "see one GPU" but it is the same one (CUDA_VISIBLE_DEVICES=0 for both).
  try {
    check_distinct_devices({{0, "ws1", 0, "GPU-aaaa", "TITAN RTX"},
                            {1, "ws1", 0, "GPU-aaaa", "TITAN RTX"},
                            {2, "ws2", 0, "GPU-bbbb", ""},
                            {3, "ws2", 1, "GPU-cccc", ""},
                            {4, "ws2", 2, "GPU-cccc", ""},
                            {5, "ws2", 3, "GPU-cccc", ""}});
    FAIL() << "sharing not detected";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("host ws1: ranks 0, 1 would share one GPU (TITAN RTX, GPU-aaaa, cuda:0"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("host ws2: ranks 3-5 would share one GPU (GPU-cccc, cuda:1/cuda:2/cuda:3"),
              std::string::npos)
        << msg;
    EXPECT_EQ(msg.find("GPU-bbbb"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--gpus-per-task=1"), std::string::npos) << msg;
  }
}

TEST(DeviceAssign, RankRangesAndDeviceStrings) {
  EXPECT_EQ(format_rank_ranges({}), "");
  EXPECT_EQ(format_rank_ranges({2}), "2");
  EXPECT_EQ(format_rank_ranges({5, 4}), "4, 5");
  EXPECT_EQ(format_rank_ranges({7, 4, 5, 6, 9}), "4-7, 9");
  EXPECT_EQ(format_rank_ranges({0, 1, 2, 4, 5, 9, 9}), "0-2, 4, 5, 9");
  EXPECT_EQ(cuda_device_string(3), "cuda:3");
}

}  // namespace
}  // namespace ddp::backend
