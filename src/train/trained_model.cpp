#include "ddp/train/trained_model.hpp"

#include <algorithm>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/data/class_names.hpp"
#include "ddp/data/dataset_geometry.hpp"
#include "ddp/error.hpp"

namespace ddp::train {

TrainedModel::TrainedModel(const Setup& cfg, const ckpt::Snapshot& snap,
                           std::unique_ptr<backend::Backend> be)
    : be_(be ? std::move(be) : backend::make_cpu_backend()) {
  const auto g = data::dataset_geometry(cfg.data);
  model_ = std::make_unique<nn::Model>(cfg.model.layers, Shape{g.channels, g.height, g.width},
                                       g.classes, *be_);
  class_names_ = data::class_names(cfg.data, g.classes);
  // eval.weights: the moving average of the weights (/ema) when asked for, or by default when the
  // snapshot holds one.
  const auto& w = cfg.eval.weights;
  if (w == "ema" && snap.ema.empty())
    throw ConfigError(snap.source.string() +
                      ": eval.weights = \"ema\", but the snapshot holds no moving average of the "
                      "weights (its run had train.ema = 0, or the average had not started); use "
                      "eval.weights = \"live\"");
  uses_average_ = w != "live" && !snap.ema.empty();
  const auto& tensors = uses_average_ ? snap.ema : snap.model;
  // Every tensor of the model must be in the snapshot with its shape (all checked before any is
  // copied, so that the message lists them all).
  std::string wrong;
  for (const auto* list : {&model_->named_params(), &model_->named_buffers()})
    for (const auto& t : *list) {
      const auto it = tensors.find(t.name);
      if (it == tensors.end())
        wrong += "\n  " + t.name + ": missing from the snapshot";
      else if (static_cast<std::int64_t>(it->second.size()) != t.tensor.numel())
        wrong += "\n  " + t.name + ": " + std::to_string(it->second.size()) +
                 " values in the snapshot, the configured model has " +
                 std::to_string(t.tensor.numel());
    }
  if (!wrong.empty())
    throw ConfigError(snap.source.string() +
                      ": the snapshot does not fit the configured model (model.* keys or the "
                      "dataset differ from training):" +
                      wrong);
  for (const auto* list : {&model_->named_params(), &model_->named_buffers()})
    for (const auto& t : *list) {
      const auto& v = tensors.at(t.name);
      std::copy(v.begin(), v.end(), t.tensor.data());
    }
  model_->push_state();
}

TrainedModel::~TrainedModel() = default;

std::vector<float> TrainedModel::logits(const float* images, std::int64_t n) {
  if (be_->device() != Device::cpu) throw Error("internal: TrainedModel::logits on a GPU");
  if (n > reserved_) {
    model_->reserve(n);
    reserved_ = n;
  }
  const Tensor x =
      Tensor::view(const_cast<float*>(images), model_->input_shape().with_batch(n), Device::cpu);
  const Tensor& y = model_->forward(x, nn::StepContext{nn::Mode::eval, 0, nullptr});
  return std::vector<float>(y.data(), y.data() + y.numel());
}

}  // namespace ddp::train
