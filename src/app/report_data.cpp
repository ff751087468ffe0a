// What `ddp_train report` reads from a run directory: metrics.jsonl and run.json.
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ddp/app/report.hpp"
#include "ddp/error.hpp"

namespace ddp::app {
namespace {

using json = nlohmann::json;

std::optional<double> number(const json& row, const char* key) {
  const auto it = row.find(key);
  if (it == row.end() || !it->is_number()) return std::nullopt;  // absent, or null (not finite)
  return it->get<double>();
}

// Per-class results as the evaluation writes them: "per_class": [{"class": NAME, ...}, ...] and
// "confusion": [[...], ...] (rows: true class, columns: predicted).
bool read_confusion(const json& row, const std::string& where, ReportData& data) {
  const auto m = row.find("confusion");
  if (m == row.end() || !m->is_array() || m->empty()) return false;
  std::vector<std::vector<std::int64_t>> matrix;
  for (const auto& r : *m) {
    if (!r.is_array() || r.size() != m->size())
      throw DataError(where + ": \"confusion\" is not a square matrix");
    matrix.push_back(r.get<std::vector<std::int64_t>>());
  }
  std::vector<std::string> classes;
  if (const auto pc = row.find("per_class"); pc != row.end() && pc->is_array())
    for (const auto& c : *pc) classes.push_back(c.value("class", std::to_string(classes.size())));
  if (classes.size() != matrix.size()) {
    classes.clear();
    for (std::size_t i = 0; i < matrix.size(); ++i) classes.push_back(std::to_string(i));
  }
  data.confusion = std::move(matrix);
  data.classes = std::move(classes);
  return true;
}

}  // namespace

ReportData read_run_metrics(const std::filesystem::path& run_dir) {
  ReportData data;
  data.title = std::filesystem::absolute(run_dir).lexically_normal().filename().string();
  if (data.title.empty())
    data.title =
        std::filesystem::absolute(run_dir).lexically_normal().parent_path().filename().string();
  const auto metrics = run_dir / "metrics.jsonl";
  if (!std::filesystem::is_directory(run_dir))
    throw ConfigError("report: '" + run_dir.string() + "' is not a directory (give a run.dir)");
  std::error_code ec;
  const auto status = std::filesystem::status(metrics, ec);
  if (!std::filesystem::exists(status))
    throw DataError("report: no " + metrics.string() +
                    " (is this a run directory? training writes it there)");
  // A directory (or a FIFO) in its place would read as an empty file: "0 epoch(s)", exit 0.
  if (!std::filesystem::is_regular_file(status))
    throw DataError("report: " + metrics.string() + " is not a regular file (" +
                    (std::filesystem::is_directory(status) ? "a directory" : "a special file") +
                    "); training writes the run's metrics there");
  std::ifstream in(metrics);
  if (!in) throw DataError("report: cannot read " + metrics.string());
  std::map<int, ReportEpoch> by_epoch;  // a resumed run may train an epoch again: the newest wins
  std::string line, confusion_where;
  json last_with_confusion;
  std::int64_t world_size = 0;
  for (int number_of_line = 1; std::getline(in, line); ++number_of_line) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = metrics.string() + ":" + std::to_string(number_of_line);
    json row;
    try {
      row = json::parse(line);
    } catch (const json::exception& e) {
      // The last line of a run killed while writing may be cut short: skip it, say nothing worse.
      if (in.peek() == EOF) break;
      throw DataError(where + ": not a JSON object (" + e.what() + ")");
    }
    if (!row.is_object()) throw DataError(where + ": not a JSON object");
    if (row.value("summary", false)) {
      world_size = row.value("world_size", world_size);
      continue;
    }
    if (!row.contains("epoch") || !row["epoch"].is_number_integer()) continue;
    ReportEpoch e;
    e.epoch = row["epoch"].get<int>();
    e.train_loss = number(row, "train_loss");
    e.train_acc = number(row, "train_acc");
    e.test_loss = number(row, "test_loss");
    e.test_acc = number(row, "test_acc");
    e.lr = number(row, "lr");
    e.images_per_s = number(row, "images_per_s");
    e.epoch_s = number(row, "epoch_s");
    if (const auto r = row.find("ranks"); r != row.end() && r->is_array())
      for (const auto& rank : *r)
        e.rank_images_per_s.push_back(number(rank, "images_per_s").value_or(0.0));
    by_epoch[e.epoch] = std::move(e);
    if (row.contains("confusion")) {
      last_with_confusion = row;
      confusion_where = where;
    }
  }
  if (in.bad()) throw DataError("report: reading " + metrics.string() + " failed");
  for (auto& [epoch, e] : by_epoch) data.epochs.push_back(std::move(e));
  if (!last_with_confusion.is_null() && read_confusion(last_with_confusion, confusion_where, data))
    data.confusion_source =
        "test set, epoch " + std::to_string(last_with_confusion["epoch"].get<int>());

  std::ostringstream summary;
  std::ifstream run_json(run_dir / "run.json");
  json run;
  if (run_json) try {
      run = json::parse(run_json);
    } catch (const json::exception&) {
      run = json();  // run.json is a convenience here: metrics.jsonl is the record
    }
  if (run.is_object()) {
    if (const auto id = run.find("run_id"); id != run.end() && id->is_string())
      data.run_id = id->get<std::string>();
    summary << "run " << run.value("run_id", std::string("?")) << ", "
            << run.value("status", std::string("?")) << ", ";
    if (world_size == 0 && run.contains("segments") && run["segments"].is_array() &&
        !run["segments"].empty())
      world_size = run["segments"].back().value("world_size", std::int64_t{0});
  }
  summary << data.epochs.size() << " epoch(s)";
  if (world_size > 0) summary << ", " << world_size << " rank(s)";
  data.summary = summary.str();
  return data;
}

}  // namespace ddp::app
