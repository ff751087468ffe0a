// 2-D convolution layer: weight [out, in, k, k], optional bias [out].
#include <cmath>

#include "layer_util.hpp"
#include "layers.hpp"

namespace ddp::nn {
namespace {

class Conv2d final : public Layer {
 public:
  Conv2d(const LayerSpec& spec, backend::Backend& be);
  Shape infer(const Shape& in) override;
  std::vector<ParamSpec> param_specs() const override;
  void bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
            const std::vector<Tensor>& buffers) override;
  void forward(const Tensor& x, const Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) override;
  double forward_flops() const override;
  bool backward_reads_output() const override { return false; }

 private:
  backend::Backend& be_;
  backend::ConvGeom g_;
  std::unique_ptr<backend::ConvOp> op_;
  Tensor w_, b_, dw_, db_;
};

Conv2d::Conv2d(const LayerSpec& spec, backend::Backend& be) : Layer(spec), be_(be) {}

Shape Conv2d::infer(const Shape& in) {
  if (in.rank() != 3) shape_error(*this, in, "expects an image (channels x height x width)");
  g_.c = in[0];
  g_.h = in[1];
  g_.w = in[2];
  g_.k = spec().out_channels;
  g_.r = g_.s = spec().kernel;
  g_.stride_h = g_.stride_w = spec().stride > 0 ? spec().stride : 1;
  g_.pad_h = g_.pad_w = spec().padding;
  g_.bias = spec().bias;
  if (g_.h + 2 * g_.pad_h < g_.r || g_.w + 2 * g_.pad_w < g_.s)
    shape_error(*this, in,
                "kernel " + std::to_string(g_.r) + " is larger than the padded input " +
                    std::to_string(g_.h + 2 * g_.pad_h) + "x" +
                    std::to_string(g_.w + 2 * g_.pad_w));
  g_.oh = pooled_extent(g_.h, g_.r, g_.stride_h, g_.pad_h);
  g_.ow = pooled_extent(g_.w, g_.s, g_.stride_w, g_.pad_w);
  op_ = be_.conv(g_);
  return Shape{g_.k, g_.oh, g_.ow};
}

std::vector<ParamSpec> Conv2d::param_specs() const {
  const std::int64_t fan_in = g_.c * g_.r * g_.s;
  std::vector<ParamSpec> p{{"weight", Shape{g_.k, g_.c, g_.r, g_.s}, Init::uniform_fan_in, fan_in}};
  if (g_.bias) p.push_back({"bias", Shape{g_.k}, Init::uniform_fan_in, fan_in});
  return p;
}

void Conv2d::bind(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                  const std::vector<Tensor>&) {
  w_ = params.at(0);
  dw_ = grads.at(0);
  if (g_.bias) {
    b_ = params.at(1);
    db_ = grads.at(1);
  }
}

void Conv2d::forward(const Tensor& x, const Tensor& y, const StepContext&) {
  op_->forward(x.shape()[0], x.data(), w_.data(), b_.data(), y.data());
}

void Conv2d::backward(const Tensor& x, const Tensor&, const Tensor& dy, const Tensor* dx) {
  op_->backward(x.shape()[0], x.data(), w_.data(), dy.data(), dx ? dx->data() : nullptr, dw_.data(),
                db_.data());
}

double Conv2d::forward_flops() const {
  return 2.0 * static_cast<double>(g_.k * g_.oh * g_.ow * g_.c * g_.r * g_.s);
}

}  // namespace

std::unique_ptr<Layer> make_conv2d(const LayerSpec& spec, backend::Backend& be) {
  return std::make_unique<Conv2d>(spec, be);
}

}  // namespace ddp::nn
