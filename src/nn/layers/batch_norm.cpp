// Batch normalisation over channels (of an image) or features: weight (gamma), bias (beta), and the
// running mean/variance as non-trainable buffers. With a BatchStatsReducer (model.sync_batchnorm)
// a training step normalises with the statistics of every rank's samples, as PyTorch's
// SyncBatchNorm: the per-channel sums of forward and the two of backward are summed over ranks.
#include "ddp/nn/activation_fusion.hpp"
#include "ddp/nn/batch_stats_reducer.hpp"
#include "ddp/nn/onnx_layer.hpp"
#include "layer_util.hpp"
#include "shared_keys.hpp"

namespace ddp::nn {
namespace {

class BatchNorm final : public UnaryLayer, public UsesBatchStatsReducer, public FusesActivation {
 public:
  BatchNorm(const LayerSpec& spec, backend::Backend& be) : UnaryLayer(spec), be_(be) {}

  Shape infer(const Shape& in) override {
    // Batch norm starts at weight 1 (or 0: zero_init_residual); a random weight is a mistake.
    if (!spec().init.empty() && spec().init != "zeros")
      throw ConfigError("model: " + describe(*this) + ": init = \"" + spec().init +
                        "\" does not apply to batchnorm (its weight starts at 1; \"zeros\" "
                        "starts it at 0, as torchvision's zero_init_residual)");
    if (in.rank() == 3) {
      g_.c = in[0];
      g_.h = in[1];
      g_.w = in[2];
    } else if (in.rank() == 1) {
      g_.c = in[0];
    } else {
      shape_error(*this, in, "expects an image or a feature vector");
    }
    g_.eps = spec().eps;
    g_.momentum = spec().momentum;
    op_ = be_.batch_norm(g_);
    return in;
  }
  std::vector<ParamSpec> param_specs() const override {
    return {{"weight", Shape{g_.c}, init_weight(spec(), Init::ones), 0},
            {"bias", Shape{g_.c}, Init::zeros, 0}};
  }
  std::vector<ParamSpec> buffer_specs() const override {
    return {{"running_mean", Shape{g_.c}, Init::zeros, 0},
            {"running_var", Shape{g_.c}, Init::ones, 0}};
  }
  void bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
            const std::vector<Tensor>& buffers) override {
    gamma_ = params.at(0);
    beta_ = params.at(1);
    dgamma_ = grads.at(0);
    dbeta_ = grads.at(1);
    mean_ = buffers.at(0);
    var_ = buffers.at(1);
  }
  void forward(const Tensor& x, const Tensor& y, const StepContext& ctx) override {
    synced_ = reducer_ && ctx.mode == Mode::train;
    if (synced_) {
      sync_forward(x.shape()[0], x.data(), y.data());
      return;
    }
    op_->forward(x.shape()[0], x.data(), gamma_.data(), beta_.data(), mean_.data(), var_.data(),
                 y.data(), ctx.mode == Mode::train);
  }
  void backward(const Tensor& x, const Tensor&, const Tensor& dy, const Tensor* dx) override {
    if (synced_) {
      sync_backward(x.shape()[0], x.data(), dy.data(), dx ? dx->data() : nullptr);
      return;
    }
    // oneDNN always produces diff_src; a first-layer batch norm gets a scratch buffer.
    float* dx_data = dx ? dx->data() : nullptr;
    if (!dx_data) {
      if (scratch_.numel() < x.numel()) scratch_ = be_.alloc(x.shape());
      dx_data = scratch_.data();
    }
    op_->backward(x.shape()[0], x.data(), dy.data(), gamma_.data(), dx_data, dgamma_.data(),
                  dbeta_.data());
  }
  bool backward_reads_output() const override { return false; }
  LayoutUse layout_use() const override { return LayoutUse::same; }
  void set_layouts(int in_block, int /*out_block: the same*/) override {
    g_.block = in_block;
    op_ = be_.batch_norm(g_);
  }
  double forward_flops() const override { return 4.0 * static_cast<double>(g_.c * g_.h * g_.w); }

  // Sync batch norm too: the op's split passes apply and mask the activation the same way.
  bool fuse_activation(backend::Activation kind) override {
    if (!be_.batch_norm_fuses(kind)) return false;
    g_.activation = kind;
    op_ = be_.batch_norm(g_);
    return true;
  }

  void set_batch_stats_reducer(BatchStatsReducer* reducer) override { reducer_ = reducer; }
  void forward_without_samples() override {
    if (!reducer_) return;
    sync_forward(0, nullptr, nullptr);
    synced_ = true;
  }
  void backward_without_samples() override {
    if (reducer_) sync_backward(0, nullptr, nullptr, nullptr);
  }

 private:
  void sync_forward(std::int64_t n, const float* x, float* y) {
    reducer_->allreduce_sum(op_->forward_sums(n, x));
    op_->forward_apply(n, x, gamma_.data(), beta_.data(), mean_.data(), var_.data(), y);
  }
  // dgamma and dbeta are this rank's part (the gradient all-reduce sums them like any other
  // parameter's); dx takes every rank's part through the summed pair.
  void sync_backward(std::int64_t n, const float* x, const float* dy, float* dx) {
    reducer_->allreduce_sum(op_->backward_sums(n, x, dy, dgamma_.data(), dbeta_.data()));
    op_->backward_apply(n, x, dy, gamma_.data(), dx);
  }

  backend::Backend& be_;
  backend::BatchNormGeom g_;
  std::unique_ptr<backend::BatchNormOp> op_;
  Tensor gamma_, beta_, dgamma_, dbeta_, mean_, var_, scratch_;
  BatchStatsReducer* reducer_ = nullptr;
  bool synced_ = false;  // the last forward used every rank's statistics
};

// Inference form: the running statistics.
void to_onnx(OnnxLayer& g) {
  std::vector<std::string> in = g.inputs();
  for (const char* t : {"weight", "bias", "running_mean", "running_var"}) in.push_back(g.weight(t));
  g.node("BatchNormalization", in, g.output(), {{"epsilon", g.spec().eps}});
}

}  // namespace

namespace registered {
std::vector<LayerType> layer_types_batch_norm() {
  return {{.type = "batchnorm",
           .family = "bn",
           .doc = "batch normalisation over channels or features (running statistics)",
           .order = 300,
           .keys = {{DDP_SPEC_FIELD(momentum),
                     .help = "running-statistics momentum (PyTorch convention)",
                     .range = {.lo = 0.0, .hi = 1.0, .lo_open = true}},
                    {DDP_SPEC_FIELD(eps), .help = "variance epsilon",
                     .range = {.lo = 0.0, .lo_open = true}},
                    keys::init()},
           .make = make_layer_of<BatchNorm>,
           .onnx = to_onnx}};
}
}  // namespace registered

}  // namespace ddp::nn
