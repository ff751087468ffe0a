#pragma once
// Runs a layer graph (nn/graph.hpp): forward front to back over named activations, backward back
// to front, summing the gradients of an output read by several layers. Activations are kept for
// backward; output gradients live only from the first layer that writes one to the backward of
// the layer that produced it, so gradient buffers are reused by liveness.
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "ddp/backend/backend.hpp"
#include "ddp/nn/graph.hpp"

namespace ddp::nn {

// Which pass a LayerProbe call is about.
enum class LayerPass { forward, backward };
// Called right before (begin = true) and right after (begin = false) each layer's forward and
// backward that does work (views do none), the sums of fan-out gradients counted with the
// backward that made them: where a profiler records its timing events (gpu_bench --profile).
using LayerProbe = std::function<void(LayerPass pass, std::size_t layer, bool begin)>;

class GraphExecutor {
 public:
  GraphExecutor(const std::vector<std::unique_ptr<Layer>>& layers, GraphPlan plan,
                backend::Backend& be);

  const GraphPlan& plan() const { return plan_; }
  // Allocates activations and gradients for batches of up to max_batch samples.
  void reserve(std::int64_t max_batch);
  // The last layer's output [n, ...], valid until the next forward.
  const Tensor& forward(const Tensor& x, const StepContext& ctx);
  // From the gradient of the last layer's output, through every layer of the last forward.
  // on_layer_done(i) runs right after layer i's backward, in reverse order.
  void backward(const Tensor& dy_last, const std::function<void(std::size_t)>& on_layer_done);
  // Frozen parameters (Model::freeze): the layers whose forward runs in eval mode in a training
  // step (frozen batch norm), and the layers whose backward runs (the others have nothing at or
  // below them that trains: no gradient is computed there, nor handed down to them). Empty: none,
  // and every layer's.
  void set_frozen(std::vector<bool> eval_in_training, std::vector<bool> runs_backward);
  // Floats held for activations and gradients (for memory reports and tests).
  std::int64_t activation_floats() const;
  std::int64_t gradient_floats() const;
  // Empty (the default): no calls.
  void set_probe(LayerProbe probe) { probe_ = std::move(probe); }

 private:
  // Where layer i's backward writes the gradient of its input k.
  struct GradTarget {
    int root = kModelInput;  // the storage whose gradient receives it; kModelInput: none
    int scratch = -1;        // >= 0: written to scratch buffer `scratch`, then added to root's
  };
  Tensor output_view(int storage, const Shape& shape, std::int64_t n) const;
  Tensor grad_view(int storage, const Shape& shape, std::int64_t n) const;
  void plan_gradients();

  const std::vector<std::unique_ptr<Layer>>& layers_;
  GraphPlan plan_;
  backend::Backend& be_;
  std::int64_t max_batch_ = 0;
  std::vector<Tensor> acts_;                      // per owning layer: its output buffer
  std::vector<Tensor> grad_slots_;                // shared gradient buffers
  std::vector<int> grad_slot_;                    // per owning layer: its gradient's slot
  std::vector<std::vector<GradTarget>> targets_;  // per layer, per input
  std::vector<Tensor> scratch_;
  std::vector<std::int64_t> slot_floats_, scratch_floats_;  // per sample, sized by the plan
  // The last forward.
  Tensor input_;
  std::vector<Tensor> outs_;
  std::int64_t last_n_ = 0;
  Mode last_mode_ = Mode::eval;
  std::vector<bool> eval_in_training_, runs_backward_;
  LayerProbe probe_;
};

}  // namespace ddp::nn
