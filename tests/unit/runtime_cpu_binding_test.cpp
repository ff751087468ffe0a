// The host's CPUs for the job and the binding warning (pure functions), and the start-up line's
// thread counts. The launch itself is tested in integration/test_binding_warning.sh.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ddp/runtime/cpu_binding.hpp"
#include "ddp/runtime/rank_info.hpp"

namespace ddp::runtime {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(RuntimeCpuBinding, ParsesTheKernelsCpuLists) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("5"), (std::vector<int>{5}));
  EXPECT_EQ(parse_cpu_list(""), std::vector<int>{});
  EXPECT_EQ(parse_cpu_list("3,1-2,1"), (std::vector<int>{1, 2, 3}));
  for (const char* bad : {"a", "3-1", "1,,2", "-1", "1-", "0-99999999"})
    EXPECT_FALSE(parse_cpu_list(bad)) << bad;
}

// 8 logical CPUs on 4 cores: CPU c and c+4 are hyperthreads of one core.
std::vector<std::string> smt_pairs() {
  return {"0,4", "1,5", "2,6", "3,7", "0,4", "1,5", "2,6", "3,7"};
}
const std::vector<int> kOnline = {0, 1, 2, 3, 4, 5, 6, 7};

TEST(RuntimeCpuBinding, NodeCpusAreTheOnlineOnesNarrowedByCgroupAndSlurm) {
  auto n = choose_node_cpus(kOnline, std::nullopt, std::nullopt, smt_pairs());
  EXPECT_EQ(n.cpus, 8);
  EXPECT_EQ(n.cores, 4);
  EXPECT_EQ(n.source, "online CPUs");
  // A cpuset that is the whole machine narrows nothing.
  EXPECT_EQ(choose_node_cpus(kOnline, kOnline, std::nullopt, smt_pairs()).source, "online CPUs");
  n = choose_node_cpus(kOnline, std::vector<int>{0, 1, 4, 5}, std::nullopt, smt_pairs());
  EXPECT_EQ(n.cpus, 4);
  EXPECT_EQ(n.cores, 2);
  EXPECT_EQ(n.source, "cgroup cpuset");
  n = choose_node_cpus(kOnline, std::vector<int>{0, 1, 4, 5}, 2, smt_pairs());
  EXPECT_EQ(n.cpus, 2);
  EXPECT_EQ(n.cores, 1);
  EXPECT_EQ(n.source, "SLURM_CPUS_ON_NODE");
  // An allocation as large as the machine (or a nonsense value) changes nothing.
  EXPECT_EQ(choose_node_cpus(kOnline, std::nullopt, 8, smt_pairs()).source, "online CPUs");
  EXPECT_EQ(choose_node_cpus(kOnline, std::nullopt, 0, smt_pairs()).cpus, 8);
  // Without topology each CPU counts as a core.
  EXPECT_EQ(choose_node_cpus(kOnline, std::nullopt, std::nullopt, {}).cores, 8);
}

RankInfo row(int rank, const std::string& host, int cpus, const std::string& affinity,
             int node_cpus, int node_cores, int threads_requested = 0) {
  RankInfo r;
  r.rank = rank;
  r.host = host;
  r.cpus = cpus;
  r.affinity = affinity;
  r.threads = cpus;
  r.threads_requested = threads_requested;
  r.node_cpus = node_cpus;
  r.node_cores = node_cores;
  r.node_cpus_source = "online CPUs";
  return r;
}

TEST(RuntimeCpuBinding, DefaultBindingOfTwoRanksOnABigHostIsReportedOnceWithTheFix) {
  // mpirun -np 2 on a 32-CPU (16-core) workstation: each rank bound to one core's hyperthreads.
  const auto w = check_binding({row(0, "ws", 2, "0,16", 32, 16), row(1, "ws", 2, "1,17", 32, 16)});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0],
              HasSubstr("host ws: ranks 0-1 are bound to as few as 2 CPU(s) (cpus 0,16; 1,17)"));
  EXPECT_THAT(w[0], HasSubstr("could use 16 each"));
  EXPECT_THAT(w[0], HasSubstr("32 CPU(s) (online CPUs) for 2 rank(s)"));
  EXPECT_THAT(w[0], HasSubstr("`mpirun --bind-to none ...`"));
  EXPECT_THAT(w[0], HasSubstr("`mpirun --map-by slot:PE=8 ...`"));
  EXPECT_THAT(w[0], HasSubstr("`srun --cpus-per-task=16 ...`"));
}

TEST(RuntimeCpuBinding, OneRankBoundToOneOfTwoCpus) {
  const auto w = check_binding({row(0, "box", 1, "0", 2, 2)});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0], HasSubstr("host box: rank 0 is bound to 1 CPU(s) (cpus 0) but could use 2:"));
  // --bind-to none: the rank sees both CPUs.
  EXPECT_TRUE(check_binding({row(0, "box", 2, "0-1", 2, 2)}).empty());
}

TEST(RuntimeCpuBinding, RanksThatUseTheirShareAreFine) {
  // Two ranks on two CPUs, one each (mpirun's default on a 2-CPU machine).
  EXPECT_TRUE(check_binding({row(0, "a", 1, "0", 2, 2), row(1, "a", 1, "1", 2, 2)}).empty());
  // Three unbound ranks on two CPUs (a share below one CPU counts as one).
  EXPECT_TRUE(check_binding({row(0, "a", 2, "0-1", 2, 2), row(1, "a", 2, "0-1", 2, 2),
                             row(2, "a", 2, "0-1", 2, 2)})
                  .empty());
  // srun --cpus-per-task=4 on a node whose allocation is 8 CPUs for 2 tasks.
  EXPECT_TRUE(check_binding({row(0, "n", 4, "0-3", 8, 8), row(1, "n", 4, "4-7", 8, 8)}).empty());
  // A rank that could not tell its host's CPUs.
  EXPECT_TRUE(check_binding({row(0, "a", 1, "0", 0, 0)}).empty());
}

TEST(RuntimeCpuBinding, ExplicitThreadsThatFitTheBindingAreNotWarnedAbout) {
  // runtime.threads = 1 on a rank pinned to one CPU: every thread has a CPU
  // (bench/rank_balance.sh).
  EXPECT_TRUE(check_binding({row(0, "box", 1, "0", 2, 2, 1)}).empty());
  // runtime.threads = 2 on one CPU: the binding does cost it.
  EXPECT_EQ(check_binding({row(0, "box", 1, "0", 2, 2, 2)}).size(), 1u);
}

TEST(RuntimeCpuBinding, OneLinePerAffectedHostNamingOnlyItsShortRanks) {
  const auto w = check_binding({row(0, "ws1", 1, "0", 8, 8), row(1, "ws1", 8, "0-7", 8, 8),
                                row(2, "ws2", 2, "0-1", 4, 4), row(3, "ws2", 2, "2-3", 4, 4),
                                row(4, "ws3", 1, "0", 16, 16), row(5, "ws3", 1, "1", 16, 16),
                                row(6, "ws3", 1, "2", 16, 16)});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_THAT(w[0], HasSubstr("host ws1: rank 0 is bound to 1 CPU(s) (cpus 0) but could use 4:"));
  EXPECT_THAT(w[1], HasSubstr("host ws3: ranks 4-6 are bound"));
  EXPECT_THAT(w[1], HasSubstr("could use 5 each"));
  for (const auto& line : w) EXPECT_THAT(line, Not(HasSubstr("ws2")));
}

TEST(RuntimeCpuBinding, StartUpLineGivesEachRanksThreads) {
  std::vector<RankInfo> t(3);
  for (auto& r : t) r.threads = 1;
  EXPECT_EQ(describe_threads(t), "1 thread(s) per rank");
  t[0].threads = 2;
  EXPECT_EQ(describe_threads(t), "threads per rank 2/1/1");
  t.resize(12, t[1]);
  EXPECT_EQ(describe_threads(t), "1-2 thread(s) per rank, see the rank table");
}

}  // namespace
}  // namespace ddp::runtime
