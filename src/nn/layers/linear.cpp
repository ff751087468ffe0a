// Fully connected layer: weight [out, in], optional bias [out]. A multi-dimensional input is
// flattened implicitly (as after nn.Flatten).
#include "ddp/nn/onnx_layer.hpp"
#include "layer_util.hpp"
#include "shared_keys.hpp"

namespace ddp::nn {
namespace {

class Linear final : public UnaryLayer {
 public:
  Linear(const LayerSpec& spec, backend::Backend& be) : UnaryLayer(spec), be_(be) {}

  Shape infer(const Shape& in) override {
    g_.in = in.numel();
    g_.out = spec().out_features;
    g_.bias = spec().bias;
    op_ = be_.linear(g_);
    return Shape{g_.out};
  }
  std::vector<ParamSpec> param_specs() const override {
    std::vector<ParamSpec> p{
        {"weight", Shape{g_.out, g_.in}, init_weight(spec(), Init::uniform_fan_in), g_.in, g_.out}};
    if (g_.bias)
      p.push_back({"bias", Shape{g_.out}, init_bias(spec(), Init::uniform_fan_in), g_.in, g_.out});
    return p;
  }
  void bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
            const std::vector<Tensor>&) override {
    w_ = params.at(0);
    dw_ = grads.at(0);
    if (g_.bias) {
      b_ = params.at(1);
      db_ = grads.at(1);
    }
  }
  void forward(const Tensor& x, const Tensor& y, const StepContext&) override {
    op_->forward(x.shape()[0], x.data(), w_.data(), b_.data(), y.data());
  }
  void backward(const Tensor& x, const Tensor&, const Tensor& dy, const Tensor* dx) override {
    op_->backward(x.shape()[0], x.data(), w_.data(), dy.data(), dx ? dx->data() : nullptr,
                  dw_.data(), db_.data());
  }
  bool backward_reads_output() const override { return false; }
  double forward_flops() const override { return 2.0 * static_cast<double>(g_.in * g_.out); }

 private:
  backend::Backend& be_;
  backend::LinearGeom g_;
  std::unique_ptr<backend::LinearOp> op_;
  Tensor w_, b_, dw_, db_;
};

// Our linear flattens each sample itself; Gemm wants [N, features].
void to_onnx(OnnxLayer& g) {
  const std::string flat = g.output() + "/flat";
  g.node("Flatten", g.inputs(), flat);
  std::vector<std::string> in = {flat, g.weight("weight")};
  if (const auto bias = g.weight("bias"); !bias.empty()) in.push_back(bias);
  g.node("Gemm", in, g.output(), {{"transB", std::int64_t{1}}});
}

}  // namespace

namespace registered {
std::vector<LayerType> layer_types_linear() {
  return {{.type = "linear",
           .family = "fc",
           .doc = "fully connected: y = x W^T + b (input flattened per sample)",
           .order = 200,
           .keys = {{DDP_SPEC_FIELD(out_features), .help = "output features", .range = {.lo = 1}},
                    keys::bias(),
                    keys::init()},
           .required = {"out_features"},
           .make = make_layer_of<Linear>,
           .onnx = to_onnx}};
}
}  // namespace registered

}  // namespace ddp::nn
