#include "ddp/app/eval_command.hpp"

#include <cstdio>
#include <filesystem>

#include "ddp/app/compute.hpp"
#include "ddp/app/threads.hpp"
#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"
#include "ddp/train/trainer.hpp"

namespace ddp::app {
namespace {

// "index,label,predicted,logit_0,..." then one row per test sample in dataset order.
std::string logits_csv(const std::vector<float>& logits, const data::SampleSet& test,
                       std::int64_t classes) {
  std::string out = "index,label,predicted";
  for (std::int64_t c = 0; c < classes; ++c) out += ",logit_" + std::to_string(c);
  out += "\n";
  char buf[32];
  for (std::int64_t i = 0; i < test.size(); ++i) {
    const float* row = logits.data() + i * classes;
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < classes; ++c)
      if (row[c] > row[best]) best = c;
    out += std::to_string(i) + "," + std::to_string(test.label(i)) + "," + std::to_string(best);
    for (std::int64_t c = 0; c < classes; ++c) {
      std::snprintf(buf, sizeof buf, ",%.9g", static_cast<double>(row[c]));
      out += buf;
    }
    out += "\n";
  }
  return out;
}

}  // namespace

CLI::App* add_eval_command(CLI::App& app, EvalCommand& cmd) {
  auto* eval = app.add_subcommand(
      "eval",
      "evaluate a snapshot on the test set: accuracy, loss, per-class accuracy, confusion.csv "
      "(runs with the configuration stored in the snapshot; --config or --section.key override)");
  eval->add_option("--snapshot", cmd.snapshot, "snapshot file (.h5)")
      ->required()
      ->check(CLI::ExistingFile);
  eval->add_option("--output-dir", cmd.output_dir,
                   "where confusion.csv (per_class.csv beyond 256 classes) is written "
                   "(default: the snapshot's directory)");
  eval->add_option("--dump-logits", cmd.dump_logits,
                   "also write every test sample's logits to this CSV file (index, label, "
                   "predicted, logit_0...)");
  return eval;
}

int run_eval(EvalCommand& cmd, Config cfg, runtime::Runtime& rt, comm::MpiComm& comm,
             std::ostream& out) {
  configure_threads(cfg.runtime.threads, rt.local_size());
  cfg.train.resume = cmd.snapshot;
  auto compute = setup_compute(cfg, rt, comm);
  // Evaluation never steps the optimizer, but restoring checks that its state fits: build the
  // optimizer the snapshot was written with, whatever the config says.
  const auto meta_opt = ckpt::read_snapshot(cmd.snapshot);
  cfg.optim.name = meta_opt.optimizer_name;
  if (meta_opt.optimizer.count("momentum") && cfg.optim.momentum == 0.0) cfg.optim.momentum = 0.9;
  if (!meta_opt.optimizer.count("momentum")) cfg.optim.momentum = 0.0;
  train::Trainer trainer(cfg, comm, out, {std::move(compute.backend), compute.grad_comm.get(), {}});
  trainer.resume();
  std::vector<float> logits;
  const auto e = trainer.evaluate(cmd.dump_logits.empty() ? nullptr : &logits);
  char buf[160];
  std::snprintf(buf, sizeof buf, "test accuracy: %.2f%% (%lld samples), loss %.4f\n",
                100.0 * e.accuracy, static_cast<long long>(e.samples), e.loss);
  out << buf << "per-class accuracy:\n" << e.confusion.table(trainer.class_names());
  if (rt.is_root()) {
    namespace fs = std::filesystem;
    const fs::path dir = cmd.output_dir.empty() ? fs::absolute(cmd.snapshot).parent_path()
                                                : fs::path(cmd.output_dir);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw SystemError("eval --output-dir '" + dir.string() + "': " + ec.message());
    const bool matrix = e.confusion.has_matrix();
    const fs::path csv = dir / (matrix ? "confusion.csv" : "per_class.csv");
    ckpt::write_file_atomically(csv, e.confusion.csv(trainer.class_names()));
    if (matrix)
      out << "confusion matrix (rows: true class, columns: predicted): " << csv.string() << "\n";
    else
      out << "per-class accuracy (" << e.confusion.classes() << " classes: more than "
          << train::Confusion::kMatrixClasses << ", so no confusion matrix): " << csv.string()
          << "\n";
    if (!cmd.dump_logits.empty()) {
      ckpt::write_file_atomically(
          cmd.dump_logits,
          logits_csv(logits, trainer.test_set(), static_cast<std::int64_t>(e.confusion.classes())));
      out << "logits: " << cmd.dump_logits << "\n";
    }
  }
  return 0;
}

}  // namespace ddp::app
