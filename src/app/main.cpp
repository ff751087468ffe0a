// ddp_train: one MPI executable that trains CNN image classifiers with synchronous data parallelism.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "ddp/app/config.hpp"
#include "ddp/app/config_schema.hpp"
#include "ddp/app/threads.hpp"
#include "ddp/comm/mpi_comm.hpp"
#include "ddp/error.hpp"
#include "ddp/runtime/runtime.hpp"
#include "ddp/train/trainer.hpp"
#include "ddp/version_info.hpp"

namespace {

// Ranks other than 0 stay quiet; errors are reported by the failing rank itself.
struct NullBuffer : std::streambuf {
  int overflow(int c) override { return c; }
};

int run_training(const ddp::app::Config& cfg, ddp::runtime::Runtime& rt) {
  NullBuffer null_buf;
  std::ostream null_out(&null_buf);
  std::ostream& out = rt.is_root() ? std::cout : null_out;
  const int threads = ddp::app::configure_threads(cfg.runtime.threads);
  out << "ddp_train " << DDP_VERSION_STRING << ": " << rt.size() << " rank(s), " << threads
      << " thread(s) per rank, device cpu, config "
      << (cfg.source.empty() ? std::string("(defaults)") : cfg.source.string()) << "\n";
  ddp::comm::MpiComm comm;
  ddp::train::Trainer trainer(cfg, comm, out);
  trainer.run();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ddp::runtime::Runtime rt(&argc, &argv);
  CLI::App app{"ddp_train: synchronous data-parallel CNN training over MPI (CPU: oneDNN).\n"
               "Every configuration key can be given as --section.key VALUE; it overrides the file."};
  app.set_version_flag("--version", std::string("ddp_train ") + DDP_VERSION_STRING);
  std::string config_path;
  app.add_option("-c,--config", config_path, "TOML configuration file")->check(CLI::ExistingFile);
  ddp::app::Overrides overrides;
  ddp::app::add_config_options(app, overrides);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help/--version print once (rank 0); a real parse error is reported by every rank's exit code.
    if (rt.is_root() || e.get_exit_code() != 0) {
      if (!rt.is_root()) return e.get_exit_code();
      return app.exit(e);
    }
    return e.get_exit_code();
  }
  try {
    const auto cfg = ddp::app::load_config(config_path, overrides);
    return run_training(cfg, rt);
  } catch (const ddp::Error& e) {
    std::fprintf(stderr, "ddp_train: error (rank %d of %d): %s\n", rt.rank(), rt.size(), e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_train: internal error (rank %d of %d): %s\n", rt.rank(), rt.size(),
                 e.what());
  }
  std::fflush(stderr);
  // Other ranks may be waiting in a collective: end the whole job rather than let it hang.
  if (rt.size() > 1) rt.abort(1);
  return 1;
}
