// Node-local placement from host names, CPU lists and the rank table's layout (pure functions).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "ddp/runtime/rank_info.hpp"

namespace ddp::runtime {
namespace {

using ::testing::HasSubstr;

TEST(RuntimeRankTable, LocalRanksFollowRankOrderPerHost) {
  // Cyclic placement over two hosts plus a third host with one rank.
  const auto p = assign_local_ranks({"a", "b", "a", "b", "c", "a"});
  ASSERT_EQ(p.size(), 6u);
  const int local[] = {0, 0, 1, 1, 0, 2};
  const int size[] = {3, 2, 3, 2, 1, 3};
  const int node[] = {0, 1, 0, 1, 2, 0};
  for (std::size_t r = 0; r < p.size(); ++r) {
    EXPECT_EQ(p[r].local_rank, local[r]) << "rank " << r;
    EXPECT_EQ(p[r].local_size, size[r]) << "rank " << r;
    EXPECT_EQ(p[r].node, node[r]) << "rank " << r;
  }
}

TEST(RuntimeRankTable, OneHostAndEmpty) {
  const auto p = assign_local_ranks({"n", "n", "n"});
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(p[static_cast<std::size_t>(r)].local_rank, r);
    EXPECT_EQ(p[static_cast<std::size_t>(r)].local_size, 3);
  }
  EXPECT_TRUE(assign_local_ranks({}).empty());
}

TEST(RuntimeRankTable, NamesAreComparedInFullNotByPrefix) {
  // Names that share a prefix or differ only at the end are different hosts.
  const auto p = assign_local_ranks({"node1", "node10", "node1.cluster", "node1"});
  EXPECT_EQ(p[0].node, p[3].node);
  EXPECT_NE(p[0].node, p[1].node);
  EXPECT_NE(p[0].node, p[2].node);
  EXPECT_EQ(p[3].local_rank, 1);
}

TEST(RuntimeRankTable, HostHashIsStableFnv1a) {
  EXPECT_EQ(host_hash(""), 14695981039346656037ull);  // the FNV-1a offset basis
  EXPECT_EQ(host_hash("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_NE(host_hash("node1"), host_hash("node2"));
}

TEST(RuntimeRankTable, CpuListIsCompact) {
  EXPECT_EQ(format_cpu_list({}), "");
  EXPECT_EQ(format_cpu_list({3}), "3");
  EXPECT_EQ(format_cpu_list({0, 1}), "0-1");
  EXPECT_EQ(format_cpu_list({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(format_cpu_list({8, 7, 7, 0}), "0,7-8");  // unsorted, duplicates
}

TEST(RuntimeRankTable, AffinityIsNotEmpty) {
  EXPECT_FALSE(affinity_cpus().empty());
}

TEST(RuntimeRankTable, TableIsAligned) {
  std::vector<RankInfo> t(2);
  t[0] = {0, 2, 0, 2, "node01", 4711, 1, "cpu", "0"};
  t[1] = {1, 2, 1, 2, "node01", 123456, 12, "cuda:0", "1-11"};
  const std::string s = format_rank_table(t);
  std::istringstream in(s);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "rank  local  host    device  threads  cpus     pid");
  EXPECT_EQ(lines[1], "   0    0/2  node01  cpu           1  0       4711");
  EXPECT_EQ(lines[2], "   1    1/2  node01  cuda:0       12  1-11  123456");
}

TEST(RuntimeRankTable, UnknownFieldsShowAQuestionMark) {
  std::vector<RankInfo> t(1);
  const std::string s = format_rank_table(t);
  EXPECT_THAT(s, HasSubstr("?"));
}

}  // namespace
}  // namespace ddp::runtime
