#include "ddp/app/report_command.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "ddp/app/report.hpp"
#include "ddp/app/snapshot_config.hpp"
#include "ddp/ckpt/snapshot.hpp"
#include "ddp/data/image_encode.hpp"
#include "ddp/data/normalization.hpp"
#include "ddp/data/readers.hpp"
#include "ddp/data/subset.hpp"
#include "ddp/data/transform.hpp"
#include "ddp/error.hpp"
#include "ddp/train/trained_model.hpp"

namespace ddp::app {
namespace {

namespace fs = std::filesystem;

// Test images with the snapshot's answers: a seeded sample of the test set (the same images on
// every report of the run), so that the grid shows every class rather than the file's first one.
void predict_samples(const ReportCommand& cmd, const fs::path& config_file,
                     const Overrides& overrides, ReportData& data) {
  fs::path snapshot = cmd.snapshot;
  if (snapshot.empty()) {
    // The run's own newest (run.json names it): another run's file in the directory is not it.
    const auto newest = ckpt::find_latest(
        cmd.run_dir, [](const std::string& w) { std::cerr << "warning: " << w << "\n"; },
        data.run_id);
    if (!newest)
      throw DataError("no complete snapshot " +
                      (data.run_id.empty() ? std::string() : "of run " + data.run_id + " ") +
                      "in '" + cmd.run_dir + "'");
    snapshot = *newest;
  }
  // A snapshot of another run beside this run's curves would put its answers under this run's
  // name: said on stderr and on the page.
  std::string other_run;
  if (const auto meta = ckpt::read_meta(snapshot);
      !data.run_id.empty() && meta.run_id != data.run_id) {
    other_run = snapshot.string() + " belongs to " +
                (meta.run_id.empty() ? std::string("no named run") : "run " + meta.run_id) +
                ", not to run " + data.run_id + " whose curves this page shows";
    std::cerr << "warning: report: " << other_run << "\n";
  }
  const Config cfg = config_for_snapshot(snapshot, config_file, overrides);
  const auto snap = ckpt::read_snapshot(snapshot);
  train::TrainedModel tm(cfg, snap);
  if (data.classes.empty()) data.classes = tm.class_names();

  const auto test = data::read_dataset(cfg.data, data::Split::test);
  const auto picked = data::random_subset(test.size(), std::min(cmd.images, test.size()),
                                          cfg.train.seed, data::Split::test);
  const auto norm = data::training_normalization(cfg.data, test.channels(), cfg.train.seed);
  const auto n = static_cast<std::int64_t>(picked.size());
  const Shape input = tm.model().input_shape();
  const std::int64_t c = input[0], h = input[1], w = input[2];
  std::vector<float> batch(static_cast<std::size_t>(n * c * h * w));
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  data::fill_batch(test, picked, norm, data::eval_augmentation(cfg.data), cfg.train.seed, 0,
                   batch.data(), labels.data());
  const auto logits = tm.logits(batch.data(), n);
  const auto classes = static_cast<std::int64_t>(tm.class_names().size());
  for (std::int64_t i = 0; i < n; ++i) {
    const float* row = logits.data() + i * classes;
    // The evaluation's argmax: the first of equal largest logits.
    const auto best = std::max_element(row, row + classes) - row;
    double sum = 0.0;
    for (std::int64_t j = 0; j < classes; ++j) sum += std::exp(double{row[j]} - row[best]);
    // The picture the model saw (after the evaluation transform), normalisation undone.
    data::Image img{c, h, w, std::vector<std::uint8_t>(static_cast<std::size_t>(c * h * w))};
    const float* x = batch.data() + i * c * h * w;
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t p = ch * h * w; p < (ch + 1) * h * w; ++p) {
        const auto k = static_cast<std::size_t>(ch);  // one value may stand for every channel
        const float v = (x[p] * norm.std[norm.std.size() == 1 ? 0 : k] +
                         norm.mean[norm.mean.size() == 1 ? 0 : k]) *
                        255.0f;
        img.pixels[static_cast<std::size_t>(p)] =
            static_cast<std::uint8_t>(std::lround(std::clamp(v, 0.0f, 255.0f)));
      }
    data.samples.push_back({data::encode_png(img), labels[static_cast<std::size_t>(i)],
                            static_cast<int>(best), 1.0 / sum});
  }
  data.samples_source = std::to_string(n) + " test images picked by train.seed, predicted by " +
                        snapshot.filename().string() +
                        (other_run.empty() ? std::string() : " (warning: " + other_run + ")");
}

}  // namespace

CLI::App* add_report_command(CLI::App& app, ReportCommand& cmd) {
  auto* r = app.add_subcommand(
      "report",
      "write RUN_DIR/report.html: loss, accuracy, learning-rate and images/s curves, the confusion "
      "matrix and test images with predicted and true labels (one self-contained page)");
  r->add_option("run_dir", cmd.run_dir, "a run directory (run.dir)")->required();
  r->add_option("--output", cmd.output, "the page (default: RUN_DIR/report.html)");
  r->add_option("--snapshot", cmd.snapshot,
                "snapshot whose predictions fill the image grid (default: the run's newest)")
      ->check(CLI::ExistingFile);
  r->add_option("--images", cmd.images, "test images in the grid (0: none)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{10000}))
      ->capture_default_str();
  return r;
}

int run_report(const ReportCommand& cmd, const fs::path& config_file, const Overrides& overrides,
               int world_size, std::ostream& out) {
  if (world_size > 1)
    throw ConfigError("ddp_train report runs as one process; start it without mpirun/srun");
  ReportData data = read_run_metrics(cmd.run_dir);
  if (cmd.images > 0) {
    // The curves stand on their own: a run whose data or snapshot is gone still gets its page.
    try {
      predict_samples(cmd, config_file, overrides, data);
    } catch (const Error& e) {
      std::cerr << "warning: report: no image grid: " << e.what() << "\n";
      data.samples.clear();
      data.samples_source = e.what();
    }
  }
  const fs::path page =
      cmd.output.empty() ? fs::path(cmd.run_dir) / "report.html" : fs::path(cmd.output);
  ckpt::write_file_atomically(page, render_report_html(data));
  out << "report: " << page.string() << " (" << data.epochs.size() << " epoch(s), "
      << (data.confusion.empty() ? "no" : "a") << " confusion matrix, " << data.samples.size()
      << " test image(s))\n";
  return 0;
}

}  // namespace ddp::app
