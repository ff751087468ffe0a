#pragma once
// The model: the layers built from the config, with all parameters in one flat buffer and all
// gradients in another (layers hold views), run by a graph executor (nn/graph_executor.hpp).
// Buckets, the optimizer and snapshots work on ranges and named views of these buffers; layers are
// numbered in file order, a topological order, so backward visits them in reverse.
//
// Memory. Parameters, gradients, buffers and activations live in the backend's memory (the GPU's
// for CUDA). Parameters and buffers have a host mirror (backend::Mirrored) that the named views
// point into: host code (initialisation, snapshots, broadcasts) reads it after pull_state() and
// hands what it wrote to the backend by push_state(). On the CPU the mirror is the buffer itself.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ddp/backend/backend.hpp"
#include "ddp/backend/mirrored.hpp"
#include "ddp/nn/graph_executor.hpp"
#include "ddp/nn/layer.hpp"

namespace ddp::nn {

class BatchStatsReducer;

struct NamedTensor {
  std::string name;    // "conv1.weight"
  Tensor tensor;       // view into the flat buffer
  std::size_t offset;  // in floats from the buffer start
  std::size_t layer;   // index of the owning layer
};

class Model {
 public:
  // input: one sample's shape (C,H,W). Throws ConfigError on any shape mismatch, naming the layer,
  // and when the last layer's output is not [num_classes].
  Model(const std::vector<LayerSpec>& specs, const Shape& input, std::int64_t num_classes,
        backend::Backend& be);
  ~Model();

  // Allocates activations for batches of up to max_batch samples.
  void reserve(std::int64_t max_batch);
  // PyTorch-default initialisation, a pure function of the seed (on the host, then pushed).
  void init_parameters(std::uint64_t seed);

  // The flat buffers in the backend's memory (what the optimizer and the all-reduce work on).
  std::span<float> params() { return params_.device_span(); }
  std::span<float> grads() { return {grads_.data(), static_cast<std::size_t>(grads_.numel())}; }
  std::span<float> buffers() { return buffers_.device_span(); }
  // Their host mirrors (the same memory on the CPU backend).
  std::span<float> host_params() const { return params_.host_span(); }
  std::span<float> host_buffers() const { return buffers_.host_span(); }
  // Backend -> mirrors (waits for the backend), and mirrors -> backend.
  void pull_state() const;
  void push_state();
  // Views into the host mirrors, by name.
  const std::vector<NamedTensor>& named_params() const { return named_params_; }
  const std::vector<NamedTensor>& named_buffers() const { return named_buffers_; }
  backend::Backend& backend() const { return be_; }
  std::int64_t num_parameters() const;  // trainable scalars, without alignment padding

  std::size_t num_layers() const { return layers_.size(); }
  const Layer& layer(std::size_t i) const { return *layers_[i]; }
  // True when layer i writes its output over its input's buffer (an element-wise layer above one
  // whose backward does not read its own output; see Layer::can_run_in_place).
  bool runs_in_place(std::size_t i) const;
  // The layers whose outputs layer i reads (kModelInput for the model input).
  const std::vector<int>& layer_inputs(std::size_t i) const;
  const GraphExecutor& graph() const { return *graph_; }
  // Calls `probe` around every layer's forward and backward (GraphExecutor::set_probe), for
  // per-layer profiles; an empty one ends the calls.
  void set_layer_probe(LayerProbe probe) { graph_->set_probe(std::move(probe)); }

  // [begin, end) of layer i's gradients in the flat buffer (empty when it has no parameters).
  std::pair<std::size_t, std::size_t> grad_range(std::size_t layer) const;

  // train.freeze: frozen[j] for named_params()[j]. A frozen parameter gets no gradient (its
  // entries of grads() are 0 after every backward, and a layer's backward runs only where a layer
  // at or below it trains), and what updates parameters leaves it alone (optim::param_infos reads
  // these flags). With bn_eval, a batch-norm layer whose parameters are all frozen normalises with
  // its running statistics in training too (eval mode; they then stay as they are), as PyTorch's
  // model.eval() on a frozen block; without, it trains as before (batch statistics, running
  // statistics updated). Throws ConfigError when such an eval-mode batch norm lies above a layer
  // that trains: the gradient through it would need its eval-mode backward, which no backend has.
  void freeze(const std::vector<bool>& frozen, bool bn_eval);
  bool is_frozen(std::size_t param) const { return !frozen_.empty() && frozen_[param]; }
  bool any_frozen() const { return !frozen_.empty(); }
  // The parts of layer i's gradient range that train (all of grad_range(i) without frozen
  // parameters), ascending and merged.
  const std::vector<std::pair<std::size_t, std::size_t>>& trained_grad_ranges(
      std::size_t layer) const {
    return trained_ranges_.at(layer);
  }
  // Whether layer i runs in eval mode in training (a frozen batch norm with bn_eval), and whether
  // its backward runs at all.
  bool eval_in_training(std::size_t layer) const {
    return !eval_in_training_.empty() && eval_in_training_[layer];
  }
  bool runs_backward(std::size_t layer) const {
    return runs_backward_.empty() || runs_backward_[layer];
  }
  // The ranges of the flat buffers (buffers()) that training changes: all but those of the layers
  // in eval mode, ascending and merged (sync::average_buffers averages only these).
  std::vector<std::pair<std::size_t, std::size_t>> trained_buffer_ranges() const;

  const Shape& input_shape() const { return input_; }
  std::int64_t num_classes() const { return num_classes_; }
  double forward_flops() const;  // per sample

  // Returns the logits [n, num_classes], valid until the next forward.
  const Tensor& forward(const Tensor& x, const StepContext& ctx);
  // Backward from dlogits through every layer of the last training forward. on_layer_done(i) runs
  // as soon as layer i's parameter gradients are final (reverse order) - the hook for overlapped
  // gradient all-reduce.
  void backward(const Tensor& dlogits, const std::function<void(std::size_t)>& on_layer_done = {});

  // Sync batch norm: training steps sum the batch statistics over ranks through `reducer` (not
  // owned; nullptr: each rank's own statistics).
  void set_batch_stats_reducer(BatchStatsReducer* reducer);
  // A training forward and backward over zero samples, for a rank whose micro-batch is empty
  // while others' are not: the reducer's collectives in forward and backward order, and
  // on_layer_done as backward calls it. Parameter gradients of layers that communicate become 0.
  void step_without_samples(const std::function<void(std::size_t)>& on_layer_done = {});

  // 64-bit digest of the parameter and buffer bytes: equal digests mean bitwise-equal models (to
  // 2^-64), which is how runs are compared for determinism and replicas for consistency. Pulls.
  std::uint64_t digest() const;

  // A human-readable table: layer, output shape, parameters.
  std::string summary() const;

 private:
  backend::Backend& be_;
  Shape input_;
  std::int64_t num_classes_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Shape> out_shapes_;  // per sample
  backend::Mirrored params_, buffers_;
  Tensor grads_;
  std::vector<NamedTensor> named_params_, named_buffers_;
  std::vector<ParamSpec> param_specs_, buffer_specs_;  // parallel to named_*
  std::vector<std::pair<std::size_t, std::size_t>> grad_ranges_;
  // train.freeze (empty: nothing frozen): per parameter, and per layer.
  std::vector<bool> frozen_, eval_in_training_, runs_backward_;
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> trained_ranges_;
  // (offset, count) of frozen parameters whose layer's backward runs: zeroed after backward.
  std::vector<std::pair<std::size_t, std::size_t>> frozen_written_;
  std::unique_ptr<GraphExecutor> graph_;
};

}  // namespace ddp::nn
