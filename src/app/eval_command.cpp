#include "ddp/app/eval_command.hpp"

#include <cstdio>
#include <filesystem>

#include "ddp/app/compute.hpp"
#include "ddp/app/threads.hpp"
#include "ddp/backend/cpu_backend.hpp"
#include "ddp/ckpt/snapshot.hpp"
#include "ddp/data/normalization.hpp"
#include "ddp/data/open_dataset.hpp"
#include "ddp/error.hpp"
#include "ddp/train/auto_caps.hpp"
#include "ddp/train/batch_plan.hpp"
#include "ddp/train/evaluator.hpp"
#include "ddp/train/trained_model.hpp"
#include "ddp/train/training_data.hpp"

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

int run_eval(EvalCommand& cmd, Config cfg, const ckpt::Snapshot& snap, runtime::Runtime& rt,
             comm::MpiComm& comm, std::ostream& out) {
  configure_threads(cfg.runtime.threads, rt.local_size());
  auto compute = setup_compute(cfg, rt, comm);
  // The snapshot into the model its configuration describes (no optimizer, no training set:
  // evaluation needs neither).
  train::TrainedModel tm(cfg, snap, std::move(compute.backend));
  nn::Model& model = tm.model();
  std::string note;
  const auto test = data::open_dataset(cfg.data, data::Split::test, cfg.train.seed, comm,
                                       backend::compute_threads(), note);
  train::check_test_split(cfg.data, test->samples(), model.input_shape(), model.num_classes(),
                          "the model's");
  // Each rank evaluates the shard its share of the global batch gives it, in micro-batches, as
  // the training run's evaluation does.
  train::BatchPlan plan(cfg.train, cfg.model.sync_batchnorm, comm.size(), comm.rank(), 0,
                        cfg.train.drop_last);
  if (cfg.train.max_micro_batch.word == "auto")
    plan = plan.with_caps(
        train::gather_auto_caps(plan, tm.backend(), model, cfg.model.layers, comm, out));
  model.reserve(plan.micro_batch());
  train::Evaluator evaluator(
      model, tm.backend(), *test,
      data::training_normalization(cfg.data, model.input_shape()[0], cfg.train.seed), cfg.data,
      cfg.train.seed, comm, plan.shares(), plan.micro_batch());
  evaluator.set_tta(train::TestTimeAugmentation(cfg.eval, model.input_shape()));
  if (tm.uses_average() || evaluator.tta().views().size() > 1)
    out << "evaluating "
        << (tm.uses_average() ? "the moving average of the weights (/ema)" : "the weights")
        << (evaluator.tta().views().size() > 1
                ? ", test-time augmentation " + evaluator.tta().name()
                : std::string())
        << "\n";
  std::vector<float> logits;
  const auto e = evaluator.evaluate(cmd.dump_logits.empty() ? nullptr : &logits);
  char buf[160];
  std::snprintf(buf, sizeof buf, "test accuracy: %.2f%% (%lld samples), loss %.4f\n",
                100.0 * e.accuracy, static_cast<long long>(e.samples), e.loss);
  out << buf << "per-class accuracy:\n" << e.confusion.table(tm.class_names());
  if (rt.is_root()) {
    namespace fs = std::filesystem;
    const fs::path dir = cmd.output_dir.empty() ? fs::absolute(cmd.snapshot).parent_path()
                                                : fs::path(cmd.output_dir);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw SystemError("eval --output-dir '" + dir.string() + "': " + ec.message());
    const bool matrix = e.confusion.has_matrix();
    const fs::path csv = dir / (matrix ? "confusion.csv" : "per_class.csv");
    ckpt::write_file_atomically(csv, e.confusion.csv(tm.class_names()));
    if (matrix)
      out << "confusion matrix (rows: true class, columns: predicted): " << csv.string() << "\n";
    else
      out << "per-class accuracy (" << e.confusion.classes() << " classes: more than "
          << train::Confusion::kMatrixClasses << ", so no confusion matrix): " << csv.string()
          << "\n";
    if (!cmd.dump_logits.empty()) {
      ckpt::write_file_atomically(
          cmd.dump_logits,
          logits_csv(logits, test->samples(), static_cast<std::int64_t>(e.confusion.classes())));
      out << "logits: " << cmd.dump_logits << "\n";
    }
  }
  return 0;
}

}  // namespace ddp::app
