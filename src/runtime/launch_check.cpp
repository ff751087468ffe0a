#include "ddp/runtime/launch_check.hpp"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "ddp/error.hpp"

namespace ddp::runtime {
namespace {

using Severity = LaunchProblem::Severity;

std::optional<std::string> get(const LaunchEnv& env, const char* name) {
  const auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

std::optional<long long> get_int(const LaunchEnv& env, const char* name) {
  const auto s = get(env, name);
  if (!s || s->empty()) return std::nullopt;
  long long v = 0;
  const auto [end, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
  if (ec != std::errc() || end != s->data() + s->size()) return std::nullopt;
  return v;
}

// First of the named variables that is set to an integer.
std::optional<long long> first_int(const LaunchEnv& env, std::initializer_list<const char*> names,
                                   std::string* which) {
  for (const char* n : names)
    if (auto v = get_int(env, n)) {
      if (which) *which = n;
      return v;
    }
  return std::nullopt;
}

std::string str(long long v) {
  return std::to_string(v);
}

}  // namespace

const std::vector<std::string>& launch_env_names() {
  static const std::vector<std::string> names = {"SLURM_JOB_ID",
                                                 "SLURM_STEP_ID",
                                                 "SLURM_STEPID",
                                                 "SLURM_NTASKS",
                                                 "SLURM_NPROCS",
                                                 "SLURM_STEP_NUM_TASKS",
                                                 "SLURM_PROCID",
                                                 "SLURM_LOCALID",
                                                 "SLURM_MPI_TYPE",
                                                 "OMPI_COMM_WORLD_SIZE",
                                                 "OMPI_COMM_WORLD_RANK",
                                                 "PMIX_RANK",
                                                 "PMI_SIZE",
                                                 "PMI_RANK"};
  return names;
}

LaunchEnv read_launch_env() {
  LaunchEnv env;
  for (const auto& n : launch_env_names())
    if (const char* v = std::getenv(n.c_str())) env[n] = v;
  return env;
}

std::vector<LaunchProblem> check_launch(int rank, int size, const LaunchEnv& env) {
  std::vector<LaunchProblem> out;
  auto error = [&](std::string m) { out.push_back({Severity::error, std::move(m)}); };
  auto warning = [&](std::string m) { out.push_back({Severity::warning, std::move(m)}); };

  const auto ompi_size = get_int(env, "OMPI_COMM_WORLD_SIZE");
  const auto ompi_rank = get_int(env, "OMPI_COMM_WORLD_RANK");
  const bool under_mpirun = get(env, "OMPI_COMM_WORLD_SIZE").has_value();
  // Slurm's special step ids (batch script 0xfffffffe, extern 0xfffffffd, interactive
  // 0xfffffffa, ...) sit just below 2^32; a real srun step has a small id.
  const auto step_id = first_int(env, {"SLURM_STEP_ID", "SLURM_STEPID"}, nullptr);
  const bool srun_task = step_id && *step_id >= 0 && *step_id < 0xfffffff0LL && !under_mpirun;
  std::string tasks_var;
  const auto tasks =
      srun_task
          ? first_int(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"}, &tasks_var)
          : first_int(env, {"SLURM_NTASKS", "SLURM_NPROCS"}, &tasks_var);
  const auto procid = get_int(env, "SLURM_PROCID");
  const auto pmi_size = get_int(env, "PMI_SIZE");
  const auto pmix_rank = get_int(env, "PMIX_RANK");
  const auto mpi_type = get(env, "SLURM_MPI_TYPE");

  bool singleton_diagnosed = false;
  if (srun_task && tasks && *tasks > 1 && size == 1) {
    singleton_diagnosed = true;
    std::string m = "srun started " + str(*tasks) + " tasks (" + tasks_var + "=" + str(*tasks);
    if (procid) m += "; this is task " + str(*procid);
    m += "), but MPI sees only this process (rank 0 of 1): srun could not connect the tasks to MPI";
    if (mpi_type) m += " (srun used --mpi=" + *mpi_type + ")";
    m += ", so each of the " + str(*tasks) +
         " tasks started as an independent MPI singleton and would train alone. Launch with "
         "`srun --mpi=pmix ...` (`srun --mpi=list` lists the plugins this Slurm has; "
         "SLURM_MPI_TYPE=pmix or MpiDefault=pmix in slurm.conf makes it the default), or start "
         "the ranks with `mpirun -np " +
         str(*tasks) + " ...` inside the allocation.";
    error(m);
  }
  if (srun_task && tasks && *tasks > 1 && size > 1 && *tasks != size)
    error("srun started " + str(*tasks) + " tasks (" + tasks_var + "=" + str(*tasks) +
          ") but the MPI world has " + str(size) +
          " ranks: the tasks did not form one MPI job. Launch with `srun --mpi=pmix ...` and "
          "without a second launcher (mpirun) inside the srun step.");
  if (srun_task && procid && size > 1 && *procid != rank)
    error("this is srun task " + str(*procid) + " (SLURM_PROCID) but MPI rank " + str(rank) +
          ": srun's tasks and MPI's ranks disagree. Launch with `srun --mpi=pmix ...` and without "
          "a second launcher inside the srun step.");
  if (under_mpirun && ompi_size && *ompi_size != size)
    error("mpirun started " + str(*ompi_size) +
          " ranks (OMPI_COMM_WORLD_SIZE) but the MPI world has " + str(size) +
          ": this process did not join mpirun's job (was ddp_train started by a program that "
          "itself runs under mpirun?). Start ddp_train directly with mpirun.");
  if (under_mpirun && ompi_rank && ompi_size && *ompi_size == size && *ompi_rank != rank)
    error("mpirun gave this process rank " + str(*ompi_rank) +
          " (OMPI_COMM_WORLD_RANK) but MPI says rank " + str(rank) +
          ": the launcher and the MPI library disagree (two MPI installations mixed? check that "
          "`which mpirun` belongs to the MPI ddp_train was built with).");
  if (!singleton_diagnosed && pmi_size && *pmi_size > 1 && size == 1)
    error("the launcher started " + str(*pmi_size) +
          " processes through PMI (PMI_SIZE=" + str(*pmi_size) +
          ") but MPI sees only this one (rank 0 of 1): this MPI library cannot use that PMI, so "
          "every process started as an independent singleton. Under Slurm launch with "
          "`srun --mpi=pmix ...` (see `srun --mpi=list`), or use mpirun.");
  if (pmix_rank && !under_mpirun && size > 1 && *pmix_rank != rank)
    error("the launcher gave this process PMIx rank " + str(*pmix_rank) +
          " (PMIX_RANK) but MPI says rank " + str(rank) +
          ": the launcher and the MPI library disagree.");
  if (!srun_task && !under_mpirun && !pmi_size && size == 1 && tasks && *tasks > 1)
    warning("this process runs in a Slurm allocation of " + str(*tasks) + " tasks (" + tasks_var +
            "=" + str(*tasks) +
            ") but was started without srun or mpirun, so it trains alone as rank 0 of 1. To use "
            "all " +
            str(*tasks) +
            " tasks start it with `srun --mpi=pmix ddp_train ...` or `mpirun ddp_train ...`.");
  return out;
}

std::string join_problems(const std::vector<LaunchProblem>& problems, Severity severity) {
  std::string out;
  for (const auto& p : problems) {
    if (p.severity != severity) continue;
    if (!out.empty()) out += '\n';
    out += p.message;
  }
  return out;
}

void check_launch_or_throw(const Runtime& rt) {
  const auto problems = check_launch(rt.rank(), rt.size(), rt.launch_env());
  for (const auto& p : problems)
    if (p.severity == Severity::warning)
      std::fprintf(stderr, "ddp_train: warning (rank %d of %d): %s\n", rt.rank(), rt.size(),
                   p.message.c_str());
  std::fflush(stderr);
  const std::string errors = join_problems(problems, Severity::error);
  if (!errors.empty()) throw Error(errors);
}

}  // namespace ddp::runtime
