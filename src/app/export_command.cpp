#include "ddp/app/export_command.hpp"

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/data/normalization.hpp"
#include "ddp/data/transform_description.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/onnx_export.hpp"
#include "ddp/train/trained_model.hpp"

namespace ddp::app {
namespace {

using json = nlohmann::json;

// What a user of the .onnx file needs besides the graph: which class each logit is, and how an
// image becomes the input tensor (the evaluation transform and the normalisation training used).
std::vector<std::pair<std::string, std::string>> onnx_metadata(const Config& cfg,
                                                               train::TrainedModel& tm) {
  const Shape in = tm.model().input_shape();
  const std::int64_t c = in[0];
  // Class names are bytes from folder names or CSV labels: invalid UTF-8 is replaced, not fatal.
  const auto text = [](const json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
  };
  std::vector<std::pair<std::string, std::string>> m = {
      {"class_names", text(json(tm.class_names()))},
      {"input_shape", text(json::array({c, in[1], in[2]}))},
      {"transform", data::describe_eval_transform(cfg.data)},
  };
  json mean = json::array(), sd = json::array();
  std::string normalization;
  try {
    const auto norm = data::training_normalization(cfg.data, c, cfg.train.seed);
    for (std::int64_t k = 0; k < c; ++k) {
      const auto at = [&](const std::vector<float>& v) {
        return static_cast<double>(v[v.size() == 1 ? 0 : static_cast<std::size_t>(k)]);
      };
      mean.push_back(cfg.data.normalize == "none" ? 0.0 : at(norm.mean));
      sd.push_back(cfg.data.normalize == "none" ? 1.0 : at(norm.std));
    }
    normalization = data::describe_normalization(cfg.data, norm);
  } catch (const Error& e) {
    // data.normalize = dataset needs the training set, which may be gone: the rest still holds.
    std::cerr << "warning: export: the normalisation is not in the metadata: " << e.what() << "\n";
    normalization = std::string("unknown (") + e.what() + ")";
  }
  if (!mean.empty()) {
    m.emplace_back("mean", text(mean));
    m.emplace_back("std", text(sd));
  }
  m.emplace_back("normalization", normalization);
  m.emplace_back("preprocessing",
                 "decode to " + std::string(c == 1 ? "greyscale" : "RGB") + ", apply transform (" +
                     data::describe_eval_transform(cfg.data) +
                     "), then per channel c: input = "
                     "(pixel / 255 - mean[c]) / std[c], as float32 [N, " +
                     std::to_string(c) + ", " + std::to_string(in[1]) + ", " +
                     std::to_string(in[2]) + "]; argmax of 'logits' indexes class_names");
  return m;
}

}  // namespace

CLI::App* add_export_command(CLI::App& app, ExportCommand& cmd) {
  auto* e = app.add_subcommand(
      "export",
      "write a snapshot's model as ONNX (opset " + std::to_string(nn::kOnnxOpset) +
          "; batch norm in inference form, dropout as identity; input 'input' [N,C,H,W], output "
          "'logits' [N,classes], before softmax)");
  e->add_option("--snapshot", cmd.snapshot, "snapshot file (.h5)")
      ->required()
      ->check(CLI::ExistingFile);
  e->add_option("--format", cmd.format, "output format")
      ->check(CLI::IsMember({"onnx"}))
      ->capture_default_str();
  e->add_option("--output", cmd.output, "the file to write (e.g. model.onnx)")->required();
  return e;
}

int run_export(const ExportCommand& cmd, const Config& cfg, int world_size, std::ostream& out) {
  if (world_size > 1)
    throw ConfigError("ddp_train export runs as one process; start it without mpirun/srun");
  const auto snap = ckpt::read_snapshot(cmd.snapshot);
  train::TrainedModel tm(cfg, snap);
  const std::string graph =
      cfg.model.preset.empty() ? std::string("ddp_train_model") : cfg.model.preset;
  const std::string bytes = nn::export_onnx(tm.model(), graph, onnx_metadata(cfg, tm));
  ckpt::write_file_atomically(cmd.output, bytes);
  const auto& in = tm.model().input_shape();
  out << "exported " << cmd.snapshot << " to " << cmd.output << " (ONNX opset " << nn::kOnnxOpset
      << ", " << bytes.size() << " bytes; input 'input' [N, " << in[0] << ", " << in[1] << ", "
      << in[2] << "], output 'logits' [N, " << tm.model().num_classes()
      << "]; metadata: class_names, input_shape, transform, mean, std, preprocessing)\n";
  return 0;
}

}  // namespace ddp::app
