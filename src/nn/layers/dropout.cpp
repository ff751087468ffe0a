// Inverted dropout whose mask depends only on (step seed, layer, sample index, element): the same
// samples get the same masks whatever the batch split over ranks.
#include "ddp/nn/layer_registry.hpp"
#include "ddp/nn/onnx_layer.hpp"
#include "ddp/rng.hpp"
#include "layer_util.hpp"

namespace ddp::nn {
namespace {

class Dropout final : public UnaryLayer {
 public:
  Dropout(const LayerSpec& spec, backend::Backend& be) : UnaryLayer(spec), be_(be) {}
  Shape infer(const Shape& in) override {
    per_sample_ = in.numel();
    salt_ = 0;
    for (char ch : name()) salt_ = mix64(salt_ ^ static_cast<unsigned char>(ch));
    return in;
  }
  void forward(const Tensor& x, const Tensor& y, const StepContext& ctx) override {
    const std::int64_t n = x.shape()[0];
    training_ = ctx.mode == Mode::train && spec().p > 0.0f;
    if (!training_) {
      be_.copy(x.numel(), x.data(), y.data());
      return;
    }
    if (!ctx.sample_ids) throw Error("internal: dropout needs the batch's sample ids");
    if (mask_.numel() < x.numel()) mask_ = be_.alloc(x.shape());
    be_.dropout_forward(n, per_sample_, spec().p, hash_words(ctx.seed, salt_), ctx.sample_ids,
                        x.data(), mask_.data(), y.data());
  }
  void backward(const Tensor&, const Tensor&, const Tensor& dy, const Tensor* dx) override {
    if (!dx) return;
    if (training_)
      be_.mul(dy.numel(), dy.data(), mask_.data(), dx->data());
    else
      be_.copy(dy.numel(), dy.data(), dx->data());
  }

 private:
  backend::Backend& be_;
  std::int64_t per_sample_ = 0;
  std::uint64_t salt_ = 0;
  bool training_ = false;
  Tensor mask_;
};

// Inference form: the identity.
void to_onnx(OnnxLayer& g) {
  g.node("Identity", g.inputs(), g.output());
}

}  // namespace

namespace registered {
std::vector<LayerType> layer_types_dropout() {
  return {{.type = "dropout",
           .family = "drop",
           .doc = "inverted dropout in training, identity in evaluation",
           .order = 700,
           .keys = {{DDP_SPEC_FIELD(p), .help = "drop probability",
                     .range = {.lo = 0.0, .hi = 1.0, .hi_open = true}}},
           .make = make_layer_of<Dropout>,
           .onnx = to_onnx}};
}
}  // namespace registered

}  // namespace ddp::nn
