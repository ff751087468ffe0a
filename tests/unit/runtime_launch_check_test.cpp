// The launcher cross-check as a pure function of (rank, size, environment): the srun-without-PMIx
// singleton, rank mismatches, and the launches that must stay quiet (mpirun inside an allocation).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "ddp/runtime/launch_check.hpp"

namespace ddp::runtime {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using Severity = LaunchProblem::Severity;

std::vector<LaunchProblem> errors(const std::vector<LaunchProblem>& all) {
  std::vector<LaunchProblem> out;
  for (const auto& p : all)
    if (p.severity == Severity::error) out.push_back(p);
  return out;
}

TEST(RuntimeLaunchCheck, PlainSingletonIsFine) {
  EXPECT_TRUE(check_launch(0, 1, {}).empty());
}

TEST(RuntimeLaunchCheck, SrunWithoutPmixIsAnErrorThatSaysWhatToDo) {
  const LaunchEnv env = {{"SLURM_NTASKS", "3"}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "2"}};
  const auto p = check_launch(0, 1, env);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].severity, Severity::error);
  EXPECT_THAT(p[0].message, AllOf(HasSubstr("srun started 3 tasks"), HasSubstr("this is task 2"),
                                  HasSubstr("rank 0 of 1"), HasSubstr("independent MPI singleton"),
                                  HasSubstr("srun --mpi=pmix"), HasSubstr("srun --mpi=list"),
                                  HasSubstr("mpirun -np 3")));
}

TEST(RuntimeLaunchCheck, StepTaskCountWinsAndMpiTypeIsNamed) {
  // A step of 4 tasks in an allocation of 8: the step's count is the one that matters.
  const LaunchEnv env = {{"SLURM_NTASKS", "8"},
                         {"SLURM_STEP_NUM_TASKS", "4"},
                         {"SLURM_STEP_ID", "1"},
                         {"SLURM_MPI_TYPE", "none"}};
  const auto p = errors(check_launch(0, 1, env));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_THAT(p[0].message, AllOf(HasSubstr("srun started 4 tasks (SLURM_STEP_NUM_TASKS=4"),
                                  HasSubstr("--mpi=none")));
}

TEST(RuntimeLaunchCheck, OlderNamesAreUnderstood) {
  const LaunchEnv env = {{"SLURM_NPROCS", "2"}, {"SLURM_STEPID", "0"}};
  EXPECT_EQ(errors(check_launch(0, 1, env)).size(), 1u);
}

TEST(RuntimeLaunchCheck, SrunWithOneTaskIsFine) {
  EXPECT_TRUE(check_launch(0, 1, {{"SLURM_NTASKS", "1"}, {"SLURM_STEP_ID", "0"}}).empty());
}

TEST(RuntimeLaunchCheck, SrunWithPmixIsFine) {
  const LaunchEnv env = {{"SLURM_NTASKS", "3"},  {"SLURM_STEP_NUM_TASKS", "3"},
                         {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "1"},
                         {"SLURM_LOCALID", "1"}, {"PMIX_RANK", "1"}};
  EXPECT_TRUE(check_launch(1, 3, env).empty());
}

TEST(RuntimeLaunchCheck, MpirunInsideAnAllocationIgnoresSlurmVariables) {
  // mpirun starts its daemons with srun (one task per node), so rank 2 on the first node sees
  // SLURM_PROCID=0 and SLURM_NTASKS=2: that describes the daemons, not the ranks.
  const LaunchEnv env = {{"SLURM_NTASKS", "2"},         {"SLURM_STEP_ID", "0"},
                         {"SLURM_PROCID", "0"},         {"OMPI_COMM_WORLD_SIZE", "4"},
                         {"OMPI_COMM_WORLD_RANK", "2"}, {"PMIX_RANK", "2"}};
  EXPECT_TRUE(check_launch(2, 4, env).empty());
}

TEST(RuntimeLaunchCheck, BatchScriptStepIsNotAnSrunTask) {
  // The batch script's own step has the special id 0xfffffffe; a process started there without
  // srun is a singleton by the user's choice: a warning, not an error.
  const LaunchEnv env = {{"SLURM_NTASKS", "4"}, {"SLURM_STEP_ID", "4294967294"}};
  const auto p = check_launch(0, 1, env);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].severity, Severity::warning);
  EXPECT_THAT(p[0].message,
              AllOf(HasSubstr("without srun or mpirun"), HasSubstr("srun --mpi=pmix")));
}

TEST(RuntimeLaunchCheck, AllocationWithoutStepIsAWarning) {
  const auto p = check_launch(0, 1, {{"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "17"}});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].severity, Severity::warning);
}

TEST(RuntimeLaunchCheck, SrunProcidMismatchIsAnError) {
  const LaunchEnv env = {{"SLURM_NTASKS", "3"}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "2"}};
  const auto p = errors(check_launch(1, 3, env));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_THAT(p[0].message, AllOf(HasSubstr("srun task 2"), HasSubstr("MPI rank 1")));
}

TEST(RuntimeLaunchCheck, SrunTaskCountDifferentFromWorldIsAnError) {
  const LaunchEnv env = {{"SLURM_NTASKS", "4"}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "1"}};
  const auto p = errors(check_launch(1, 2, env));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_THAT(p[0].message, HasSubstr("the MPI world has 2 ranks"));
}

TEST(RuntimeLaunchCheck, MpirunRankOrSizeMismatchIsAnError) {
  auto p =
      errors(check_launch(0, 3, {{"OMPI_COMM_WORLD_SIZE", "3"}, {"OMPI_COMM_WORLD_RANK", "1"}}));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_THAT(p[0].message, AllOf(HasSubstr("rank 1 (OMPI_COMM_WORLD_RANK)"), HasSubstr("rank 0")));
  p = errors(check_launch(0, 1, {{"OMPI_COMM_WORLD_SIZE", "3"}, {"OMPI_COMM_WORLD_RANK", "0"}}));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_THAT(p[0].message, HasSubstr("mpirun started 3 ranks"));
}

TEST(RuntimeLaunchCheck, PmiSizeWithSingletonIsAnError) {
  // srun --mpi=pmi2 and an MPI without PMI-2 support: PMI_SIZE tells, even without SLURM_*.
  const auto p = errors(check_launch(0, 1, {{"PMI_SIZE", "2"}, {"PMI_RANK", "1"}}));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_THAT(p[0].message, AllOf(HasSubstr("PMI_SIZE=2"), HasSubstr("srun --mpi=pmix")));
}

TEST(RuntimeLaunchCheck, PmixRankMismatchIsAnError) {
  EXPECT_EQ(errors(check_launch(1, 2, {{"PMIX_RANK", "0"}})).size(), 1u);
  EXPECT_TRUE(check_launch(1, 2, {{"PMIX_RANK", "1"}}).empty());
}

TEST(RuntimeLaunchCheck, GarbageValuesAreIgnored) {
  EXPECT_TRUE(check_launch(0, 1, {{"SLURM_NTASKS", "3x"}, {"SLURM_STEP_ID", "0"}}).empty());
  EXPECT_TRUE(check_launch(0, 1, {{"SLURM_NTASKS", ""}, {"SLURM_STEP_ID", "0"}}).empty());
}

TEST(RuntimeLaunchCheck, JoinProblemsKeepsOneSeverity) {
  const std::vector<LaunchProblem> p = {
      {Severity::error, "a"}, {Severity::warning, "b"}, {Severity::error, "c"}};
  EXPECT_EQ(join_problems(p, Severity::error), "a\nc");
  EXPECT_EQ(join_problems(p, Severity::warning), "b");
}

TEST(RuntimeLaunchCheck, ReadLaunchEnvTakesOnlyTheNamedVariables) {
  const char* old = std::getenv("SLURM_NTASKS");
  const std::string saved = old ? old : "";
  setenv("SLURM_NTASKS", "5", 1);
  setenv("DDP_UNRELATED_VARIABLE", "1", 1);
  const auto env = read_launch_env();
  EXPECT_EQ(env.at("SLURM_NTASKS"), "5");
  EXPECT_EQ(env.count("DDP_UNRELATED_VARIABLE"), 0u);
  if (old) {
    setenv("SLURM_NTASKS", saved.c_str(), 1);
  } else {
    unsetenv("SLURM_NTASKS");
  }
  unsetenv("DDP_UNRELATED_VARIABLE");
}

}  // namespace
}  // namespace ddp::runtime
