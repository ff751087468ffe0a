#include "ddp/app/export_command.hpp"

#include <filesystem>

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/onnx_export.hpp"
#include "ddp/train/trained_model.hpp"

namespace ddp::app {

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
  const std::string bytes = nn::export_onnx(tm.model(), graph);
  ckpt::write_file_atomically(cmd.output, bytes);
  const auto& in = tm.model().input_shape();
  out << "exported " << cmd.snapshot << " to " << cmd.output << " (ONNX opset " << nn::kOnnxOpset
      << ", " << bytes.size() << " bytes; input 'input' [N, " << in[0] << ", " << in[1] << ", "
      << in[2] << "], output 'logits' [N, " << tm.model().num_classes() << "])\n";
  return 0;
}

}  // namespace ddp::app
