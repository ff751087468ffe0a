// MpiComm, the Runtime's placement and the rank table in an MPI singleton (this test process).
// The multi-rank behaviour (stall detection, a killed rank) is covered by the integration tests
// test_stall_detection.sh and test_launch_singleton.sh, which launch the real binary.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "../../src/comm/mpi_check.hpp"
#include "ddp/comm/collective_check.hpp"
#include "ddp/comm/mpi_comm.hpp"
#include "ddp/error.hpp"
#include "ddp/runtime/gather.hpp"
#include "ddp/runtime/launch_check.hpp"
#include "ddp/runtime/rank_info.hpp"
#include "ddp/runtime/runtime.hpp"
#include "mpi_test_env.hpp"

namespace ddp::comm {
namespace {

using ::testing::HasSubstr;

using ddp::testing::ensure_mpi;

class CommMpiSingleton : public ::testing::Test {
 protected:
  void SetUp() override { ensure_mpi(); }
};

TEST_F(CommMpiSingleton, CollectivesOnOneRankLeaveDataAsIs) {
  MpiComm comm(MPI_COMM_WORLD, CommOptions{});
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  std::vector<float> f = {1.5f, -2.0f};
  std::vector<double> d = {3.25};
  std::vector<std::int64_t> i = {7, 8, 9};
  comm.allreduce_sum(std::span<float>(f));
  comm.allreduce_sum(std::span<double>(d));
  comm.allreduce_sum(std::span<std::int64_t>(i));
  EXPECT_EQ(f, (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(d[0], 3.25);
  EXPECT_EQ(i, (std::vector<std::int64_t>{7, 8, 9}));
  std::vector<std::byte> b(5, std::byte{42});
  comm.broadcast(b, 0);
  EXPECT_EQ(b[4], std::byte{42});
  comm.barrier();
  comm.allreduce_sum(std::span<float>());  // empty buffers are fine
  EXPECT_EQ(comm.collectives_started(), 6);
}

TEST_F(CommMpiSingleton, AllgatherCopiesOwnPart) {
  MpiComm comm(MPI_COMM_WORLD, CommOptions{});
  const std::vector<std::byte> mine = {std::byte{1}, std::byte{2}};
  std::vector<std::byte> all(2);
  comm.allgather(mine, all);
  EXPECT_EQ(all, mine);
  std::vector<std::byte> wrong(3);
  EXPECT_THROW(comm.allgather(mine, wrong), Error);
}

TEST_F(CommMpiSingleton, BroadcastFromAnInvalidRootIsAnError) {
  MpiComm comm(MPI_COMM_WORLD, CommOptions{});
  std::vector<std::byte> b(1);
  EXPECT_THROW(comm.broadcast(b, 1), Error);
}

TEST_F(CommMpiSingleton, NonBlockingRequests) {
  MpiComm comm(MPI_COMM_WORLD, CommOptions{});
  std::vector<float> a(1000, 1.0f), b(10, 2.0f);
  Request ra = comm.iallreduce_sum(a);
  Request rb = comm.iallreduce_sum(b);
  EXPECT_FALSE(ra.empty());
  EXPECT_EQ(comm.pending_requests(), 2u);
  while (!comm.test(rb)) {
  }
  EXPECT_TRUE(rb.empty());
  EXPECT_TRUE(comm.test(rb));  // an empty request is complete
  comm.wait(ra);
  EXPECT_TRUE(ra.empty());
  comm.wait(ra);  // waiting again is a no-op
  EXPECT_EQ(comm.pending_requests(), 0u);
  EXPECT_EQ(a[999], 1.0f);
  EXPECT_EQ(b[0], 2.0f);
  Request foreign{12345};
  EXPECT_THROW(comm.wait(foreign), Error);
}

TEST_F(CommMpiSingleton, UnwaitedRequestsDoNotBlockDestruction) {
  std::vector<float> a(100, 1.0f);
  {
    MpiComm comm(MPI_COMM_WORLD, CommOptions{});
    (void)comm.iallreduce_sum(a);
  }
  SUCCEED();
}

TEST_F(CommMpiSingleton, TimeoutComesFromTheEnvironment) {
  setenv("DDP_COMM_TIMEOUT_S", "12", 1);
  MpiComm from_env;
  unsetenv("DDP_COMM_TIMEOUT_S");
  EXPECT_EQ(from_env.timeout(), 12.0);
  from_env.set_timeout(0);
  std::vector<double> d = {1.0};
  from_env.allreduce_sum(std::span<double>(d));  // no timeout at all is allowed
  EXPECT_EQ(MpiComm().timeout(), CommOptions::kDefaultTimeoutS);
}

TEST_F(CommMpiSingleton, StallFaultIsIgnoredOnASingleton) {
  // A singleton has nobody to detect its stall, so the test-only fault only applies to real jobs.
  setenv("DDP_FAULT_STALL_RANK", "0", 1);
  MpiComm comm;
  unsetenv("DDP_FAULT_STALL_RANK");
  comm.barrier();
  SUCCEED();
}

TEST_F(CommMpiSingleton, MpiErrorsBecomeSystemErrorsWithMpisText) {
  try {
    detail::check(MPI_ERR_COUNT, "MPI_Iallreduce");
    FAIL();
  } catch (const SystemError& e) {
    EXPECT_THAT(e.what(), HasSubstr("MPI_Iallreduce failed: MPI_ERR_COUNT"));
  }
}

TEST_F(CommMpiSingleton, RuntimePlacementAndRankTable) {
  runtime::Runtime rt(nullptr, nullptr);  // MPI is up already: it neither inits nor finalises
  EXPECT_EQ(rt.rank(), 0);
  EXPECT_EQ(rt.size(), 1);
  EXPECT_EQ(rt.local_rank(), 0);
  EXPECT_EQ(rt.local_size(), 1);
  EXPECT_EQ(rt.num_nodes(), 1);
  EXPECT_FALSE(rt.host().empty());
  MpiComm comm(MPI_COMM_WORLD, CommOptions{});
  const auto table = runtime::gather_rank_table(runtime::describe_self(rt, 3, "cpu"), comm);
  ASSERT_EQ(table.size(), 1u);
  EXPECT_EQ(table[0].pid, static_cast<int>(getpid()));
  EXPECT_EQ(table[0].host, rt.host());
  EXPECT_EQ(table[0].threads, 3);
  EXPECT_EQ(table[0].device, "cpu");
  EXPECT_EQ(table[0].affinity, runtime::format_cpu_list(runtime::affinity_cpus()));
  EXPECT_THAT(runtime::format_rank_table(table), HasSubstr(rt.host()));
}

TEST_F(CommMpiSingleton, MisLaunchedSingletonThrows) {
  // What every task of `srun -n 3` without PMIx sees: three tasks, a world of one.
  setenv("SLURM_NTASKS", "3", 1);
  setenv("SLURM_STEP_ID", "0", 1);
  runtime::Runtime rt(nullptr, nullptr);  // captures the launcher's variables now
  unsetenv("SLURM_NTASKS");
  unsetenv("SLURM_STEP_ID");
  try {
    runtime::check_launch_or_throw(rt);
    FAIL() << "expected ddp::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("srun --mpi=pmix"));
  }
}

// The doctor's collective check on the real MPI (one rank): every result is right.
TEST_F(CommMpiSingleton, CollectiveCheckPassesOnWorkingMpi) {
  MpiComm comm(MPI_COMM_WORLD, CommOptions{});
  EXPECT_EQ(verify_collectives(comm), "");
}

// A communicator whose float sums come back wrong in one element (a stand-in for a broken
// transport, which real MPI cannot be made into): the check must say what and where.
class OffByOneComm final : public Communicator {
 public:
  explicit OffByOneComm(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void allreduce_sum(std::span<float> d) override {
    inner_.allreduce_sum(d);
    if (d.size() > 17) d[17] += 1.0f;
  }
  void allreduce_sum(std::span<double> d) override { inner_.allreduce_sum(d); }
  void allreduce_sum(std::span<std::int64_t> d) override { inner_.allreduce_sum(d); }
  void broadcast(std::span<std::byte> d, int root) override { inner_.broadcast(d, root); }
  void barrier() override { inner_.barrier(); }

 private:
  Communicator& inner_;
};

TEST_F(CommMpiSingleton, CollectiveCheckNamesAWrongResult) {
  MpiComm mpi(MPI_COMM_WORLD, CommOptions{});
  OffByOneComm comm(mpi);
  const std::string problems = verify_collectives(comm);
  EXPECT_THAT(problems, HasSubstr("allreduce float: 1 of 1000003 elements wrong, first at 17"));
  // The non-blocking path of the default Communicator goes through the same sum: caught too.
  EXPECT_THAT(problems, HasSubstr("non-blocking allreduce (bucket 1)"));
  EXPECT_THAT(problems, ::testing::Not(HasSubstr("double")));
}

TEST_F(CommMpiSingleton, BandwidthSweepTimesEverySize) {
  MpiComm comm(MPI_COMM_WORLD, CommOptions{});
  const auto rows = bandwidth_sweep(comm, {8, 4096, 65536}, 3);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].bytes, 8u);
  EXPECT_EQ(rows[2].bytes, 65536u);
  for (const auto& r : rows) {
    EXPECT_GE(r.iterations, 1);
    EXPECT_LE(r.iterations, 3);
    EXPECT_GT(r.seconds, 0.0);
    EXPECT_NEAR(r.algbw, double(r.bytes) / r.seconds / 1e9, 1e-12);
    EXPECT_EQ(r.busbw, 0.0);  // one rank: nothing crosses a link
  }
  const std::string table = format_bandwidth_table(rows);
  EXPECT_THAT(table, HasSubstr("algbw(GB/s)"));
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 4);
}

TEST(CollectiveCheck, BusBandwidthAndSweepSizes) {
  EXPECT_DOUBLE_EQ(allreduce_busbw(3.0, 3), 4.0);  // 3 * 2 * 2 / 3
  EXPECT_DOUBLE_EQ(allreduce_busbw(1.0, 2), 1.0);
  EXPECT_DOUBLE_EQ(allreduce_busbw(5.0, 1), 0.0);
  EXPECT_EQ(sweep_sizes(8, 512, 4), (std::vector<std::size_t>{8, 32, 128, 512}));
  EXPECT_EQ(sweep_sizes(1, 10, 2), (std::vector<std::size_t>{4, 8}));
  EXPECT_EQ(sweep_sizes(8, 4, 4), (std::vector<std::size_t>{}));
}

TEST_F(CommMpiSingleton, GatheredRecordsRoundTrip) {
  runtime::RecordWriter w;
  w.put(std::int64_t{-5}).put(2.5).put(std::string("host\0name", 9)).put(std::string());
  MpiComm comm(MPI_COMM_WORLD, CommOptions{});
  const auto all = runtime::allgather_strings(w.bytes(), comm);
  ASSERT_EQ(all.size(), 1u);
  runtime::RecordReader in(all[0]);
  EXPECT_EQ(in.get_int(), -5);
  EXPECT_EQ(in.get_double(), 2.5);
  EXPECT_EQ(in.get_str(), std::string("host\0name", 9));
  EXPECT_EQ(in.get_str(), "");
  EXPECT_THROW(in.get_int(), ddp::SystemError);  // nothing left: truncated
}

}  // namespace
}  // namespace ddp::comm
