// Element-wise sum of two or more inputs of equal shape (the residual connection).
#include "layer_util.hpp"
#include "layers.hpp"

namespace ddp::nn {
namespace {

class Add final : public Layer {
 public:
  Add(const LayerSpec& spec, backend::Backend& be) : Layer(spec), be_(be) {}
  std::size_t min_inputs() const override { return 2; }
  std::size_t max_inputs() const override { return SIZE_MAX; }

  Shape infer(std::span<const Shape> in) override {
    for (std::size_t k = 1; k < in.size(); ++k)
      if (in[k] != in[0]) inputs_error(*this, in, "add needs inputs of equal shape");
    return in[0];
  }
  // In place (GraphPlan::storage), y is one of the inputs: the others are added to it, and its
  // gradient is the output gradient already.
  void forward(std::span<const Tensor> xs, const Tensor& y, const StepContext&) override {
    std::size_t first = 0;
    for (std::size_t k = 0; k < xs.size(); ++k)
      if (xs[k].data() == y.data()) first = k;
    if (xs[first].data() != y.data()) be_.copy(y.numel(), xs[first].data(), y.data());
    for (std::size_t k = 0; k < xs.size(); ++k)
      if (k != first) be_.add(y.numel(), xs[k].data(), y.data());
  }
  void backward(std::span<const Tensor>, const Tensor&, const Tensor& dy,
                std::span<const Tensor* const> dxs) override {
    for (const Tensor* dx : dxs)
      if (dx && dx->data() != dy.data()) be_.copy(dy.numel(), dy.data(), dx->data());
  }
  bool can_run_in_place() const override { return true; }
  bool backward_reads_output() const override { return false; }
  LayoutUse layout_use() const override { return LayoutUse::elementwise; }

 private:
  backend::Backend& be_;
};

}  // namespace

std::unique_ptr<Layer> make_add(const LayerSpec& spec, backend::Backend& be) {
  return std::make_unique<Add>(spec, be);
}

}  // namespace ddp::nn
