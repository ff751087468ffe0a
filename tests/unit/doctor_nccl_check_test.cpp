// doctor's NCCL check on a stalled bootstrap (DDP_FAULT_NCCL_BOOTSTRAP_STALL's injection, here as
// the option it sets): the check fails with the stall report and the process lives on, although
// the options it is given ask for the job to end on a stall (training's default). The bootstrap
// stalls before any CUDA call, so this runs without a GPU, as one MPI rank.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "ddp/app/doctor_nccl.hpp"
#include "ddp/comm/mpi_comm.hpp"
#include "ddp/error.hpp"
#include "ddp/plugin/cuda_plugin.hpp"
#include "mpi_test_env.hpp"

namespace ddp::app {
namespace {

TEST(DoctorNccl, StalledBootstrapFailsTheCheckInsteadOfEndingTheJob) {
#ifndef DDP_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend: there is no NCCL check";
#endif
  // ctest names the plugin in DDP_CUDA_PLUGIN; run by hand without it, it is not found.
  if (!plugin::cuda_plugin())
    GTEST_SKIP() << "the CUDA plugin did not load: " << plugin::cuda_plugin_status().error;
  ddp::testing::ensure_mpi();
  comm::MpiComm control(MPI_COMM_WORLD, comm::CommOptions{30.0});
  comm::NcclCommOptions requested;
  requested.comm.timeout_s = 0.5;
  requested.abort_job_on_stall = true;  // what training uses; doctor must not honour it
  requested.fault_stall_bootstrap = true;
  const auto start = std::chrono::steady_clock::now();
  const NcclCheck result = check_nccl(control, 0, requested);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(result.comm, nullptr);
  ASSERT_EQ(result.errors.size(), 1u);
  const auto& [message, ranks] = *result.errors.begin();
  EXPECT_EQ(ranks, std::vector<int>{0});
  EXPECT_NE(message.find("NCCL setup (broadcast of the unique id from rank 0)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("did not complete within 0.5 s"), std::string::npos) << message;
  EXPECT_GE(took, 0.5);
  EXPECT_LT(took, 10.0);
  // The control plane still works after the failed check: doctor goes on to print its report.
  double x = 2.0;
  control.allreduce_sum(std::span<double>(&x, 1));
  EXPECT_EQ(x, 2.0);
}

}  // namespace
}  // namespace ddp::app
