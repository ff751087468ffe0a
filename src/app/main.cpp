// ddp_train: one MPI executable that trains CNN image classifiers with synchronous data
// parallelism.
//   ddp_train --config FILE [--section.key VALUE ...]      train (the default command)
//   ddp_train inspect SNAPSHOT                               what a snapshot holds
//   ddp_train eval --snapshot FILE                           test-set accuracy, per class
//   ddp_train predict --snapshot FILE IMAGE...|DIR           classify JPEG/PNG files
//   ddp_train export --snapshot FILE --output model.onnx     the model as ONNX
//   ddp_train report RUN_DIR                                 RUN_DIR/report.html
//   ddp_train diff A.h5 B.h5                                 largest relative weight difference
//   ddp_train doctor [--config FILE]                         check a launch before training
//   ddp_train pack --format F --input PATH --output FILE.h5  pack images into one HDF5 file
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <new>
#include <optional>

#include "ddp/app/build_info.hpp"
#include "ddp/app/compute.hpp"
#include "ddp/app/config.hpp"
#include "ddp/app/config_agreement.hpp"
#include "ddp/app/config_schema.hpp"
#include "ddp/app/doctor.hpp"
#include "ddp/app/eval_command.hpp"
#include "ddp/app/export_command.hpp"
#include "ddp/app/pack_command.hpp"
#include "ddp/app/predict_command.hpp"
#include "ddp/app/report_command.hpp"
#include "ddp/app/snapshot_config.hpp"
#include "ddp/app/threads.hpp"
#include "ddp/backend/cuda_backend.hpp"
#include "ddp/ckpt/snapshot.hpp"
#include "ddp/comm/comm_options.hpp"
#include "ddp/comm/mpi_comm.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/presets.hpp"
#include "ddp/runtime/cpu_binding.hpp"
#include "ddp/runtime/error_agreement.hpp"
#include "ddp/runtime/launch_check.hpp"
#include "ddp/runtime/rank_info.hpp"
#include "ddp/runtime/runtime.hpp"
#include "ddp/runtime/signals.hpp"
#include "ddp/train/rank_log.hpp"
#include "ddp/train/run_start.hpp"
#include "ddp/train/trainer.hpp"
#include "ddp/version_info.hpp"

// Slurm's warning signal (SIGUSR1) or a SIGTERM may arrive while the process is still starting;
// without our handler its default action kills the process. An entry in .preinit_array runs before
// the initialisers of every shared library (MPI, oneDNN, HDF5, libstdc++), so the only window left
// is the dynamic loader's own work before it (README, "Snapshots, resuming, stopping"). The
// handlers only set a flag, so installing them this early needs nothing initialised.
extern "C" void ddp_install_stop_handlers_early(int, char**, char**) {
  ddp::runtime::install_stop_handlers();
}
__attribute__((section(".preinit_array"), used)) static void (*const ddp_preinit_stop_handlers)(
    int, char**, char**) = ddp_install_stop_handlers_early;

namespace {

constexpr const char* kOutOfMemory =
    "out of memory: an allocation failed (std::bad_alloc); the model, the batch "
    "(train.batch_size, train.global_batch) or the dataset need more memory than this rank can "
    "have";

// Ranks other than 0 stay quiet; errors are reported by the failing rank itself.
struct NullBuffer : std::streambuf {
  int overflow(int c) override { return c; }
};

// Training: the start (devices, rank table, run directory, trainer) is a phase whose errors the
// ranks agree on (runtime/error_agreement.hpp); the training itself reports errors per rank.
int run_training(const ddp::app::Config& cfg, ddp::runtime::Runtime& rt, ddp::comm::MpiComm& comm,
                 ddp::runtime::ErrorAgreement* agreement,
                 std::optional<ddp::train::RankLog>& rank_log, std::ostream& out) {
  std::optional<ddp::app::Compute> compute;
  std::unique_ptr<ddp::train::Trainer> trainer;
  std::optional<ddp::train::RunStart> start;
  ddp::runtime::PhaseFailure failed;
  std::exception_ptr error;
  try {
    const int threads = ddp::app::configure_threads(cfg.runtime.threads, rt.local_size());
    // Collective: the whole job settles on one kind of device (runtime.device = cuda without a
    // usable GPU on some rank is an error naming the ranks).
    compute.emplace(ddp::app::setup_compute(cfg, rt, comm));
    // Collective: every rank contributes its row, rank 0 prints the table (and the start-up line
    // takes the ranks' thread counts from it).
    const auto table = ddp::runtime::gather_rank_table(
        ddp::runtime::describe_self(rt, threads, compute->device, cfg.runtime.threads), comm);
    out << "ddp_train " << DDP_VERSION_STRING << ": " << rt.size() << " rank(s), "
        << ddp::runtime::describe_threads(table) << ", device "
        << (compute->device == "cpu" ? "cpu" : "cuda") << " (" << compute->backend->name()
        << "), config " << (cfg.source.empty() ? std::string("(defaults)") : cfg.source.string())
        << "\n";
    if (!compute->note.empty()) out << "device: " << compute->note << "\n";
    if (!cfg.model.preset.empty())
      out << "preset: "
          << ddp::nn::preset_description(cfg.model.preset, ddp::app::preset_options(cfg)) << "\n";
    out << ddp::runtime::format_rank_table(table);
    for (const auto& w : ddp::runtime::check_binding(table)) out << "warning: " << w << "\n";
    // Collective: a new run, the run.dir's run continued (possibly with another global batch
    // kept), or nothing to do.
    start.emplace(ddp::train::plan_run_start(cfg, comm, out));
    if (start->action == ddp::train::RunStart::Action::nothing_to_do) return 0;
    // From here on (the run.dir settled) each rank's warnings and errors also go to its log file.
    rank_log.emplace(start->config.run.dir, rt.rank());
    rank_log->note("ddp_train " DDP_VERSION_STRING ": rank " + std::to_string(rt.rank()) + " of " +
                   std::to_string(rt.size()) + " on " + rt.host() + ", pid " +
                   std::to_string(::getpid()) + ": training in " + start->config.run.dir +
                   " (warnings and errors of this rank follow)");
    trainer = std::make_unique<ddp::train::Trainer>(
        start->config, comm, out,
        ddp::train::ComputePlace{std::move(compute->backend), compute->grad_comm.get(), table});
  } catch (const ddp::train::RunStartFailedOnRank0&) {
    failed = std::string();  // rank 0 says why
    error = std::current_exception();
  } catch (const ddp::app::RanksDisagree&) {
    throw;
  } catch (const ddp::Error& e) {
    failed = e.what();
    error = std::current_exception();
  } catch (const std::bad_alloc&) {
    failed = kOutOfMemory;
    error = std::current_exception();
  }
  if (agreement) {
    const auto all = agreement->exchange(failed);
    const std::string report = ddp::runtime::describe_failures(all);
    if (!report.empty()) {
      if (failed && !failed->empty() && rank_log) rank_log->note("error: " + *failed);
      if (rt.is_root()) {
        std::fputs(report.c_str(), stderr);
        std::fflush(stderr);
      }
      return 1;
    }
  } else if (error) {
    std::rethrow_exception(error);
  }
  const bool gpu = compute->device != "cpu";
  try {
    const auto result = trainer->run(*start);
    return result.stopped ? ddp::runtime::kExitStopped : 0;
  } catch (...) {
    // On GPUs a collective may still wait for a rank that died, and freeing device memory or
    // finalising NCCL would wait with it: leave both to the process exit, so that main reports the
    // error and MPI_Abort ends the job at once.
    if (gpu) {
      (void)trainer.release();
      (void)compute->grad_comm.release();
    }
    throw;
  }
}

// Largest relative difference between two snapshots' model tensors, per tensor and overall:
// max |a-b| / max(max |a|, tiny) over each tensor. Exit 0 when the architectures match.
int run_diff(const std::string& a_file, const std::string& b_file, std::ostream& out) {
  const auto a = ddp::ckpt::read_snapshot(a_file);
  const auto b = ddp::ckpt::read_snapshot(b_file);
  double worst = 0.0;
  for (const auto& [name, va] : a.model) {
    const auto it = b.model.find(name);
    if (it == b.model.end() || it->second.size() != va.size())
      throw ddp::ConfigError("snapshots differ in architecture: tensor '" + name + "'");
    double diff = 0.0, scale = 1e-30;
    for (std::size_t i = 0; i < va.size(); ++i) {
      diff = std::max(diff, static_cast<double>(std::abs(va[i] - it->second[i])));
      scale = std::max(scale, static_cast<double>(std::abs(va[i])));
    }
    char line[160];
    std::snprintf(line, sizeof line, "  %-28s max rel diff %.3e\n", name.c_str(), diff / scale);
    out << line;
    worst = std::max(worst, diff / scale);
  }
  char line[96];
  std::snprintf(line, sizeof line, "max relative difference: %.3e\n", worst);
  out << line;
  return 0;
}

// The start-up exchange's timeout (DDP_COMM_TIMEOUT_S, else the default): the config, which may set
// comm.timeout_s, is not read yet. A bad value is reported later, where the communicator reads it.
double startup_timeout_s() {
  try {
    return ddp::comm::comm_options_from_env().timeout_s;
  } catch (const ddp::Error&) {
    return ddp::comm::CommOptions::kDefaultTimeoutS;
  }
}

// A failed rank reports itself and ends the job: the others may be waiting for it in a collective
// (or in MPI_Finalize), and would otherwise wait until their timeout or forever. (Errors of the
// start-up phases are agreed instead: see run_training and main.)
int fail(const ddp::runtime::Runtime& rt, const char* kind, const std::string& message) {
  std::fprintf(stderr, "ddp_train: %s (rank %d of %d): %s\n", kind, rt.rank(), rt.size(),
               message.c_str());
  std::fflush(stderr);
  if (rt.size() > 1) rt.abort(1);
  return 1;
}

// What this rank checks alone before any collective, beyond what CLI11 checks: nothing left over,
// one subcommand, no training-only key for a command that ignores it, one-process commands not
// under mpirun/srun.
void check_command_line(const CLI::App& app, const ddp::app::Overrides& overrides, int world_size) {
  if (!app.remaining().empty())
    throw ddp::ConfigError(ddp::app::unexpected_arguments(app.remaining(), app));
  const auto given = app.get_subcommands();
  if (given.size() > 1) {
    // `inspect A diff B C`: CLI11 takes the words after `inspect A` for a second command.
    std::string names;
    for (const auto* c : given) names += (names.empty() ? "'" : " and '") + c->get_name() + "'";
    throw ddp::ConfigError("command line: " + names +
                           ": give one command at a time (ddp_train --help lists them)");
  }
  const std::string command = given.empty() ? "" : given.front()->get_name();
  // Keys that only training reads: a command that would silently ignore them refuses them.
  if (command == "eval" || command == "predict" || command == "export" || command == "report")
    for (const auto& [key, value] : overrides)
      if (key == "train.resume" || key == "run.overwrite")
        throw ddp::ConfigError("command line: --" + key + " '" + value + "' does not apply to `" +
                               command + "`: it reads the snapshot given with --snapshot" +
                               (command == "report" ? std::string(" (or the run's newest)") : "") +
                               ", not the run directory's");
  if (world_size > 1 &&
      (command == "predict" || command == "export" || command == "report" || command == "pack"))
    throw ddp::ConfigError("ddp_train " + command +
                           " runs as one process; start it without mpirun/srun");
}

// CLI::Range lets NaN through (every comparison with it is false).
const CLI::Validator kFinite(
    [](std::string& text) {
      try {
        std::size_t used = 0;
        const double v = std::stod(text, &used);
        if (used == text.size() && std::isfinite(v)) return std::string();
      } catch (const std::exception&) {
      }
      return "'" + text + "' is not a finite number";
    },
    "FINITE");

}  // namespace

int main(int argc, char** argv) {
  // Again (see ddp_install_stop_handlers_early), in case this platform skips .preinit_array.
  ddp::runtime::install_stop_handlers();
  ddp::runtime::start_signal_thread();
  ddp::runtime::Runtime rt(&argc, &argv, startup_timeout_s());
  NullBuffer null_buf;
  std::ostream null_out(&null_buf);
  std::ostream& out = rt.is_root() ? std::cout : null_out;

  CLI::App app{
      "ddp_train: synchronous data-parallel CNN training over MPI (CPU: oneDNN; GPU: cuDNN, "
      "cuBLAS, NCCL).\n"
      "Every configuration key can be given as --section.key VALUE; it overrides the file."};
  // Built only when asked for: it loads the CUDA plugin to report it (about 1 s of loading cuBLAS),
  // which every other start would pay for nothing.
  app.set_version_flag("--version", std::function<std::string()>(ddp::app::build_info));
  app.fallthrough();
  // Unknown arguments are collected and reported by us, with the suggestion a config file gets.
  app.allow_extras();
  std::string config_path;
  app.add_option("-c,--config", config_path, "TOML configuration file")->check(CLI::ExistingFile);
  ddp::app::Overrides overrides;
  ddp::app::add_config_options(app, overrides);

  auto* layers = app.add_subcommand("layers", "list every layer type with its keys");
  auto* inspect = app.add_subcommand("inspect", "print what a snapshot holds");
  std::string inspect_file;
  inspect->add_option("snapshot", inspect_file, "snapshot file (.h5)")->required();
  ddp::app::EvalCommand eval_cmd;
  auto* eval = ddp::app::add_eval_command(app, eval_cmd);
  ddp::app::PredictCommand predict_cmd;
  auto* predict = ddp::app::add_predict_command(app, predict_cmd);
  ddp::app::ExportCommand export_cmd;
  auto* export_ = ddp::app::add_export_command(app, export_cmd);
  ddp::app::ReportCommand report_cmd;
  auto* report = ddp::app::add_report_command(app, report_cmd);
  auto* diff = app.add_subcommand("diff", "compare the model tensors of two snapshots");
  std::string diff_a, diff_b;
  diff->add_option("a", diff_a, "first snapshot")->required();
  diff->add_option("b", diff_b, "second snapshot")->required();
  auto* doctor = app.add_subcommand(
      "doctor",
      "check the launch: configuration, rank table, launcher, GPUs, network, dataset, "
      "collectives, all-reduce bandwidth (exit 0 only when every check passes)");
  ddp::app::DoctorOptions doctor_opts;
  double sweep_max_mb = 64.0;
  bool no_sweep = false;
  doctor->add_option("--sweep-max-mb", sweep_max_mb, "largest all-reduce of the sweep (MiB)")
      ->check(kFinite)
      ->check(CLI::Range(1e-5, 4096.0))
      ->capture_default_str();
  doctor
      ->add_option("--iters", doctor_opts.sweep_iterations, "timed all-reduces per size (at most)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  doctor->add_flag("--no-sweep", no_sweep, "skip the bandwidth sweep");
  ddp::app::PackCommand pack_cmd;
  auto* pack = ddp::app::add_pack_command(app, pack_cmd);
  // Set after the subcommands, which would otherwise inherit it (`pack --help` listed the layers).
  app.footer(
      "\nCommands: ddp_train COMMAND --help describes each. Layer types and their keys "
      "([[model.layers]]): ddp_train layers");

  // Phase 1, this rank alone: the command line and the configuration. Under mpirun/srun the
  // ranks then agree on the outcome: a start-up error is reported once, by rank 0, and every rank
  // exits 1 (no MPI_Abort, no banner).
  ddp::runtime::PhaseFailure startup_error;
  std::optional<ddp::app::Config> cfg;
  std::optional<ddp::ckpt::Snapshot> eval_snapshot;
  try {
    app.parse(argc, argv);
    check_command_line(app, overrides, rt.size());
    if (*doctor) {
      // The doctor reports a configuration error as one of its checks instead of refusing to run.
      cfg = ddp::app::load_config_for_doctor(config_path, overrides, doctor_opts.config_error);
      doctor_opts.dataset_configured = !config_path.empty();
      for (const auto& [key, value] : overrides)
        if (key.rfind("data.", 0) == 0) doctor_opts.dataset_configured = true;
    } else if (app.get_subcommands().empty() || *eval) {
      // srun without PMIx starts N singletons that each think they are rank 0 of 1: stop here.
      ddp::runtime::check_launch_or_throw(rt);
      // eval reads its snapshot once, here, and runs with the configuration stored in it unless
      // --config names one.
      if (*eval) {
        eval_snapshot = ddp::ckpt::read_snapshot(eval_cmd.snapshot);
        cfg = ddp::app::config_for_snapshot(eval_snapshot->meta, eval_cmd.snapshot, config_path,
                                            overrides);
      } else {
        cfg = ddp::app::load_config(config_path, overrides);
      }
    }
  } catch (const CLI::ParseError& e) {
    // --help and --version print once (rank 0) and every rank exits 0.
    if (e.get_exit_code() == 0) return rt.is_root() ? app.exit(e) : 0;
    // pack runs as one process, not a ranked run: its errors name no rank.
    if (*pack && rt.size() == 1)
      return ddp::app::report_pack_error("command line: " + std::string(e.what()) +
                                         " (ddp_train pack --help lists the options)");
    startup_error =
        "command line: " + std::string(e.what()) + " (ddp_train --help lists the options)";
  } catch (const ddp::Error& e) {
    startup_error = e.what();
  } catch (const std::bad_alloc&) {
    startup_error = kOutOfMemory;
  } catch (const std::exception& e) {
    startup_error = std::string("internal error: ") + e.what();
  }
  std::optional<ddp::runtime::ErrorAgreement> agreement;
  if (rt.size() > 1) {
    agreement.emplace(startup_timeout_s());
    const std::string said = ddp::runtime::describe_failures(agreement->exchange(startup_error));
    if (!said.empty()) {
      if (rt.is_root()) {
        std::fputs(said.c_str(), stderr);
        std::fflush(stderr);
      }
      return 1;
    }
  } else if (startup_error) {
    std::fprintf(stderr, "ddp_train: error (rank 0 of 1): %s\n", startup_error->c_str());
    return 1;
  }

  // Outlives the try block: the error the handlers below report goes to the rank's log too.
  std::optional<ddp::train::RankLog> rank_log;
  try {
    if (*layers) {
      out << ddp::app::layers_help();
      return 0;
    }
    if (*inspect) {
      out << ddp::ckpt::inspect(inspect_file);
      return 0;
    }
    if (*diff) return run_diff(diff_a, diff_b, out);
    if (*pack) return ddp::app::run_pack(pack_cmd, rt.size(), std::cout);
    if (*predict)
      return ddp::app::run_predict(
          predict_cmd, ddp::app::config_for_snapshot(predict_cmd.snapshot, config_path, overrides),
          rt.size(), std::cout);
    if (*export_)
      return ddp::app::run_export(
          export_cmd, ddp::app::config_for_snapshot(export_cmd.snapshot, config_path, overrides),
          rt.size(), std::cout);
    if (*report)
      return ddp::app::run_report(report_cmd, config_path, overrides, rt.size(), std::cout);
    if (*doctor) {
      doctor_opts.sweep = !no_sweep;
      doctor_opts.sweep_max_bytes = static_cast<std::size_t>(sweep_max_mb * 1024 * 1024);
      return ddp::app::run_doctor(*cfg, rt, doctor_opts, out);
    }
    // From here on every collective waits under comm.timeout_s (a rank that never arrives is
    // named and the job aborted), and the first one checks that every rank runs the same
    // configuration and command.
    ddp::comm::MpiComm comm(MPI_COMM_WORLD, ddp::comm::comm_options_from_env(cfg->comm.timeout_s));
    std::vector<std::pair<std::string, std::string>> command = {{"command", "train"}};
    if (*eval) command = {{"command", "eval"}, {"eval --snapshot", eval_cmd.snapshot}};
    ddp::app::check_ranks_agree(comm, cfg->resolved_toml, command);
    if (*eval) return ddp::app::run_eval(eval_cmd, *cfg, *eval_snapshot, rt, comm, out);
    return run_training(*cfg, rt, comm, agreement ? &*agreement : nullptr, rank_log, out);
  } catch (const ddp::app::RanksDisagree& e) {
    // Every rank knows (they exchanged the hashes): rank 0 says it once, every rank exits 1.
    if (e.report()) {
      std::fprintf(stderr, "ddp_train: error (rank %d of %d): %s\n", rt.rank(), rt.size(),
                   e.what());
      std::fflush(stderr);
    }
    return 1;
  } catch (const ddp::Error& e) {
    return fail(rt, "error", e.what());
  } catch (const std::bad_alloc&) {
    return fail(rt, "error", kOutOfMemory);
  } catch (const std::exception& e) {
    return fail(rt, "internal error", e.what());
  }
}
