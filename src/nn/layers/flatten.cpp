// Flatten: the input reinterpreted as one feature vector per sample (no buffer, no work).
#include "layers.hpp"

namespace ddp::nn {
namespace {

class Flatten final : public UnaryLayer {
 public:
  Flatten(const LayerSpec& spec, backend::Backend&) : UnaryLayer(spec) {}
  Shape infer(const Shape& in) override { return Shape{in.numel()}; }
  bool is_view() const override { return true; }
  void forward(const Tensor&, const Tensor&, const StepContext&) override {}
  void backward(const Tensor&, const Tensor&, const Tensor&, const Tensor*) override {}
};

}  // namespace

std::unique_ptr<Layer> make_flatten(const LayerSpec& spec, backend::Backend& be) {
  return std::make_unique<Flatten>(spec, be);
}

}  // namespace ddp::nn
