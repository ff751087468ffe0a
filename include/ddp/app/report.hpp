#pragma once
// `ddp_train report RUN_DIR`: one self-contained report.html (inline SVG and CSS, images as data
// URIs, no script and nothing fetched) with the curves of metrics.jsonl, images/s per rank, the
// confusion matrix and a grid of test images with predicted and true labels.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ddp::app {

// One epoch row of metrics.jsonl (the newest row of an epoch a resumed run trained again).
struct ReportEpoch {
  int epoch = 0;
  std::optional<double> train_loss, train_acc, test_loss, test_acc, lr, images_per_s, epoch_s;
  std::vector<double> rank_images_per_s;  // by rank; empty when the row has no ranks array
};

// A test image with the model's answer: PNG bytes, ready to embed.
struct ReportSample {
  std::vector<std::uint8_t> png;
  int truth = 0, predicted = 0;
  double probability = 0.0;  // of the predicted class
};

struct ReportData {
  std::string title;    // the run directory's name
  std::string run_id;   // run.json's ("" when unknown)
  std::string summary;  // one line: run id, status, epochs, world size
  std::vector<ReportEpoch> epochs;
  std::vector<std::string> classes;
  std::vector<std::vector<std::int64_t>> confusion;  // [true][predicted]; empty when unknown
  std::string confusion_source;                      // what the matrix counts
  std::vector<ReportSample> samples;
  std::string samples_source;  // which snapshot and images
};

// Reads metrics.jsonl (required) and run.json (optional) of a run directory. The confusion matrix
// and class names come from the newest epoch row that has them. Errors name the file and line.
ReportData read_run_metrics(const std::filesystem::path& run_dir);

// The whole page.
std::string render_report_html(const ReportData& data);

}  // namespace ddp::app
