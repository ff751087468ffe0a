#pragma once
// One layer interface for every layer kind (Caffe style): shape inference at build time, the
// parameters it owns (as views into the model's flat buffers), forward and backward on a backend.
// A layer takes one or more inputs (the outputs of layers above it, or the model input; see
// nn/graph.hpp); most take one and derive from UnaryLayer.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ddp/nn/layer_spec.hpp"
#include "ddp/shape.hpp"
#include "ddp/tensor.hpp"

namespace ddp::nn {

enum class Mode { train, eval };

// What a forward pass needs besides its input.
struct StepContext {
  Mode mode = Mode::train;
  std::uint64_t seed = 0;                    // per-step seed for dropout masks
  const std::int64_t* sample_ids = nullptr;  // dataset index of each sample of the batch
};

// How a parameter or buffer starts.
enum class Init {
  uniform_fan_in,  // U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's default for conv/linear weights
                   // (kaiming_uniform with a = sqrt(5)) and biases
  ones,
  zeros,
  kaiming_normal_fan_out,  // N(0, 2/fan_out): torchvision's ResNet/MobileNetV2 convolutions
  normal_001,              // N(0, 0.01^2): MobileNetV2's classifier
  // Convolution weights only (nn/init_dirac.hpp): torch.nn.init.dirac_ (identity filters);
  // uniform_fan_in then dirac_ of the first in/groups filters (airbench's implicit residual);
  // uniform_fan_in until the trainer sets the filters from the data (train/patch_whitening.hpp).
  dirac,
  partial_dirac,
  patch_whitening,
};

struct ParamSpec {
  std::string name;  // suffix: "weight", "bias", "running_mean", ...
  Shape shape;
  Init init = Init::zeros;
  std::int64_t fan_in = 0;
  std::int64_t fan_out = 0;  // kaiming_normal_fan_out: out_channels x kernel area (as PyTorch)
  std::int64_t groups = 1;   // a convolution's channel groups (dirac)
};

// How a layer takes the backend's blocked activation layout (backend::ConvGeom; nn/layout_plan.hpp
// decides which activations use it): plain = its inputs and output are plain NCHW; elementwise =
// any layout, its output in that of its inputs, which all share one (ReLU, add); same = one layout
// for its input and output, which set_layouts tells it (batch norm, pooling); independent = its
// input's and its output's layouts may differ (convolution, global average pooling).
enum class LayoutUse { plain, elementwise, same, independent };

class Layer {
 public:
  explicit Layer(LayerSpec spec) : spec_(std::move(spec)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return spec_.name; }
  const LayerSpec& spec() const { return spec_; }

  // How many inputs the layer takes: [min_inputs, max_inputs].
  virtual std::size_t min_inputs() const { return 1; }
  virtual std::size_t max_inputs() const { return 1; }

  // Output shape of one sample given each input's shape of one sample. Builds the backend ops.
  // Throws ConfigError naming the layer when the inputs do not fit.
  virtual Shape infer(std::span<const Shape> in) = 0;

  // Trainable parameters and non-trainable state (batch-norm running statistics).
  virtual std::vector<ParamSpec> param_specs() const { return {}; }
  virtual std::vector<ParamSpec> buffer_specs() const { return {}; }
  // Views into the flat buffers, in the order of the specs above.
  virtual void bind(const std::vector<Tensor>& /*params*/, const std::vector<Tensor>& /*grads*/,
                    const std::vector<Tensor>& /*buffers*/) {}

  // xs[i]: [n, in_i...], y: [n, out...]. Parameter gradients are overwritten, not accumulated.
  virtual void forward(std::span<const Tensor> xs, const Tensor& y, const StepContext& ctx) = 0;
  // dxs[i] receives the gradient w.r.t. input i (overwritten; the executor sums the gradients of
  // an output read by several layers); null when that input needs no gradient (the model input).
  virtual void backward(std::span<const Tensor> xs, const Tensor& y, const Tensor& dy,
                        std::span<const Tensor* const> dxs) = 0;

  // True when the output is the input reinterpreted (flatten): no buffer, no work.
  virtual bool is_view() const { return false; }
  // True for element-wise layers whose forward may write over an input and whose backward may
  // write that input's gradient over the output gradient (ReLU; add, over one of its inputs). The
  // executor then lets them share the buffers of the layer below, when that layer's backward does
  // not read its own output and nothing else reads it: less memory and memory traffic, the same
  // arithmetic. Such a layer finds which input it shares by comparing data pointers.
  virtual bool can_run_in_place() const { return false; }
  // False when backward reads only the layer's input, parameters and saved state, never its output
  // (convolution, linear, batch norm): an in-place layer above may then overwrite the output.
  virtual bool backward_reads_output() const { return true; }
  virtual LayoutUse layout_use() const { return LayoutUse::plain; }
  // After infer: the layouts (block sizes, 0 = plain) of the input and the output, for layers whose
  // layout_use is same or independent (they rebuild their backend ops). Called by plan_layouts
  // when the backend has a blocked layout.
  virtual void set_layouts(int /*in_block*/, int /*out_block*/) {}
  // Multiply-adds x 2 of one sample's forward pass (for GFLOP/s reports).
  virtual double forward_flops() const { return 0.0; }

 private:
  LayerSpec spec_;
};

// A layer with one input: infer/forward/backward on that input alone.
class UnaryLayer : public Layer {
 public:
  using Layer::backward;
  using Layer::forward;
  using Layer::infer;
  using Layer::Layer;

  virtual Shape infer(const Shape& in) = 0;
  virtual void forward(const Tensor& x, const Tensor& y, const StepContext& ctx) = 0;
  // dx is null when the input gradient is not needed (first layer).
  virtual void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) = 0;

  Shape infer(std::span<const Shape> in) final { return infer(in[0]); }
  void forward(std::span<const Tensor> xs, const Tensor& y, const StepContext& ctx) final {
    forward(xs[0], y, ctx);
  }
  void backward(std::span<const Tensor> xs, const Tensor& y, const Tensor& dy,
                std::span<const Tensor* const> dxs) final {
    backward(xs[0], y, dy, dxs[0]);
  }
};

}  // namespace ddp::nn
