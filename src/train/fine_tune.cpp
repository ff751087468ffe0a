#include "ddp/train/fine_tune.hpp"

#include <algorithm>

#include "ddp/ckpt/init_weights.hpp"
#include "ddp/ckpt/resume_broadcast.hpp"
#include "ddp/error.hpp"
#include "ddp/optim/param_groups.hpp"
#include "ddp/optim/param_pattern.hpp"
#include "ddp/sync/replica.hpp"

namespace ddp::train {

void freeze_parameters(nn::Model& model, const Options& train) {
  if (train.freeze.empty()) return;
  const std::vector<bool> frozen =
      optim::select(train.freeze, optim::param_infos(model), "train.freeze");
  if (std::all_of(frozen.begin(), frozen.end(), [](bool f) { return f; }))
    throw ConfigError("train.freeze freezes every parameter of the model: nothing would train");
  // param_infos lists the parameters in buffer order, the model in its own: map by offset.
  std::vector<bool> by_model(model.named_params().size(), false);
  const auto infos = optim::param_infos(model);
  for (std::size_t j = 0; j < by_model.size(); ++j)
    for (std::size_t i = 0; i < infos.size(); ++i)
      if (infos[i].begin == model.named_params()[j].offset) by_model[j] = frozen[i];
  model.freeze(by_model, train.frozen_bn == "eval");
}

std::unique_ptr<optim::Optimizer> make_optimizer(const optim::Options& cfg, backend::Backend& be,
                                                 const nn::Model& model) {
  return optim::Optimizer::create(cfg, be, optim::plan_update_runs(cfg, optim::param_infos(model)));
}

std::string freeze_line(const nn::Model& model, const std::vector<sync::Bucket>& buckets) {
  if (!model.any_frozen()) return "";
  std::size_t tensors = 0;
  std::int64_t frozen_values = 0, trained_values = 0;
  const auto& params = model.named_params();
  for (std::size_t j = 0; j < params.size(); ++j) {
    if (model.is_frozen(j)) {
      ++tensors;
      frozen_values += params[j].tensor.numel();
    } else {
      trained_values += params[j].tensor.numel();
    }
  }
  std::size_t eval_bn = 0, travelling = 0;
  for (std::size_t i = 0; i < model.num_layers(); ++i) eval_bn += model.eval_in_training(i);
  for (const auto& b : buckets) travelling += b.end - b.begin;
  return "freeze: " + std::to_string(tensors) + " of " + std::to_string(params.size()) +
         " parameter tensors frozen (" + std::to_string(frozen_values) + " values; " +
         std::to_string(eval_bn) + " batch norm" + (eval_bn == 1 ? "" : "s") + " in eval mode); " +
         std::to_string(trained_values) +
         " values train; all-reduced per step: " + std::to_string(travelling) + " floats in " +
         std::to_string(buckets.size()) + " bucket" + (buckets.size() == 1 ? "" : "s") + " (of " +
         std::to_string(model.host_params().size()) + ")\n";
}

std::string load_init_weights(nn::Model& model, const std::string& file, comm::Communicator& comm) {
  std::string line;
  ckpt::broadcast_resume_state(
      comm,
      [&]() -> std::optional<ckpt::SnapshotState> {
        const ckpt::Snapshot s = ckpt::read_snapshot(file);
        line = ckpt::init_from(s, model).line() + "\n";
        return std::nullopt;  // the weights travel below; nothing else of the file does
      },
      "load train.init = '" + file + "'");
  // Rank 0 loaded into its host mirrors; every rank takes them.
  sync::broadcast_state(comm, model);
  return line;
}

std::string apply_init(nn::Model& model, const std::string& file, comm::Communicator& comm,
                       std::ostream& out) {
  if (file.empty()) return "";
  out << load_init_weights(model, file, comm);
  out.flush();
  return file;
}

}  // namespace ddp::train
