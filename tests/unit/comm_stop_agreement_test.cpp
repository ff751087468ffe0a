// The stop agreement over real MPI: in this test process (one rank) and, run by
// test_mpi_uneven_shares.sh under `mpirun -np 3`, over three ranks, where the verdict comes one
// step late and counts every rank's flags.
#include <gtest/gtest.h>
#include <mpi.h>

#include "ddp/comm/mpi_comm.hpp"
#include "ddp/comm/stop_agreement.hpp"
#include "mpi_test_env.hpp"

namespace ddp::comm {
namespace {

class StopAgreementTest : public ::testing::Test {
 protected:
  void SetUp() override { ddp::testing::ensure_mpi(); }
};

// A stop asked for on the last rank at step 2 is every rank's verdict: at once on one rank, a
// step later (while step 3 computes) on several.
TEST_F(StopAgreementTest, EveryRankLearnsOfOneRanksStop) {
  MpiComm comm(MPI_COMM_WORLD, CommOptions{});
  const bool one = comm.size() == 1, last = comm.rank() == comm.size() - 1;
  StopAgreement agree(comm);
  EXPECT_FALSE(agree.step(false, false).stop);   // step 1: nobody
  EXPECT_EQ(agree.step(last, false).stop, one);  // step 2: the last rank is asked
  const auto v = agree.step(last, false);        // step 3
  EXPECT_TRUE(v.stop);
  EXPECT_EQ(v.nonfinite_ranks, 0);
  EXPECT_TRUE(agree.finish().stop);
  // The next loop starts afresh.
  EXPECT_FALSE(agree.step(false, false).stop);
  EXPECT_FALSE(agree.step(false, false).stop);
  EXPECT_FALSE(agree.finish().stop);
}

// A request that comes with a loop's last step is still agreed on: by finish().
TEST_F(StopAgreementTest, ARequestWithTheLastStepReachesFinish) {
  MpiComm comm(MPI_COMM_WORLD, CommOptions{});
  StopAgreement agree(comm);
  EXPECT_FALSE(agree.step(false, false).stop);
  const auto v = agree.step(comm.rank() == 0, false);
  EXPECT_EQ(v.stop, comm.size() == 1);
  EXPECT_TRUE(agree.finish().stop);
}

// Every rank whose loss is not finite is counted, so that all stop at the same step.
TEST_F(StopAgreementTest, NonFiniteRanksAreCounted) {
  MpiComm comm(MPI_COMM_WORLD, CommOptions{});
  StopAgreement agree(comm);
  const bool odd = comm.rank() % 2 == 1;
  const int odd_ranks = comm.size() / 2;
  auto v = agree.step(false, odd || comm.size() == 1);
  if (comm.size() == 1) {
    EXPECT_EQ(v.nonfinite_ranks, 1);
  } else {
    EXPECT_EQ(v.nonfinite_ranks, 0);
    v = agree.step(false, false);
    EXPECT_EQ(v.nonfinite_ranks, odd_ranks);
    EXPECT_FALSE(v.stop);
  }
  // The last step's flags: on one rank its own, on several the clean step after.
  EXPECT_EQ(agree.finish().nonfinite_ranks, comm.size() == 1 ? 1 : 0);
}

}  // namespace
}  // namespace ddp::comm
